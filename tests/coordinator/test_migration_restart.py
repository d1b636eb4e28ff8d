"""A group in the middle of an online migration survives a broker restart: the coordinator loads the
consumer group with its classic members from `__consumer_offsets` (Kafka's records), and both kinds
of members carry on with their generation / epoch and partitions; so does the group downgraded back."""

from __future__ import annotations

import pytest

from broker.admin import main
from broker.admin.client import KafkaClient
from broker.admin.groups import committed_offsets, describe_consumer_group, list_groups
from broker.testing import running_broker
from protocol import messages
from protocol.consumer_protocol import Assignment, encode_assignment
from tests.broker.raw_client import RawClient
from tests.coordinator.test_migration_matches_kafka import (FIND_COORDINATOR, SETTINGS, TOPIC, call, cg_heartbeat,
                                                            commit, heartbeat, join, partitions, sync)
from broker.admin.topics import create_topics


def connect(broker):
    host, port = broker.bootstrap.rsplit(":", 1)
    client = RawClient(host, int(port), timeout=60)
    call(client, FIND_COORDINATOR, 3, messages.FindCoordinatorRequest(key="g", key_type=0))
    return client


def member_types(broker) -> list:
    admin = KafkaClient(broker.bootstrap)
    try:
        described = describe_consumer_group(admin, "g")
        return None if described is None else sorted(m.member_type for m in described.members)
    finally:
        admin.close()


def group_type(broker) -> str:
    admin = KafkaClient(broker.bootstrap)
    try:
        return {g.group_id: g.group_type for g in list_groups(admin)}["g"]
    finally:
        admin.close()


@pytest.mark.timeout(300)
def test_a_mixed_group_survives_a_restart_and_so_does_its_downgrade(tmp_path, capsys):
    data = tmp_path / "data"
    with running_broker(data, SETTINGS) as broker:
        admin = KafkaClient(broker.bootstrap)
        create_topics(admin, [TOPIC], partitions=4, replication_factor=1)
        admin.close()
        with connect(broker) as c:
            first = join(c, "g")
            joined = join(c, "g", first.member_id)
            a = joined.member_id
            sync(c, "g", a, joined.generation_id, [(a, encode_assignment(Assignment(assigned_partitions=[
                Assignment.TopicPartition(topic=TOPIC, partitions=[0, 1, 2, 3])])))])
            assert commit(c, "g", a, joined.generation_id) == 0      # committed while a classic group
            b = cg_heartbeat(c, "g")
            b_id, b_epoch = b.member_id, b.member_epoch
            rejoined = join(c, "g", a)
            generation = rejoined.generation_id
            kept = partitions(sync(c, "g", a, generation).assignment)
            for _ in range(10):
                b = cg_heartbeat(c, "g", b_id, b_epoch)
                b_epoch = b.member_epoch
                if b.assignment is not None and b.assignment.topic_partitions:
                    break
            got = sorted(p for t in b.assignment.topic_partitions for p in t.partitions)
            assert sorted(kept + got) == [0, 1, 2, 3] and len(kept) == 2
        assert member_types(broker) == [0, 1]
        # `odradek groups describe` tells which protocol each member speaks
        assert main(["groups", "describe", "g", "-b", broker.bootstrap, "--timeout", "10"]) == 0
        out = capsys.readouterr().out
        assert "PROTOCOL" in out and " classic" in out and out.count(" consumer") >= 2
    with running_broker(data, SETTINGS) as broker:
        with connect(broker) as c:
            assert heartbeat(c, "g", a, generation) == 0
            resynced = sync(c, "g", a, generation)
            assert resynced.error_code == 0 and partitions(resynced.assignment) == kept
            again = cg_heartbeat(c, "g", b_id, b_epoch)
            assert again.error_code == 0 and again.member_epoch == b_epoch
            assert member_types(broker) == [0, 1]
            admin = KafkaClient(broker.bootstrap)
            assert committed_offsets(admin, "g") == {(TOPIC, 0): 0}      # the offsets stayed with the group
            admin.close()
            # the consumer-protocol member leaves: a classic group again, the classic member rebalances
            assert cg_heartbeat(c, "g", b_id, -1).error_code == 0
            assert heartbeat(c, "g", a, generation) == 27
            back = join(c, "g", a)
            assert back.error_code == 0 and back.leader == a
            assert sync(c, "g", a, back.generation_id, [(a, encode_assignment(Assignment(assigned_partitions=[
                Assignment.TopicPartition(topic=TOPIC, partitions=[0, 1, 2, 3])])))]).error_code == 0
        assert group_type(broker) == "classic"
    with running_broker(data, SETTINGS) as broker:
        with connect(broker) as c:
            assert heartbeat(c, "g", a, back.generation_id) == 0
            assert partitions(sync(c, "g", a, back.generation_id).assignment) == [0, 1, 2, 3]
        assert group_type(broker) == "classic" and member_types(broker) is None
