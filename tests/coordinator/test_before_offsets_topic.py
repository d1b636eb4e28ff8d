"""Group requests before `__consumer_offsets` exists, version by version, as Kafka 3.9 answers them
(checked against a fresh Kafka 3.9.0, with and without the KIP-848 protocol): only FindCoordinator
creates the topic; until then no broker coordinates any group, so every group request is
NOT_COORDINATOR, in each API's own shape, and creates nothing.

    python -m tests.coordinator.test_before_offsets_topic HOST:PORT    # the same checks on any broker
"""

from __future__ import annotations

import time
import uuid

from protocol import ErrorCode as E
from protocol import messages as m

from tests.coordinator.fresh_broker_checks import on_broker_named_in_argv, on_fresh_odradek

NC = E.NOT_COORDINATOR


def _requests():
    """(api key, versions, request, the answer expected at a version)."""
    C, CR = m.OffsetCommitRequest, m.OffsetCommitResponse
    yield 8, range(1, 10), C(group_id="g", generation_id_or_member_epoch=-1, member_id="", topics=[
        C.OffsetCommitRequestTopic(name="t", partitions=[C.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=1, committed_leader_epoch=-1, committed_metadata="")])]), \
        lambda v: CR(topics=[CR.OffsetCommitResponseTopic(name="t", partitions=[
            CR.OffsetCommitResponsePartition(partition_index=0, error_code=NC)])])
    # the topic's and partition's existence are checked first
    yield 8, [8], C(group_id="g", generation_id_or_member_epoch=-1, member_id="", topics=[
        C.OffsetCommitRequestTopic(name=name, partitions=[C.OffsetCommitRequestPartition(
            partition_index=i, committed_offset=1, committed_leader_epoch=-1, committed_metadata="")])
        for name, i in (("t", 5), ("nosuch", 0))]), \
        lambda v: CR(topics=[CR.OffsetCommitResponseTopic(name=name, partitions=[
            CR.OffsetCommitResponsePartition(partition_index=i, error_code=E.UNKNOWN_TOPIC_OR_PARTITION)])
            for name, i in (("t", 5), ("nosuch", 0))])
    F, FR = m.OffsetFetchRequest, m.OffsetFetchResponse
    # before v2 there is no error field: Kafka answers no partitions at all
    yield 9, range(1, 8), F(group_id="g", topics=[F.OffsetFetchRequestTopic(name="t", partition_indexes=[0])]), \
        lambda v: FR(error_code=NC if v >= 2 else 0)
    yield 9, range(8, 10), F(groups=[
        F.OffsetFetchRequestGroup(group_id="g", topics=None),
        F.OffsetFetchRequestGroup(group_id="h", topics=[F.OffsetFetchRequestTopics(name="t", partition_indexes=[0])])]), \
        lambda v: FR(groups=[FR.OffsetFetchResponseGroup(group_id=g, error_code=NC) for g in "gh"])
    J = m.JoinGroupRequest
    yield 11, range(0, 10), J(group_id="g", session_timeout_ms=30_000, rebalance_timeout_ms=30_000, member_id="",
                              protocol_type="consumer", protocols=[J.JoinGroupRequestProtocol(name="range", metadata=b"")]), \
        lambda v: m.JoinGroupResponse(error_code=NC, protocol_name=None if v >= 7 else "")
    # the empty group id, and (Kafka's KIP-848 coordinator) the session timeout, are checked first
    yield 11, [5], J(group_id="", session_timeout_ms=30_000, rebalance_timeout_ms=30_000, member_id="",
                     protocol_type="consumer", protocols=[]), \
        lambda v: m.JoinGroupResponse(error_code=E.INVALID_GROUP_ID)
    yield 11, [5], J(group_id="g", session_timeout_ms=10, rebalance_timeout_ms=30_000, member_id="",
                     protocol_type="consumer", protocols=[]), \
        lambda v: m.JoinGroupResponse(error_code=E.INVALID_SESSION_TIMEOUT)
    yield 12, [4], m.HeartbeatRequest(group_id="", generation_id=1, member_id="m"), \
        lambda v: m.HeartbeatResponse(error_code=E.INVALID_GROUP_ID)
    yield 13, [5], m.LeaveGroupRequest(group_id="", members=[m.LeaveGroupRequest.MemberIdentity(member_id="m")]), \
        lambda v: m.LeaveGroupResponse(error_code=E.INVALID_GROUP_ID)
    yield 14, [5], m.SyncGroupRequest(group_id="", generation_id=1, member_id="m", protocol_type="consumer",
                                      protocol_name="range", assignments=[]), \
        lambda v: m.SyncGroupResponse(error_code=E.INVALID_GROUP_ID)
    yield 47, [0], m.OffsetDeleteRequest(group_id="", topics=[]), \
        lambda v: m.OffsetDeleteResponse(error_code=E.INVALID_GROUP_ID)
    yield 12, range(0, 5), m.HeartbeatRequest(group_id="g", generation_id=1, member_id="m"), \
        lambda v: m.HeartbeatResponse(error_code=NC)
    L = m.LeaveGroupRequest
    yield 13, range(0, 3), L(group_id="g", member_id="m"), lambda v: m.LeaveGroupResponse(error_code=NC)
    yield 13, range(3, 6), L(group_id="g", members=[L.MemberIdentity(member_id="m")]), \
        lambda v: m.LeaveGroupResponse(error_code=NC)
    yield 14, range(0, 6), m.SyncGroupRequest(group_id="g", generation_id=1, member_id="m", protocol_type="consumer",
                                              protocol_name="range", assignments=[]), \
        lambda v: m.SyncGroupResponse(error_code=NC)
    D = m.DescribeGroupsResponse
    for versions, operations in ((range(0, 3), False), (range(3, 6), True)):
        yield 15, versions, m.DescribeGroupsRequest(groups=["g", "h"], include_authorized_operations=operations), \
            lambda v: D(groups=[D.DescribedGroup(error_code=NC, group_id=g) for g in "gh"])   # and no operations
    yield 16, range(0, 6), m.ListGroupsRequest(states_filter=[], types_filter=[]), lambda v: m.ListGroupsResponse()
    G = m.DeleteGroupsResponse
    yield 42, range(0, 3), m.DeleteGroupsRequest(groups_names=["g", "h"]), \
        lambda v: G(results=[G.DeletableGroupResult(group_id=g, error_code=NC) for g in "gh"])
    O = m.OffsetDeleteRequest
    yield 47, [0], O(group_id="g", topics=[O.OffsetDeleteRequestTopic(name="t", partitions=[
        O.OffsetDeleteRequestPartition(partition_index=0)])]), lambda v: m.OffsetDeleteResponse(error_code=NC)
    yield 68, [0], m.ConsumerGroupHeartbeatRequest(
        group_id="g", member_id=str(uuid.uuid4()), member_epoch=0, rebalance_timeout_ms=30_000,
        subscribed_topic_names=["t"], topic_partitions=[]), \
        lambda v: m.ConsumerGroupHeartbeatResponse(error_code=NC)     # and no message, as Kafka
    CD = m.ConsumerGroupDescribeResponse
    yield 69, [0], m.ConsumerGroupDescribeRequest(group_ids=["g"]), \
        lambda v: CD(groups=[CD.DescribedGroup(error_code=NC, group_id="g")])


