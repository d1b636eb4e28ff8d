"""The replicated and SSL rows' servers: an Odradek SSL listener with the bench's own CA, a 3-node
Odradek cluster target (RF 3 topics, the cluster's summed CPU), a 3-node Kafka cluster (`-m slow`),
and the checks that read these rows. Smoke tests of the harness, never of anyone's speed.
"""

from __future__ import annotations

import uuid

import pytest

from bench import clusters, kafka, replicated_rows, report, ssl_rows, suite, targets
from tests.bench.round_trip import round_trip as _round_trip

pytestmark = pytest.mark.timeout(300)


def _settings() -> suite.Settings:
    return suite.Settings("test", duration=0.5, repeats=1, producers=1, partitions=2, consume_records=100,
                          latency_rate=10, latency_duration=0.5, warmup_seconds=0.0)


def test_odradek_ssl_listener_with_the_bench_ca_moves_records(tmp_path):
    pki = ssl_rows.BenchPki(tmp_path / "pki")
    target = targets.start_odradek(tmp_path, tls=pki)
    try:
        assert target.ssl_bootstrap and target.ssl_bootstrap != target.bootstrap
        assert target.ssl_client == {"security.protocol": "SSL", "ssl.ca.location": pki.path("ca.pem")}
        assert "SSL listener" in target.label
        topic = f"ssl-{uuid.uuid4().hex[:6]}"
        with suite.Suite(_settings(), [target], log=lambda line: None) as bench_suite:
            name = bench_suite.create_topic(target, topic, 1)  # over PLAINTEXT, read back over SSL
            got = _round_trip(target.ssl_bootstrap, target.ssl_client, name)
        assert got == [f"{name}-{i}".encode() for i in range(5)]
    finally:
        target.stop()


def test_ssl_rows_report_each_brokers_own_ratio():
    values = ssl_rows._ssl_values({"records/s": 200.0, "MB/s": 2.0, suite.CPU_METRIC: 1.0},
                                  {"records/s": 150.0, "MB/s": 1.5, suite.CPU_METRIC: 2.0})
    assert values == {"PLAINTEXT records/s": 200.0, "SSL records/s": 150.0, "SSL MB/s": 1.5,
                      "SSL/PLAINTEXT": 0.75, "SSL server CPU µs/record": 2.0}
    assert [metric for metric, _ in ssl_rows.SSL_METRICS] == list(values)
    assert report.format_value(150_000.0, "SSL records/s") == "150.0 k"


def test_replicated_and_ssl_checks_read_their_rows():
    rows = [
        suite.Row("replicated: produce batched 100 B acks=all (3 nodes)", "records/s", True,
                  {"odradek": [90.0], "kafka": [100.0]}),
        suite.Row("replicated: end-to-end latency at 5 records/s", "p99 ms", False,
                  {"odradek": [4.0], "kafka": [8.0]}),
        suite.Row("SSL: consume from earliest, 1 KiB", "SSL records/s", True, {"odradek": [3.0], "kafka": [2.0]}),
    ]
    checks = {goal: (measured, verdict) for goal, measured, verdict in report.target_checks(rows)}
    assert checks["replicated: batched produce 100 B acks=all ≥ 1.0× Kafka's cluster"] == ("0.90×", "missed")
    assert checks["replicated: p99 end-to-end ≤ Kafka's"] == ("0.50×", "met")
    assert checks["SSL: consume ≥ 1.0× Kafka over SSL"] == ("1.50×", "met")
    assert checks["replicated: consume ≥ 1.0× Kafka's cluster"] == ("n/a", "n/a")
    # the single-node checks do not pick up the replicated or SSL rows
    assert checks["batched produce 100 B acks=all ≥ 1.0× Kafka"] == ("n/a", "n/a")
    assert checks["p99 end-to-end ≤ Kafka's"] == ("n/a", "n/a")


def test_odradek_cluster_target_replicates_and_sums_its_nodes(tmp_path):
    target = clusters.start_odradek_cluster(tmp_path)
    try:
        assert target.alive() and len(target.processes) == 3 and target.replication_factor == 3
        assert target.bootstrap.count(",") == 2 and target.column == "odradek"
        with suite.Suite(_settings(), [target], log=lambda line: None) as bench_suite:
            topic = bench_suite.create_topic(target, "rf3", 2)  # returns once every ISR has all three
            from confluent_kafka.admin import AdminClient

            metadata = AdminClient({"bootstrap.servers": target.bootstrap}).list_topics(topic, timeout=30)
            assert all(len(p.replicas) == 3 for p in metadata.topics[topic].partitions.values())
            assert _round_trip(target.bootstrap, {}, topic) == [f"{topic}-{i}".encode() for i in range(5)]
            produce_100 = replicated_rows.build_replicated_cases(bench_suite)[0]
            values = produce_100.run(target)  # a short acks=all run, split by node role
            assert values["records/s"] > 0 and set(values) >= {replicated_rows.LEADER_CPU,
                                                               replicated_rows.FOLLOWER_CPU}
        per_node = target.node_cpu_seconds()
        assert set(per_node) == {1, 2, 3} and all(value > 0 for value in per_node.values())
        assert target.cpu_seconds() >= max(per_node.values())
        assert target.rss_bytes() > max(targets.rss_bytes(p.pid) for p in target.processes.values())
    finally:
        target.stop()
    assert not target.alive() and not any(path.exists() for path in target.cleanup)


@pytest.mark.slow
def test_kafka_cluster_target_forms_and_keeps_acks_all_records(tmp_path):
    reason = kafka.available()
    if reason:
        pytest.skip(f"Apache Kafka not available: {reason}")
    target = clusters.start_kafka_cluster(tmp_path, heap="256m")
    try:
        assert target.warmup and "3 nodes" in target.label and "heap 256 MiB each" in target.label
        with suite.Suite(_settings(), [target], log=lambda line: None) as bench_suite:
            topic = bench_suite.create_topic(target, "rf3", 1)
            assert _round_trip(target.bootstrap, {}, topic) == [f"{topic}-{i}".encode() for i in range(5)]
    finally:
        target.stop()
    assert not target.alive() and not any(path.exists() for path in target.cleanup)


def test_replicated_produce_splits_the_clusters_cpu_by_role():
    from bench.replicated_rows import FOLLOWER_CPU, LEADER_CPU, _split_by_role

    before = {1: 10.0, 2: 10.0, 3: 10.0}
    after = {1: 13.0, 2: 13.0, 3: 12.0}  # nodes 1 and 2 lead; 3 only follows
    values = _split_by_role(before, after, {1, 2}, cpu_per_record=8.0)
    assert values == {LEADER_CPU: 3.0, FOLLOWER_CPU: 2.0}
    assert _split_by_role(before, {**after, 3: None}, {1, 2}, 8.0) == {}
