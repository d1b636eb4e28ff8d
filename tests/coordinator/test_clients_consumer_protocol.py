"""Kafka 4's consumer with `group.protocol=consumer` (KIP-848) against Odradek: the Java client
(kafka-clients 4.x) in groups of one to five members that join, leave, crash and rejoin statically,
every record checked; confluent-kafka (librdkafka) with the same setting. Skipped without the JDK /
jars (compat-tests/setup.sh)."""

from __future__ import annotations

import time

import pytest

from broker.admin.client import KafkaClient
from broker.admin.groups import describe_groups, list_groups
from broker.testing import running_broker
from tests.coordinator.consumer_protocol_clients import (FAST_CONSUMER_GROUPS, JavaClient, JavaMember, Rec,
                                                         covers, jars_missing, poll_until)

PARTITIONS = 10
java = pytest.mark.skipif(jars_missing("java-4") is not None, reason=str(jars_missing("java-4")))


def produce(client, topic, start, count):
    records = [Rec(b"k%d" % i, b"%06d" % i) for i in range(start, start + count)]
    assert all(d.error is None for d in client.produce(topic, records))
    return {r.value for r in records}


def consumed(members) -> set:
    return {v for m in members for v in m.values}


@java
@pytest.mark.timeout(400)
def test_java_group_of_five_joins_leaves_crashes_and_rejoins_statically(tmp_path):
    with running_broker(tmp_path / "data", FAST_CONSUMER_GROUPS) as broker:
        main, doomed, static1 = (JavaClient(broker.bootstrap, "java-4") for _ in range(3))
        static2 = None
        try:
            main.create_topic("cg", PARTITIONS)
            produced = produce(main, "cg", 0, 2000)
            m1 = JavaMember(main, "g5", "cg", "m1")
            members = [m1]
            poll_until(members, covers(members, PARTITIONS), what="one member owning everything")
            assert m1.assignment == list(range(PARTITIONS))
            # four more join: two beside m1, one in a JVM we will kill, one static in its own JVM
            members += [JavaMember(main, "g5", "cg", "m2"), JavaMember(main, "g5", "cg", "m3"),
                        JavaMember(doomed, "g5", "cg", "m4"), JavaMember(static1, "g5", "cg", "s1", "s1")]
            poll_until(members, lambda: covers(members, PARTITIONS)() and consumed(members) >= produced,
                       what="five members sharing the partitions, all records read")
            assert sorted(len(m.assignment) for m in members) == [2] * 5
            admin = KafkaClient(broker.bootstrap)
            try:
                (listed,) = [g for g in list_groups(admin) if g.group_id == "g5"]
                assert (listed.group_type, listed.state, listed.protocol_type) == ("consumer", "Stable", "consumer")
                (described,) = describe_groups(admin, ["g5"])
                assert described.group_type == "consumer" and len(described.members) == 5
                assert {tuple(m.assignment.get("cg", [])) for m in described.members} == \
                    {tuple(m.assignment) for m in members}
            finally:
                admin.close()
            # a graceful leave
            members[1].close()
            poll_until(members, covers(members, PARTITIONS), what="four members after m2 left")
            # a crash: the session times out, its partitions move
            members[3].crash()
            poll_until(members, covers(members, PARTITIONS), what="three members after m4 crashed")
            # static rejoin: s1 closes (leaving for now), a new process with its instance id takes its place
            s1 = members[4]
            before = {m.name: list(m.assignment) for m in members if m.alive}
            s1.close()
            static2 = JavaClient(broker.bootstrap, "java-4")
            s1b = JavaMember(static2, "g5", "cg", "s1b", "s1")
            members.append(s1b)
            poll_until(members, lambda: bool(s1b.assignment), what="the static member back")
            assert s1b.assignment == before["s1"]
            assert {m.name: m.assignment for m in members if m.alive and m is not s1b} == \
                {k: v for k, v in before.items() if k != "s1"}
            produced |= produce(main, "cg", 2000, 500)
            poll_until(members, lambda: consumed(members) >= produced, what="the second batch")
            assert consumed(members) == produced      # every record, nothing else
            committed = main.group_offsets("g5")
            ends = main.list_offsets("cg", list(range(PARTITIONS)))
            assert {p: o for (t, p), o in committed.items()} == {p: ends[p][1] for p in range(PARTITIONS)}
        finally:
            for client in (main, doomed, static1, static2):
                if client is not None:
                    client.close()


@pytest.mark.slow
@pytest.mark.timeout(240)
@pytest.mark.parametrize("java_version", ["java-4", "java-3.9"])
def test_java_two_members_join_and_leave(tmp_path, java_version):
    """A member joins a running one, then leaves; every record read exactly once (commits after every
    poll); also the 3.9 client, whose KIP-848 support was a preview speaking ConsumerGroupHeartbeat v0.
    Slow: the five-member test covers the same ground in the default run."""
    if jars_missing(java_version):
        pytest.skip(jars_missing(java_version))
    with running_broker(tmp_path / "data", FAST_CONSUMER_GROUPS) as broker:
        client = JavaClient(broker.bootstrap, java_version)
        try:
            client.create_topic("cg2", 4)
            produced = produce(client, "cg2", 0, 400)
            a = JavaMember(client, "g2", "cg2", "a")
            poll_until([a], covers([a], 4), what="a owning everything")
            b = JavaMember(client, "g2", "cg2", "b")
            members = [a, b]
            poll_until(members, lambda: covers(members, 4)() and consumed(members) >= produced, what="a and b")
            assert sorted(len(m.assignment) for m in members) == [2, 2]
            b.close()
            produced |= produce(client, "cg2", 400, 100)
            poll_until(members, lambda: covers(members, 4)() and consumed(members) >= produced, what="a alone")
            assert sorted(a.values + b.values) == sorted(produced)   # exactly once: commits after every poll
        finally:
            client.close()


