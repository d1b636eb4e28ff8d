"""Fetch (key 1), v0–v17: consumers read record batches straight from segment files.

- Incremental fetch sessions (KIP-227) via ``broker.fetch_session``.
- Long polling: when fewer than ``min_bytes`` are available the request sleeps until an append to one
  of its partitions wakes it (no polling) or ``max_wait_ms`` passes, then reads again.
- ``max_bytes`` across the response and ``partition_max_bytes`` per partition, except that the first
  partition with data always gets at least one whole batch (KIP-74); for v0–v2 (before KIP-74) the
  limits are hard, as in Kafka: a batch larger than ``partition_max_bytes`` is not sent at all.
- read_uncommitted reads up to the high watermark, read_committed up to the last stable offset and
  gets the aborted transactions of the range.
- A follower's fetch (replica id / ReplicaState) reads up to the log end, records the follower's
  position with the replica manager (which may move the high watermark) and, when the follower's last
  fetched epoch ends earlier here, answers DivergingEpoch instead of records.
- Records are storage file slices, sent with ``os.sendfile`` by the connection; v0–v3 fetchers (sarama
  set below 0.11, kafka-go 0.2) get them converted to message format v0/v1 instead, as Kafka 3.9 does.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import NamedTuple

import trio

import protocol
from protocol import ErrorCode, legacy_records, messages
from protocol.compression import CompressionError
from protocol.records import RecordBatchError, iter_batches

from broker.connection_writes import SlicedRecords
from broker.fetch_session import PartitionFetch
from broker.partitions import PartitionError
from broker.quotas import identity
from broker.replication.divergence import diverging_epoch
from broker.replication.read_replica import preferred_read_replica
from broker.security import access
from broker.security.acls import AclOperation, ResourceType
from storage.errors import StorageError

API_KEY = 1
READ_COMMITTED = 1
Response = messages.FetchResponse


class _Read:
    """The outcome of reading one partition."""

    __slots__ = ("key", "fetch", "error", "high_watermark", "last_stable_offset",
                 "log_start_offset", "slices", "size", "aborted", "partition", "leader_epoch",
                 "diverging", "position", "preferred")

    def __init__(self, key, fetch):
        self.key, self.fetch = key, fetch
        self.error = ErrorCode.NONE
        self.high_watermark = self.last_stable_offset = self.log_start_offset = -1
        self.slices, self.size, self.aborted, self.partition = [], 0, None, None
        self.leader_epoch = -1
        self.diverging = None   # (epoch, end offset) for a diverged follower
        self.position = -1      # what a long poll waits to move: high watermark, or log end for replicas
        self.preferred = -1     # PreferredReadReplica (KIP-392) instead of records


def _requested(body, version) -> tuple[OrderedDict, list]:
    uses_ids = version >= 13
    requested: OrderedDict = OrderedDict()
    for topic in body.topics:
        topic_key = topic.topic_id if uses_ids else topic.topic
        for p in topic.partitions:
            requested[(topic_key, p.partition)] = PartitionFetch(
                topic=None if uses_ids else topic.topic,
                topic_id=topic.topic_id if uses_ids else None,
                partition=p.partition, fetch_offset=p.fetch_offset,
                partition_max_bytes=p.partition_max_bytes,
                current_leader_epoch=p.current_leader_epoch,
                last_fetched_epoch=getattr(p, "last_fetched_epoch", -1),
                log_start_offset=p.log_start_offset)
    forgotten = []
    for topic in getattr(body, "forgotten_topics_data", None) or []:
        topic_key = topic.topic_id if uses_ids else topic.topic
        forgotten.extend((topic_key, index) for index in topic.partitions)
    return requested, forgotten


def _now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


def _resolve(image, key, uses_ids) -> str:
    """The topic name a fetch key stands for, or raises PartitionError."""
    topic_key, _ = key
    if uses_ids:
        topic = image.topics_by_id.get(topic_key)
        if topic is None:
            raise PartitionError(ErrorCode.UNKNOWN_TOPIC_ID)
        return topic.name
    return topic_key


def _denied_topics(ctx, origin: "Origin", reads, uses_ids) -> frozenset:
    """Topics this fetch may not read: a follower needs CLUSTER_ACTION (then every topic is
    refused without it), a consumer READ on each topic."""
    if not access.enabled(ctx):
        return frozenset()
    image = ctx.image
    names = set()
    for read in reads:
        try:
            names.add(_resolve(image, read.key, uses_ids))
        except PartitionError:
            pass
    if origin.replica_id >= 0:
        return frozenset() if access.cluster_allowed(ctx, AclOperation.CLUSTER_ACTION) \
            else frozenset(names)
    return frozenset(names - access.allowed_names(ctx, AclOperation.READ, ResourceType.TOPIC,
                                                  names))


class Origin(NamedTuple):
    """Who fetches: a follower (replica id >= 0, its broker epoch) or a consumer (its rack, v11+),
    and whether its byte limits are hard (v0-v2, before KIP-74: no oversized first batch)."""
    replica_id: int = -1
    replica_epoch: int = -1
    client_rack: str | None = None      # None: before v11, a consumer may read from leaders only
    hard_limits: bool = False

    @classmethod
    def of(cls, body, version) -> "Origin":
        if version >= 15:
            state = body.replica_state
            if state is not None and state.replica_id >= 0:
                return cls(state.replica_id, state.replica_epoch)
        elif body.replica_id >= 0:
            return cls(body.replica_id, hard_limits=version <= 2)
        return cls(client_rack=(body.rack_id or "") if version >= 11 else None,
                   hard_limits=version <= 2)


def _partition(ctx, name, fetch, origin: Origin):
    """The partition to read: its leader here, or (KIP-392) any replica here for a v11+ consumer."""
    if origin.client_rack is not None:
        return ctx.partitions.readable(name, fetch.partition, fetch.current_leader_epoch)
    return ctx.partitions.leader(name, fetch.partition, fetch.current_leader_epoch)


def _read_all(ctx, reads, uses_ids, isolation, max_bytes, origin: Origin = Origin(),
              denied=frozenset(), seen_image=None):
    """Read every partition within the byte budgets (on the event loop: no data is copied);
    returns the metadata image the reads were made under.

    With `seen_image`, the image of the pass before a long poll's wait (and still current), a
    partition whose leader epoch and read position are as that pass saw them keeps what it read,
    only its offsets refreshed: in a follower's fetch session most partitions are idle, and a full
    read of each (leadership, divergence, follower state, index lookup) costs several µs per pass.
    A partition whose bytes changed makes every later one with bytes read again (the budget).
    """
    image = ctx.image
    if seen_image is not image:
        seen_image = None   # (metadata moved meanwhile: every partition is read again)
    replica_id, replica_epoch = origin.replica_id, origin.replica_epoch
    partitions = ctx.partitions
    budget = max_bytes
    bytes_moved = False
    for read in reads:
        if seen_image is not None and not (bytes_moved and read.size) \
                and _unchanged(read, partitions, replica_id >= 0):
            budget -= read.size
            continue
        size_before = read.size
        _read_one(ctx, read, image, partitions, uses_ids, isolation, max_bytes, budget,
                  replica_id, replica_epoch, origin, denied)
        bytes_moved |= read.size != size_before
        budget -= read.size
    return image


def _unchanged(read, partitions, replica: bool) -> bool:
    """Whether the last pass's read of this partition still holds (refreshing its offsets)."""
    partition = read.partition
    if partition is None or partition.leader_epoch != read.leader_epoch \
            or not partitions.is_current(partition):
        return False
    log = partition.log
    if replica:
        if log.log_end_offset != read.position:
            return False
    elif log.high_watermark != read.position or log.last_stable_offset != read.last_stable_offset:
        return False
    if log.log_start_offset != read.log_start_offset:
        return False
    read.high_watermark = log.high_watermark
    read.last_stable_offset = log.last_stable_offset
    return True


