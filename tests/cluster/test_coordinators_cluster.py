"""Group and transaction coordinators in a real multi-process cluster (broker.testing_cluster).

A transaction whose partitions are led by three different brokers: its coordinator (one of them)
writes the commit/abort markers on the other two with WriteTxnMarkers, their leaders verify the
producer's writes with it (KIP-890), and the group's offsets sent to the transaction commit with it.
"""

from __future__ import annotations

import os
import sys
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.testing_cluster import call, running_cluster
from protocol import messages as m

INTERNAL = {"offsets.topic.num.partitions": "3", "transaction.state.log.num.partitions": "3"}
COMPAT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "compat-tests")


@pytest.fixture(scope="module")
def three_brokers(tmp_path_factory):
    """One 3-node cluster shared by the transaction tests (each uses its own topics and ids)."""
    with running_cluster(tmp_path_factory.mktemp("txn-cluster"), nodes=3, overrides=INTERNAL) as cluster:
        yield cluster


def spread_topic(cluster, name: str) -> None:
    """A 3-partition topic, each partition led by a different broker."""
    create_topic(cluster.bootstrap, name, 3)
    led = cluster.wait_until(lambda: all(len(leaders(cluster, name, b)) == 3 for b in cluster.brokers)
                             and leaders(cluster, name, cluster.brokers[0]), 30, f"{name} on every broker")
    assert sorted(led.values()) == [1, 2, 3]


def create_topic(bootstrap: str, name: str, partitions: int, replication: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, replication)], request_timeout=30)[name].result(60)


def leaders(cluster, topic: str, broker: int) -> dict[int, int]:
    response = cluster.metadata(broker, [topic])
    return {p.partition_index: p.leader_id for p in response.topics[0].partitions}


