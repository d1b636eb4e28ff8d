"""Smoke tests of the benchmark harness's pieces (never of anyone's speed: no timing assertions)."""

from __future__ import annotations

import socket
import time
import struct

import pytest

from bench import idle, report, suite, targets
from bench.null_sink import NullSink, api_versions_body
from bench.profile import categorize, summarize

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def sink():
    server = NullSink(partitions=3).start()
    yield server
    server.close()


def _request(api_key: int, version: int, correlation_id: int, body: bytes, flexible: bool = False) -> bytes:
    header = struct.pack(">hhih", api_key, version, correlation_id, 5) + b"bench"
    if flexible:
        header += b"\x00"  # no tagged fields
    frame = header + body
    return struct.pack(">i", len(frame)) + frame


def _connect(sink: NullSink) -> socket.socket:
    return socket.create_connection((sink.host, sink.port), timeout=10)


def test_sink_answers_api_versions_v0_and_v3(sink):
    with _connect(sink) as sock:
        sock.sendall(idle.api_versions_request(7))
        response = idle.read_frame(sock)
        assert response == struct.pack(">i", 7) + api_versions_body(0)
        error, count = struct.unpack_from(">hi", response, 4)
        assert (error, count) == (0, 4)
        ranges = {struct.unpack_from(">hhh", response, 10 + 6 * i)[0]: struct.unpack_from(">hhh", response, 10 + 6 * i)[1:]
                  for i in range(count)}
        assert ranges == {0: (3, 7), 1: (4, 4), 3: (1, 4), 18: (0, 3)}

        body_v3 = b"\x06bench\x021\x00"  # compact strings software name/version, no tags
        sock.sendall(_request(18, 3, 8, body_v3, flexible=True))
        response = idle.read_frame(sock)
        assert struct.unpack_from(">ih", response) == (8, 0)
        assert response[6] == 4 + 1  # compact array length


def test_sink_answers_unknown_api_versions_version_in_v0_format(sink):
    with _connect(sink) as sock:
        sock.sendall(_request(18, 99, 3, b""))
        response = idle.read_frame(sock)
        assert struct.unpack_from(">ih", response) == (3, 35)  # UNSUPPORTED_VERSION, v0 layout
        assert struct.unpack_from(">i", response, 6)[0] == 4


def test_sink_sends_nothing_for_acks_0_and_stays_in_order(sink):
    produce_v3 = struct.pack(">hhi", -1, 0, 1000) + struct.pack(">i", 0)  # null txn id, acks=0, no topics
    with _connect(sink) as sock:
        sock.sendall(_request(0, 3, 1, produce_v3) + idle.api_versions_request(2))
        assert struct.unpack_from(">i", idle.read_frame(sock))[0] == 2


def test_sink_closes_the_connection_on_an_api_it_does_not_speak(sink):
    with _connect(sink) as sock:
        sock.sendall(_request(19, 2, 1, b""))  # CreateTopics
        assert sock.recv(16) == b""


def test_confluent_kafka_produces_into_the_sink(sink):
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient

    bootstrap = f"{sink.host}:{sink.port}"
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics("anything", timeout=10)
    assert len(metadata.topics["anything"].partitions) == 3

    reports = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all",
                         "enable.idempotence": False})
    for i in range(50):
        producer.produce("t", b"x" * 100, partition=0, on_delivery=lambda err, msg: reports.append((err, msg.offset())))
    assert producer.flush(20) == 0
    assert [err for err, _ in reports] == [None] * 50
    assert sorted(offset for _, offset in reports) == list(range(50))
    assert sink.records_acked == 50


def test_idle_connections_hold_handshaken_sockets(sink):
    with idle.IdleConnections(sink.host, sink.port, 5) as connections:
        assert len(connections.sockets) == 5
    assert connections.sockets == []


def test_sink_runs_as_a_process_target(tmp_path):
    target = targets.start_sink(tmp_path, partitions=2)
    try:
        assert target.alive()
        assert target.rss_bytes() > 0
        host, port = target.bootstrap.rsplit(":", 1)
        with idle.IdleConnections(host, int(port), 1):
            pass
    finally:
        target.stop()
    assert not target.alive()
    assert targets.rss_bytes(target.pid) is None


def test_percentile_is_nearest_rank():
    values = list(range(1, 101))
    assert suite.percentile(values, 0.5) == 50
    assert suite.percentile(values, 0.99) == 99
    assert suite.percentile(values, 0.999) == 100
    assert suite.percentile([3.0], 0.99) == 3.0
    with pytest.raises(ValueError):
        suite.percentile([], 0.5)


