"""`odradek serve` as a subprocess driven by confluent-kafka (librdkafka): produce, consume, admin,
clean shutdown, and kill -9 with fsync-before-acknowledge."""

import os
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient, ConfigResource, NewPartitions, NewTopic, ResourceType,
)

from tests.broker.subprocess_broker import ServeProcess

pytestmark = pytest.mark.timeout(120)


def consume_all(bootstrap, topic, partitions, expected, timeout=20.0, **config):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "e2e",
                         "enable.auto.commit": False, **config})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = []
    deadline = time.monotonic() + timeout
    while len(got) < expected and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is None or message.error():
            continue
        got.append((message.partition(), message.offset(), message.key(), message.value()))
    consumer.close()
    return got


def wait_all(futures):
    return {key: future.result(timeout=30) for key, future in futures.items()}


def test_produce_consume_and_admin_with_librdkafka(tmp_path):
    with ServeProcess(tmp_path / "data") as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        wait_all(admin.create_topics([NewTopic("orders", num_partitions=3, replication_factor=1,
                                               config={"retention.ms": "3600000"})]))
        with pytest.raises(KafkaException, match="TOPIC_ALREADY_EXISTS"):
            wait_all(admin.create_topics([NewTopic("orders", num_partitions=1, replication_factor=1)]))

        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5,
                             "compression.type": "zstd", "enable.idempotence": False})
        for i in range(3000):
            producer.produce("orders", key=b"k%d" % (i % 7), value=b"order %d" % i)
        assert producer.flush(30) == 0

        got = consume_all(broker.bootstrap, "orders", 3, 3000)
        assert len(got) == 3000
        assert sorted(v for *_, v in got) == sorted(b"order %d" % i for i in range(3000))
        probe = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "probe"})
        total = 0
        for p in range(3):
            low, high = probe.get_watermark_offsets(TopicPartition("orders", p), timeout=10)
            assert low == 0
            total += high
        assert total == 3000   # the high watermark is last offset + 1, batches or not

        # offsets for times: a timestamp far in the future has no offset (-1)
        [future] = probe.offsets_for_times([TopicPartition("orders", 0, 2**50)], timeout=10)
        assert future.offset == -1
        probe.close()

        [resource] = wait_all(admin.describe_configs(
            [ConfigResource(ResourceType.TOPIC, "orders")])).values()
        assert resource["retention.ms"].value == "3600000"
        assert resource["cleanup.policy"].value == "delete"
        assert resource["max.message.bytes"].value == "1048588"
        [broker_configs] = wait_all(admin.describe_configs(
            [ConfigResource(ResourceType.BROKER, "1")])).values()
        assert broker_configs["num.partitions"].value == "1"

        wait_all(admin.create_partitions([NewPartitions("orders", 5)]))
        metadata = admin.list_topics(timeout=10)
        assert len(metadata.topics["orders"].partitions) == 5
        wait_all(admin.delete_topics(["orders"]))
        deadline = time.monotonic() + 10
        while "orders" in admin.list_topics(timeout=10).topics and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "orders" not in admin.list_topics(timeout=10).topics


def test_sigterm_shuts_down_cleanly_and_data_survives(tmp_path):
    broker = ServeProcess(tmp_path / "data").start()
    try:
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        for i in range(100):
            producer.produce("survivor", value=b"v%d" % i)
        assert producer.flush(30) == 0
    finally:
        assert broker.stop() == 0
    assert "odradek: stopped\n" in broker.output
    assert os.path.exists(tmp_path / "data" / ".kafka_cleanshutdown")
    with broker.start():
        got = consume_all(broker.bootstrap, "survivor", 1, 100)
        assert [v for *_, v in got] == [b"v%d" % i for i in range(100)]


def test_kill_9_loses_no_acknowledged_record_with_fsync_before_ack(tmp_path):
    broker = ServeProcess(tmp_path / "data", "log.flush.before.acknowledge=true").start()
    acknowledged = []
    try:
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all",
                             "linger.ms": 1, "message.timeout.ms": 5000,
                             "enable.idempotence": False})

        def delivered(error, message):
            if error is None:
                acknowledged.append((message.offset(), message.value()))

        deadline = time.monotonic() + 30
        i = 0
        while len(acknowledged) < 2000 and time.monotonic() < deadline:
            producer.produce("durable", value=b"value %d" % i, on_delivery=delivered)
            producer.poll(0)
            i += 1
            if i % 100 == 0:
                producer.poll(0.01)
        broker.kill()          # SIGKILL mid-load: records in flight may be lost, acknowledged ones not
        producer.flush(6)
    finally:
        broker.kill()
    assert len(acknowledged) >= 2000
    with broker.start():
        got = consume_all(broker.bootstrap, "durable", 1, len(acknowledged))
        stored = {offset: value for _, offset, _, value in got}
        missing = [(o, v) for o, v in acknowledged if stored.get(o) != v]
        assert missing == []


def test_read_committed_hides_aborted_records(tmp_path):
    with ServeProcess(tmp_path / "data") as broker:
        producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "tx-e2e"})
        producer.init_transactions(30)
        producer.begin_transaction()
        for i in range(5):
            producer.produce("txn", value=b"committed %d" % i)
        producer.commit_transaction(30)
        producer.begin_transaction()
        for i in range(5):
            producer.produce("txn", value=b"aborted %d" % i)
        producer.flush(30)                 # in the log, so the abort has something to hide
        producer.abort_transaction(30)
        producer.begin_transaction()
        producer.produce("txn", value=b"last")
        producer.commit_transaction(30)

        committed = consume_all(broker.bootstrap, "txn", 1, 6, timeout=10,
                                **{"isolation.level": "read_committed"})
        assert [v for *_, v in committed] == [b"committed %d" % i for i in range(5)] + [b"last"]
        everything = consume_all(broker.bootstrap, "txn", 1, 11, timeout=10,
                                 **{"isolation.level": "read_uncommitted"})
        assert len(everything) == 11
