"""Raft core messages <-> Kafka's KRaft wire messages (protocol's generated classes).

Vote (52), BeginQuorumEpoch (53), EndQuorumEpoch (54), Fetch (1, v15, the `__cluster_metadata` topic by
its fixed topic id) and FetchSnapshot (59) carry the core's messages; log entries travel as RecordBatch v2
(one record per entry, the entry epoch as partition leader epoch, epoch markers as control batches
holding a LEADER_CHANGE record). Responses are decoded against the request they answer, which supplies
the fields the core echoes (fetch offset, snapshot position, pre-vote).

A pre-vote travels as KIP-996 puts it: Vote v2 with `PreVote` set (the candidate's current epoch, not
bumped).

`describe_quorum_response(view, version)` builds DescribeQuorum's answer from `Controller.describe_quorum()`.
"""

from __future__ import annotations

import struct
import uuid

from protocol import ErrorCode, messages as m
from protocol.records import RecordBatchError, SimpleRecord, build_batch, iter_batches

from .disklog import Entry
from .raft import messages as rm

METADATA_TOPIC = "__cluster_metadata"
METADATA_TOPIC_ID = uuid.UUID(int=1)
CLIENT_ID = "odradek-raft"
FETCH_MAX_WAIT_MS = 500      # the leader holds a fetch with nothing new this long (long poll)
VERSIONS = {52: 2, 53: 0, 54: 0, 1: 15, 59: 0}
_LEADER_CHANGE_KEY = struct.pack(">hh", 0, 2)      # control record key: version 0, type LEADER_CHANGE

_ERRORS = {None: ErrorCode.NONE, rm.FENCED_LEADER_EPOCH: ErrorCode.FENCED_LEADER_EPOCH,
           rm.NOT_LEADER: ErrorCode.NOT_LEADER_OR_FOLLOWER, rm.SNAPSHOT_NOT_FOUND: ErrorCode.SNAPSHOT_NOT_FOUND}
_CODES = {int(code): name for name, code in _ERRORS.items()}


class WireError(ValueError):
    """A KRaft message that does not address the metadata partition or is malformed."""


def _code(error) -> int:
    return int(_ERRORS[error])


def _error(code: int):
    if code not in _CODES:
        return rm.NOT_LEADER                   # any other failure: treat the peer as unusable now
    return _CODES[code]


# -- entries <-> record batches ----------------------------------------------------------------------

def entries_to_records(entries) -> bytes:
    out = bytearray()
    for e in entries:
        record = SimpleRecord(value=e.data, key=_LEADER_CHANGE_KEY if e.control else None, timestamp=0)
        out += build_batch([record], base_offset=e.offset, partition_leader_epoch=e.epoch, control=e.control)
    return bytes(out)


def records_to_entries(buf) -> tuple[Entry, ...]:
    if not buf:
        return ()
    try:
        out = []
        for batch in iter_batches(buf):
            batch.ensure_valid()
            (record,) = list(batch.records())
            out.append(Entry(batch.base_offset, batch.partition_leader_epoch, bytes(record.value or b""),
                             batch.is_control))
        return tuple(out)
    except (RecordBatchError, ValueError) as exc:
        raise WireError(f"bad metadata records: {exc}") from None


# -- requests ----------------------------------------------------------------------------------------

