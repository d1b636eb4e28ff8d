"""Producer-id and transaction APIs: InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn,
TxnOffsetCommit, EndTxn, WriteTxnMarkers, DescribeProducers, DescribeTransactions, ListTransactions.

Thin translations between wire bodies and `broker.coordinator`'s cores. Versions are those of
transaction protocol version 1 (the broker does not advertise `transaction.version` 2, so clients
never need EndTxn v5's per-transaction epoch bumps).
"""

from __future__ import annotations

import time

import trio

from protocol import ErrorCode, messages

from broker.coordinator.group_coordinator import OffsetCommitItem
from broker.coordinator.markers import Marker, append_markers
from broker.coordinator.service import (
    OFFSETS_TOPIC, TRANSACTION_TOPIC, CoordinatorError, CoordinatorService,
)
from broker.coordinator.verification import verify_with_coordinator
from broker.handlers import common
from broker.security import access
from broker.security.acls import AclOperation, ResourceType

E = ErrorCode
Op, RT = AclOperation, ResourceType


def _may_write_txn(ctx, transactional_id) -> bool:
    return access.allowed(ctx, Op.WRITE, RT.TRANSACTIONAL_ID, transactional_id or "")


def _txn_error(service, transactional_id) -> ErrorCode:
    """As Kafka: the empty transactional id is INVALID_REQUEST before its coordinator is looked for."""
    return E.INVALID_REQUEST if not transactional_id else service.txn_coordinator_error(transactional_id)


def _fenced(code: ErrorCode, version: int, first_version_with_fenced: int) -> ErrorCode:
    """Clients older than PRODUCER_FENCED know it as INVALID_PRODUCER_EPOCH."""
    if code is E.PRODUCER_FENCED and version < first_version_with_fenced:
        return E.INVALID_PRODUCER_EPOCH
    return code


# ---- InitProducerId (22) ------------------------------------------------------------------------------
async def init_producer_id(ctx, header, body):
    Response = messages.InitProducerIdResponse
    version = header.api_version
    transactional_id = body.transactional_id
    # A transactional producer needs WRITE on its id; an idempotent one IDEMPOTENT_WRITE on the
    # cluster or WRITE on some topic (KIP-679).
    if transactional_id is not None and not _may_write_txn(ctx, transactional_id):
        return Response(error_code=E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, producer_id=-1,
                        producer_epoch=-1)
    if transactional_id is None and not access.may_write_idempotently(ctx):
        return Response(error_code=E.CLUSTER_AUTHORIZATION_FAILED, producer_id=-1, producer_epoch=-1)
    service = await CoordinatorService.of(ctx.broker)
    if transactional_id:
        if not 0 < body.transaction_timeout_ms <= service.txns.config.max_timeout_ms:
            code = E.INVALID_TRANSACTION_TIMEOUT      # as Kafka: before the coordinator is looked for
        else:
            code = service.txn_coordinator_error(transactional_id)
        if code is not E.NONE:
            return Response(error_code=code, producer_id=-1, producer_epoch=-1)
    try:
        await service.producer_ids.ensure()
    except CoordinatorError as exc:
        return Response(error_code=exc.code, producer_id=-1, producer_epoch=-1)
    except Exception:
        return Response(error_code=E.COORDINATOR_LOAD_IN_PROGRESS, producer_id=-1, producer_epoch=-1)
    expected_id, expected_epoch = (body.producer_id, body.producer_epoch) if version >= 3 else (-1, -1)
    mark = service.write_mark()
    result = service.txns.init_producer_id(transactional_id, body.transaction_timeout_ms, expected_id,
                                           expected_epoch)
    if not _refused_at_once(service, mark, result.error):
        unacknowledged = await service.settle(since=mark)
        if result.error is E.NONE and unacknowledged is not E.NONE:
            return Response(error_code=unacknowledged, producer_id=-1, producer_epoch=-1)
    if result.error is not E.NONE:
        return Response(error_code=_fenced(result.error, version, 4), producer_id=-1, producer_epoch=-1)
    return Response(error_code=E.NONE, producer_id=result.producer_id, producer_epoch=result.producer_epoch)