def _read_one(ctx, read, image, partitions, uses_ids, isolation, max_bytes, budget, replica_id,
              replica_epoch, origin: Origin, denied) -> None:
    """Read one partition in full: leadership, a follower's divergence and progress, the bytes."""
    # As Kafka: a list of aborted transactions for read_committed data and for any error (an
    # empty one then), none (null) for read_uncommitted data.
    read.slices, read.size, read.aborted, read.partition = [], 0, [], None
    read.high_watermark = read.last_stable_offset = read.log_start_offset = -1
    fetch = read.fetch
    try:
        name = _resolve(image, read.key, uses_ids)
        if name in denied:
            raise PartitionError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        partition = _partition(ctx, name, fetch, origin)
    except PartitionError as exc:
        read.error = exc.code
        return
    read.partition = partition
    read.leader_epoch = partition.leader_epoch
    log = partition.log
    read.diverging = None
    if replica_id >= 0:
        read.diverging = diverging_epoch(log, fetch.fetch_offset, fetch.last_fetched_epoch)
        if read.diverging is None and log.log_start_offset <= fetch.fetch_offset <= log.log_end_offset \
                and not partitions.replication.on_replica_fetch(
                    partition, replica_id, replica_epoch, fetch.fetch_offset,
                    fetch.log_start_offset):
            read.error = ErrorCode.NOT_LEADER_OR_FOLLOWER   # not a replica of this partition
            return
    read.high_watermark = log.high_watermark
    read.last_stable_offset = log.last_stable_offset
    read.log_start_offset = log.log_start_offset
    read.position = log.log_end_offset if replica_id >= 0 else read.high_watermark
    read.error = ErrorCode.NONE
    if read.diverging is not None:
        return
    if origin.client_rack and partition.replica_state is not None:
        read.preferred = preferred_read_replica(ctx.broker, partition, fetch.fetch_offset,
                                                origin.client_rack, _now_ms())
        if read.preferred >= 0:
            return     # the consumer goes to that replica for its records
    if replica_id >= 0:
        limit = None         # a follower reads up to the log end
    else:
        limit = read.last_stable_offset if isolation == READ_COMMITTED else read.high_watermark
    offset = fetch.fetch_offset
    if offset == (read.position if limit is None else limit) and offset >= read.log_start_offset \
            and log.offline is None:
        slices = []   # caught up (most partitions of a follower's session): no index lookup
    else:
        try:
            slices = log.read(offset, min(fetch.partition_max_bytes, max(budget, 0)),
                              max_offset=limit,
                              min_one_batch=budget == max_bytes and not origin.hard_limits)
        except StorageError as exc:
            if partition.log is not log:   # moved to another log dir meanwhile: read it there
                return _read_one(ctx, read, image, partitions, uses_ids, isolation, max_bytes,
                                 budget, replica_id, replica_epoch, origin, denied)
            read.error = exc.error_code
            if replica_id < 0:
                # Kafka answers a consumer's failed read (OFFSET_OUT_OF_RANGE, ...) with unknown
                # offsets; our followers keep them: they resynchronise from the leader's log start
                # and high watermark in this answer (broker/replication/fetcher.py).
                read.high_watermark = read.last_stable_offset = read.log_start_offset = -1
            return
    read.error = ErrorCode.NONE
    read.aborted = None
    read.slices = slices
    read.size = sum(map(len, slices)) if slices else 0
    if isolation == READ_COMMITTED:
        upper = fetch.fetch_offset + 1
        if slices:
            upper = max(upper, limit)
        read.aborted = log.aborted_transactions(fetch.fetch_offset, upper)


