"""Consumer groups with real clients against an in-process broker (confluent-kafka, kafka-python)."""

import time

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from broker.testing import running_broker

TOPIC = "events"
FAST_GROUP = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 300, "auto.offset.reset": "earliest",
              "enable.auto.commit": False, "topic.metadata.refresh.interval.ms": 1000}


def create_topic(bootstrap, name=TOPIC, partitions=4):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(10)


def produce(bootstrap, count, topic=TOPIC, partitions=4, start=0):
    producer = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(start, start + count):
        producer.produce(topic, value=b"%d" % i, partition=i % partitions)
    assert producer.flush(10) == 0


def consumer(bootstrap, group, **extra):
    return ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group, **FAST_GROUP, **extra})


INBOX: dict = {}  # messages polled so far, by consumer; a poll for another reason must not lose any


def _poll(c, timeout=0.05):
    m = c.poll(timeout)
    if m is not None and not m.error():
        INBOX.setdefault(id(c), []).append((m.partition(), m.offset(), m.value()))


def poll_until(consumers, done, timeout=30.0):
    """Poll every consumer in turn until done(messages by consumer) or the timeout; takes the messages."""
    deadline = time.time() + timeout
    view = lambda: {id(c): INBOX.get(id(c), []) for c in consumers}  # noqa: E731
    while time.time() < deadline and not done(view()):
        for c in consumers:
            _poll(c)
    got = view()
    for c in consumers:
        INBOX.pop(id(c), None)
    return got