def encode_request(msg, cluster_id: str) -> tuple[int, int, str, object]:
    """(api key, version, client id, body) for a core request message."""
    if isinstance(msg, rm.VoteRequest):
        part = m.VoteRequest.PartitionData(partition_index=0, replica_epoch=msg.epoch,
                                           replica_id=msg.candidate_id, last_offset_epoch=msg.last_epoch,
                                           last_offset=msg.end_offset, pre_vote=msg.pre_vote)
        body = m.VoteRequest(cluster_id=cluster_id, topics=[m.VoteRequest.TopicData(
            topic_name=METADATA_TOPIC, partitions=[part])])
        return 52, VERSIONS[52], CLIENT_ID, body
    if isinstance(msg, rm.BeginQuorumEpoch):
        part = m.BeginQuorumEpochRequest.PartitionData(partition_index=0, leader_id=msg.leader_id,
                                                       leader_epoch=msg.epoch)
        body = m.BeginQuorumEpochRequest(cluster_id=cluster_id, topics=[
            m.BeginQuorumEpochRequest.TopicData(topic_name=METADATA_TOPIC, partitions=[part])])
        return 53, VERSIONS[53], CLIENT_ID, body
    if isinstance(msg, rm.EndQuorumEpoch):
        part = m.EndQuorumEpochRequest.PartitionData(partition_index=0, leader_id=msg.leader_id,
                                                     leader_epoch=msg.epoch,
                                                     preferred_successors=list(msg.preferred_successors))
        body = m.EndQuorumEpochRequest(cluster_id=cluster_id, topics=[
            m.EndQuorumEpochRequest.TopicData(topic_name=METADATA_TOPIC, partitions=[part])])
        return 54, VERSIONS[54], CLIENT_ID, body
    if isinstance(msg, rm.FetchRequest):
        part = m.FetchRequest.FetchPartition(partition=0, current_leader_epoch=msg.epoch,
                                             fetch_offset=msg.fetch_offset,
                                             last_fetched_epoch=msg.last_fetched_epoch, partition_max_bytes=1 << 20)
        body = m.FetchRequest(cluster_id=cluster_id, replica_state=m.FetchRequest.ReplicaState(
            replica_id=msg.replica_id, replica_epoch=-1), max_wait_ms=FETCH_MAX_WAIT_MS, min_bytes=0,
            topics=[m.FetchRequest.FetchTopic(topic_id=METADATA_TOPIC_ID, partitions=[part])])
        return 1, VERSIONS[1], CLIENT_ID, body
    if isinstance(msg, rm.FetchSnapshotRequest):
        part = m.FetchSnapshotRequest.PartitionSnapshot(
            partition=0, current_leader_epoch=msg.epoch, position=msg.position,
            snapshot_id=m.FetchSnapshotRequest.SnapshotId(end_offset=msg.snapshot_id[0], epoch=msg.snapshot_id[1]))
        body = m.FetchSnapshotRequest(cluster_id=cluster_id, replica_id=msg.replica_id, topics=[
            m.FetchSnapshotRequest.TopicSnapshot(name=METADATA_TOPIC, partitions=[part])])
        return 59, VERSIONS[59], CLIENT_ID, body
    raise TypeError(f"not a raft request: {msg!r}")


def _only_partition(topics, name_attr: str):
    if len(topics) != 1 or len(topics[0].partitions) != 1:
        raise WireError("expected exactly the metadata partition")
    topic = topics[0]
    name = getattr(topic, name_attr)
    if name_attr == "topic_id" and name != METADATA_TOPIC_ID or name_attr != "topic_id" and name != METADATA_TOPIC:
        raise WireError(f"unknown topic {name}")
    part = topic.partitions[0]
    index = getattr(part, "partition_index", getattr(part, "partition", 0))
    if index != 0:
        raise WireError(f"unknown partition {index}")
    return part


def decode_request(api_key: int, client_id: str | None, body) -> tuple[int, object]:
    """(source node id, core message) for a KRaft request body; raises WireError."""
    if api_key == 52:
        p = _only_partition(body.topics, "topic_name")
        return p.replica_id, rm.VoteRequest(p.replica_epoch, p.replica_id, p.last_offset_epoch,
                                            p.last_offset, pre_vote=p.pre_vote)
    if api_key == 53:
        p = _only_partition(body.topics, "topic_name")
        return p.leader_id, rm.BeginQuorumEpoch(p.leader_epoch, p.leader_id)
    if api_key == 54:
        p = _only_partition(body.topics, "topic_name")
        return p.leader_id, rm.EndQuorumEpoch(p.leader_epoch, p.leader_id, tuple(p.preferred_successors))
    if api_key == 1:
        p = _only_partition(body.topics, "topic_id")
        replica = body.replica_state.replica_id
        return replica, rm.FetchRequest(p.current_leader_epoch, replica, p.fetch_offset, p.last_fetched_epoch)
    if api_key == 59:
        p = _only_partition(body.topics, "name")
        sid = (p.snapshot_id.end_offset, p.snapshot_id.epoch)
        return body.replica_id, rm.FetchSnapshotRequest(p.current_leader_epoch, body.replica_id, sid, p.position)
    raise WireError(f"api key {api_key} is not a raft request")


