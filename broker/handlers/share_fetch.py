"""KIP-932's data path: ShareFetch (78) and ShareAcknowledge (79).

A ShareFetch steps the member's share session (`broker.share.session`), applies the acknowledgements
it carries, then acquires records for the member from every share-partition of its session
(`broker.share.partition`) and answers the log's batches as they are on disk (sent with sendfile)
together with the acquired offset ranges and their delivery counts; the client hands out only the
acquired records. Without records to acquire it waits up to MaxWaitMs for new data or for records to
be released. Every state change is written to the share coordinator and acknowledged before the
answer goes out.
"""

from __future__ import annotations

import os
import struct

import trio

from protocol import ErrorCode, messages
from storage.errors import StorageError

from broker.config.group_configs import group_config
from broker.connection_writes import SlicedRecords
from broker.coordinator.ownership import SHARE_STATE_TOPIC
from broker.coordinator.service import CoordinatorError, CoordinatorService
from broker.handlers.share_groups import share_groups_enabled
from broker.partitions import PartitionError
from broker.security import access
from broker.security.acls import AclOperation, ResourceType
from broker.share.session import OPEN_EPOCH

E = ErrorCode
DEFAULT_MAX_RECORDS = 500
# a batch header up to the producer id: base offset, length, (leader epoch, magic, crc), attributes,
# last offset delta, (base and max timestamps), producer id
_HEADER = struct.Struct(">qi9xhi16xq")
_TRANSACTIONAL, _CONTROL = 0x10, 0x20
# rounds of one share-partition's read when a read held nothing to deliver (only markers/aborted records)
_SKIP_ROUNDS = 8
_TRANSIENT = (E.NOT_COORDINATOR, E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE)
# how long a request waits for the share coordinator's partitions to finish loading
_LOAD_WAIT_S = 5.0


class _Partition:
    """One share-partition's part of an answer."""

    def __init__(self, topic_id, index):
        self.topic_id, self.index = topic_id, index
        self.error = E.NONE
        self.ack_error = E.NONE
        self.leader = (-1, -1)
        self.slices: list = []
        self.acquired: list = []


async def share_fetch(ctx, header, body):
    Response = messages.ShareFetchResponse
    opened = await _open(ctx, body, Response)
    if not isinstance(opened, tuple):
        return opened
    service, step = opened
    manager = service.share_partitions
    group_id, member_id = body.group_id, body.member_id
    mark = service.write_mark()
    answers: dict[tuple, _Partition] = {}
    for topic in body.topics:
        for p in topic.partitions:
            answer = answers.setdefault((topic.topic_id, p.partition_index), _Partition(topic.topic_id, p.partition_index))
            if p.acknowledgement_batches:
                answer.ack_error = await _acknowledge(ctx, manager, group_id, member_id, answer,
                                                      p.acknowledgement_batches)
    if step.closing:
        manager.session_closed(group_id, member_id, set(step.session.partitions))
    else:
        max_records = body.max_records if header.api_version >= 1 and body.max_records > 0 else DEFAULT_MAX_RECORDS
        deadline = trio.current_time() + max(body.max_wait_ms, 0) / 1000
        while True:
            await _load(ctx, manager, group_id, step.session.partitions, answers)
            seen = _acquire(ctx, manager, group_id, member_id, step.session.partitions, answers,
                            max_records, body.max_bytes if body.max_bytes > 0 else 0x7FFFFFFF)
            remaining = deadline - trio.current_time()
            if any(a.acquired or a.error for a in answers.values()) or remaining <= 0 or ctx.broker.draining:
                break
            await _wait(ctx, manager, seen, remaining)
    await manager.flush()
    await service.settle(since=mark)
    topics: dict = {}
    for answer in answers.values():
        data = Response.PartitionData(
            partition_index=answer.index, error_code=answer.error, acknowledge_error_code=answer.ack_error,
            current_leader=Response.LeaderIdAndEpoch(leader_id=answer.leader[0], leader_epoch=answer.leader[1]),
            records=SlicedRecords(answer.slices) if answer.slices else b"",
            acquired_records=[Response.AcquiredRecords(first_offset=a.first_offset, last_offset=a.last_offset,
                                                       delivery_count=a.delivery_count) for a in answer.acquired])
        topics.setdefault(answer.topic_id, []).append(data)
    return Response(error_code=E.NONE, acquisition_lock_timeout_ms=manager.lock_duration_ms(group_id),
                    responses=[Response.ShareFetchableTopicResponse(topic_id=t, partitions=parts)
                               for t, parts in topics.items()])


