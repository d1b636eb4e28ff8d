"""Scale rows (``python -m bench --scale``): a broker holding 10,000 partitions (50 topics × 200).

A single event loop pays for every large answer, so these rows measure what a big cluster's metadata
costs: CreateTopics of all of them (in as few requests as the controllers' bound of 10,000 records
per operation allows: two at 10,000 partitions), a full Metadata answer (raw socket, so no client
parsing is timed), RSS and open files, one record produced to every partition, and the end-to-end
latency of a quiet topic at 2,000 records/s, first alone and then while another client fetches full
metadata every 100 ms. Slow (minutes per broker), so behind an option; ``--setting scale_topics=250``
asks for 50,000 partitions.

The workload functions run in the worker processes (`bench.workers`), like `bench.workloads`.
"""

from __future__ import annotations

import socket
import statistics
import struct
import threading
import time
import uuid

from bench import workloads
from bench.idle import api_versions_request, read_frame
from bench.suite import Case, Suite, percentile
from bench.targets import Target

METADATA = 3
METADATA_VERSION = 4  # topics: null asks for every topic; both brokers answer it (Kafka 3.9: v0-12)
CLIENT_ID = b"odradek-bench-scale"
METADATA_WARMUP_REQUESTS = 3
METADATA_MEASURED_REQUESTS = 10
POLL_INTERVAL_S = 0.1
CREATE_TOPICS_RECORDS = 9_000  # metadata records per CreateTopics request, under the controllers' 10,000
# librdkafka puts one partition in each ProduceRequest and, by default, builds no new request while
# one is still unsent (queue.buffering.backpressure.threshold=1), so each request costs a scan of
# every partition with records queued: 1.4 ms of client CPU per record at 20,000 partitions, and the
# 50,000 pass timed out (message.timeout.ms) against Kafka and Odradek alike. Letting it build up to
# 1,000 requests per scan makes the pass linear; the same setting for every broker.
SPREAD_PRODUCER = {"queue.buffering.backpressure.threshold": 1000}


def full_metadata_request(correlation_id: int) -> bytes:
    """A size-prefixed Metadata v4 request for all topics, no auto-creation."""
    header = struct.pack(">hhih", METADATA, METADATA_VERSION, correlation_id, len(CLIENT_ID)) + CLIENT_ID
    body = struct.pack(">ib", -1, 0)
    return struct.pack(">i", len(header) + len(body)) + header + body


def metadata_latencies(bootstrap: str, count: int, interval: float, start_at: float,
                       duration: float | None = None) -> dict:
    """Full Metadata round trips on one connection: `count` of them (or for `duration` seconds),
    one every `interval` seconds; returns each latency in ms and the answer's size."""
    host, port = bootstrap.rsplit(":", 1)
    latencies: list[float] = []
    size = 0
    with socket.create_connection((host, int(port)), timeout=120) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        workloads._wait_until(start_at)
        stop_at = time.monotonic() + duration if duration is not None else None
        correlation_id = 0
        while (len(latencies) < count) if stop_at is None else (time.monotonic() < stop_at):
            began = time.monotonic()
            sock.sendall(full_metadata_request(correlation_id))
            response = read_frame(sock)
            latencies.append((time.monotonic() - began) * 1e3)
            if struct.unpack_from(">i", response)[0] != correlation_id:
                raise RuntimeError("metadata answer with the wrong correlation id")
            size = len(response)
            correlation_id += 1
            time.sleep(max(interval - (time.monotonic() - began), 0))
    return {"latencies_ms": latencies, "bytes": size}


