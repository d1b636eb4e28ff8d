"""Real clients against the in-process broker, on the edges where brokers break them: acks=0
(no response may be sent), a consumer starting in the middle of a batch, committed metadata, and
Debian's kcat (librdkafka 2.0.2 misreads ApiVersions tagged fields written at their default)."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import time

import pytest

from tests.broker.raw_client import RawClient, batch

COUNT = 200


def _values(prefix: str) -> list[bytes]:
    return [f"{prefix}-{i}".encode() for i in range(COUNT)]


def _read_all(broker, topic: str) -> list[bytes]:
    out, offset = [], 0
    from protocol.records import iter_batches
    with RawClient("127.0.0.1", broker.port) as client:
        while True:
            data = client.fetch(topic, 0, offset).responses[0].partitions[0]
            assert data.error_code == 0
            batches = list(iter_batches(bytes(data.records or b"")))
            if not batches:
                return out
            for stored in batches:
                for record in stored.records():
                    if record.offset >= offset:
                        out.append(record.value)
                offset = stored.last_offset + 1


def test_kafka_python_acks_zero_then_acks_one(broker):
    kafka = pytest.importorskip("kafka")
    with RawClient("127.0.0.1", broker.port) as client:
        assert client.create_topic("kp", 1).error_code == 0
    producer = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap, acks=0, linger_ms=5,
                                   request_timeout_ms=10_000)
    try:
        for value in _values("zero"):
            producer.send("kp", value, partition=0)
        producer.flush(timeout=20)
    finally:
        producer.close(timeout=10)
    producer = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap, acks=1,
                                   request_timeout_ms=10_000)
    try:
        metadata = producer.send("kp", b"acked", partition=0).get(timeout=20)
        assert metadata.offset == COUNT
    finally:
        producer.close(timeout=10)
    assert _read_all(broker, "kp") == _values("zero") + [b"acked"]


def test_confluent_acks_zero_and_a_consumer_starting_mid_batch(broker):
    ck = pytest.importorskip("confluent_kafka")
    with RawClient("127.0.0.1", broker.port) as client:
        assert client.create_topic("ck", 1).error_code == 0
        # one batch of 10 records (offsets 0..9): the consumer starts at offset 4, inside it
        assert client.produce("ck", 0, batch([f"b-{i}".encode() for i in range(10)])).base_offset == 0
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap, "acks": 0, "linger.ms": 5})
    for value in _values("zero"):
        producer.produce("ck", value, partition=0)
    assert producer.flush(20) == 0
    consumer = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "ck-mid",
                            "enable.auto.commit": False, "auto.offset.reset": "error"})
    try:
        consumer.assign([ck.TopicPartition("ck", 0, 4)])
        got = []
        deadline = time.monotonic() + 20
        while len(got) < 6 + COUNT and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                continue
            assert message.error() is None, message.error()
            got.append((message.offset(), message.value()))
        assert got[0] == (4, b"b-4")
        assert [v for _, v in got] == [f"b-{i}".encode() for i in range(4, 10)] + _values("zero")
        consumer.commit(offsets=[ck.TopicPartition("ck", 0, 50, metadata="mid-batch")],
                        asynchronous=False)
        [committed] = consumer.committed([ck.TopicPartition("ck", 0)], timeout=10)
        assert committed.offset == 50 and committed.metadata == "mid-batch"
    finally:
        consumer.close()


def test_aiokafka_round_trip_with_committed_metadata(broker):
    aiokafka = pytest.importorskip("aiokafka")
    from aiokafka.structs import OffsetAndMetadata, TopicPartition

    async def scenario():
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=broker.bootstrap)
        await producer.start()
        try:
            for value in _values("aio")[:20]:
                await producer.send("aio", value, partition=0)
            await producer.flush()
        finally:
            await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="aio-g",
                                             enable_auto_commit=False, auto_offset_reset="earliest")
        await consumer.start()
        try:
            partition = TopicPartition("aio", 0)
            consumer.assign([partition])
            await consumer.seek_to_beginning(partition)
            got = []
            while len(got) < 20:
                batches = await consumer.getmany(timeout_ms=1000)
                got.extend(m.value for messages in batches.values() for m in messages)
            await consumer.commit({partition: OffsetAndMetadata(7, "aio-meta")})
            committed = await consumer.committed(partition)
            return got, committed
        finally:
            await consumer.stop()

    with RawClient("127.0.0.1", broker.port) as client:
        assert client.create_topic("aio", 1).error_code == 0
    got, committed = asyncio.run(asyncio.wait_for(scenario(), 30))
    assert got == _values("aio")[:20] and committed == 7


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed")
def test_debian_kcat_lists_metadata(broker):
    with RawClient("127.0.0.1", broker.port) as client:
        assert client.create_topic("kc", 3).error_code == 0
    out = subprocess.run(["kcat", "-b", broker.bootstrap, "-L", "-J", "-m", "10"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    listing = json.loads(out.stdout)
    [topic] = [t for t in listing["topics"] if t["topic"] == "kc"]
    assert len(topic["partitions"]) == 3