# ---- AddPartitionsToTxn (24) --------------------------------------------------------------------------
async def add_partitions_to_txn(ctx, header, body):
    Response = messages.AddPartitionsToTxnResponse
    version = header.api_version
    if version >= 4 and not access.cluster_allowed(ctx, Op.CLUSTER_ACTION):
        # Batched (v4+) requests come from brokers verifying a produce.
        return Response(error_code=E.CLUSTER_AUTHORIZATION_FAILED, results_by_transaction=[])
    service = await CoordinatorService.of(ctx.broker)
    if version <= 3:
        results = await _add_partitions(ctx, service, version, body.v3_and_below_transactional_id,
                                        body.v3_and_below_producer_id, body.v3_and_below_producer_epoch,
                                        body.v3_and_below_topics, verify_only=False)
        return Response(results_by_topic_v3_and_below=_topic_results(results))
    out = []
    for txn in body.transactions:
        results = await _add_partitions(ctx, service, version, txn.transactional_id, txn.producer_id,
                                        txn.producer_epoch, txn.topics, txn.verify_only)
        out.append(Response.AddPartitionsToTxnResult(transactional_id=txn.transactional_id,
                                                     topic_results=_topic_results(results)))
    return Response(error_code=E.NONE, results_by_transaction=out)


async def _add_partitions(ctx, service, version, transactional_id, producer_id, producer_epoch, topics,
                          verify_only) -> dict[tuple[str, int], ErrorCode]:
    requested = [(t.name, p) for t in topics for p in t.partitions]
    if version <= 3 and not _may_write_txn(ctx, transactional_id):
        return {tp: E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED for tp in requested}
    # A client may not add an internal topic, authorizer or not (TOPIC_AUTHORIZATION_FAILED, as
    # Kafka); brokers verifying (v4+) may ask about the offsets topic's partitions.
    writable = {t.name for t in topics if version >= 4 or not common.is_internal(t.name)}
    if version <= 3 and access.enabled(ctx):   # clients need WRITE on each (non-internal) topic
        writable = access.allowed_names(ctx, Op.WRITE, RT.TOPIC,
                                        (t.name for t in topics if not common.is_internal(t.name)))
    image = ctx.broker.image
    refused = {tp: E.TOPIC_AUTHORIZATION_FAILED for tp in requested if tp[0] not in writable}
    refused.update({tp: E.UNKNOWN_TOPIC_OR_PARTITION for tp in requested
                    if tp not in refused and image.partition(*tp) is None})
    if refused:
        # Kafka adds nothing when one partition is bad: the rest were not attempted (and its
        # coordinator is not asked)
        return {tp: refused.get(tp, E.OPERATION_NOT_ATTEMPTED) for tp in requested}
    code = _txn_error(service, transactional_id)
    if code is not E.NONE:
        return {tp: code for tp in requested}
    if verify_only:
        # TRANSACTION_ABORTABLE for a partition outside the transaction, at v4 too (as Kafka 3.9 answers)
        return service.txns.verify_partitions(transactional_id, producer_id, producer_epoch, requested)
    mark = service.write_mark()
    code = service.txns.add_partitions(transactional_id, producer_id, producer_epoch, requested)
    code = await _settled(service, transactional_id, mark, code)
    return {tp: _fenced(code, version, 2) for tp in requested}


def _refused_at_once(service, mark: int, code: ErrorCode) -> bool:
    """The call wrote nothing and refuses (CONCURRENT_TRANSACTIONS while another request's write for
    the id is in flight, a fenced epoch, ...). As Kafka, that is answered at once: it claims nothing
    that must commit first, and must not wait behind the write it refuses to race."""
    return code is not E.NONE and service.write_mark() == mark


async def _settled(service, transactional_id: str, mark: int, code: ErrorCode) -> ErrorCode:
    """The answer to a transaction call that answered `code` after writing from `mark` on."""
    if _refused_at_once(service, mark, code):
        return code
    unacknowledged = await _settle_txn(service, transactional_id, mark)
    return unacknowledged if code is E.NONE else code


