"""ListOffsets (key 2) v0–v10 and OffsetForLeaderEpoch (key 23) v2–v4.

ListOffsets: EARLIEST (-2) is the log start offset; LATEST (-1) the high watermark (read_uncommitted)
or last stable offset (read_committed); MAX_TIMESTAMP (-3) the record with the largest timestamp;
EARLIEST_LOCAL (-4) the log start (no tiered storage); LATEST_TIERED (-5) nothing tiered: -1; any
other negative one UNSUPPORTED_VERSION; a timestamp the first record at or after it, or -1 when there
is none below the fetchable limit.
An empty partition answers offset 0 (earliest/latest), never an error. v0 answers Kafka's
old-style list of segment offsets instead (see `_legacy_offsets`).
"""

from __future__ import annotations

import time
from collections import Counter

from protocol import ErrorCode, messages
from protocol.records import RecordBatchError

from broker.partitions import PartitionError
from broker.security import access
from broker.security.acls import AclOperation, ResourceType
from storage.errors import StorageError

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5
# The version each special timestamp came with; a negative timestamp not listed is one a newer
# version defines, unsupported at every version served here (Kafka answers so).
SPECIAL_SINCE = {LATEST: 0, EARLIEST: 0, MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9}
READ_COMMITTED = 1
CONSUMER_REPLICA_ID = -1


def _known_at(timestamp: int, version: int) -> bool:
    return timestamp >= 0 or version >= SPECIAL_SINCE.get(timestamp, version + 1)


def _lookup(partition, timestamp: int, isolation: int) -> tuple[int, int, int]:
    """(timestamp, offset, leader epoch); runs in a worker thread."""
    log = partition.log
    fetchable = log.last_stable_offset if isolation == READ_COMMITTED else log.high_watermark
    epoch = partition.leader_epoch
    if timestamp == LATEST:
        return -1, fetchable, epoch
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return -1, log.log_start_offset, epoch
    if timestamp == LATEST_TIERED:
        return -1, -1, -1
    if timestamp == MAX_TIMESTAMP:
        found = log.max_timestamp_offset()
    else:
        found = log.offset_for_timestamp(timestamp)
    if found is None or found.offset >= fetchable:
        return -1, -1, -1
    return found.timestamp, found.offset, found.leader_epoch


def _legacy_offsets(partition, timestamp: int, max_count: int, replica_id: int) -> list[int]:
    """ListOffsets v0 (sarama set below 0.10.1): Kafka's offsets by segment; a consumer's never
    pass the high watermark (one above it is replaced by the high watermark)."""
    log = partition.log
    offsets = log.legacy_offsets_before(timestamp, max_count, int(time.time() * 1000))
    if replica_id != CONSUMER_REPLICA_ID:
        return offsets
    high_watermark = log.high_watermark
    if any(offset > high_watermark for offset in offsets):
        return [high_watermark] + [offset for offset in offsets if offset <= high_watermark]
    return offsets


async def handle_list_offsets(ctx, header, body):
    Response = messages.ListOffsetsResponse
    version = header.api_version
    isolation = body.isolation_level if version >= 2 else 0
    # Kafka (ListOffsetsRequest.duplicatePartitions): a partition named twice anywhere in the
    # request is answered INVALID_REQUEST every time it appears, none of its copies looked up.
    named = Counter((topic.name, p.partition_index) for topic in body.topics for p in topic.partitions)
    describable = access.allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                       (topic.name for topic in body.topics))
    topics = []
    for topic in body.topics:
        answers = []
        for request in topic.partitions:
            index = request.partition_index
            answer = Response.ListOffsetsPartitionResponse(partition_index=index,
                                                           error_code=ErrorCode.NONE,
                                                           timestamp=-1, offset=-1)
            answers.append(answer)
            if topic.name not in describable:
                answer.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            if named[topic.name, index] > 1:
                answer.error_code = ErrorCode.INVALID_REQUEST
                continue
            if not _known_at(request.timestamp, version):
                answer.error_code = ErrorCode.UNSUPPORTED_VERSION
                continue
            try:
                partition = ctx.partitions.leader(topic.name, index, request.current_leader_epoch)
                if version == 0:
                    answer.old_style_offsets = await ctx.run_blocking(
                        _legacy_offsets, partition, request.timestamp, request.max_num_offsets,
                        body.replica_id)
                    continue
                timestamp, offset, epoch = await ctx.run_blocking(
                    _lookup, partition, request.timestamp, isolation)
            except PartitionError as exc:
                answer.error_code = exc.code
                continue
            except StorageError as exc:
                answer.error_code = exc.error_code
                continue
            except RecordBatchError as exc:
                # A stored batch that cannot be decoded (e.g. over the decompression bound) fails
                # this partition's lookup only, never the connection.
                answer.error_code = exc.error_code
                continue
            answer.timestamp, answer.offset = timestamp, offset
            if version >= 4:
                answer.leader_epoch = epoch
        topics.append(Response.ListOffsetsTopicResponse(name=topic.name, partitions=answers))
    return Response(throttle_time_ms=0, topics=topics)


async def handle_offset_for_leader_epoch(ctx, header, body):
    Response = messages.OffsetForLeaderEpochResponse
    # Replicas use it with CLUSTER_ACTION; consumers (KIP-320) need DESCRIBE on each topic.
    names = [topic.topic for topic in body.topics]
    if access.cluster_allowed(ctx, AclOperation.CLUSTER_ACTION, log_if_denied=False):
        describable = set(names)
    else:
        describable = access.allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
    topics = []
    for topic in body.topics:
        answers = []
        for request in topic.partitions:
            answer = Response.EpochEndOffset(partition=request.partition, error_code=0,
                                             leader_epoch=-1, end_offset=-1)
            answers.append(answer)
            if topic.topic not in describable:
                answer.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            try:
                partition = ctx.partitions.leader(topic.topic, request.partition,
                                                  request.current_leader_epoch)
            except PartitionError as exc:
                answer.error_code = exc.code
                continue
            epoch, end_offset = partition.log.end_offset_for_epoch(request.leader_epoch)
            if epoch == -1 and request.leader_epoch == partition.leader_epoch:
                # Becoming leader starts an epoch at the log end, even before any append.
                epoch, end_offset = partition.leader_epoch, partition.log.log_end_offset
            answer.leader_epoch, answer.end_offset = epoch, end_offset
        topics.append(Response.OffsetForLeaderTopicResult(topic=topic.topic, partitions=answers))
    return Response(throttle_time_ms=0, topics=topics)


HANDLERS = {
    2: (0, 10, handle_list_offsets),
    23: (0, 4, handle_offset_for_leader_epoch),
}
