"""KIP-848 online migration answered as Apache Kafka 3.9 answers it (KIP-848 early access there:
`group.coordinator.rebalance.protocols=classic,consumer`): the same raw requests to both brokers, the
same answers (recorded from Kafka, which the slow test asks again). A classic group upgraded by a ConsumerGroupHeartbeat member, its classic member driven
through JoinGroup/SyncGroup/Heartbeat inside the consumer group, the downgrade when the consumer
member leaves, and the refused upgrade of a group not using the consumer embedded protocol.
The slow test skips without Java or the reference Kafka (tests/apache_kafka.py)."""

from __future__ import annotations

import time

import pytest

from broker.testing import running_broker
from protocol import messages
from protocol.consumer_protocol import Assignment, Subscription, decode_assignment, encode_assignment, \
    encode_subscription
from tests import apache_kafka as oracle
from tests.broker.raw_client import raw_client_with_topic

OFFSET_COMMIT, FIND_COORDINATOR, JOIN, HEARTBEAT, LEAVE, SYNC, DESCRIBE_GROUPS, LIST_GROUPS, CG_HEARTBEAT = \
    8, 10, 11, 12, 13, 14, 15, 16, 68
RETRIABLE = {14, 15, 16}      # the coordinator is loading / not there yet
TOPIC = "mig"
SETTINGS = {"group.coordinator.rebalance.protocols": "classic,consumer",
            "group.consumer.migration.policy": "bidirectional", "group.initial.rebalance.delay.ms": "0",
            "offsets.topic.replication.factor": "1", "offsets.topic.num.partitions": "1"}


def call(client, api, version, body):
    deadline = time.monotonic() + 60
    while True:
        response = client.request(api, version, body)
        if getattr(response, "error_code", 0) not in RETRIABLE or time.monotonic() > deadline:
            return response
        time.sleep(0.5)


def subscription(owned=()):
    return encode_subscription(Subscription(topics=[TOPIC], owned_partitions=[
        Subscription.TopicPartition(topic=TOPIC, partitions=sorted(owned))] if owned else []), 1)


def join(client, group, member_id="", protocol_type="consumer", owned=(), protocol="range"):
    return call(client, JOIN, 7, messages.JoinGroupRequest(
        group_id=group, session_timeout_ms=30_000, rebalance_timeout_ms=30_000, member_id=member_id,
        protocol_type=protocol_type, protocols=[messages.JoinGroupRequest.JoinGroupRequestProtocol(
            name=protocol, metadata=subscription(owned))]))


def sync(client, group, member_id, generation, assignments=(), protocol="range"):
    return call(client, SYNC, 5, messages.SyncGroupRequest(
        group_id=group, generation_id=generation, member_id=member_id, protocol_type="consumer",
        protocol_name=protocol, assignments=[messages.SyncGroupRequest.SyncGroupRequestAssignment(
            member_id=m, assignment=a) for m, a in assignments]))


def heartbeat(client, group, member_id, generation):
    return call(client, HEARTBEAT, 4, messages.HeartbeatRequest(
        group_id=group, generation_id=generation, member_id=member_id)).error_code


def cg_heartbeat(client, group, member_id="", epoch=0, owned=None):
    body = messages.ConsumerGroupHeartbeatRequest(group_id=group, member_id=member_id, member_epoch=epoch)
    if epoch == 0:
        body.rebalance_timeout_ms, body.subscribed_topic_names, body.topic_partitions = 30_000, [TOPIC], []
    elif owned is not None:
        body.topic_partitions = [messages.ConsumerGroupHeartbeatRequest.TopicPartitions(
            topic_id=topic_id, partitions=sorted(ps)) for topic_id, ps in owned.items()]
    return call(client, CG_HEARTBEAT, 0, body)


def partitions(data) -> list[int]:
    return sorted(p for tp in decode_assignment(data)[1].assigned_partitions for p in tp.partitions) if data else []


def group_type(client, group):
    listed = client.request(LIST_GROUPS, 5, messages.ListGroupsRequest())
    return {g.group_id: (g.group_type, g.group_state) for g in listed.groups}.get(group)