async def share_acknowledge(ctx, header, body):
    Response = messages.ShareAcknowledgeResponse
    if body.share_session_epoch == OPEN_EPOCH:
        return Response(error_code=E.INVALID_SHARE_SESSION_EPOCH,
                        error_message="A share session cannot be opened by ShareAcknowledge.")
    opened = await _open(ctx, body, Response)
    if not isinstance(opened, tuple):
        return opened
    service, step = opened
    manager = service.share_partitions
    mark = service.write_mark()
    out: dict = {}
    for topic in body.topics:
        for p in topic.partitions:
            answer = _Partition(topic.topic_id, p.partition_index)
            code = await _acknowledge(ctx, manager, body.group_id, body.member_id, answer, p.acknowledgement_batches)
            out.setdefault(topic.topic_id, []).append(Response.PartitionData(
                partition_index=p.partition_index, error_code=answer.error if answer.error is not E.NONE else code,
                current_leader=Response.LeaderIdAndEpoch(leader_id=answer.leader[0], leader_epoch=answer.leader[1])))
    if step.closing:
        manager.session_closed(body.group_id, body.member_id, set(step.session.partitions))
    await manager.flush()
    await service.settle(since=mark)
    response = Response(error_code=E.NONE, responses=[
        Response.ShareAcknowledgeTopicResponse(topic_id=t, partitions=parts) for t, parts in out.items()])
    if header.api_version >= 2:
        response.acquisition_lock_timeout_ms = manager.lock_duration_ms(body.group_id)
    return response


# ---- the steps ------------------------------------------------------------------------------------------
async def _open(ctx, body, Response):
    """(service, session step), or the response that refuses the request."""
    if not share_groups_enabled(ctx):
        return Response(error_code=E.UNSUPPORTED_VERSION, error_message="Share groups are not enabled.")
    if not body.group_id or not body.member_id:
        return Response(error_code=E.INVALID_REQUEST, error_message="GroupId and MemberId are required.")
    service = await CoordinatorService.of(ctx.broker)
    code = await share_state_ready(service)
    if code is not E.NONE:
        return Response(error_code=code, error_message=code.name)
    topics = getattr(body, "topics", ())
    if body.share_session_epoch == OPEN_EPOCH and any(p.acknowledgement_batches for t in topics for p in t.partitions):
        return Response(error_code=E.INVALID_REQUEST,
                        error_message="Acknowledge data present on initial share fetch request.")
    added = [(t.topic_id, p.partition_index) for t in topics for p in t.partitions] \
        if isinstance(body, messages.ShareFetchRequest) else []
    forgotten = [(t.topic_id, p) for t in getattr(body, "forgotten_topics_data", ()) for p in t.partitions]
    manager = service.share_partitions
    step = manager.sessions.step(body.group_id, body.member_id, body.share_session_epoch, added, forgotten)
    if isinstance(step, ErrorCode):
        return Response(error_code=step, error_message=step.name)
    if step.replaced is not None:        # a new session from the same member: the old one's records go back
        manager.release_member(body.group_id, body.member_id, set(step.replaced.partitions))
    if step.opened:                       # the session lives as long as this connection
        connection = step.session.connection = ctx.connection
        if step.replaced is None or step.replaced.connection is not connection:
            group_id, member_id = body.group_id, body.member_id
            connection.on_close.append(lambda: manager.connection_closed(group_id, member_id, connection))
    return service, step