def assignment_sizes(consumers, want, timeout=30.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        for c in consumers:
            _poll(c)
        sizes = sorted(len(c.assignment()) for c in consumers)
        if sizes == want:
            return sizes
    return sorted(len(c.assignment()) for c in consumers)


@pytest.mark.timeout(120)
def test_two_members_split_then_one_takes_all_then_restart_resumes(tmp_path):
    data = tmp_path / "data"
    with running_broker(data) as broker:
        create_topic(broker.bootstrap)
        a, b = consumer(broker.bootstrap, "g"), consumer(broker.bootstrap, "g")
        a.subscribe([TOPIC])
        b.subscribe([TOPIC])
        assert assignment_sizes([a, b], [2, 2]) == [2, 2]
        owned = {p.partition for c in (a, b) for p in c.assignment()}
        assert owned == {0, 1, 2, 3}
        produce(broker.bootstrap, 40)  # after the split: every record is read exactly once
        got = poll_until([a, b], lambda g: sum(map(len, g.values())) >= 40)
        assert sorted(v for msgs in got.values() for _, _, v in msgs) == sorted(b"%d" % i for i in range(40))
        a.commit(asynchronous=False)
        b.commit(asynchronous=False)
        b.close()  # LeaveGroup: a gets everything
        assert assignment_sizes([a], [4]) == [4]
        produce(broker.bootstrap, 8, start=40)
        got = poll_until([a], lambda g: sum(map(len, g.values())) >= 8)
        assert sorted(v for _, _, v in got[id(a)]) == sorted(b"%d" % i for i in range(40, 48))
        a.commit(asynchronous=False)
        a.close()
        produce(broker.bootstrap, 4, start=48)
    with running_broker(data) as broker:  # restarted: committed offsets and data survive
        c = consumer(broker.bootstrap, "g")
        committed = c.committed([ck.TopicPartition(TOPIC, p) for p in range(4)], timeout=10)
        assert [tp.offset for tp in committed] == [12, 12, 12, 12]
        c.subscribe([TOPIC])
        got = poll_until([c], lambda g: sum(map(len, g.values())) >= 4)
        assert sorted(v for _, _, v in got[id(c)]) == [b"48", b"49", b"50", b"51"]
        c.close()


@pytest.mark.timeout(60)
def test_commit_keeps_metadata_and_assign_consumer_commits(tmp_path):
    with running_broker(tmp_path / "data") as broker:
        create_topic(broker.bootstrap, partitions=2)
        produce(broker.bootstrap, 10, partitions=2)
        c = consumer(broker.bootstrap, "simple")
        c.assign([ck.TopicPartition(TOPIC, 0, 0), ck.TopicPartition(TOPIC, 1, 0)])
        poll_until([c], lambda g: sum(map(len, g.values())) >= 10)
        c.commit(offsets=[ck.TopicPartition(TOPIC, 0, 3, metadata="hello"), ck.TopicPartition(TOPIC, 1, 4)],
                 asynchronous=False)
        committed = c.committed([ck.TopicPartition(TOPIC, 0), ck.TopicPartition(TOPIC, 1)], timeout=10)
        assert [(tp.offset, tp.metadata) for tp in committed] == [(3, "hello"), (4, None)]
        c.close()
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        listed = admin.list_consumer_group_offsets([ck.ConsumerGroupTopicPartitions("simple")])["simple"].result(10)
        assert sorted((tp.partition, tp.offset) for tp in listed.topic_partitions) == [(0, 3), (1, 4)]
        described = admin.describe_consumer_groups(["simple"])["simple"].result(10)
        assert described.state == ck.ConsumerGroupState.EMPTY
        assert admin.delete_consumer_groups(["simple"])["simple"].result(10) is None
        assert [g.group_id for g in admin.list_consumer_groups().result(10).valid] == []


@pytest.mark.timeout(60)
def test_static_member_rejoins_without_rebalance(tmp_path):
    with running_broker(tmp_path / "data") as broker:
        create_topic(broker.bootstrap)
        a = consumer(broker.bootstrap, "static", **{"group.instance.id": "a"})
        b = consumer(broker.bootstrap, "static", **{"group.instance.id": "b"})
        a.subscribe([TOPIC])
        b.subscribe([TOPIC])
        assert assignment_sizes([a, b], [2, 2]) == [2, 2]
        before = {p.partition for p in b.assignment()}
        coordinator = broker.broker.coordinators["group"]
        generation = coordinator.groups["static"].generation_id
        b.close()  # a static member does not leave the group on close
        b = consumer(broker.bootstrap, "static", **{"group.instance.id": "b"})
        b.subscribe([TOPIC])
        assert assignment_sizes([a, b], [2, 2]) == [2, 2]
        assert {p.partition for p in b.assignment()} == before
        assert coordinator.groups["static"].generation_id == generation
        a.close()
        b.close()


@pytest.mark.timeout(60)
def test_kafka_python_group_consumer(tmp_path):
    kafka = pytest.importorskip("kafka")
    with running_broker(tmp_path / "data") as broker:
        create_topic(broker.bootstrap, partitions=2)
        produce(broker.bootstrap, 20, partitions=2)
        c = kafka.KafkaConsumer(TOPIC, bootstrap_servers=broker.bootstrap, group_id="kp",
                                auto_offset_reset="earliest", enable_auto_commit=False,
                                consumer_timeout_ms=10_000, heartbeat_interval_ms=300)
        values = []
        for message in c:
            values.append(message.value)
            if len(values) == 20:
                break
        assert sorted(values) == sorted(b"%d" % i for i in range(20))
        c.commit()
        tps = [kafka.TopicPartition(TOPIC, p) for p in range(2)]
        assert [c.committed(tp) for tp in tps] == [10, 10]
        c.close()


@pytest.mark.timeout(90)
@pytest.mark.parametrize("strategy", ["range", "roundrobin", "cooperative-sticky"])
def test_assignors_split_and_hand_over(tmp_path, strategy):
    with running_broker(tmp_path / "data") as broker:
        create_topic(broker.bootstrap)
        produce(broker.bootstrap, 8)
        extra = {"partition.assignment.strategy": strategy}
        a = consumer(broker.bootstrap, "g-" + strategy, **extra)
        a.subscribe([TOPIC])
        assert assignment_sizes([a], [4]) == [4]
        b = consumer(broker.bootstrap, "g-" + strategy, **extra)
        b.subscribe([TOPIC])
        assert assignment_sizes([a, b], [2, 2]) == [2, 2]
        assert {p.partition for c in (a, b) for p in c.assignment()} == {0, 1, 2, 3}
        # nothing was committed: records `a` read before the split may be read again by `b`
        everything = {b"%d" % i for i in range(8)}
        got = poll_until([a, b], lambda g: {v for msgs in g.values() for _, _, v in msgs} >= everything)
        assert {v for msgs in got.values() for _, _, v in msgs} == everything
        a.close()
        assert assignment_sizes([b], [4]) == [4]
        b.close()
