"""Time-based retention runs on Kafka's schedule (first check 30 s after start, then every
log.retention.check.interval.ms), not on every housekeeping pass: records written with event-time
timestamps older than retention.ms (a backfill, a stream app replaying last week) stay readable
until that check, as on Kafka. Found with Quix Streams: its consumer started at offset BEGINNING
and found each input partition already empty a few seconds after the data was produced."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker.subprocess_broker import ServeProcess

RECORDS = 50
RETENTION_MS = 3_600_000
QUIET_WATCH_S = 8.0   # longer than the old 5 s housekeeping tick that applied retention on every pass


def _create_and_backfill(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1, config={"retention.ms": str(RETENTION_MS)})],
                                      operation_timeout=30).values():
        future.result(timeout=30)
    producer = Producer({"bootstrap.servers": bootstrap})
    two_hours_ago = int(time.time() * 1000) - 2 * RETENTION_MS
    for i in range(RECORDS):
        producer.produce(topic, key=b"k%d" % i, value=b"v%d" % i, timestamp=two_hours_ago + i)
    assert producer.flush(30) == 0


def _watermarks(consumer: Consumer, topic: str) -> tuple[int, int]:
    return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)


def _read_from_beginning(bootstrap: str, topic: str) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "backfill-reader",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        values: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(values) < RECORDS and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                values.append(message.value())
        return values
    finally:
        consumer.close()


def test_expired_records_stay_until_the_retention_check(tmp_path):
    with ServeProcess(tmp_path / "data") as broker:   # log.retention.check.interval.ms: 300000
        _create_and_backfill(broker.bootstrap, "backfill")
        probe = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "probe"})
        try:
            watch_until = time.monotonic() + QUIET_WATCH_S
            while time.monotonic() < watch_until:
                assert _watermarks(probe, "backfill") == (0, RECORDS)
                time.sleep(0.5)
        finally:
            probe.close()
        assert _read_from_beginning(broker.bootstrap, "backfill") == [b"v%d" % i for i in range(RECORDS)]


def test_expired_records_go_at_the_configured_check_interval(tmp_path):
    with ServeProcess(tmp_path / "data", "log.retention.check.interval.ms=1000") as broker:
        _create_and_backfill(broker.bootstrap, "backfill")
        probe = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "probe"})
        try:
            deadline = time.monotonic() + 60
            while _watermarks(probe, "backfill") != (RECORDS, RECORDS) and time.monotonic() < deadline:
                time.sleep(0.2)
            assert _watermarks(probe, "backfill") == (RECORDS, RECORDS)
        finally:
            probe.close()