async def _settle_txn(service, transactional_id: str, mark: int) -> ErrorCode:
    """The client's error for the transaction state writes since `mark`. When the call wrote nothing
    (a retry finding its partitions already added, its commit already prepared), the state it answers
    from may rest on an earlier write whose acknowledgement gave up: it stays in this leader's log,
    uncommitted, and a coordinator elected without it never saw it. So the answer waits for the
    partition to commit what it holds, as Kafka answers only from written state."""
    code = await service.settle(since=mark)
    if code is E.NONE and service.write_mark() == mark:
        txn = service.txns.view(transactional_id)    # waited for as long as its own writes would be
        code = await service.caught_up(TRANSACTION_TOPIC, service.txn_partition(transactional_id),
                                       timeout_ms=txn.timeout_ms if txn is not None else None)
    return code


def _topic_results(results):
    Response = messages.AddPartitionsToTxnResponse
    topics: dict[str, list] = {}
    for (topic, partition), code in results.items():
        topics.setdefault(topic, []).append(Response.AddPartitionsToTxnPartitionResult(
            partition_index=partition, partition_error_code=code))
    return [Response.AddPartitionsToTxnTopicResult(name=name, results_by_partition=parts)
            for name, parts in topics.items()]


# ---- AddOffsetsToTxn (25) -----------------------------------------------------------------------------
async def add_offsets_to_txn(ctx, header, body):
    service = await CoordinatorService.of(ctx.broker)
    code = _txn_error(service, body.transactional_id)
    if code is E.NONE:
        # the group's offsets partition joins the transaction, wherever its group coordinator is and
        # whether or not `__consumer_offsets` exists yet (as Kafka, which only computes the partition)
        mark = service.write_mark()
        code = service.txns.add_offsets(body.transactional_id, body.producer_id, body.producer_epoch,
                                        body.group_id)
        code = await _settled(service, body.transactional_id, mark, code)
    return messages.AddOffsetsToTxnResponse(error_code=_fenced(code, header.api_version, 2))


# ---- TxnOffsetCommit (28) -----------------------------------------------------------------------------
async def txn_offset_commit(ctx, header, body):
    Response = messages.TxnOffsetCommitResponse
    version = header.api_version
    service = await CoordinatorService.of(ctx.broker)
    readable = set()
    if not _may_write_txn(ctx, body.transactional_id):
        code = E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not access.allowed(ctx, Op.READ, RT.GROUP, body.group_id):
        code = E.GROUP_AUTHORIZATION_FAILED
    else:
        readable = access.allowed_names(ctx, Op.READ, RT.TOPIC, (t.name for t in body.topics))
        code = service.group_coordinator_error(body.group_id)
    if code is E.NONE:
        code = await _check_producer(service, body.transactional_id, body.producer_id, body.producer_epoch,
                                     body.group_id)
    image = ctx.broker.image
    errors: dict[tuple[str, int], ErrorCode] = {}
    items = []
    for topic in body.topics:
        for p in topic.partitions:
            key = (topic.name, p.partition_index)
            # as Kafka: the id's and group's authorization, then each partition's, then the coordinator
            if code in (E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, E.GROUP_AUTHORIZATION_FAILED):
                errors[key] = code
            elif topic.name not in readable:
                errors[key] = E.TOPIC_AUTHORIZATION_FAILED
            elif image.partition(*key) is None:
                errors[key] = E.UNKNOWN_TOPIC_OR_PARTITION
            elif code is not E.NONE:
                errors[key] = code
            else:
                items.append(OffsetCommitItem(topic.name, p.partition_index, p.committed_offset,
                                              p.committed_leader_epoch if version >= 2 else -1,
                                              p.committed_metadata))
    if items:
        member = (body.member_id, body.group_instance_id, body.generation_id) if version >= 3 else ("", None, -1)
        mark = service.write_mark()
        # a KIP-848 group checks the member epoch itself; the offsets are stored as any group's
        consumer_check = service.consumer_groups.offset_commit_error(body.group_id, *member, version,
                                                                      transactional=True)
        if consumer_check is not None:
            member = ("", None, -1)
        if consumer_check not in (None, E.NONE):
            top, per = consumer_check, {}
        else:
            top, per = service.groups.commit_offsets(body.group_id, *member, items, producer_id=body.producer_id,
                                                     producer_epoch=body.producer_epoch)
        unacknowledged = await service.settle(since=mark)
        for item in items:
            key = (item.topic, item.partition)
            errors[key] = top if top is not E.NONE else per.get(key, E.NONE)
            if errors[key] is E.NONE:
                errors[key] = unacknowledged
    topics: dict[str, list] = {}
    for topic in body.topics:
        for p in topic.partitions:
            topics.setdefault(topic.name, []).append(Response.TxnOffsetCommitResponsePartition(
                partition_index=p.partition_index,
                error_code=_fenced(errors[(topic.name, p.partition_index)], version, 2)))
    return Response(topics=[Response.TxnOffsetCommitResponseTopic(name=n, partitions=ps) for n, ps in topics.items()])