def _offsets_topic_error(client) -> int:
    M = m.MetadataRequest
    return client.request(3, 12, M(topics=[M.MetadataRequestTopic(name="__consumer_offsets")],
                                    allow_auto_topic_creation=False)).topics[0].error_code


def check(client) -> None:
    """On a broker with topic `t` and no `__consumer_offsets`: each group request's answer, then
    FindCoordinator creates the topic and the group is served."""
    assert _offsets_topic_error(client) == E.UNKNOWN_TOPIC_OR_PARTITION
    for key, versions, request, expected in _requests():
        for version in versions:
            answer = client.request(key, version, request)
            answer.throttle_time_ms = 0
            assert answer == expected(version), (key, version)
    assert _offsets_topic_error(client) == E.UNKNOWN_TOPIC_OR_PARTITION   # nothing created it
    deadline = time.monotonic() + 15
    while client.request(10, 3, m.FindCoordinatorRequest(key="g", key_type=0)).error_code != E.NONE:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    _, _, request, _ = next(r for r in _requests() if r[0] == 11 and r[2].group_id == "g")
    # (Kafka's coordinator may still be loading the fresh partition a moment)
    while (code := client.request(11, 9, request).error_code) in (NC, E.COORDINATOR_LOAD_IN_PROGRESS):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert code == E.MEMBER_ID_REQUIRED


def test_group_requests_answer_not_coordinator_until_find_coordinator_creates_the_offsets_topic(tmp_path):
    on_fresh_odradek(check, tmp_path)


if __name__ == "__main__":
    on_broker_named_in_argv(check)
