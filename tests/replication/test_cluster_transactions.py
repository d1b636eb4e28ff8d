"""librdkafka's transactions (confluent-kafka) against a 3-node cluster with replication factor 3
everywhere, as librdkafka's own integration suite runs them (its test cluster has three brokers and
its topics RF 3): user topics, __transaction_state and __consumer_offsets all RF 3 with
min.insync.replicas=2. The scenarios follow librdkafka's producer transaction tests (basic
commit/abort with sync and async producing, a consume-transform-produce job aborting every third
transaction, a fenced zombie, empty transactions) plus a partition leader killed mid-transaction.
Every check reads back with read_committed (and read_uncommitted where it tells something) and
compares exact values and order.
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.testing_cluster import call, running_cluster
from protocol import messages as m

RF3 = {
    "min.insync.replicas": "2",
    "offsets.topic.replication.factor": "3", "offsets.topic.num.partitions": "3",
    "transaction.state.log.replication.factor": "3", "transaction.state.log.min.isr": "2",
    "transaction.state.log.num.partitions": "3",
    # a killed broker is fenced, and leaves the ISR, within a few seconds
    "broker.session.timeout.ms": "3000", "broker.heartbeat.interval.ms": "500",
    "replica.lag.time.max.ms": "3000", "replica.fetch.backoff.ms": "200",
}


# (records, abort, produce synchronously) per transaction, as librdkafka's basic test (smaller)
TRANSACTIONS = [(20, False, True), (500, False, False), (50, True, True), (1000, True, False)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with running_cluster(tmp_path_factory.mktemp("rf3-txn"), nodes=3, overrides=RF3) as running:
        yield running


def create_rf3_topic(cluster, name: str, partitions: int) -> dict[int, int]:
    """The topic, created with RF 3; {partition: leader} once every broker knows it fully replicated."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 3)], request_timeout=30)[name].result(60)

    def ready():
        views = [partition_states(cluster, b, name) for b in cluster.brokers if cluster.nodes[b].running]
        if all(len(v) == partitions and all(isr == [1, 2, 3] for _, isr in v.values()) for v in views):
            return {p: leader for p, (leader, _) in views[0].items()}
        return None
    return cluster.wait_until(ready, 60, f"{name} fully replicated on every broker")


def partition_states(cluster, broker: int, topic: str) -> dict[int, tuple[int, list[int]]]:
    response = cluster.metadata(broker, [topic])
    return {p.partition_index: (p.leader_id, sorted(p.isr_nodes)) for p in response.topics[0].partitions}


def transactional_producer(cluster, transactional_id: str, **extra) -> Producer:
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": transactional_id,
                         "linger.ms": 5, "transaction.timeout.ms": 60000, **extra})
    producer.init_transactions(60)
    return producer


def reader(cluster, isolation: str, group: str | None = None, **extra) -> Consumer:
    return Consumer({"bootstrap.servers": cluster.bootstrap,
                     "group.id": group or f"reader-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False,
                     "auto.offset.reset": "earliest", "isolation.level": isolation, **extra})


def drain(consumer: Consumer, expect: int, timeout: float = 60.0, quiet: float = 1.5) -> list:
    """Poll until `expect` records arrived and then nothing more for `quiet` seconds (or time is up):
    the (partition, value) of each, in arrival order."""
    got, deadline, idle_since = [], time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is None:
            if len(got) >= expect:
                idle_since = idle_since or time.monotonic()
                if time.monotonic() - idle_since > quiet:
                    break
            continue
        if message.error():
            continue
        idle_since = None
        got.append((message.partition(), message.value()))
    return got


def by_partition(records) -> dict[int, list[bytes]]:
    out: dict[int, list[bytes]] = {}
    for partition, value in records:
        out.setdefault(partition, []).append(value)
    return out


def read_everything(cluster, topic: str, partitions: int, isolation: str, expect: int):
    consumer = reader(cluster, isolation)
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    try:
        return by_partition(drain(consumer, expect))
    finally:
        consumer.close()


