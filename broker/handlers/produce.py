"""Produce (key 0), v0–v11.

Batches are appended as opaque bytes (storage validates the 61-byte headers and CRCs, assigns offsets,
checks idempotent / transactional producer state). Once every partition is appended the connection
may start its next request; then the appends are acknowledged — after the fsync when
``log.flush.before.acknowledge`` is on — which advances the high watermark and wakes waiting fetches.
acks=all then waits (``ReplicaManager.wait_for_replicas``, bounded by the request's timeout) until the
high watermark covers the batches: NOT_ENOUGH_REPLICAS before appending when the ISR is below
``min.insync.replicas``, NOT_ENOUGH_REPLICAS_AFTER_APPEND if it shrank meanwhile, REQUEST_TIMED_OUT.
acks=0 gets no response at all.

Produce v0–v2 carry message format v0/v1 (sarama set below 0.11, kafka-go 0.2): as Kafka 3.9, such a
message set is converted to one v2 batch before it is checked and appended (protocol.legacy_records).

Transactional batches are first checked with the transaction coordinator (KIP-890 part 1,
``transaction.partition.verification.enable``): one for a partition outside the producer's ongoing
transaction is refused, not appended (see ``broker.coordinator.verification``).
"""

from __future__ import annotations

import trio

from protocol import ErrorCode, legacy_records, messages
from protocol.records import RecordBatchError, validate_produce_records

from broker.connection import CloseConnection
from broker.coordinator.verification import refused_batches
from broker.handlers import common
from broker.partitions import PartitionError
from broker.quotas import identity
from broker.security import access
from broker.security.acls import AclOperation, ResourceType
from storage.errors import StorageError

API_KEY = 0
Response = messages.ProduceResponse


# Append errors Kafka answers without the partition's log start offset (-1); with any other the
# client learns it (the Java producer compares it with its last acknowledged offset).
_WITHOUT_LOG_START = frozenset({
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.MESSAGE_TOO_LARGE,
    ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.CORRUPT_MESSAGE, ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.INVALID_TOPIC_EXCEPTION})


def _partition_response(index, error, message=None, base_offset=-1, log_append_time=-1,
                        log_start_offset=-1):
    return Response.PartitionProduceResponse(
        index=index, error_code=error, base_offset=base_offset, log_append_time_ms=log_append_time,
        log_start_offset=log_start_offset, record_errors=[], error_message=message)


# A v2 batch's magic byte, the low byte of its attributes and their transactional bit
# (message sets of magic 0/1 hold key or timestamp bytes there, and are never transactional).
_MAGIC_BYTE = 16
_ATTRIBUTES_LOW_BYTE = 22
_TRANSACTIONAL_BIT = 0x10


def _has_transactional_records(body) -> bool:
    for topic in body.topic_data:   # (loops, not any() over a generator: once per request)
        for data in topic.partition_data:
            records = data.records
            if (records is not None and len(records) > _ATTRIBUTES_LOW_BYTE
                    and records[_ATTRIBUTES_LOW_BYTE] & _TRANSACTIONAL_BIT and records[_MAGIC_BYTE] == 2):
                return True
    return False


def _refuse_all(body, code):
    return Response(responses=[Response.TopicProduceResponse(name=topic.name, partition_responses=[
        _partition_response(data.index, code) for data in topic.partition_data])
        for topic in body.topic_data], throttle_time_ms=0)


