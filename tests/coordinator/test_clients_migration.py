"""KIP-848 online migration with real clients: a group of Java consumers (kafka-clients 4.x) on the
classic protocol restarted one by one with `group.protocol=consumer` (a rolling upgrade), then back
to classic one by one (a rolling downgrade). Consumption goes on all along: every record is seen,
the group's committed offsets never go backwards, and no partition is assigned to two members at
once. Skipped without the JDK / jars (compat-tests/setup.sh)."""

from __future__ import annotations

import pytest

from broker.admin.client import KafkaClient
from broker.admin.groups import committed_offsets, describe_consumer_group, list_groups
from broker.testing import running_broker
from tests.coordinator.consumer_protocol_clients import (FAST_CONSUMER_GROUPS, ClientError, JavaClient, JavaMember,
                                                         Rec, covers, jars_missing, poll_until)

PARTITIONS = 6
TOPIC, GROUP = "mig", "gmig"
java = pytest.mark.skipif(jars_missing("java-4") is not None, reason=str(jars_missing("java-4")))
# what a commit may hear while its member rebalances (the Java client retries with the next poll)
REBALANCE_COMMIT_ERRORS = ("rebalance", "generation", "stale member epoch", "commit cannot be completed",
                           "unknown member", "not a member")


class MigratingMember(JavaMember):
    def __init__(self, client, group, topic, name, protocol, assignor=None):
        config = {"group.protocol": protocol, "auto.offset.reset": "earliest", "enable.auto.commit": "false",
                  "client.id": name, "max.poll.records": 100}
        if assignor is not None and protocol == "classic":
            config["partition.assignment.strategy"] = assignor
        self.client, self.name = client, name
        self.handle = client.driver.call("group_open", group=group, topic=topic, config=config)
        self.assignment: list[int] = []
        self.values: list[bytes] = []
        self.alive = True
        self.commit_errors: list[str] = []

    def poll(self, timeout_ms: int = 200) -> None:
        answer = self.client.driver.call("group_poll", handle=self.handle, timeout_ms=timeout_ms)
        from tests.coordinator.consumer_protocol_clients import from_json
        self.values += [from_json(r).value for r in answer["records"]]
        self.assignment = answer["assignment"]
        try:
            self.client.driver.call("group_commit", handle=self.handle)
        except ClientError as exc:
            message = str(exc).lower()
            assert any(text in message for text in REBALANCE_COMMIT_ERRORS), f"{self.name}: {exc}"
            self.commit_errors.append(message)


def produce(client, start, count):
    records = [Rec(b"k%d" % i, b"%06d" % i) for i in range(start, start + count)]
    assert all(d.error is None for d in client.produce(TOPIC, records))
    return {r.value for r in records}


class Watch:
    """The group's type and committed offsets, checked after every phase: offsets only move forward."""

    def __init__(self, bootstrap):
        self.admin = KafkaClient(bootstrap)
        self.offsets: dict = {}

    def check(self) -> str:
        now = committed_offsets(self.admin, GROUP)
        for tp, offset in self.offsets.items():
            assert now.get(tp, -1) >= offset, f"committed offset of {tp} went back: {offset} -> {now.get(tp)}"
        self.offsets = now
        (listed,) = [g for g in list_groups(self.admin) if g.group_id == GROUP]
        return listed.group_type


COOPERATIVE = "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"


@java
@pytest.mark.timeout(600)
@pytest.mark.parametrize("assignor", [None, pytest.param(COOPERATIVE, marks=pytest.mark.slow)],
                         ids=["eager", "cooperative"])
