"""The Apache Kafka bench target: it starts, answers a real produce/consume, reports its JVM, stops.

Skipped with the reason when there is no Kafka directory or no Java (`bench.kafka.available`).
"""

from __future__ import annotations

import uuid

import pytest

from bench import kafka, report, suite
from bench.ssl_rows import BenchPki
from tests.bench.round_trip import round_trip as _round_trip

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def kafka_target(tmp_path_factory):
    reason = kafka.available()
    if reason:
        pytest.skip(f"Apache Kafka not available: {reason}")
    pki = BenchPki(tmp_path_factory.mktemp("pki"))
    target = kafka.start_kafka(tmp_path_factory.mktemp("kafka-logs"), {"log.flush.interval.messages": "1"},
                               name="kafka-durable", column="kafka", heap="256m", tls=pki)
    yield target
    target.stop()


def test_kafka_target_answers_a_produce_and_a_consume(kafka_target):
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

    topic = f"bench-smoke-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": kafka_target.bootstrap, "log_level": 3})
    values = [f"record-{i}".encode() for i in range(5)]
    for value in values:
        producer.produce(topic, value)  # auto-created, as a new user would see it
    assert producer.flush(60) == 0
    consumer = Consumer({"bootstrap.servers": kafka_target.bootstrap, "group.id": "smoke", "log_level": 3})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got = []
    for _ in range(120):
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got.append(message.value())
        if len(got) == len(values):
            break
    consumer.close()
    assert got == values


def test_kafka_target_ssl_listener_takes_the_bench_certificate(kafka_target):
    assert kafka_target.ssl_bootstrap and kafka_target.ssl_bootstrap != kafka_target.bootstrap
    assert "SSL listener" in kafka_target.label
    topic = f"bench-ssl-{uuid.uuid4().hex[:8]}"
    assert _round_trip(kafka_target.ssl_bootstrap, kafka_target.ssl_client, topic, acks="1") == [
        f"{topic}-{i}".encode() for i in range(5)]


def test_kafka_target_reports_what_it_runs_with(kafka_target):
    assert kafka_target.column == "kafka" and kafka_target.warmup
    assert "heap 256 MiB" in kafka_target.label and "G1GC" in kafka_target.label
    assert "log.flush.interval.messages=1" in kafka_target.label
    assert "-XX:MaxHeapSize=268435456" in kafka_target.details["jvm_flags"]
    assert kafka_target.open_files() > 0 and kafka_target.rss_bytes() > 0


def test_kafka_target_stops_and_removes_its_data(kafka_target):  # last of the tests that use it
    target = kafka_target
    data_dirs = list(target.cleanup)
    target.stop()
    assert not target.alive() and target.process.returncode is not None
    assert not any(path.exists() for path in data_dirs)


def test_unavailable_kafka_says_why(monkeypatch, tmp_path):
    monkeypatch.setenv("APACHE_KAFKA_HOME", str(tmp_path))
    assert "no Apache Kafka at" in kafka.available()
    with pytest.raises(kafka.TargetError, match="not available"):
        kafka.start_kafka(tmp_path)


def test_jvm_settings_fall_back_to_the_command_line_of_a_non_jvm():
    import os

    settings = kafka.jvm_settings(os.getpid())  # never jcmd (its SIGQUIT would kill us): the command line
    assert settings["heap"] == "JVM default" and settings["gc"] == "JVM default GC"


def test_table_has_a_kafka_column_and_durable_twins_fill_it():
    row = suite.Row("produce", "records/s", True, {"odradek": [300.0], "peer": [100.0], "kafka": [200.0]})
    lines = report.format_table([row]).splitlines()
    assert lines[0] == "| workload | metric | Odradek | peer | Kafka | Odradek/peer | Odradek/Kafka |"
    assert lines[2] == "| produce | records/s | 300 | 100 | 200 | 3.00× | 1.50× |"


class _Twin:
    def __init__(self, name: str, column: str, warmup: bool = False):
        self.name, self.column, self.warmup, self.pid = name, column, warmup, 0

    def alive(self) -> bool:
        return True

    def rss_bytes(self) -> int:
        return 1 << 20


def test_suite_warms_up_then_measures_and_files_twins_under_their_column():
    calls = []

    def run(target):
        calls.append(target.name)
        return {"records/s": 10.0 if target.name == "kafka-durable" else 20.0}

    settings = suite.Settings("test", duration=0.1, repeats=2, producers=1, partitions=1, consume_records=1,
                              latency_rate=1, latency_duration=0.1, warmup_seconds=0.0)
    twins = [_Twin("odradek-durable", "odradek"), _Twin("kafka-durable", "kafka", warmup=True)]
    with suite.Suite(settings, twins, log=lambda line: None) as bench_suite:
        bench_suite.run_case(suite.Case("durable", run, [("records/s", True)], targets=("odradek-durable",
                                                                                          "kafka-durable")))
        bench_suite.run_case(suite.Case("cold", run, [("records/s", True)], targets=("kafka-durable",),
                                        warmup=False, repeats=1))
    assert calls == ["kafka-durable"] + ["odradek-durable", "kafka-durable"] * 2 + ["kafka-durable"]
    assert bench_suite.rows[0].ratio("odradek", "kafka") == 2.0