def read_all(bootstrap: str, topic: str, partitions: int, isolation: str, expect: int, timeout: float = 60.0):
    """{partition: [values in offset order]} once `expect` records arrived and nothing more comes."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False, "isolation.level": isolation})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: dict[int, list] = {}
    count, deadline, quiet = 0, time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is None:
            if count >= expect:
                quiet = quiet or time.monotonic()
                if time.monotonic() - quiet > 1.5:
                    break
            continue
        if message.error():
            continue
        quiet = None
        got.setdefault(message.partition(), []).append(message.value())
        count += 1
    consumer.close()
    return got


@pytest.mark.timeout(240)
def test_a_transaction_over_partitions_led_by_three_brokers(three_brokers):
    cluster = three_brokers
    spread_topic(cluster, "tx3")
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "three-brokers",
                         "linger.ms": 5, "transaction.timeout.ms": 60000})
    producer.init_transactions(60)
    group = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "g3"})
    committed_values = {p: [] for p in range(3)}

    producer.begin_transaction()
    for i in range(30):
        value = b"commit-1-%d" % i
        producer.produce("tx3", value, partition=i % 3)
        committed_values[i % 3].append(value)
    producer.send_offsets_to_transaction([TopicPartition("tx3", p, 10 + p) for p in range(3)],
                                         group.consumer_group_metadata(), 60)
    producer.commit_transaction(60)

    producer.begin_transaction()
    for i in range(30):
        producer.produce("tx3", b"abort-%d" % i, partition=i % 3)
    producer.send_offsets_to_transaction([TopicPartition("tx3", p, 99) for p in range(3)],
                                         group.consumer_group_metadata(), 60)
    producer.flush(60)
    producer.abort_transaction(60)

    producer.begin_transaction()
    for p in range(3):
        value = b"commit-2-%d" % p
        producer.produce("tx3", value, partition=p)
        committed_values[p].append(value)
    producer.commit_transaction(60)

    visible = read_all(cluster.bootstrap, "tx3", 3, "read_committed", 33)
    assert visible == committed_values                 # nothing aborted, nothing lost, in order
    everything = read_all(cluster.bootstrap, "tx3", 3, "read_uncommitted", 63)
    assert sum(len(v) for v in everything.values()) == 63
    offsets = group.committed([TopicPartition("tx3", p) for p in range(3)], timeout=60)
    assert {tp.partition: tp.offset for tp in offsets} == {0: 10, 1: 11, 2: 12}   # the aborted 99s are gone
    group.close()


def java_client(bootstrap):
    if COMPAT not in sys.path:
        sys.path.insert(0, COMPAT)
    from odradek_compat.clients.java import JavaClient, jars_missing

    missing = jars_missing("java-4")
    if missing:
        pytest.skip(missing)
    return JavaClient(bootstrap, "java-4")


@pytest.mark.timeout(300)
def test_java_transactions_over_three_brokers(three_brokers):
    """The Java client (kafka-clients 4.x, compat-tests' driver): commit/abort/commit, then
    consume-transform-produce with the offsets sent to the transaction, every partition elsewhere."""
    cluster = three_brokers
    client = java_client(cluster.bootstrap)
    from odradek_compat.records import Rec

    try:
        spread_topic(cluster, "jtx")
        batches = [([Rec(b"k%d" % i, b"%s-%d" % (tag, i), partition=i % 3) for i in range(15)], commit)
                   for tag, commit in ((b"one", True), (b"aborted", False), (b"two", True))]
        client.txn_produce("jtx", "java-three-brokers", batches)
        expected = {p: [r.value for recs, commit in batches if commit for r in recs if r.partition == p]
                    for p in range(3)}
        assert read_all(cluster.bootstrap, "jtx", 3, "read_committed", 30) == expected
        spread_topic(cluster, "jtx-out")
        processed = client.consume_transform_produce("jtx", "jtx-out", "java-ctp", "java-ctp-txn", count=30,
                                                     timeout=90)
        assert processed == 30
        out = read_all(cluster.bootstrap, "jtx-out", 3, "read_committed", 30)
        assert sorted(v for values in out.values() for v in values) == \
            sorted(v.upper() for values in expected.values() for v in values)
        group = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "java-ctp"})
        offsets = group.committed([TopicPartition("jtx", p) for p in range(3)], timeout=60)
        group.close()
        # 30 committed records and 45 in all: the group's offsets point past what it consumed
        assert all(tp.offset > 0 for tp in offsets)
    finally:
        client.close()


def find_coordinator(cluster, group: str) -> int:
    """The group's coordinator as the running brokers answer it (-1 while none is available)."""
    for node in cluster.brokers:
        if not cluster.nodes[node].running:
            continue
        answer = call(cluster.nodes[node].address, 10, 3, m.FindCoordinatorRequest(key=group, key_type=0))
        return answer.node_id if answer.error_code == 0 else -1
    return -1


def commit_sync(consumer, deadline: float) -> None:
    """Commit the consumer's position, retrying through a coordinator move."""
    while True:
        try:
            consumer.commit(asynchronous=False)
            return
        except KafkaException as exc:
            if exc.args[0].code() == KafkaError._NO_OFFSET:
                return                                   # nothing consumed since the last commit
            if time.monotonic() > deadline or not exc.args[0].retriable():
                raise
            time.sleep(0.2)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("how", ["kill", pytest.param("sigterm", marks=pytest.mark.slow)])
def test_a_consumer_group_survives_its_coordinator_being_killed(tmp_path, how):
    """__consumer_offsets with replication factor 3: kill -9 (or stop, a controlled shutdown) the group
    coordinator's broker mid-stream; the consumer finds the new coordinator (the new leader of the
    group's partition), its committed offsets are there, and it goes on without skipping a record."""
    settings = {"offsets.topic.replication.factor": "3", "offsets.topic.num.partitions": "3"}
    with running_cluster(tmp_path, nodes=3, overrides=settings) as cluster:
        create_topic(cluster.bootstrap, "gf", 3, replication=3)
        cluster.wait_until(lambda: all(len(leaders(cluster, "gf", b)) == 3 for b in cluster.brokers), 30, "gf")
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 5, "acks": "all"})
        sent = {b"v-%d" % i for i in range(300)}
        for i in range(300):
            producer.produce("gf", b"v-%d" % i, partition=i % 3)
        assert producer.flush(60) == 0

        group = "survivors"
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                             "enable.auto.commit": False, "auto.offset.reset": "earliest",
                             "session.timeout.ms": 30000, "heartbeat.interval.ms": 1000})
        consumer.subscribe(["gf"])
        seen, deadline = set(), time.monotonic() + 120
        while len(seen) < 150 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                seen.add(message.value())
                if len(seen) % 10 == 0:
                    commit_sync(consumer, deadline)
        commit_sync(consumer, deadline)
        assignment = [TopicPartition("gf", p) for p in range(3)]
        before = {tp.partition: tp.offset for tp in consumer.committed(assignment, timeout=30)}
        assert sum(max(o, 0) for o in before.values()) == len(seen)

        coordinator = cluster.wait_until(lambda: max(find_coordinator(cluster, group), 0), 30, "a coordinator")
        if how == "kill":
            cluster.kill(coordinator)
        else:
            assert cluster.stop(coordinator, timeout=60) == 0
        cluster.wait_until(lambda: find_coordinator(cluster, group) not in (-1, coordinator), 60,
                           "the group's new coordinator")
        # the new coordinator loaded the group's offsets from its replica of the log
        after = {tp.partition: tp.offset for tp in consumer.committed(assignment, timeout=60)}
        assert after == before

        deadline = time.monotonic() + 120
        while len(seen) < len(sent) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                seen.add(message.value())
        commit_sync(consumer, deadline)
        assert seen == sent                                    # no record skipped
        final = {tp.partition: tp.offset for tp in consumer.committed(assignment, timeout=60)}
        assert sum(final.values()) == 300
        consumer.close()