async def _check_producer(service, transactional_id, producer_id, producer_epoch, group_id) -> ErrorCode:
    """The offsets must belong to the transaction's current producer, and AddOffsetsToTxn came first:
    the transaction coordinator, here or on another broker, is asked whether the group's offsets
    partition is in the transaction (KIP-890's verification), its answer translated as Kafka
    translates it for TxnOffsetCommit (a zombie's epoch: INVALID_PRODUCER_EPOCH)."""
    offsets_partition = (OFFSETS_TOPIC, service.offsets_partition(group_id))
    code = (await verify_with_coordinator(service, transactional_id, producer_id, producer_epoch,
                                          [offsets_partition]))[offsets_partition]
    return _VERIFY_TO_TXN_OFFSET_COMMIT.get(code, code)


# Kafka's translation of a failed verification for TxnOffsetCommit (retriable ones stay retriable
# without sending the client to look for a transaction coordinator it does not talk to here).
_VERIFY_TO_TXN_OFFSET_COMMIT = {
    E.NETWORK_EXCEPTION: E.COORDINATOR_LOAD_IN_PROGRESS,
    E.NOT_COORDINATOR: E.COORDINATOR_NOT_AVAILABLE,
    E.COORDINATOR_LOAD_IN_PROGRESS: E.COORDINATOR_NOT_AVAILABLE,
    E.CONCURRENT_TRANSACTIONS: E.COORDINATOR_NOT_AVAILABLE,
    E.TRANSACTION_ABORTABLE: E.INVALID_TXN_STATE,
    E.PRODUCER_FENCED: E.INVALID_PRODUCER_EPOCH,
}


# ---- EndTxn (26) --------------------------------------------------------------------------------------
async def end_txn(ctx, header, body):
    service = await CoordinatorService.of(ctx.broker)
    code = _txn_error(service, body.transactional_id)
    if code is E.NONE:
        mark = service.write_mark()
        code = service.txns.end_txn(body.transactional_id, body.producer_id, body.producer_epoch, body.committed)
        code = await _settled(service, body.transactional_id, mark, code)
    return messages.EndTxnResponse(error_code=_fenced(code, header.api_version, 2))


# ---- WriteTxnMarkers (27) ----------------------------------------------------------------------------
async def write_txn_markers(ctx, header, body):
    """A transaction coordinator (on any broker) asks this partition leader to close transactions."""
    Response = messages.WriteTxnMarkersResponse
    markers = [Marker(m.producer_id, m.producer_epoch, m.transaction_result, m.coordinator_epoch,
                      tuple((t.name, index) for t in m.topics for index in t.partition_indexes))
               for m in body.markers]
    # once a marker is in the log it must become visible even if the coordinator hangs up meanwhile
    with trio.CancelScope(shield=True):
        results = await append_markers(ctx.broker, markers, now_ms=int(time.time() * 1000))
    out = []
    for marker, requested, per in zip(body.markers, markers, results):
        by_topic: dict[str, list] = {}
        for topic, index in requested.partitions:
            by_topic.setdefault(topic, []).append(Response.WritableTxnMarkerPartitionResult(
                partition_index=index, error_code=per[(topic, index)]))
        out.append(Response.WritableTxnMarkerResult(producer_id=marker.producer_id, topics=[
            Response.WritableTxnMarkerTopicResult(name=name, partitions=parts) for name, parts in by_topic.items()]))
    return Response(markers=out)