def test_throughput_reduction_spans_all_workers_and_rejects_losses():
    results = [{"records": 100, "bytes": 10_000, "start": 10.0, "end": 11.0, "errors": 0, "first_error": None},
               {"records": 300, "bytes": 30_000, "start": 10.5, "end": 12.0, "errors": 0, "first_error": None}]
    assert suite._throughput(results) == {"records/s": 200.0, "MB/s": 0.02}
    results[1]["errors"] = 2
    results[1]["first_error"] = "timed out"
    with pytest.raises(RuntimeError, match="timed out"):
        suite._throughput(results)


def test_table_shows_medians_ratios_and_missing_cells():
    produce = suite.Row("produce", "records/s", True,
                        {"odradek": [100.0, 300.0, 200.0], "peer": [400.0], "sink": [1000.0]})
    latency = suite.Row("latency", "p99 ms", False, {"odradek": [4.0], "peer": [2.0]})
    table = report.format_table([produce, latency], extra_rows=[("loopback", "GB/s", "3.00")])
    lines = table.splitlines()
    assert lines[0] == "| workload | metric | Odradek | peer | null sink | Odradek/peer | Odradek/sink |"
    assert lines[2] == "| produce | records/s | 200 | 400 | 1.0 k | 0.50× | 0.20× |"
    without_sink = report.format_table([latency], extra_rows=[("loopback", "GB/s", "3.00")]).splitlines()
    assert without_sink[-1] == "| loopback | GB/s: 3.00 |  |  |  |"
    assert lines[3] == "| latency | p99 ms (lower is better) | 4.00 | 2.00 | n/a | 2.00× |  |"
    assert lines[4] == "| loopback | GB/s |  |  | 3.00 |  |  |"


def test_table_adds_a_candidate_column_for_ab_runs():
    row = suite.Row("produce", "records/s", True, {"odradek": [100.0], "candidate": [150.0], "peer": [50.0]})
    lines = report.format_table([row]).splitlines()
    assert lines[0] == "| workload | metric | Odradek | candidate | peer | Odradek/peer | candidate/Odradek |"
    assert lines[2] == "| produce | records/s | 100 | 150 | 50 | 2.00× | 1.50× |"


def test_results_files(tmp_path):
    run = {"date": "2026-01-02T03:04:05+00:00", "command": "python -m bench --quick",
           "settings": {"mode": "quick", "repeats": 1, "duration": 1.0}, "machine_text": "2 cores",
           "targets": {"peer": "peer: tansu, in-memory storage"}, "errors": []}
    md = tmp_path / "RESULTS.md"
    path = report.write_results(run, "| table |", results_dir=tmp_path / "results", results_md=md)
    assert path.name == "bench-quick-20260102T030405Z.json"
    text = md.read_text()
    assert "`python -m bench --quick`" in text and "| table |" in text and "in-memory" in text
    # hand-written notes below the marker survive the next run's rewrite; the old table does not
    md.write_text(text.replace("| table |", "| old table |") + report.NOTES_MARKER + "\n## A/B notes\n")
    report.write_results(run, "| new table |", results_dir=tmp_path / "results", results_md=md)
    text = md.read_text()
    assert "| new table |" in text and "| old table |" not in text
    assert text.count(report.NOTES_MARKER) == 1 and text.endswith("## A/B notes\n")


def test_other_bench_sections_survive_a_rewrite_and_replace_themselves(tmp_path):
    run = {"date": "2026-01-02T03:04:05+00:00", "command": "python -m bench --quick",
           "settings": {"mode": "quick", "repeats": 1, "duration": 1.0}, "machine_text": "2 cores",
           "targets": {"peer": "peer"}, "errors": []}
    md = tmp_path / "RESULTS.md"
    report.write_results(run, "| first |", results_dir=tmp_path / "results", results_md=md)
    report.write_section(md, "Spark", "| spark 1 |")
    report.write_section(md, "Other", "| other |")
    report.write_section(md, "Spark", "| spark 2 |")        # replaces its own section, keeps the rest
    report.write_results(run, "| second |", results_dir=tmp_path / "results", results_md=md)
    text = md.read_text()
    assert "| first |" not in text and "| second |" in text
    assert "| spark 1 |" not in text and text.count("\n## Spark\n") == 1 and "| spark 2 |" in text
    assert text.index("| second |") < text.index("## Other") < text.index("## Spark")


def test_profile_summary_ranks_self_and_total_time(tmp_path):
    collapsed = tmp_path / "profile.txt"
    collapsed.write_text(
        "main (broker/cli.py:10);serve (broker/server.py:20);decode (protocol/codec.py:5) 6\n"
        "main (broker/cli.py:10);serve (broker/server.py:21);append (storage/log.py:7) 3\n"
        "main (broker/cli.py:10);run (trio/_core/_run.py:1);get_events (trio/_core/_io_epoll.py:9) 90\n"
        "main (broker/cli.py:10);serve (broker/server.py:20) 1\n"
        "Thread.run (threading.py:982);WorkerThread._work (trio/_core/_thread_cache.py:211) 40\n"
    )
    samples, shares = categorize(collapsed)
    assert samples == 10 and shares["other"] == 100.0  # none of these frames is a known bucket
    summary = summarize(collapsed)
    assert summary.samples == 10  # epoll waits and parked worker threads are idle, left out
    assert summary.self_time[0] == ("decode (protocol/codec.py)", 60.0)
    assert dict(summary.total_time)["serve (broker/server.py)"] == 100.0