# -- responses ---------------------------------------------------------------------------------------

def encode_response(api_key: int, msg) -> object:
    """The response body for `api_key`; `msg` None means an empty success (EndQuorumEpoch)."""
    if api_key == 52:
        part = m.VoteResponse.PartitionData(partition_index=0, leader_id=msg.leader_id, leader_epoch=msg.epoch,
                                            vote_granted=msg.granted)
        return m.VoteResponse(topics=[m.VoteResponse.TopicData(topic_name=METADATA_TOPIC, partitions=[part])])
    if api_key == 53:
        leader, epoch = (msg.leader_id, msg.epoch) if msg is not None else (-1, -1)
        part = m.BeginQuorumEpochResponse.PartitionData(partition_index=0, leader_id=leader, leader_epoch=epoch)
        return m.BeginQuorumEpochResponse(topics=[m.BeginQuorumEpochResponse.TopicData(
            topic_name=METADATA_TOPIC, partitions=[part])])
    if api_key == 54:
        part = m.EndQuorumEpochResponse.PartitionData(partition_index=0, leader_id=-1, leader_epoch=-1)
        return m.EndQuorumEpochResponse(topics=[m.EndQuorumEpochResponse.TopicData(
            topic_name=METADATA_TOPIC, partitions=[part])])
    if api_key == 1:
        R = m.FetchResponse
        part = R.PartitionData(
            partition_index=0, error_code=_code(msg.error), high_watermark=msg.high_watermark,
            log_start_offset=msg.log_start_offset,
            current_leader=R.LeaderIdAndEpoch(leader_id=msg.leader_id, leader_epoch=msg.epoch),
            records=entries_to_records(msg.entries) if msg.entries else None)
        if msg.diverging is not None:
            part.diverging_epoch = R.EpochEndOffset(epoch=msg.diverging[0], end_offset=msg.diverging[1])
        if msg.snapshot_id is not None:
            part.snapshot_id = R.SnapshotId(end_offset=msg.snapshot_id[0], epoch=msg.snapshot_id[1])
        return R(responses=[R.FetchableTopicResponse(topic_id=METADATA_TOPIC_ID, partitions=[part])])
    if api_key == 59:
        R = m.FetchSnapshotResponse
        part = R.PartitionSnapshot(
            index=0, error_code=_code(msg.error),
            snapshot_id=R.SnapshotId(end_offset=msg.snapshot_id[0], epoch=msg.snapshot_id[1]),
            current_leader=R.LeaderIdAndEpoch(leader_id=msg.leader_id, leader_epoch=msg.epoch),
            size=msg.size, position=msg.position, unaligned_records=msg.chunk)
        return R(topics=[R.TopicSnapshot(name=METADATA_TOPIC, partitions=[part])])
    raise WireError(f"api key {api_key} is not a raft request")