# ---- DescribeProducers (61) ----------------------------------------------------------------------------
async def describe_producers(ctx, header, body):
    """Active producers of partitions this broker leads, from storage's producer state."""
    from broker.partitions import PartitionError

    Response = messages.DescribeProducersResponse
    readable = access.allowed_names(ctx, Op.READ, RT.TOPIC, (t.name for t in body.topics))
    topics = []
    for topic in body.topics:
        partitions = []
        for index in topic.partition_indexes:
            if topic.name not in readable:
                partitions.append(Response.PartitionResponse(
                    partition_index=index, error_code=E.TOPIC_AUTHORIZATION_FAILED))
                continue
            try:
                partition = ctx.partitions.leader(topic.name, index)
            except PartitionError as exc:
                partitions.append(Response.PartitionResponse(partition_index=index, error_code=exc.code))
                continue
            entries = list(partition.log.producer_state.producers.values())  # one C-level copy
            partitions.append(Response.PartitionResponse(partition_index=index, error_code=E.NONE, active_producers=[
                Response.ProducerState(
                    producer_id=e.producer_id, producer_epoch=e.epoch, last_sequence=e.last_seq,
                    last_timestamp=e.last_timestamp, coordinator_epoch=e.coordinator_epoch,
                    current_txn_start_offset=-1 if e.current_txn_first_offset is None else e.current_txn_first_offset)
                for e in sorted(entries, key=lambda e: e.producer_id)]))
        topics.append(Response.TopicResponse(name=topic.name, partitions=partitions))
    return Response(topics=topics)


# ---- DescribeTransactions (65) / ListTransactions (66) ------------------------------------------------
async def describe_transactions(ctx, header, body):
    Response = messages.DescribeTransactionsResponse
    service = await CoordinatorService.of(ctx.broker)
    out = []
    for transactional_id in body.transactional_ids:
        if not access.allowed(ctx, Op.DESCRIBE, RT.TRANSACTIONAL_ID, transactional_id or ""):
            out.append(Response.TransactionState(error_code=E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                                 transactional_id=transactional_id))
            continue
        code = service.txn_coordinator_error(transactional_id) if transactional_id else E.INVALID_REQUEST
        if code is not E.NONE:
            out.append(Response.TransactionState(error_code=code, transactional_id=transactional_id))
            continue
        d = service.txns.describe(transactional_id)
        if d.error is not E.NONE:
            out.append(Response.TransactionState(error_code=d.error, transactional_id=transactional_id))
            continue
        topics: dict[str, list[int]] = {}
        for topic, partition in d.partitions:
            topics.setdefault(topic, []).append(partition)
        # Only the topics the principal may describe (Kafka).
        visible = access.allowed_names(ctx, Op.DESCRIBE, RT.TOPIC, topics)
        topics = {t: ps for t, ps in topics.items() if t in visible}
        out.append(Response.TransactionState(
            error_code=E.NONE, transactional_id=transactional_id, transaction_state=d.state,
            transaction_timeout_ms=d.timeout_ms, transaction_start_time_ms=d.start_timestamp,
            producer_id=d.producer_id, producer_epoch=d.producer_epoch,
            topics=[Response.TopicData(topic=t, partitions=ps) for t, ps in topics.items()]))
    return Response(transaction_states=out)


async def list_transactions(ctx, header, body):
    Response = messages.ListTransactionsResponse
    service = await CoordinatorService.of(ctx.broker)
    duration = body.duration_filter if header.api_version >= 1 else -1
    if service.loading(TRANSACTION_TOPIC):
        return Response(error_code=E.COORDINATOR_LOAD_IN_PROGRESS)   # as Kafka: nothing until all are loaded
    rows, unknown = service.txns.list(body.state_filters, body.producer_id_filters, duration)
    if access.enabled(ctx):   # only the transactional ids the principal may describe
        rows = [row for row in rows if access.allowed(ctx, Op.DESCRIBE, RT.TRANSACTIONAL_ID,
                                                      row[0], log_if_denied=False)]
    return Response(error_code=E.NONE, unknown_state_filters=unknown, transaction_states=[
        Response.TransactionState(transactional_id=t, producer_id=p, transaction_state=s) for t, p, s in sorted(rows)])


HANDLERS = {
    22: (0, 5, init_producer_id),
    24: (0, 5, add_partitions_to_txn),
    25: (0, 4, add_offsets_to_txn),
    26: (0, 4, end_txn),
    27: (0, 1, write_txn_markers),
    28: (0, 4, txn_offset_commit),
    61: (0, 0, describe_producers),
    65: (0, 0, describe_transactions),
    66: (0, 1, list_transactions),
}