class _FakeTarget:
    def __init__(self, name: str):
        self.name, self.pid = name, 0

    def alive(self) -> bool:
        return True

    def rss_bytes(self) -> int:
        return 1 << 20


def test_suite_alternates_servers_takes_medians_and_drops_a_server_that_keeps_failing():
    odradek, candidate, peer = _FakeTarget("odradek"), _FakeTarget("candidate"), _FakeTarget("peer")
    order = []
    values = {"odradek": iter([3.0, 1.0, 2.0]), "candidate": iter([4.0, 5.0, 6.0])}

    def run(target):
        order.append(target.name)
        if target.name == "peer":
            raise RuntimeError("peer is down")
        return {"records/s": next(values[target.name])}

    settings = suite.Settings("test", duration=0.1, repeats=3, producers=1, partitions=1, consume_records=1,
                              latency_rate=1, latency_duration=0.1)
    logged = []
    with suite.Suite(settings, [odradek, candidate, peer], log=logged.append) as bench_suite:
        bench_suite.run_case(suite.Case("first", run, [("records/s", True)], targets=("odradek", "peer")))
        bench_suite.run_case(suite.Case("second", run, [("records/s", True)], targets=("peer",)))
        bench_suite.run_case(suite.Case("third", run, [("records/s", True)], targets=("peer",)))
    first = bench_suite.rows[0]
    assert order == ["odradek", "candidate", "peer", "odradek", "candidate", "odradek", "candidate", "peer"]
    assert first.median("odradek") == 2.0 and first.median("candidate") == 5.0
    assert first.ratio("candidate", "odradek") == 2.5
    assert first.median("peer") is None
    assert bench_suite.errors == ["first / peer: RuntimeError: peer is down",
                                  "second / peer: RuntimeError: peer is down"]
    assert any("left out" in line for line in logged)


def test_target_checks_read_the_issue_targets_off_the_rows():
    rows = [
        suite.Row("produce batched 100 B acks=1", "records/s", True, {"odradek": [90.0], "peer": [100.0], "sink": [150.0]}),
        suite.Row("consume from earliest, 1 KiB (60 records)", "records/s", True, {"odradek": [30.0], "peer": [10.0]}),
        suite.Row("end-to-end latency at 5 records/s", "p99 ms", False, {"odradek": [4.0], "peer": [250.0]}),
        suite.Row("scaling: 1 partition (100 B acks=1)", "records/s", True, {"odradek": [100.0]}),
        suite.Row("scaling: 1000 partitions (100 B acks=1)", "records/s", True, {"odradek": [40.0]}),
    ]
    checks = {goal: (measured, verdict) for goal, measured, verdict in report.target_checks(rows)}
    assert checks["batched produce 100 B acks=1 ≥ 1.0× peer"] == ("0.90×", "missed")
    assert checks["batched produce 100 B acks=1 ≥ 50% of the null sink"] == ("0.60×", "met")
    assert checks["consume ≥ 1.0× peer"] == ("3.00×", "met")
    assert checks["p99 end-to-end ≤ 10 ms and below the peer's"][1] == "met"
    assert checks["1000 partitions at most 2× slower than 1"] == ("2.50× slower", "missed")
    assert checks["RSS flat (±10%) from 1 to 2 GiB written"] == ("n/a", "n/a")
    assert report.format_checks(report.target_checks(rows)).startswith("| target | this run | |")


def test_worker_pool_runs_calls_side_by_side_and_survives_failures_and_timeouts():
    from bench.workers import WorkerError, WorkerPool, WorkerTimeout

    pool = WorkerPool(2)
    try:
        assert pool.run([(divmod, (7, 2)), (pow, (2, 10))], timeout=30) == [(3, 1), 1024]
        with pytest.raises(WorkerError, match="ZeroDivisionError"):
            pool.run([(divmod, (1, 0)), (pow, (2, 3))], timeout=30)
        assert pool.run([(pow, (3, 2)), (pow, (2, 3))], timeout=30) == [9, 8]  # no stale replies
        with pytest.raises(WorkerTimeout):
            pool.run([(time.sleep, (30,))], timeout=0.5)
        assert pool.run([(pow, (2, 2)), (pow, (2, 3)), (pow, (2, 4))], timeout=30) == [4, 8, 16]  # replaced, grown
    finally:
        pool.close()