async def handle_fetch(ctx, header, body):
    version = header.api_version
    uses_ids = version >= 13
    requested, forgotten = _requested(body, version)
    session_id = body.session_id if version >= 7 else 0
    epoch = body.session_epoch if version >= 7 else -1
    context = ctx.fetch_sessions.open(session_id, epoch, requested, forgotten, uses_ids)
    if isinstance(context, ErrorCode):
        return Response(throttle_time_ms=0, error_code=context, session_id=0, responses=[])
    isolation = body.isolation_level
    max_bytes = body.max_bytes if body.max_bytes > 0 else 0
    min_bytes = body.min_bytes
    quotas = ctx.broker.quotas
    from_follower = _from_follower(body, version)
    ctx.request_quota_charged |= from_follower   # replication is exempt from client quotas
    quota_checked = (quotas.fetch.enabled or quotas.request.enabled) and not from_follower
    if quota_checked and quotas.fetch.enabled:
        # As Kafka: never more than the quota allows over a window's worth of samples.
        user, client_id = identity(ctx)
        window_bytes = quotas.fetch.max_value_in_window(user, client_id)
        if window_bytes < max_bytes:
            max_bytes = int(window_bytes)
            min_bytes = min(min_bytes, max_bytes)
    deadline = trio.current_time() + max(body.max_wait_ms, 0) / 1000
    keys = list(context.partitions.keys())
    reads = [_Read(key, context.partitions[key]) for key in keys]
    origin = Origin.of(body, version)
    denied = _denied_topics(ctx, origin, reads, uses_ids)

    seen_image = None
    while True:
        # Index lookups and file slices only (the bytes go out with sendfile): cheaper inline
        # than a worker-thread trip, and nothing can land between this read and the wait below.
        seen_image = _read_all(ctx, reads, uses_ids, isolation, max_bytes, origin, denied,
                               seen_image)
        total = sum(r.size for r in reads)
        errors = any(r.error or r.diverging or r.preferred >= 0 for r in reads)
        remaining = deadline - trio.current_time()
        if total >= min_bytes or errors or remaining <= 0 or ctx.broker.draining \
                or not reads:
            break
        await ctx.partitions.wait_for_data(
            [(r.partition, r.position, r.leader_epoch) for r in reads if r.partition],
            remaining, replica=origin.replica_id >= 0)

    responses: list = []
    with_records = []
    sent_before = [(p, p.sent_high_watermark, p.sent_log_start_offset)
                   for p in context.partitions.values()] if quota_checked else None
    for read in reads:
        if not context.should_include(read.key, read.high_watermark, read.log_start_offset,
                                      read.size > 0 or read.diverging is not None
                                      or read.preferred >= 0, read.error):
            continue
        if read.size:
            with_records.append(read.key)
        records = SlicedRecords(read.slices) if read.slices else b""
        if version < 4 and read.slices:
            records = _down_converted(read, magic=0 if version < 2 else 1)
        data = Response.PartitionData(
            partition_index=read.fetch.partition, error_code=read.error,
            high_watermark=read.high_watermark, last_stable_offset=read.last_stable_offset,
            log_start_offset=read.log_start_offset,
            aborted_transactions=(
                [Response.AbortedTransaction(producer_id=txn.producer_id,
                                             first_offset=txn.first_offset)
                 for txn in read.aborted] if read.aborted is not None else None),
            preferred_read_replica=read.preferred,
            records=records)
        if read.diverging is not None:
            data.diverging_epoch = Response.EpochEndOffset(epoch=read.diverging[0],
                                                           end_offset=read.diverging[1])
        topic_key = read.key[0]
        if responses and responses[-1][0] == topic_key:
            responses[-1][1].append(data)
        else:
            responses.append((topic_key, [data]))
    topics = []
    for topic_key, partitions in responses:
        if uses_ids:
            topics.append(Response.FetchableTopicResponse(topic_id=topic_key, partitions=partitions))
        else:
            topics.append(Response.FetchableTopicResponse(topic=topic_key, partitions=partitions))
    response = Response(throttle_time_ms=0, error_code=0, session_id=context.session_id,
                        responses=topics)
    if quota_checked and _throttled(ctx, header, response):
        # Kafka answers a throttled fetch with no data: the session stays as it was (a new one
        # is not kept) and the bytes are not counted.
        for partition, high_watermark, log_start_offset in sent_before:
            partition.sent_high_watermark = high_watermark
            partition.sent_log_start_offset = log_start_offset
        if not context.incremental and context.session is not None:
            ctx.fetch_sessions.sessions.pop(context.session.id, None)
        return Response(throttle_time_ms=ctx.throttle_ms, error_code=0,
                        session_id=context.session_id if context.incremental else 0,
                        responses=[])
    context.rotate(with_records)
    ctx.broker.record_fetch(reads)
    return response