async def share_state_ready(service) -> ErrorCode:
    """`__share_group_state` exists (created on first use) and the partitions this broker leads are
    loaded (waited for a while), or the error that stops a share-state operation."""
    try:
        await service.ensure_topic(SHARE_STATE_TOPIC)
    except CoordinatorError as exc:
        return exc.code
    with trio.move_on_after(_LOAD_WAIT_S):
        while _share_state_loading(service):
            await trio.sleep(0.05)
    return E.NONE


def _share_state_loading(service) -> bool:
    """Whether a `__share_group_state` partition this broker leads is not loaded yet (just created, or
    just taken over): share-partitions initialized meanwhile could not be written."""
    topic = service.broker.image.topics.get(SHARE_STATE_TOPIC)
    if topic is None:
        return True
    node = service.broker.node_id
    return any(p.leader == node and service.coordinator_error(SHARE_STATE_TOPIC, index) is E.COORDINATOR_LOAD_IN_PROGRESS
               for index, p in topic.partitions.items())


def _leader(ctx, answer: _Partition):
    """The local leader of the share-partition's topic partition, or None with `answer.error` set."""
    topic = ctx.broker.image.topics_by_id.get(answer.topic_id)
    if topic is None:
        answer.error = E.UNKNOWN_TOPIC_ID
        return None
    if not access.allowed(ctx, AclOperation.READ, ResourceType.TOPIC, topic.name):
        answer.error = E.TOPIC_AUTHORIZATION_FAILED
        return None
    try:
        partition = ctx.partitions.leader(topic.name, answer.index)
    except PartitionError as exc:
        answer.error = ErrorCode(exc.code)
        return None
    answer.leader = (partition.leader, partition.leader_epoch)
    return partition


async def _acknowledge(ctx, manager, group_id, member_id, answer: _Partition, batches) -> ErrorCode:
    partition = _leader(ctx, answer)
    if partition is None:
        return answer.error
    share = await manager.load(group_id, answer.topic_id, answer.index, partition)
    if isinstance(share, ErrorCode):
        return share
    now = manager.service.clock.now_ms()
    code = E.NONE
    for batch in batches:
        result = share.acknowledge(member_id, batch.first_offset, batch.last_offset, list(batch.acknowledge_types), now)
        if result is not E.NONE and code is E.NONE:
            code = result
    manager.persist((group_id, answer.topic_id, answer.index))
    manager.wake()                      # released records may be fetched by others now
    return code


def _acquire(ctx, manager, group_id, member_id, session_partitions, answers, max_records, max_bytes) -> list:
    """Acquire records on every share-partition of the session; returns what a wait should watch."""
    seen = []
    now = manager.service.clock.now_ms()
    for topic_id, index in session_partitions:
        answer = answers.get((topic_id, index))
        if answer is None:
            answer = answers[(topic_id, index)] = _Partition(topic_id, index)
        if max_records <= 0 or max_bytes <= 0 or answer.error is not E.NONE:
            continue
        partition = _leader(ctx, answer)
        if partition is None:
            continue
        share = manager.get((group_id, topic_id, index))
        if share is None:               # not loaded (`_load` set the error, if one is to be told)
            continue
        manager.leader_epochs[(group_id, topic_id, index)] = partition.leader_epoch
        log = partition.log
        share.reset_start(log.log_start_offset)     # records removed from the log are gone for the group too
        high_watermark = log.high_watermark
        seen.append((partition, high_watermark, partition.leader_epoch))
        # read_committed: nothing past the last stable offset, and aborted transactions' records are never delivered
        committed = group_config(ctx.broker.image, group_id, "share.isolation.level") == "read_committed"
        upper = min(log.last_stable_offset, high_watermark) if committed else high_watermark
        for _ in range(_SKIP_ROUNDS):   # a read of only control/aborted batches archives them: read on
            offset = share.next_fetch_offset()
            if offset >= upper:
                break
            try:
                slices = log.read(offset, max_bytes, max_offset=upper, min_one_batch=True)
            except StorageError as exc:
                answer.error = ErrorCode(exc.error_code)
                break
            if not slices:
                break
            batches = _batch_headers(slices)
            last = min(batches[-1].last if batches else -1, upper - 1)
            version = share.version
            acquired = share.acquire(member_id, offset, last, max_records, now,
                                     skip=_undeliverable(log, batches, offset, upper, committed))
            if share.version != version:
                manager.persist((group_id, topic_id, index))
            if acquired:
                answer.slices, answer.acquired = slices, acquired
                max_records -= sum(a.last_offset - a.first_offset + 1 for a in acquired)
                max_bytes -= sum(len(s) for s in slices)
                break
            if share.version == version:
                break
    return seen