def find_txn_coordinator(cluster, transactional_id: str) -> int:
    for node in cluster.brokers:
        if cluster.nodes[node].running:
            answer = call(cluster.nodes[node].address, 10, 3,
                          m.FindCoordinatorRequest(key=transactional_id, key_type=1))
            return answer.node_id if answer.error_code == 0 else -1
    return -1


@pytest.mark.timeout(300)
def test_an_open_transaction_survives_its_coordinator_being_killed(tmp_path):
    """__transaction_state with replication factor 3: kill -9 the transaction coordinator's broker
    while a transaction is open; the new coordinator loads it (partitions and all) from its replica,
    and the producer's commit writes the markers on every partition."""
    settings = {"transaction.state.log.replication.factor": "3", "transaction.state.log.min.isr": "2",
                "transaction.state.log.num.partitions": "3", "offsets.topic.num.partitions": "3"}
    with running_cluster(tmp_path, nodes=3, overrides=settings) as cluster:
        create_topic(cluster.bootstrap, "tf", 3, replication=3)
        cluster.wait_until(lambda: all(len(leaders(cluster, "tf", b)) == 3 for b in cluster.brokers), 30, "tf")
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "survivor",
                             "linger.ms": 5, "transaction.timeout.ms": 120000})
        producer.init_transactions(60)
        producer.begin_transaction()
        for i in range(30):
            producer.produce("tf", b"kept-%d" % i, partition=i % 3)
        assert producer.flush(60) == 0
        coordinator = cluster.wait_until(lambda: max(find_txn_coordinator(cluster, "survivor"), 0), 30,
                                         "the transaction coordinator")
        cluster.kill(coordinator)
        cluster.wait_until(lambda: find_txn_coordinator(cluster, "survivor") not in (-1, coordinator),
                           60, "the new transaction coordinator")
        producer.commit_transaction(90)
        producer.begin_transaction()
        for i in range(30):
            producer.produce("tf", b"dropped-%d" % i, partition=i % 3)
        producer.flush(60)
        producer.abort_transaction(90)
        visible = read_all(cluster.bootstrap, "tf", 3, "read_committed", 30)
        assert {p: values for p, values in visible.items()} == \
            {p: [b"kept-%d" % i for i in range(p, 30, 3)] for p in range(3)}