def _down_converted(read, magic: int) -> bytes:
    """The read's records as a magic 0/1 message set (Kafka's down-conversion for Fetch v0-v3): whole
    batches only, records before the fetch offset left out. ZStandard data cannot be expressed:
    UNSUPPORTED_COMPRESSION_TYPE, as Kafka answers fetchers older than v10."""
    data = b"".join(piece.read() if hasattr(piece, "read") else bytes(piece) for piece in read.slices)
    try:
        return legacy_records.from_batches(iter_batches(data, allow_partial=True), magic,
                                           read.fetch.fetch_offset)
    except RecordBatchError as exc:
        read.error = exc.error_code
        return b""
    except CompressionError:
        read.error = ErrorCode.CORRUPT_MESSAGE
        return b""


def _from_follower(body, version) -> bool:
    """A replica's fetch: exempt from client quotas (replication has quotas of its own)."""
    if version >= 15:
        state = getattr(body, "replica_state", None)
        return state is not None and state.replica_id >= 0
    return getattr(body, "replica_id", -1) >= 0


def _throttled(ctx, header, response) -> bool:
    """Charge consumer_byte_rate with the response's size and the request quota with the time
    spent so far; True when either throttles (the larger throttle is the one applied)."""
    quotas = ctx.broker.quotas
    request_throttle = quotas.charge_request_now(ctx)
    fetch_throttle = 0
    if quotas.fetch.enabled:
        user, client_id = identity(ctx)
        size = sum(len(part) for part in protocol.encode_response_parts(
            API_KEY, header.api_version, header.correlation_id, response))
        fetch_throttle = quotas.fetch.record(user, client_id, size)
        if max(fetch_throttle, request_throttle) > 0:
            quotas.fetch.unrecord(user, client_id, size)
    quotas.throttle(ctx, quotas.fetch, fetch_throttle)
    quotas.throttle(ctx, quotas.request, request_throttle)
    return ctx.throttle_ms > 0


HANDLERS = {API_KEY: (0, 17, handle_fetch)}