def scenario(bootstrap: str) -> list:
    """What a classic member and a consumer-protocol member hear along an upgrade and a downgrade."""
    seen: list = []
    with raw_client_with_topic(bootstrap, TOPIC, partitions=4) as c:
        for group in ("g", "h"):    # Kafka creates __consumer_offsets when a coordinator is looked up
            call(c, FIND_COORDINATOR, 3, messages.FindCoordinatorRequest(key=group, key_type=0))
        # a classic group, one member (it leads and takes every partition)
        first = join(c, "g")
        seen.append(("member id required", first.error_code))
        joined = join(c, "g", first.member_id)
        a, generation = joined.member_id, joined.generation_id
        seen.append(("classic join", joined.error_code, generation, joined.leader == a, len(joined.members)))
        everything = encode_assignment(Assignment(assigned_partitions=[
            Assignment.TopicPartition(topic=TOPIC, partitions=[0, 1, 2, 3])]))
        synced = sync(c, "g", a, generation, [(a, everything)])
        seen.append(("classic sync", synced.error_code, partitions(synced.assignment)))
        # a consumer-protocol member joins: the group becomes a consumer group, the classic member stays
        b = cg_heartbeat(c, "g")
        b_id, b_epoch = b.member_id, b.member_epoch
        seen.append(("upgrade", b.error_code, b_epoch - generation,
                     sorted(p for t in b.assignment.topic_partitions for p in t.partitions) if b.assignment else None))
        seen.append(("listed", group_type(c, "g")))
        seen.append(("classic heartbeat", heartbeat(c, "g", a, generation)))
        seen.append(("wrong generation", heartbeat(c, "g", a, generation + 5)))
        seen.append(("unknown member", heartbeat(c, "g", "nobody", generation)))
        # the classic member rejoins (eager: it owns nothing now) and syncs its smaller assignment
        rejoined = join(c, "g", a)
        seen.append(("classic rejoin", rejoined.error_code, rejoined.generation_id - generation,
                     rejoined.leader, rejoined.protocol_name, len(rejoined.members)))
        resynced = sync(c, "g", a, rejoined.generation_id)
        kept = partitions(resynced.assignment)
        seen.append(("classic resync", resynced.error_code, len(kept)))
        seen.append(("stale sync", sync(c, "g", a, generation).error_code))
        seen.append(("classic heartbeat after", heartbeat(c, "g", a, rejoined.generation_id)))
        # the consumer member now gets the rest
        for _ in range(20):
            b = cg_heartbeat(c, "g", b_id, b_epoch)
            b_epoch = b.member_epoch
            if b.assignment is not None and b.assignment.topic_partitions:
                break
            time.sleep(0.2)
        got = sorted(p for t in b.assignment.topic_partitions for p in t.partitions)
        seen.append(("consumer member gets the rest", b.error_code, sorted(got + kept) == [0, 1, 2, 3]))
        # the last consumer-protocol member leaves: a classic group again, the classic member rebalances
        left = cg_heartbeat(c, "g", b_id, -1)
        seen.append(("consumer leaves", left.error_code, left.member_epoch))
        seen.append(("listed after", group_type(c, "g")))
        seen.append(("rebalance", heartbeat(c, "g", a, rejoined.generation_id)))
        back = join(c, "g", a)
        seen.append(("classic group again", back.error_code, back.generation_id - rejoined.generation_id,
                     back.leader == a, len(back.members)))
        # a classic group of another protocol type is not upgraded
        other = join(c, "h", protocol_type="connect")
        other = join(c, "h", other.member_id, protocol_type="connect")
        refused = cg_heartbeat(c, "h")
        seen.append(("not upgradable", refused.error_code, refused.error_message))
        seen += mixed_group_edges(c)
    return seen


def commit(client, group, member_id, generation):
    req = messages.OffsetCommitRequest
    response = call(client, OFFSET_COMMIT, 7, req(group_id=group, generation_id_or_member_epoch=generation,
                                                  member_id=member_id, topics=[req.OffsetCommitRequestTopic(
                                                      name=TOPIC, partitions=[req.OffsetCommitRequestPartition(
                                                          partition_index=0, committed_offset=0)])]))
    return response.topics[0].partitions[0].error_code