async def _load(ctx, manager, group_id, session_partitions, answers) -> None:
    """Bring the session's share-partitions here (their state from the share coordinator)."""
    for topic_id, index in session_partitions:
        answer = answers.get((topic_id, index))
        if answer is None:
            answer = answers[(topic_id, index)] = _Partition(topic_id, index)
        if manager.get((group_id, topic_id, index)) is not None:
            continue
        partition = _leader(ctx, answer)
        if partition is None:
            continue
        share = await manager.load(group_id, topic_id, index, partition)
        # the share coordinator loading or moving: no records this time, the member fetches again
        # (Java's client treats a coordinator error on a partition as fatal)
        if isinstance(share, ErrorCode) and share not in _TRANSIENT:
            answer.error = share


class _Header:
    """What a share fetch needs of a batch header: its offsets, whether it is a control batch (a
    transaction marker) and, for transactional data, its producer."""
    __slots__ = ("first", "last", "control", "transactional", "producer_id")

    def __init__(self, first, last, attributes, producer_id):
        self.first, self.last, self.producer_id = first, last, producer_id
        self.control = bool(attributes & _CONTROL)
        self.transactional = bool(attributes & _TRANSACTIONAL)


def _batch_headers(slices) -> list[_Header]:
    """The headers of the batches in `slices` (reads only their first bytes, never the records)."""
    headers = []
    for piece in slices:
        position, end = piece.position, piece.position + piece.length
        while position + _HEADER.size <= end:
            base_offset, length, attributes, last_delta, producer_id = _HEADER.unpack(
                os.pread(piece.fileno(), _HEADER.size, position))
            headers.append(_Header(base_offset, base_offset + last_delta, attributes, producer_id))
            position += 12 + length
    return headers


def _undeliverable(log, batches: list[_Header], first: int, upper: int, committed: bool) -> list[tuple[int, int]]:
    """Offset ranges a share group never delivers: control records, and under read_committed the
    records of aborted transactions (the log's aborted-transaction index, as a read_committed Fetch)."""
    skip = [(b.first, b.last) for b in batches if b.control]
    if committed and any(b.transactional and not b.control for b in batches):
        aborted: dict[int, list] = {}
        for txn in log.aborted_transactions(first, upper):
            aborted.setdefault(txn.producer_id, []).append((txn.first_offset, txn.last_offset))
        skip += [(b.first, b.last) for b in batches if b.transactional and not b.control
                 and any(lo <= b.first <= hi for lo, hi in aborted.get(b.producer_id, ()))]
    return skip


async def _wait(ctx, manager, seen, timeout: float) -> None:
    """Until new data reaches one of the partitions, records are released somewhere, or `timeout`."""
    async with trio.open_nursery() as nursery:
        async def for_data():
            await ctx.partitions.wait_for_data(seen, timeout)
            nursery.cancel_scope.cancel()

        async def for_releases():
            await manager.wait_available(timeout)
            nursery.cancel_scope.cancel()
        nursery.start_soon(for_data)
        nursery.start_soon(for_releases)


HANDLERS = {
    78: (1, 2, share_fetch),
    79: (1, 2, share_acknowledge),
}
