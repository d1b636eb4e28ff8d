"""Scenario 17: a replica moves to another log dir of its broker (kafka-python's
alter_replica_log_dirs, AlterReplicaLogDirs) while a producer keeps writing; DescribeLogDirs shows
the copy (IsFutureKey) while it is made; every acknowledged record comes back once, in order, and
the partition's files end in the new dir - also when the broker is killed in the middle of the move.
Needs a broker with two log dirs: Odradek gets them here; for Kafka, give run.sh a second one
(KAFKA_EXTRA_PROPS=log.dirs={data_dir}/kraft-logs,{data_dir}/logs2 in COMPAT_BROKER_CMD)."""

import os
import threading
import time

import pytest

from kafka import KafkaConsumer, KafkaProducer, TopicPartition, TopicPartitionReplica
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic

from odradek_compat import brokers

THROTTLE = "replica.alter.log.dirs.io.max.bytes.per.second"
VALUE = b"x" * 400


@pytest.fixture
def two_dir_broker():
    if brokers.external_bootstrap():
        pytest.skip("needs a broker the harness starts itself (COMPAT_BOOTSTRAP is set)")
    process = brokers.BrokerProcess("logdirs")
    data = os.path.join(process.data_dir, "data")
    process.overrides["log.dirs"] = f"{data}/a,{data}/b"
    process.start()
    yield process
    process.close()


def replicas(admin, topic):
    """{log dir: (size, is future)} of partition 0 of `topic`."""
    found = {}
    for broker in admin.describe_log_dirs():
        for log_dir in broker["log_dirs"]:
            for t in log_dir["topics"]:
                for p in t["partitions"]:
                    if t["name"] == topic and p["partition_index"] == 0:
                        found[log_dir["log_dir"]] = (p["partition_size"], p["is_future_key"])
    return found


class Writer(threading.Thread):
    """Produces numbered records until stopped; `acknowledged()`: (offset, number) of each."""

    def __init__(self, bootstrap, topic, first=0):
        super().__init__(daemon=True)
        self.first = first
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=1000,
                                      max_in_flight_requests_per_connection=1, linger_ms=5,
                                      retry_backoff_ms=100, request_timeout_ms=10000)
        self.topic, self.sent, self.stop = topic, [], threading.Event()

    def run(self):
        i = self.first
        while not self.stop.is_set():
            self.sent.append((i, self.producer.send(self.topic, VALUE + str(i).encode(), partition=0)))
            i += 1
            time.sleep(0.01)   # about 40 KB/s: a throttled copy still catches up

    def acknowledged(self):
        self.stop.set()
        self.join(30)
        self.producer.flush(60)
        acked = []
        for i, future in self.sent:
            try:
                acked.append((future.get(60).offset, i))
            except Exception:  # noqa: BLE001 - a record the producer gave up on is not acknowledged
                pass
        self.producer.close(10)
        return acked


def read_all(bootstrap, topic, end):
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             auto_offset_reset="earliest", consumer_timeout_ms=5000)
    consumer.assign([TopicPartition(topic, 0)])
    got = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (not got or got[-1][0] < end - 1):
        for messages in consumer.poll(1000).values():
            got += [(m.offset, int(m.value[len(VALUE):])) for m in messages]
    consumer.close()
    return got


def start_move(admin, bootstrap, topic, rate):
    admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, "1", {THROTTLE: str(rate)})],
                        raise_on_unknown=False)
    [(source, _)] = replicas(admin, topic).items()
    target = next(d["log_dir"] for d in admin.describe_log_dirs()[0]["log_dirs"]
                  if d["log_dir"] != source)
    result = admin.alter_replica_log_dirs({TopicPartitionReplica(topic, 0, 1): target})
    assert [e.__name__ for e in result.values()] == ["NoError"]
    return source, target


def wait_moved(admin, topic, target, timeout=60):
    """Polls DescribeLogDirs until the replica is in `target` alone; whether a copy was seen."""
    seen_future = False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = replicas(admin, topic)
        seen_future |= found.get(target, (0, False))[1]
        if list(found) == [target] and not found[target][1]:
            return seen_future
        time.sleep(0.2)
    raise AssertionError(f"not moved to {target}: {found}")


def check(bootstrap, topic, acked, source, target):
    acked.sort()
    got = read_all(bootstrap, topic, acked[-1][0] + 1)
    numbers = [i for _, i in got]
    assert [o for o, _ in got] == list(range(len(got)))      # no gap, no repeat
    assert numbers == sorted(numbers)                         # in the order they were sent
    assert set(acked) <= set(got)                             # nothing acknowledged is lost
    name = f"{topic}-0"
    assert name in os.listdir(target)
    assert not [n for n in os.listdir(source) if n.startswith(name) and not n.endswith("-delete")]


def test_a_replica_moves_to_the_other_log_dir_while_a_producer_writes(two_dir_broker):
    bootstrap = two_dir_broker.bootstrap
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    topic = "moving"
    try:
        admin.create_topics([NewTopic(topic, 1, 1)])
        dirs = admin.describe_log_dirs()[0]["log_dirs"]
        assert len(dirs) == 2, "the broker needs two log dirs"
        writer = Writer(bootstrap, topic)
        writer.start()
        time.sleep(3)                                          # some data to copy
        source, target = start_move(admin, bootstrap, topic, 100_000)
        seen_future = wait_moved(admin, topic, target)
        time.sleep(0.5)                                        # appends to the moved replica
        acked = writer.acknowledged()
        assert seen_future, "DescribeLogDirs never showed the copy (IsFutureKey) in the new dir"
        assert len(acked) > 200
        check(bootstrap, topic, acked, source, target)
        # where it is already; an unknown dir; a relative path; a partition the broker lacks
        for partition, path, expected in ((0, target, "NoError"),
                                          (0, "/no/such/dir", "LogDirNotFoundError"),
                                          (0, os.path.basename(target), "LogDirNotFoundError"),
                                          (5, target, "UnknownTopicOrPartitionError")):
            errors = admin.alter_replica_log_dirs({TopicPartitionReplica(topic, partition, 1): path})
            assert [e.__name__ for e in errors.values()] == [expected], (partition, path)
    finally:
        admin.close()


def test_a_move_killed_halfway_finishes_after_the_restart(two_dir_broker):
    bootstrap = two_dir_broker.bootstrap
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    topic = "killed"
    admin.create_topics([NewTopic(topic, 1, 1)])
    writer = Writer(bootstrap, topic)
    writer.start()
    time.sleep(2)
    before = writer.acknowledged()
    source, target = start_move(admin, bootstrap, topic, 50_000)
    time.sleep(1.5)
    assert replicas(admin, topic)[target][1], "the copy should still be under way"
    admin.close()
    two_dir_broker.proc.kill()                                 # no clean shutdown
    two_dir_broker.proc.wait()
    two_dir_broker.proc = None
    two_dir_broker.start()
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        writer = Writer(bootstrap, topic, first=max(i for _, i in before) + 1)
        writer.start()
        wait_moved(admin, topic, target, timeout=90)
        after = writer.acknowledged()
        assert after
        check(bootstrap, topic, before + after, source, target)
    finally:
        admin.close()
