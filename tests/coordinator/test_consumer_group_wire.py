"""ConsumerGroupHeartbeat, ConsumerGroupDescribe and the member-epoch checks of OffsetCommit /
OffsetFetch over a real socket. Every expected answer here (codes and messages) is what Apache Kafka
3.9.0 answered to the same requests with `group.coordinator.rebalance.protocols=classic,consumer`."""

from __future__ import annotations

import uuid

import pytest

from confluent_kafka.admin import AdminClient, NewTopic

from broker.admin.client import KafkaClient
from broker.testing import running_broker
from protocol import ErrorCode as E
from protocol import messages as m

H = m.ConsumerGroupHeartbeatRequest


@pytest.fixture(scope="module")
def coordinator(tmp_path_factory):
    with running_broker(tmp_path_factory.mktemp("cg-wire"), {"offsets.topic.replication.factor": "1"}) as broker:
        client = KafkaClient(broker.bootstrap)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("pt", 2, 1)])["pt"].result(30)
        try:
            yield client.coordinator("pg")
        finally:
            client.close()


def heartbeat(conn, version=0, **fields):
    _, r = conn.request(68, H(**fields), max_version=version, min_version=version)
    assignment = None if r.assignment is None else {t.topic_id: t.partitions for t in r.assignment.topic_partitions}
    return E(r.error_code), r.error_message, r.member_id, r.member_epoch, r.heartbeat_interval_ms, assignment


def commit(conn, version, epoch, member):
    C = m.OffsetCommitRequest
    body = C(group_id="pg", generation_id_or_member_epoch=epoch, member_id=member, topics=[
        C.OffsetCommitRequestTopic(name="pt", partitions=[
            C.OffsetCommitRequestPartition(partition_index=0, committed_offset=0, committed_metadata="")])])
    _, r = conn.request(8, body, max_version=version, min_version=version)
    return E(r.topics[0].partitions[0].error_code)


def fetch(conn, epoch, member):
    F = m.OffsetFetchRequest
    body = F(groups=[F.OffsetFetchRequestGroup(group_id="pg", member_id=member, member_epoch=epoch, topics=None)])
    _, r = conn.request(9, body, max_version=9, min_version=9)
    return E(r.groups[0].error_code), [(t.name, [p.partition_index for p in t.partitions]) for t in r.groups[0].topics]