@pytest.mark.timeout(300)
def test_commit_and_abort_with_sync_and_async_producing(cluster):
    """librdkafka's basic producer transaction test: a read_committed consumer, assigned before the
    first transaction, sees each committed transaction's records and none of an aborted one's."""
    topic = "rf3-basic"
    create_rf3_topic(cluster, topic, 4)
    consumer = reader(cluster, "read_committed")
    consumer.assign([TopicPartition(topic, p, 0) for p in range(4)])
    producer = transactional_producer(cluster, "rf3-basic")
    expected: dict[int, list[bytes]] = {}
    produced, delivered, failed = set(), set(), []

    def report(err, message, abort):
        if err is None:
            delivered.add(message.value())
        elif not abort:                # an abort may purge what is still queued, as librdkafka says
            failed.append(err)

    for n, (count, abort, sync) in enumerate(TRANSACTIONS):
        producer.begin_transaction()
        values = [b"txn%d-%05d" % (n, i) for i in range(count)]
        produced.update(values)
        for i, value in enumerate(values):
            producer.produce(topic, value, partition=i % 4,
                             on_delivery=lambda err, msg, abort=abort: report(err, msg, abort))
            if sync:
                producer.flush(30)
            else:
                producer.poll(0)
        if abort:
            producer.abort_transaction(60)
            assert drain(consumer, 0, timeout=2, quiet=2) == []
        else:
            producer.commit_transaction(60)
            got = by_partition(drain(consumer, count))
            wanted = {p: values[p::4] for p in range(4)}
            assert got == wanted                        # exactly these, each once, in order
            for p, vs in wanted.items():
                expected.setdefault(p, []).extend(vs)
    consumer.close()
    assert not failed
    committed = sum(len(v) for v in expected.values())
    assert read_everything(cluster, topic, 4, "read_committed", committed) == expected
    # read_uncommitted also shows the aborted records that were written, and nothing else
    everything = read_everything(cluster, topic, 4, "read_uncommitted", len(delivered))
    seen = [v for values in everything.values() for v in values]
    assert len(seen) == len(set(seen)) and delivered <= set(seen) <= produced


@pytest.mark.timeout(300)
def test_consume_transform_produce_aborting_every_third_transaction(cluster):
    """librdkafka's streams-like test: a read_committed group consumer feeds a transactional producer
    that sends the consumer's offsets with each transaction; every third transaction aborts (the job
    rewinds to its committed offsets, and once its consumer is even recreated), so each input record
    reaches the output exactly once, in its partition's order."""
    source, sink = "rf3-ctp-in", "rf3-ctp-out"
    create_rf3_topic(cluster, source, 3)
    create_rf3_topic(cluster, sink, 3)
    seed = transactional_producer(cluster, "rf3-ctp-seed")
    seed.begin_transaction()
    inputs = {p: [b"in-%d-%03d" % (p, i) for i in range(100)] for p in range(3)}
    for p, values in inputs.items():
        for value in values:
            seed.produce(source, value, partition=p)
    seed.commit_transaction(60)

    group = "rf3-ctp"
    job = transactional_producer(cluster, "rf3-ctp-job")

    def job_consumer():
        consumer = reader(cluster, "read_committed", group=group)
        consumer.subscribe([source])
        return consumer

    consumer = job_consumer()
    done = 0
    for n in range(40):
        if done >= 300:
            break
        batch = []
        deadline = time.monotonic() + 60
        while len(batch) < 10 * (1 + n % 3) and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and not message.error():
                batch.append(message)
        if not batch:
            continue
        abort = n % 3 == 0
        job.begin_transaction()
        for message in batch:
            job.produce(sink, message.value(), partition=message.partition())
        job.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                        consumer.consumer_group_metadata(), 60)
        if abort:
            job.abort_transaction(60)
            if n == 3:
                consumer.close()                  # a new consumer resumes from the committed offsets
                consumer = job_consumer()
            else:
                committed = consumer.committed(consumer.assignment(), timeout=30)
                for tp in committed:
                    consumer.seek(TopicPartition(source, tp.partition,
                                                 tp.offset if tp.offset >= 0 else 0))
        else:
            job.commit_transaction(60)
            done += len(batch)
    consumer.close()
    assert done == 300
    output = read_everything(cluster, sink, 3, "read_committed", 300)
    assert output == inputs                               # each input once, in order, nothing aborted
    offsets = reader(cluster, "read_committed", group=group).committed(
        [TopicPartition(source, p) for p in range(3)], timeout=30)
    # past the last record (100), or past the commit marker after it too (101) once fetched
    assert all(100 <= tp.offset <= 101 for tp in offsets), offsets