def mixed_group_edges(c) -> list:
    """A classic member inside a consumer group: what its other requests hear."""
    seen: list = []
    for group in ("k", "m"):
        call(c, FIND_COORDINATOR, 3, messages.FindCoordinatorRequest(key=group, key_type=0))
    # a member whose SyncGroup assignment is empty bytes cannot be converted
    first = join(c, "m")
    joined = join(c, "m", first.member_id)
    sync(c, "m", joined.member_id, joined.generation_id)
    refused = cg_heartbeat(c, "m")
    seen.append(("malformed assignment", refused.error_code, refused.error_message))
    first = join(c, "k")
    joined = join(c, "k", first.member_id)
    a, generation = joined.member_id, joined.generation_id
    sync(c, "k", a, generation, [(a, encode_assignment(Assignment(assigned_partitions=[])))])
    b = cg_heartbeat(c, "k")
    seen.append(("upgraded", b.error_code))
    (described,) = c.request(DESCRIBE_GROUPS, 5, messages.DescribeGroupsRequest(groups=["k"])).groups
    seen.append(("described", described.error_code, described.group_state, described.protocol_type,
                 described.protocol_data, sorted((m.member_id == a, partitions(m.member_assignment))
                                                 for m in described.members)))
    seen.append(("other protocol type", join(c, "k", protocol_type="connect").error_code))
    seen.append(("no common protocol", join(c, "k", first.member_id + "x", protocol="roundrobin").error_code))
    seen.append(("new classic member", join(c, "k").error_code))
    seen.append(("sync, other protocol", sync(c, "k", a, generation, protocol="roundrobin").error_code))
    seen.append(("commit", commit(c, "k", a, generation)))
    seen.append(("commit, wrong generation", commit(c, "k", a, generation + 3)))
    left = call(c, LEAVE, 3, messages.LeaveGroupRequest(group_id="k", members=[
        messages.LeaveGroupRequest.MemberIdentity(member_id=a), messages.LeaveGroupRequest.MemberIdentity(
            member_id="nobody")]))
    seen.append(("classic leaves", left.error_code, [m.error_code for m in left.members]))
    seen.append(("listed", group_type(c, "k")))
    b = cg_heartbeat(c, "k", b.member_id, b.member_epoch)
    seen.append(("consumer member alone", b.error_code,
                 sorted(p for t in b.assignment.topic_partitions for p in t.partitions) if b.assignment else None))
    return seen


# What Apache Kafka 3.9.0 answered to `scenario` (recorded with the slow test below, which checks it again)
KAFKA_3_9_ANSWERS = [
    ("member id required", 79),
    ("classic join", 0, 1, True, 1),
    ("classic sync", 0, [0, 1, 2, 3]),
    ("upgrade", 0, 1, []),
    ("listed", ("consumer", "Reconciling")),
    ("classic heartbeat", 27),
    ("wrong generation", 22),
    ("unknown member", 25),
    ("classic rejoin", 0, 1, "", "range", 0),
    ("classic resync", 0, 2),
    ("stale sync", 22),
    ("classic heartbeat after", 0),
    ("consumer member gets the rest", 0, True),
    ("consumer leaves", 0, -1),
    ("listed after", ("classic", "PreparingRebalance")),
    ("rebalance", 27),
    ("classic group again", 0, 1, True, 1),
    ("not upgradable", 69, "Group h is not a consumer group."),
    ("malformed assignment", 69, "Cannot upgrade the classic group m to consumer group because the embedded "
                                 "consumer protocol is malformed."),
    ("upgraded", 0),
    ("described", 0, "Dead", "", "", []),         # DescribeGroups: a consumer group is no classic group
    ("other protocol type", 23),
    ("no common protocol", 23),
    ("new classic member", 79),
    ("sync, other protocol", 23),
    ("commit", 0),
    ("commit, wrong generation", 22),
    ("classic leaves", 0, [0, 25]),
    ("listed", ("consumer", "Assigning")),
    ("consumer member alone", 0, [0, 1, 2, 3]),
]


@pytest.mark.timeout(300)
def test_online_migration_answers_as_kafka_did(tmp_path):
    with running_broker(tmp_path / "odradek", SETTINGS) as broker:
        assert scenario(broker.bootstrap) == KAFKA_3_9_ANSWERS


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_kafka_still_answers_so(tmp_path, monkeypatch):
    reason = oracle.skip_reason()
    if reason:
        pytest.skip(reason)
    monkeypatch.setenv("KAFKA_EXTRA_PROPS", " ".join(f"{k}={v}" for k, v in SETTINGS.items()))
    (tmp_path / "kafka").mkdir()
    kafka = oracle.ApacheKafka(tmp_path / "kafka")
    kafka.start()
    try:
        assert scenario(kafka.bootstrap) == KAFKA_3_9_ANSWERS
    finally:
        kafka.stop()