def decode_response(request, body):
    """The core message for `body`, the wire answer to core request `request`; raises WireError."""
    if isinstance(request, rm.VoteRequest):
        p = _only_partition(body.topics, "topic_name")
        if body.error_code or p.error_code:
            return rm.VoteResponse(p.leader_epoch, p.leader_id, False, request.pre_vote)
        return rm.VoteResponse(p.leader_epoch, p.leader_id, p.vote_granted, request.pre_vote)
    if isinstance(request, rm.BeginQuorumEpoch):
        p = _only_partition(body.topics, "topic_name")
        return rm.BeginQuorumEpochResponse(p.leader_epoch, p.leader_id)
    if isinstance(request, rm.EndQuorumEpoch):
        return None
    if isinstance(request, rm.FetchRequest):
        if body.error_code:
            raise WireError(f"fetch failed: {body.error_code}")
        if len(body.responses) != 1 or body.responses[0].topic_id != METADATA_TOPIC_ID \
                or len(body.responses[0].partitions) != 1:
            raise WireError("fetch response without the metadata partition")
        p = body.responses[0].partitions[0]
        diverging = (p.diverging_epoch.epoch, p.diverging_epoch.end_offset) if p.diverging_epoch.end_offset >= 0 else None
        snapshot = (p.snapshot_id.end_offset, p.snapshot_id.epoch) if p.snapshot_id.end_offset >= 0 else None
        return rm.FetchResponse(p.current_leader.leader_epoch, p.current_leader.leader_id, request.fetch_offset,
                                request.last_fetched_epoch, error=_error(p.error_code),
                                entries=records_to_entries(p.records), high_watermark=p.high_watermark,
                                diverging=diverging, snapshot_id=snapshot, log_start_offset=p.log_start_offset)
    if isinstance(request, rm.FetchSnapshotRequest):
        p = _only_partition(body.topics, "name")
        return rm.FetchSnapshotResponse(p.current_leader.leader_epoch, p.current_leader.leader_id,
                                        (p.snapshot_id.end_offset, p.snapshot_id.epoch), p.position, size=p.size,
                                        chunk=bytes(p.unaligned_records or b""), error=_error(p.error_code))
    raise TypeError(f"not a raft request: {request!r}")


def inconsistent_cluster_response(api_key: int):
    """The answer to a KRaft request from a node of another cluster."""
    response = {52: m.VoteResponse, 53: m.BeginQuorumEpochResponse, 54: m.EndQuorumEpochResponse,
                1: m.FetchResponse, 59: m.FetchSnapshotResponse}[api_key]
    return response(error_code=int(ErrorCode.INCONSISTENT_CLUSTER_ID))


# -- DescribeQuorum ----------------------------------------------------------------------------------

_NOT_LEADER_MESSAGE = ("For requests intended only for the leader, this error indicates that the broker "
                       "is not the current leader. For requests intended for any replica, this error "
                       "indicates that the broker is not a replica of the topic partition.")


def describe_quorum_response(view: dict | None, request=None):
    """DescribeQuorumResponse for `view` = Controller.describe_quorum() (None: not a controller)."""
    R = m.DescribeQuorumResponse
    if request is not None:
        try:
            _only_partition(request.topics, "topic_name")
        except WireError as exc:
            # As Kafka's raft client: the error goes on each requested partition, none at the top
            return R(error_code=0, topics=[R.TopicData(topic_name=t.topic_name, partitions=[
                R.PartitionData(partition_index=p.partition_index,
                                error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                error_message=str(exc)) for p in t.partitions])
                for t in request.topics])
    part = R.PartitionData(partition_index=0)    # Kafka leaves error_message "" when all is well
    if view is None or view["leader_id"] != view.get("node_id", view["leader_id"]) or not view.get("replicas"):
        # As Kafka's non-leader answers: the error and its stock message, every other field 0.
        part.error_code = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        part.error_message = _NOT_LEADER_MESSAGE
        return R(topics=[R.TopicData(topic_name=METADATA_TOPIC, partitions=[part])])
    part.leader_id, part.leader_epoch, part.high_watermark = view["leader_id"], view["epoch"], view["high_watermark"]

    def state(rid, r):
        return R.ReplicaState(replica_id=rid, log_end_offset=r["log_end_offset"],
                              last_fetch_timestamp=r["last_fetch_timestamp"],
                              last_caught_up_timestamp=r["last_caught_up_timestamp"])
    voters = set(view["voters"])
    part.current_voters = [state(rid, r) for rid, r in sorted(view["replicas"].items()) if rid in voters]
    part.observers = [state(rid, r) for rid, r in sorted(view["replicas"].items()) if rid not in voters]
    return R(topics=[R.TopicData(topic_name=METADATA_TOPIC, partitions=[part])])