@pytest.mark.timeout(300)
def test_a_fenced_zombie_cannot_commit_and_empty_transactions_are_fine(cluster):
    """A second producer with the same transactional.id fences the first (its commit fails, fatally);
    only the new producer's records are visible. Empty transactions commit and abort, with and
    without offsets sent to them."""
    topic = "rf3-fenced"
    create_rf3_topic(cluster, topic, 3)
    zombie = transactional_producer(cluster, "rf3-fenced")
    zombie.begin_transaction()
    for i in range(30):
        zombie.produce(topic, b"zombie-%d" % i, partition=i % 3)
    assert zombie.flush(30) == 0
    successor = transactional_producer(cluster, "rf3-fenced")   # aborts the zombie's transaction
    with pytest.raises(KafkaException) as raised:
        zombie.commit_transaction(30)
    assert raised.value.args[0].fatal()
    successor.begin_transaction()
    for i in range(30):
        successor.produce(topic, b"successor-%d" % i, partition=i % 3)
    successor.commit_transaction(60)
    assert read_everything(cluster, topic, 3, "read_committed", 30) == \
        {p: [b"successor-%d" % i for i in range(p, 30, 3)] for p in range(3)}

    group = reader(cluster, "read_committed", group="rf3-empty")
    successor.begin_transaction()
    successor.commit_transaction(30)
    successor.begin_transaction()
    successor.abort_transaction(30)
    successor.begin_transaction()
    successor.send_offsets_to_transaction([TopicPartition(topic, 0, 7)], group.consumer_group_metadata(), 30)
    successor.abort_transaction(30)
    successor.begin_transaction()
    successor.send_offsets_to_transaction([TopicPartition(topic, 0, 5)], group.consumer_group_metadata(), 30)
    successor.commit_transaction(30)
    assert group.committed([TopicPartition(topic, 0)], timeout=30)[0].offset == 5
    group.close()


def find_transaction_coordinator(cluster, transactional_id: str) -> int:
    for node in cluster.brokers:
        if cluster.nodes[node].running:
            answer = call(cluster.nodes[node].address, 10, 3,
                          m.FindCoordinatorRequest(key=transactional_id, key_type=1), timeout=15)
            return answer.node_id if answer.error_code == 0 else -1
    return -1


@pytest.mark.timeout(300)
def test_a_partition_leader_killed_mid_transaction(cluster):
    """kill -9 the leader of one of the transaction's partitions (not its coordinator) between two
    halves of a transaction: the producer carries on to the new leader (which kept its producer
    state as a follower), the commit's markers land there, and read_committed sees every committed
    record once, in order, and none of an earlier aborted transaction. The broker then rejoins the
    ISR."""
    topic = "rf3-failover"
    leaders = create_rf3_topic(cluster, topic, 3)
    producer = transactional_producer(cluster, "rf3-failover", **{"message.timeout.ms": 90000,
                                                                  "transaction.timeout.ms": 120000})
    coordinator = cluster.wait_until(lambda: max(find_transaction_coordinator(cluster, "rf3-failover"), 0),
                                     30, "the transaction coordinator")
    others = [(p, b) for p, b in sorted(leaders.items()) if b != coordinator]
    assert others, f"every partition led by the coordinator {coordinator}: {leaders}"
    victim_partition, victim = others[0]
    # an aborted transaction first: the new leader must know it from its replica's own
    # transaction index, built while it was a follower
    producer.begin_transaction()
    for i in range(90):
        producer.produce(topic, b"aborted-%03d" % i, partition=i % 3)
    assert producer.flush(60) == 0
    producer.abort_transaction(60)
    producer.begin_transaction()
    values = {p: [] for p in range(3)}
    for i in range(300):
        values[i % 3].append(b"before-%03d" % i)
        producer.produce(topic, b"before-%03d" % i, partition=i % 3)
    assert producer.flush(60) == 0
    cluster.kill(victim)
    survivor = next(b for b in cluster.brokers if b != victim)
    cluster.wait_until(lambda: partition_states(cluster, survivor, topic)[victim_partition][0]
                       not in (-1, victim), 60, "a new leader")
    for i in range(300):
        values[i % 3].append(b"after-%03d" % i)
        producer.produce(topic, b"after-%03d" % i, partition=i % 3)
    producer.commit_transaction(90)
    try:
        assert read_everything(cluster, topic, 3, "read_committed", 600) == values
    finally:
        cluster.start(victim)
        cluster.wait_started([victim], 60)
    cluster.wait_until(lambda: all(isr == [1, 2, 3] for _, isr in
                                   partition_states(cluster, survivor, topic).values()), 60,
                       "the killed broker back in every ISR")