def produce_every_partition(bootstrap: str, topics: list[str], partitions: int, passes: int) -> dict:
    """One 100-byte record to every partition of `topics`, `passes` times; the seconds each pass took
    from the first send to the last acknowledgement (metadata of every topic fetched before)."""
    errors: list[str] = []
    producer = workloads._producer(bootstrap, {"linger.ms": 5, "acks": "1", **SPREAD_PRODUCER}, errors)
    for topic in topics:
        workloads._connect(producer, topic, timeout=60)
    payload = workloads.PAYLOAD_BYTE * 100
    seconds = []
    for _ in range(passes):
        began = time.monotonic()
        for topic in topics:
            for partition in range(partitions):
                while True:
                    try:
                        producer.produce(topic, payload, partition=partition)
                        break
                    except BufferError:
                        producer.poll(0.01)
            producer.poll(0)
        unflushed = producer.flush(300)
        seconds.append(time.monotonic() - began)
        if unflushed or errors:
            return {"seconds": seconds, "errors": len(errors) + unflushed, "first_error": errors[0] if errors else
                    f"{unflushed} records not acknowledged within 300 s"}
    return {"seconds": seconds, "errors": 0, "first_error": None}


class StallProbe:
    """A thread sending ApiVersions every `interval` s on its own connection while a step runs; the
    longest round trip is how long the broker left a trivial request waiting (on Odradek: the longest
    time something held the event loop, give or take one interval)."""

    def __init__(self, bootstrap: str, interval: float = 0.01):
        host, port = bootstrap.rsplit(":", 1)
        self.address, self.interval = (host, int(port)), interval
        self.longest_ms = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: str | None = None

    def __enter__(self) -> "StallProbe":
        self._sock = socket.create_connection(self.address, timeout=120)
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._thread = threading.Thread(target=self._run, name="stall-probe", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        correlation_id = 0
        try:
            while not self._stop.is_set():
                began = time.monotonic()
                self._sock.sendall(api_versions_request(correlation_id))
                read_frame(self._sock)
                self.longest_ms = max(self.longest_ms, (time.monotonic() - began) * 1e3)
                correlation_id += 1
                self._stop.wait(self.interval)
        except OSError as error:
            self.error = str(error)

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(150)
        self._sock.close()


def scale_case(suite: Suite) -> Case:
    s = suite.settings
    topics_count, per_topic = s.scale_topics, s.scale_partitions_per_topic
    total = topics_count * per_topic
    rate, duration = s.scale_latency_rate, s.scale_latency_duration

    def latency_run(target: Target, topic: str, with_poller: bool) -> tuple[list[float], list[float]]:
        start_at = time.time() + 2.0
        expected = int(rate * duration)
        calls = [
            (workloads.latency_consumer, (target.bootstrap, topic, [0], expected,
                                          {"fetch.wait.max.ms": 500, "fetch.min.bytes": 1}, start_at, duration + 60)),
            (workloads.latency_producer, (target.bootstrap, topic, 100, rate, duration,
                                          {"linger.ms": 1, "acks": "all"}, start_at)),
        ]
        if with_poller:
            calls.append((metadata_latencies, (target.bootstrap, 0, POLL_INTERVAL_S, start_at, duration)))
        results = suite._gather(calls, timeout=duration + 180)
        for result in results[:2]:
            if result["errors"]:
                raise RuntimeError(f"{result['errors']} records lost: {result['first_error']}")
        return sorted(results[0]["latencies_ms"]), (results[2]["latencies_ms"] if with_poller else [])

    def run(target: Target) -> dict[str, float]:
        from confluent_kafka.admin import NewTopic

        admin = suite._admin(target)
        prefix = f"scale-{uuid.uuid4().hex[:6]}"
        names = [f"{prefix}-{i}" for i in range(topics_count)]
        values: dict[str, float] = {}
        began = time.monotonic()
        with StallProbe(target.bootstrap) as probe:
            # Kafka's controller refuses an operation over 10,000 metadata records (a TopicRecord
            # plus one PartitionRecord per partition), and so does Odradek's: one request per group.
            group = max(1, CREATE_TOPICS_RECORDS // (per_topic + 1))
            for first in range(0, topics_count, group):
                futures = admin.create_topics([NewTopic(name, per_topic, 1) for name in names[first:first + group]],
                                              operation_timeout=300, request_timeout=600)
                for future in futures.values():
                    future.result(timeout=600)
            values["CreateTopics s"] = time.monotonic() - began
            deadline = time.monotonic() + 600
            while True:  # usable means every partition has a leader in the broker's metadata
                listed = admin.list_topics(timeout=120).topics
                ready = sum(1 for name in names if name in listed and listed[name].error is None
                            and len(listed[name].partitions) == per_topic
                            and all(p.leader >= 0 for p in listed[name].partitions.values()))
                if ready == topics_count:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"only {ready}/{topics_count} topics have leaders after 600 s")
                time.sleep(0.5)
            values["all leaders s"] = time.monotonic() - began
        values["longest ApiVersions wait ms, creating"] = probe.longest_ms
        values["RSS MiB"] = (target.rss_bytes() or 0) / (1 << 20)
        values["open files"] = float(target.open_files() or 0)

        with StallProbe(target.bootstrap) as probe:
            [meta] = suite._gather([(metadata_latencies, (
                target.bootstrap, METADATA_WARMUP_REQUESTS + METADATA_MEASURED_REQUESTS, 0.0, 0.0))], timeout=600)
        values["longest ApiVersions wait ms, full Metadata"] = probe.longest_ms
        measured = meta["latencies_ms"][METADATA_WARMUP_REQUESTS:]
        values["full Metadata ms"] = statistics.median(measured)
        values["full Metadata max ms"] = max(measured)
        values["full Metadata MiB"] = meta["bytes"] / (1 << 20)

        with StallProbe(target.bootstrap) as probe:
            [produced] = suite._gather([(produce_every_partition, (target.bootstrap, names, per_topic, 2))],
                                       timeout=900)
        values["longest ApiVersions wait ms, producing"] = probe.longest_ms
        if produced["errors"]:
            raise RuntimeError(f"produce to every partition: {produced['first_error']}")
        values["1 record to every partition, 1st pass s"] = produced["seconds"][0]
        values["1 record to every partition, 2nd pass s"] = produced["seconds"][1]
        values["RSS MiB after producing"] = (target.rss_bytes() or 0) / (1 << 20)
        values["open files after producing"] = float(target.open_files() or 0)

        with suite._topic(target, "scale-latency", 1) as topic:
            quiet, _ = latency_run(target, topic, with_poller=False)
        with suite._topic(target, "scale-latency-meta", 1) as topic:
            busy, polls = latency_run(target, topic, with_poller=True)
        values["e2e p99 ms, quiet topic"] = percentile(quiet, 0.99)
        values["e2e p99 ms, + full Metadata every 100 ms"] = percentile(busy, 0.99)
        values["full Metadata ms under that load"] = statistics.median(polls) if polls else 0.0
        try:  # best effort: the broker stops right after the scale rows anyway
            for future in admin.delete_topics(names, operation_timeout=300, request_timeout=600).values():
                future.result(timeout=600)
        except Exception as error:  # noqa: BLE001
            suite.log(f"  ({target.name}: could not delete the scale topics: {error})")
        return values

    metrics = [("CreateTopics s", False), ("all leaders s", False), ("longest ApiVersions wait ms, creating", False),
               ("RSS MiB", False), ("open files", False),
               ("full Metadata ms", False), ("full Metadata max ms", False), ("full Metadata MiB", False),
               ("longest ApiVersions wait ms, full Metadata", False),
               ("1 record to every partition, 1st pass s", False), ("1 record to every partition, 2nd pass s", False),
               ("longest ApiVersions wait ms, producing", False),
               ("RSS MiB after producing", False), ("open files after producing", False), ("e2e p99 ms, quiet topic", False),
               ("e2e p99 ms, + full Metadata every 100 ms", False), ("full Metadata ms under that load", False)]
    name = (f"scale: {total:,} partitions ({topics_count} topics × {per_topic}); latency at {rate:,} records/s "
            f"on another topic")
    # Kafka gets the suite's JVM warm-up but no pass of this case: it would hold twice the partitions (and
    # open files). The sub-steps warm themselves: unmeasured Metadata requests, a second produce pass,
    # the latency run's own warm-up.
    return Case(name, run, metrics, targets=("odradek", "kafka"), repeats=1, warmup=False)