@java
@pytest.mark.timeout(240)
def test_java_consume_transform_produce_with_the_new_consumer(tmp_path):
    """sendOffsetsToTransaction with the KIP-848 consumer's group metadata (member id and epoch):
    TxnOffsetCommit checks the member epoch, the offsets commit with the transaction."""
    with running_broker(tmp_path / "data", FAST_CONSUMER_GROUPS) as broker:
        client = JavaClient(broker.bootstrap, "java-4")
        try:
            client.create_topic("eos-in", 3)
            client.create_topic("eos-out", 3)
            produced = produce(client, "eos-in", 0, 90)
            done = client.driver.call(
                "consume_transform_produce", timeout=150, in_topic="eos-in", out_topic="eos-out", group="eos",
                transactional_id="eos-tx", count=90, timeout_ms=90000,
                config={"transaction.timeout.ms": 60000, "max.block.ms": 30000},
                consumer_config={"group.protocol": "consumer"})
            assert done == 90
            out = client.consume("eos-out", isolation="read_committed")
            assert sorted(r.value for r in out) == sorted(v.upper() for v in produced)
            committed = client.group_offsets("eos")
            assert sum(committed.values()) == 90
        finally:
            client.close()


@java
@pytest.mark.timeout(300)
def test_java_group_moves_between_classic_and_consumer_protocols_when_empty(tmp_path):
    """An empty classic group becomes a consumer group when a KIP-848 member joins (and back when a
    classic member joins the empty consumer group): the committed offsets carry over both ways, so
    each generation of consumers starts where the last stopped — every record read exactly once."""
    with running_broker(tmp_path / "data", FAST_CONSUMER_GROUPS) as broker:
        client = JavaClient(broker.bootstrap, "java-4")
        try:
            client.create_topic("mig", 3)
            produced, seen = set(), []
            for step, protocol in enumerate(("classic", "consumer", "classic", "consumer")):
                produced |= produce(client, "mig", step * 100, 100)
                member = JavaMember(client, "migrating", "mig", f"{protocol}-{step}", protocol=protocol)
                poll_until([member], lambda: covers([member], 3)() and set(seen + member.values) >= produced,
                           what=f"step {step} ({protocol}) reading the new records")
                member.close()
                seen += member.values
            assert sorted(seen) == sorted(produced)
            assert {p: o for (_, p), o in client.group_offsets("migrating").items()} == \
                {p: e for p, (_, e) in client.list_offsets("mig", [0, 1, 2]).items()}
        finally:
            client.close()


# ---- confluent-kafka (librdkafka) ----------------------------------------------------------------------
class RdMember:
    def __init__(self, bootstrap: str, group: str, topic: str, name: str):
        from confluent_kafka import Consumer
        self.name = name
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False, "client.id": name})
        self.consumer.subscribe([topic])
        self.assignment: list[int] = []
        self.values: list[bytes] = []
        self.alive = True

    def poll(self) -> None:
        for message in self.consumer.consume(num_messages=100, timeout=0.2):
            assert message.error() is None, message.error()
            self.values.append(message.value())
            self.commit(message)
        self.assignment = sorted(tp.partition for tp in self.consumer.assignment())

    def commit(self, message) -> None:
        """A commit that crossed an epoch bump answers STALE_MEMBER_EPOCH (as Kafka's coordinator does);
        librdkafka hands it to the application, which retries once the new epoch has arrived."""
        from confluent_kafka import KafkaError, KafkaException
        deadline = time.monotonic() + 30
        while True:
            try:
                self.consumer.commit(message=message, asynchronous=False)
                return
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.STALE_MEMBER_EPOCH or time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def close(self) -> None:
        self.consumer.close()
        self.alive = False


def test_confluent_kafka_group_protocol_consumer(tmp_path):
    import confluent_kafka
    from confluent_kafka.admin import AdminClient, NewTopic
    version = confluent_kafka.libversion()[1]
    if version < 0x020c0000:
        pytest.skip(f"librdkafka {confluent_kafka.libversion()[0]} predates KIP-848 support (2.12)")
    with running_broker(tmp_path / "data", FAST_CONSUMER_GROUPS) as broker:
        from confluent_kafka import Producer
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})   # kept: its futures need the handle
        admin.create_topics([NewTopic("rk", 6, 1)])["rk"].result(30)
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        produced = set()

        def produce_range(start, count):
            for i in range(start, start + count):
                producer.produce("rk", b"%06d" % i)
                produced.add(b"%06d" % i)
            assert producer.flush(30) == 0

        produce_range(0, 600)
        members = [RdMember(broker.bootstrap, "rg", "rk", "r1")]
        poll_until(members, covers(members, 6), what="r1 owning everything")
        members += [RdMember(broker.bootstrap, "rg", "rk", "r2"), RdMember(broker.bootstrap, "rg", "rk", "r3")]
        poll_until(members, lambda: covers(members, 6)() and consumed(members) >= produced, what="three members")
        assert sorted(len(m.assignment) for m in members) == [2, 2, 2]
        members[0].close()
        produce_range(600, 300)
        poll_until(members, lambda: covers(members, 6)() and consumed(members) >= produced, what="r1 left")
        assert sorted(v for m in members for v in m.values) == sorted(produced)   # once each
        for m in members[1:]:
            m.close()