def test_java_rolling_upgrade_to_the_consumer_protocol_and_back(tmp_path, assignor):
    """Classic members with the Java defaults (range before cooperative-sticky: the eager protocol),
    or with the cooperative-sticky assignor alone (-m slow)."""
    overrides = {**FAST_CONSUMER_GROUPS, "group.initial.rebalance.delay.ms": "0"}
    with running_broker(tmp_path / "data", overrides) as broker:
        main = JavaClient(broker.bootstrap, "java-4")
        watch = Watch(broker.bootstrap)
        everyone: list[JavaMember] = []

        def start(name, protocol):
            member = MigratingMember(main, GROUP, TOPIC, name, protocol, assignor)
            everyone.append(member)
            return member

        def settle(members, produced, what):
            poll_until(members, lambda: covers(members, PARTITIONS)()
                       and {v for m in everyone for v in m.values} >= produced, what=what)

        try:
            main.create_topic(TOPIC, PARTITIONS)
            produced = produce(main, 0, 600)
            members = [start(f"classic{i}", "classic") for i in range(3)]
            settle(members, produced, "three classic members")
            assert watch.check() == "classic"
            types = []
            for i in range(3):            # the rolling upgrade
                members[i].close()
                members[i] = start(f"consumer{i}", "consumer")
                produced |= produce(main, 600 + 200 * i, 200)
                settle(members, produced, f"upgrade step {i}")
                types.append(watch.check())
                # the members still on the classic protocol are members of the consumer group
                described = describe_consumer_group(watch.admin, GROUP)
                assert sorted(m.member_type for m in described.members) == [0] * (2 - i) + [1] * (i + 1)
            assert types == ["consumer"] * 3
            types = []
            for i in range(3):            # and back
                members[i].close()
                members[i] = start(f"back{i}", "classic")
                produced |= produce(main, 1200 + 200 * i, 200)
                settle(members, produced, f"downgrade step {i}")
                types.append(watch.check())
            # the group stays a consumer group while a consumer-protocol member is in it
            assert types == ["consumer", "consumer", "classic"]
            seen = {v for m in everyone for v in m.values}
            assert seen == produced                      # every record, nothing else
        finally:
            watch.admin.close()
            for member in everyone:
                if member.alive:
                    try:
                        member.close()
                    except ClientError:
                        pass
            main.close()


# ---- confluent-kafka (librdkafka): classic and consumer-protocol members in one group -----------------
class RdMember:
    def __init__(self, bootstrap: str, name: str, protocol: str):
        from confluent_kafka import Consumer
        self.name = name
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "rmig", "group.protocol": protocol,
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False, "client.id": name,
                                  "session.timeout.ms": 10_000} if protocol == "classic" else
                                 {"bootstrap.servers": bootstrap, "group.id": "rmig", "group.protocol": protocol,
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False, "client.id": name})
        self.consumer.subscribe([TOPIC])
        self.assignment: list[int] = []
        self.values: list[bytes] = []
        self.alive = True

    def poll(self, timeout_ms: int = 200) -> None:
        from confluent_kafka import KafkaException
        messages = self.consumer.consume(num_messages=100, timeout=timeout_ms / 1000)
        for message in messages:
            assert message.error() is None, message.error()
            self.values.append(message.value())
        if messages:
            try:
                self.consumer.commit(asynchronous=False)
            except KafkaException as exc:
                # a commit crossing a rebalance is refused; the next poll's commit covers it
                assert any(text in str(exc).lower() for text in REBALANCE_COMMIT_ERRORS + ("stale",)), exc
        self.assignment = sorted(tp.partition for tp in self.consumer.assignment())

    def close(self) -> None:
        self.consumer.close()
        self.alive = False


def test_confluent_kafka_classic_and_consumer_members_share_a_group(tmp_path):
    import confluent_kafka
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    if confluent_kafka.libversion()[1] < 0x020c0000:
        pytest.skip(f"librdkafka {confluent_kafka.libversion()[0]} predates KIP-848 support (2.12)")
    overrides = {**FAST_CONSUMER_GROUPS, "group.initial.rebalance.delay.ms": "0"}
    with running_broker(tmp_path / "data", overrides) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        produced: set = set()

        def produce_range(start, count):
            for i in range(start, start + count):
                producer.produce(TOPIC, b"%06d" % i)
                produced.add(b"%06d" % i)
            assert producer.flush(30) == 0

        everyone: list[RdMember] = []

        def settle(members, what):
            poll_until(members, lambda: covers(members, PARTITIONS)()
                       and {v for m in everyone for v in m.values} >= produced, what=what)

        produce_range(0, 300)
        members = [RdMember(broker.bootstrap, "classic1", "classic"), RdMember(broker.bootstrap, "classic2", "classic")]
        everyone += members
        settle(members, "two classic members")
        # a consumer-protocol member joins: the group is upgraded, all three share the partitions
        members.append(RdMember(broker.bootstrap, "consumer1", "consumer"))
        everyone.append(members[-1])
        produce_range(300, 300)
        settle(members, "two classic members and a consumer-protocol one")
        assert sorted(len(m.assignment) for m in members) == [2, 2, 2]
        client = KafkaClient(broker.bootstrap)
        try:
            described = describe_consumer_group(client, "rmig")
            assert sorted(m.member_type for m in described.members) == [0, 0, 1]
        finally:
            client.close()
        # the consumer-protocol member leaves: the classic members carry on as a classic group
        members.pop().close()
        produce_range(600, 300)
        settle(members, "the classic members again")
        client = KafkaClient(broker.bootstrap)
        try:
            (listed,) = [g for g in list_groups(client) if g.group_id == "rmig"]
            assert listed.group_type == "classic"
        finally:
            client.close()
        assert {v for m in everyone for v in m.values} == produced
        for m in members:
            m.close()