async def handle_produce(ctx, header, body):
    acks = body.acks
    if body.transactional_id is None and _has_transactional_records(body):
        # As Kafka: transactional records need the request's transactional id (the one the
        # producer is authorised for); without it the whole request is refused, nothing appended.
        if acks == 0:
            raise CloseConnection("transactional records without a transactional id (acks=0)")
        return _refuse_all(body, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    partitions = ctx.broker.partitions
    api_version = header.api_version
    results: list[tuple[str, list]] = []
    # (partition, records, verification guard, first batch header, answer): the shape
    # PartitionManager.append_now takes as it is (no list rebuilt per request)
    to_append = []
    writable = None   # every topic, unless an authorizer says otherwise
    authorizing = access.enabled(ctx)
    if authorizing:
        writable = access.allowed_names(ctx, AclOperation.WRITE, ResourceType.TOPIC,
                                        (topic.name for topic in body.topic_data))

    opening = []   # (topic, data, answer) of partitions whose logs are still being opened here
    for topic in body.topic_data:
        answers = []
        results.append((topic.name, answers))
        for data in topic.partition_data:
            answer = _partition_response(data.index, ErrorCode.NONE)
            answers.append(answer)
            if writable is not None and topic.name not in writable:
                answer.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            _check_into(to_append, opening, partitions, acks, topic.name, data, answer, api_version)
    if opening:
        # Just created (thousands at once): wait for their logs rather than have the client retry.
        await partitions.wait_opened([(name, data.index) for name, data, _ in opening], body.timeout_ms / 1000)
        for name, data, answer in opening:
            answer.error_code = ErrorCode.NONE
            _check_into(to_append, None, partitions, acks, name, data, answer, api_version)

    if authorizing and not _may_write_transactionally(ctx, body.transactional_id, to_append):
        for _, answers in results:
            for answer in answers:
                answer.error_code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
                answer.error_message = None
        to_append = []
    if body.transactional_id is not None:
        # A commit/abort marker landing between the verification and the append would leave the
        # batch outside its (then closed) transaction: storage's verification guard refuses it then.
        to_append = await _verify_transactional(ctx, body.transactional_id, to_append)
    if not partitions.durable_acks and partitions.appends_inline(to_append):
        # The common unbatched case: nothing up to the acknowledgement can suspend, so nothing
        # can cancel it half way and no shield (nor another coroutine) is needed.
        appended = _note_outcomes(to_append, partitions.append_now(to_append))
        partitions.acknowledge_now(appended)
        if acks == -1 and not _replicated_now(ctx, appended):
            # Followers have yet to fetch these: the connection's next request may go ahead
            # while this one waits (shielded: the records are in the log, the answer must say so).
            ctx.release_order()
            with trio.CancelScope(shield=True):
                await _wait_for_replicas(ctx, appended, body.timeout_ms)
        return _answer(ctx, acks, results, appended)
    # Once batches go to the log they must also become visible (high watermark), even if the
    # client disconnects meanwhile: the rest of the request is shielded from cancellation.
    with trio.CancelScope(shield=True):
        return await _append_and_acknowledge(ctx, acks, results, to_append, body.timeout_ms)


def _check_into(to_append, opening, partitions, acks, name, data, answer, api_version) -> None:
    """Queue one partition's batches for appending, or set its answer's error; one whose log is
    still being opened goes to `opening` instead when that is a list."""
    try:
        partition, first_batch = _check(partitions, acks, name, data, api_version)
    except PartitionError as exc:
        if opening is not None and exc.code == ErrorCode.NOT_LEADER_OR_FOLLOWER \
                and partitions.opening(name, data.index):
            opening.append((name, data, answer))
            return
        answer.error_code, answer.error_message = exc.code, exc.message
        answer.log_start_offset = exc.log_start_offset
        return
    except RecordBatchError as exc:
        answer.error_code, answer.error_message = exc.error_code, str(exc)
        return
    to_append.append((partition, data.records, None, first_batch, answer))


async def _wait_for_replicas(ctx, appended, timeout_ms: int) -> None:
    """acks=all: answer once the high watermark covers each partition's batches (the purgatory)."""
    waiting = [(p, result, answer) for p, result, answer, _ in appended if not answer.error_code]
    if not waiting:
        return
    with ctx.connection.reading_held(ctx.size):   # the client's next requests may wait for this answer
        codes = await ctx.partitions.replication.wait_for_replicas(
            [(p, result.last_offset + 1) for p, result, _ in waiting], timeout_ms / 1000)
    _note_acks_codes(waiting, codes)


def _note_acks_codes(waiting, codes) -> None:
    for (_, _, answer), code in zip(waiting, codes):
        if code:
            answer.error_code, answer.base_offset = code, -1
            answer.error_message = _ACKS_MESSAGES.get(code)


def _replicated_now(ctx, appended) -> bool:
    """acks=all without waiting when the high watermark already covers every partition's
    batches (one replica in the ISR: the leader's append is enough); answers updated then."""
    for partition, result, answer, _ in appended:
        # The common case without a call: the appends were just made, on the loop, by the leader
        # (nothing could move leadership since), the high watermark covers them and the ISR is
        # large enough: every answer stays as it is.
        if not answer.error_code and (partition.log.high_watermark <= result.last_offset
                                      or len(partition.isr) < partition.min_insync_replicas):
            break
    else:
        return True
    waiting = [(p, result, answer) for p, result, answer, _ in appended if not answer.error_code]
    if not waiting:
        return True
    codes = ctx.partitions.replication.replicated_now(
        [(p, result.last_offset + 1) for p, result, _ in waiting])
    if codes is None:
        return False
    _note_acks_codes(waiting, codes)
    return True


_ACKS_MESSAGES = {
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND:
        "The ISR shrank below min.insync.replicas after the records were appended",
    ErrorCode.REQUEST_TIMED_OUT: "The in-sync replicas did not acknowledge the records in time",
}


async def _append_and_acknowledge(ctx, acks, results, to_append, timeout_ms):
    partitions = ctx.partitions
    appended = _note_outcomes(to_append, await partitions.append_many(to_append))
    # The batches are in the log in request order: the connection's next request may go ahead
    # (its appends queue behind these) while these wait for durability or the replicas. Without
    # such a wait the rest is immediate, and keeping the order spares the connection a task.
    if acks == -1 or partitions.durable_acks:
        ctx.release_order()
    try:
        await partitions.acknowledge_many([(p, result) for p, result, _, _ in appended])
    except StorageError as exc:
        for _, _, answer, _ in appended:
            answer.error_code, answer.error_message, answer.base_offset = \
                exc.error_code, exc.message, -1

    if acks == -1:
        await _wait_for_replicas(ctx, appended, timeout_ms)
    return _answer(ctx, acks, results, appended)


def _note_outcomes(to_append, outcomes) -> list:
    """Fill each partition's answer from its append outcome; the (partition, AppendResult,
    answer, record bytes) of those appended."""
    appended = []
    for (partition, records, _, _, answer), outcome in zip(to_append, outcomes):
        if isinstance(outcome, StorageError):
            answer.error_code, answer.error_message = outcome.error_code, outcome.message
            if outcome.error_code not in _WITHOUT_LOG_START:
                answer.log_start_offset = partition.log.log_start_offset
            answer.record_errors = [
                Response.BatchIndexAndErrorMessage(batch_index=index, batch_index_error_message=message)
                for index, message in getattr(outcome, "record_errors", ())]
            continue
        answer.base_offset = outcome.first_offset
        answer.log_append_time_ms = outcome.log_append_time
        answer.log_start_offset = outcome.log_start_offset
        appended.append((partition, outcome, answer, len(records)))
    return appended


def _answer(ctx, acks, results, appended):
    """Metrics and the produce quota, then the response (None for acks=0)."""
    ctx.broker.record_produce(appended)
    _charge_produce_quota(ctx)
    failed = []   # counted here, where they are known: the answer is not walked for them again
    for name, answers in results:
        for answer in answers:
            if answer.error_code:
                failed.append((name, answer.index, answer.error_code))
    if acks == 0:
        if failed:
            # As Kafka: the client gets no answer, so dropping the connection is how it learns
            # (it then refreshes its metadata) that some of its records went nowhere.
            raise CloseConnection(f"acks=0 produce failed for {failed[:3]}")
        return None
    if failed:
        count_error = ctx.broker.metrics.count_error
        for _, _, code in failed:
            count_error(API_KEY, code)
    ctx.counted_error = failed[0][2] if failed else 0
    return Response(responses=[Response.TopicProduceResponse(name=name, partition_responses=answers)
                               for name, answers in results], throttle_time_ms=0)


def _charge_produce_quota(ctx):
    """producer_byte_rate counts the whole request's bytes, as Kafka does; over the quota the
    response carries the throttle and the connection is muted (even for acks=0)."""
    quotas = ctx.broker.quotas
    if quotas.produce.enabled:
        user, client_id = identity(ctx)
        quotas.throttle(ctx, quotas.produce, quotas.produce.record(user, client_id, ctx.size))


def _may_write_transactionally(ctx, transactional_id, to_append) -> bool:
    """Transactional batches need WRITE on the request's transactional id (Kafka refuses the
    whole request otherwise)."""
    if not access.enabled(ctx) or not any(item[3].is_transactional for item in to_append):
        return True
    return transactional_id is not None and access.allowed(
        ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id)


async def _verify_transactional(ctx, transactional_id, to_append):
    """`to_append` less the transactional batches the coordinator refuses (their answers say why)."""
    candidates = [(i, item[0], item[3]) for i, item in enumerate(to_append) if item[3].is_transactional]
    if not candidates or not ctx.config["transaction.partition.verification.enable"]:
        return to_append
    # Guards first (as Kafka): a marker written while the coordinator is asked voids them.
    guards = {i: partition.log.start_verification(batch.producer_id, batch.producer_epoch)
              for i, partition, batch in candidates}
    refused = await refused_batches(ctx, transactional_id, candidates)
    for i, (code, message) in refused.items():
        to_append[i][4].error_code, to_append[i][4].error_message = code, message
    return [(item[0], item[1], guards.get(i), item[3], item[4])
            for i, item in enumerate(to_append) if i not in refused]


def _check(partitions, acks: int, topic: str, data, api_version: int):
    """The partition to append to and its batch's header, or the PartitionError /
    RecordBatchError Kafka answers."""
    if acks not in (-1, 0, 1):
        raise PartitionError(ErrorCode.INVALID_REQUIRED_ACKS)
    if topic in common.INTERNAL_TOPICS:
        raise PartitionError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                             f"Cannot append to internal topic {topic}")
    partition = partitions.leader(topic, data.index)
    if acks == -1 and len(partition.isr) < partition.min_insync_replicas:
        raise PartitionError(
            ErrorCode.NOT_ENOUGH_REPLICAS,
            f"The size of the current ISR {len(partition.isr)} is insufficient to satisfy the "
            f"min.isr requirement of {partition.min_insync_replicas}",
            log_start_offset=partition.log.log_start_offset)   # refused by the leader's log, as Kafka
    if api_version < 3 and legacy_records.is_legacy(data.records):
        # an old producer's magic 0/1 message set: stored as one v2 batch, as Kafka 3.9 does
        data.records = legacy_records.to_batch(data.records)
    return partition, validate_produce_records(data.records, api_version)


HANDLERS = {API_KEY: (0, 11, handle_produce)}
