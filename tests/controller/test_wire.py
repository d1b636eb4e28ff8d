"""KRaft wire mapping: every core message survives a trip through protocol's encoder and decoder."""

import pytest

import protocol

from broker.controller import wire
from broker.controller.disklog import Entry
from broker.controller.raft import messages as rm

REQUESTS = [
    rm.VoteRequest(5, 2, 4, 17),
    rm.VoteRequest(5, 2, 4, 17, pre_vote=True),
    rm.BeginQuorumEpoch(6, 3),
    rm.EndQuorumEpoch(6, 3, (1, 2)),
    rm.FetchRequest(6, 2, 10, 5),
    rm.FetchSnapshotRequest(6, 2, (40, 5), 128),
]

ENTRIES = (Entry(10, 5, b"payload"), Entry(11, 6, b"", control=True), Entry(12, 6, b"x" * 300))


def _over_the_wire_request(msg):
    key, version, client_id, body = wire.encode_request(msg, "cluster")
    header, decoded = protocol.decode_request(protocol.encode_request(key, version, 1, client_id, body))
    return key, version, wire.decode_request(key, header.client_id, decoded)


@pytest.mark.parametrize("msg", REQUESTS)
def test_requests_round_trip(msg):
    _, _, (src, back) = _over_the_wire_request(msg)
    assert back == msg
    assert src == getattr(msg, "candidate_id", getattr(msg, "replica_id", getattr(msg, "leader_id", None)))


@pytest.mark.parametrize("request_msg, response", [
    (REQUESTS[0], rm.VoteResponse(5, -1, True)),
    (REQUESTS[1], rm.VoteResponse(5, 3, False, pre_vote=True)),
    (REQUESTS[2], rm.BeginQuorumEpochResponse(6, 3)),
    (REQUESTS[4], rm.FetchResponse(6, 3, 10, 5, entries=ENTRIES, high_watermark=11, log_start_offset=3)),
    (REQUESTS[4], rm.FetchResponse(6, 3, 10, 5, diverging=(4, 8), high_watermark=7)),
    (REQUESTS[4], rm.FetchResponse(6, 3, 10, 5, snapshot_id=(40, 5), high_watermark=50)),
    (REQUESTS[4], rm.FetchResponse(7, 1, 10, 5, error=rm.FENCED_LEADER_EPOCH)),
    (REQUESTS[5], rm.FetchSnapshotResponse(6, 3, (40, 5), 128, size=300, chunk=b"abc")),
    (REQUESTS[5], rm.FetchSnapshotResponse(6, 3, (40, 5), 128, error=rm.SNAPSHOT_NOT_FOUND)),
])
def test_responses_round_trip(request_msg, response):
    key, version, _ = _over_the_wire_request(request_msg)
    frame = protocol.encode_response(key, version, 1, wire.encode_response(key, response))
    _, body = protocol.decode_response(key, version, frame)
    assert wire.decode_response(request_msg, body) == response


def test_wrong_partition_is_refused():
    key, version, client_id, body = wire.encode_request(REQUESTS[0], "c")
    body.topics[0].partitions[0].partition_index = 3
    with pytest.raises(wire.WireError):
        wire.decode_request(key, client_id, body)


def test_describe_quorum_response():
    view = {"node_id": 1, "leader_id": 1, "epoch": 4, "high_watermark": 9, "voters": [1, 2],
            "replicas": {1: {"log_end_offset": 9, "last_fetch_timestamp": 5, "last_caught_up_timestamp": 5},
                         2: {"log_end_offset": 7, "last_fetch_timestamp": 3, "last_caught_up_timestamp": -1},
                         9: {"log_end_offset": 2, "last_fetch_timestamp": 3, "last_caught_up_timestamp": -1}}}
    part = wire.describe_quorum_response(view).topics[0].partitions[0]
    assert (part.error_code, part.leader_id, part.leader_epoch, part.high_watermark) == (0, 1, 4, 9)
    assert part.error_message == ""             # as Kafka 3.9's v2 answer: empty, not null
    assert [(r.replica_id, r.log_end_offset) for r in part.current_voters] == [(1, 9), (2, 7)]
    assert [r.replica_id for r in part.observers] == [9]
    follower = dict(view, node_id=2, leader_id=1, replicas={})
    part = wire.describe_quorum_response(follower).topics[0].partitions[0]
    # Kafka 3.9's non-leader controller: the error with its stock message and every other field 0
    assert part.error_code == protocol.ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert part.error_message.startswith("For requests intended only for the leader")
    assert (part.leader_id, part.leader_epoch, part.high_watermark) == (0, 0, 0)


def test_pre_vote_travels_as_kip_996_vote_v2():
    """A pre-vote is Vote v2 with PreVote set (not a marker elsewhere); a real vote has it unset."""
    for pre_vote in (True, False):
        key, version, client_id, body = wire.encode_request(
            rm.VoteRequest(7, 2, 6, 40, pre_vote=pre_vote), "cluster-x")
        assert (key, version, client_id) == (52, 2, wire.CLIENT_ID)
        header, decoded = protocol.decode_request(
            protocol.encode_request(key, version, 9, client_id, body))
        partition = decoded.topics[0].partitions[0]
        assert partition.pre_vote is pre_vote and partition.replica_epoch == 7
        assert wire.decode_request(52, header.client_id, decoded) == \
            (2, rm.VoteRequest(7, 2, 6, 40, pre_vote=pre_vote))