def test_consumer_group_answers_as_kafka(coordinator):
    conn = coordinator
    err, _, member_id, epoch, interval, assignment = heartbeat(
        conn, group_id="pg", member_id="", member_epoch=0, rebalance_timeout_ms=30000, subscribed_topic_names=["pt"],
        topic_partitions=[])
    assert (err, epoch, interval, len(member_id)) == (E.NONE, 1, 5000, 22)
    assert list(assignment.values()) == [[0, 1]]
    assert heartbeat(conn, group_id="pg", member_id=member_id, member_epoch=1)[:2] == (E.NONE, None)
    assert heartbeat(conn, group_id="pg", member_id=member_id, member_epoch=6)[:2] == (
        E.FENCED_MEMBER_EPOCH, "The consumer group member has a greater member epoch (6) than the one known by the "
                               "group coordinator (1). The member must abandon all its partitions and rejoin.")
    assert heartbeat(conn, group_id="pg", member_id="nobody", member_epoch=3)[:2] == (
        E.UNKNOWN_MEMBER_ID, "Member nobody is not a member of group pg.")
    assert heartbeat(conn, group_id="nogroup", member_id="x", member_epoch=3)[:2] == (
        E.GROUP_ID_NOT_FOUND, "Consumer group nogroup not found.")
    join = dict(group_id="pg", member_id="", member_epoch=0, subscribed_topic_names=["pt"], topic_partitions=[])
    assert heartbeat(conn, **{**join, "rebalance_timeout_ms": 30000, "topic_partitions": [
        H.TopicPartitions(topic_id=uuid.uuid4(), partitions=[0])]})[:2] == (
        E.INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining.")
    assert heartbeat(conn, **join)[:2] == (E.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request.")
    assert heartbeat(conn, **{**join, "rebalance_timeout_ms": 3000, "server_assignor": "foo"})[:2] == (
        E.UNSUPPORTED_ASSIGNOR, "ServerAssignor foo is not supported. Supported assignors: uniform, range.")
    assert heartbeat(conn, group_id="pg", member_id=member_id, member_epoch=-3)[:2] == (
        E.INVALID_REQUEST, "MemberEpoch is invalid.")
    assert heartbeat(conn, group_id="pg", member_id=member_id, member_epoch=-2)[:2] == (
        E.INVALID_REQUEST, "InstanceId can't be null.")
    # offsets with member epochs
    assert commit(conn, 9, 1, member_id) is E.NONE
    assert commit(conn, 9, 0, member_id) is E.STALE_MEMBER_EPOCH
    assert commit(conn, 9, 1, "nobody") is E.UNKNOWN_MEMBER_ID
    assert commit(conn, 8, 1, member_id) is E.UNSUPPORTED_VERSION
    assert commit(conn, 9, -1, "") is E.UNKNOWN_MEMBER_ID
    assert fetch(conn, 1, member_id) == (E.NONE, [("pt", [0])])
    assert fetch(conn, 2, member_id) == (E.STALE_MEMBER_EPOCH, [])
    assert fetch(conn, -1, None) == (E.NONE, [("pt", [0])])
    assert fetch(conn, 1, "nobody") == (E.UNKNOWN_MEMBER_ID, [])
    # admin views
    _, r = conn.request(15, m.DescribeGroupsRequest(groups=["pg"]), max_version=5)
    g = r.groups[0]
    assert (E(g.error_code), g.group_state, g.protocol_type, g.protocol_data, g.members) == (E.NONE, "Dead", "", "", [])
    _, r = conn.request(16, m.ListGroupsRequest(), max_version=5)
    assert [(x.group_id, x.protocol_type, x.group_state, x.group_type) for x in r.groups] == \
        [("pg", "consumer", "Stable", "consumer")]
    _, r = conn.request(16, m.ListGroupsRequest(types_filter=["classic"]), max_version=5)
    assert r.groups == []
    _, r = conn.request(69, m.ConsumerGroupDescribeRequest(group_ids=["pg", "nogroup"],
                                                           include_authorized_operations=True), max_version=0)
    pg, nogroup = r.groups
    assert (E(pg.error_code), pg.group_state, pg.group_epoch, pg.assignment_epoch, pg.assignor_name) == \
        (E.NONE, "Stable", 1, 1, "uniform")
    (member,) = pg.members
    assert (member.member_id, member.member_epoch, member.subscribed_topic_names) == (member_id, 1, ["pt"])
    assert member.subscribed_topic_regex == ""     # subscribed by name: Kafka answers "", not null
    assert [(t.topic_name, t.partitions) for t in member.assignment.topic_partitions] == [("pt", [0, 1])]
    assert (E(nogroup.error_code), nogroup.error_message, nogroup.group_state) == (E.GROUP_ID_NOT_FOUND, None, "")
    # only the described group carries the operations (every group operation with no authorizer)
    assert (pg.authorized_operations, nogroup.authorized_operations) == (328, -(2 ** 31))
    # OffsetDelete keeps what the members subscribe to
    D = m.OffsetDeleteRequest
    _, r = conn.request(47, D(group_id="pg", topics=[D.OffsetDeleteRequestTopic(
        name="pt", partitions=[D.OffsetDeleteRequestPartition(partition_index=0)])]), max_version=0)
    assert (E(r.error_code), E(r.topics[0].partitions[0].error_code)) == (E.NONE, E.GROUP_SUBSCRIBED_TO_TOPIC)
    # leaving, then deleting the empty group with its offsets
    assert heartbeat(conn, group_id="pg", member_id=member_id, member_epoch=-1)[:4] == (E.NONE, None, member_id, -1)
    assert heartbeat(conn, group_id="pg", member_id=member_id, member_epoch=-1)[:2] == (
        E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group pg.")
    _, r = conn.request(42, m.DeleteGroupsRequest(groups_names=["pg"]), max_version=2)
    assert [(x.group_id, E(x.error_code)) for x in r.results] == [("pg", E.NONE)]
    assert fetch(conn, -1, None) == (E.NONE, [])


def test_joins_and_static_members_refused_as_kafka(coordinator):
    """Checked side by side with Kafka 3.9 (tests/differential/scenarios_kip848.py): a join must state
    it owns nothing (an empty list, not null); a static member is looked up by its instance id first."""
    conn = coordinator
    join = dict(group_id="sg", member_id="", member_epoch=0, rebalance_timeout_ms=30000,
                subscribed_topic_names=["pt"])
    assert heartbeat(conn, **join, topic_partitions=None)[:2] == (
        E.INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining.")
    _, _, dynamic, epoch, _, _ = heartbeat(conn, **join, topic_partitions=[])
    _, _, static, _, _, _ = heartbeat(conn, **join, topic_partitions=[], instance_id="i1")
    fenced = f"with instance id i1 was fenced by member {static}."
    assert heartbeat(conn, group_id="sg", member_id=dynamic, member_epoch=epoch, instance_id="i1")[:2] == (
        E.FENCED_INSTANCE_ID, f"Static member {dynamic} {fenced}")
    assert heartbeat(conn, group_id="sg", member_id="stranger", member_epoch=1, instance_id="i1")[:2] == (
        E.FENCED_INSTANCE_ID, f"Static member stranger {fenced}")
    assert heartbeat(conn, group_id="sg", member_id="stranger", member_epoch=-2, instance_id="i1")[:2] == (
        E.FENCED_INSTANCE_ID, f"Static member stranger {fenced}")
    assert heartbeat(conn, group_id="sg", member_id=dynamic, member_epoch=epoch, instance_id="i9")[:2] == (
        E.UNKNOWN_MEMBER_ID, "Instance id i9 is unknown.")
    assert heartbeat(conn, group_id="sg", member_id=static, member_epoch=-2, instance_id="i9")[:2] == (
        E.UNKNOWN_MEMBER_ID, "Instance id i9 is unknown.")
    for member_id, instance_id in ((static, "i1"), (dynamic, None)):
        assert heartbeat(conn, group_id="sg", member_id=member_id, member_epoch=-1,
                         instance_id=instance_id)[0] is E.NONE


def test_consumer_protocol_can_be_switched_off(tmp_path):
    """Without "consumer" in group.coordinator.rebalance.protocols the APIs are not advertised and a
    heartbeat is refused, so clients fall back or fail as against a Kafka without KIP-848."""
    with running_broker(tmp_path / "data", {"group.coordinator.rebalance.protocols": "classic"}) as broker:
        with KafkaClient(broker.bootstrap) as client:
            conn = client.node(next(iter(client.metadata([]).brokers)))
            assert 68 not in conn.api_versions and 69 not in conn.api_versions
            assert 15 in conn.api_versions
