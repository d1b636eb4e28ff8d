"""The workload suite: which cases run against which servers, how often, and how results reduce.

Cases run one at a time; within a case the repetitions alternate between servers (Odradek, peer,
Kafka, sink, Odradek, peer, ...), so a noisy neighbour on the shared machine hurts every server
alike and the ratios stay meaningful. A server with `warmup` (Apache Kafka's JVM) gets an unmeasured
warm-up (`warmup_seconds` of produce and consume) before its first case and one unmeasured pass of
each case before its measured repetitions, so its JIT has compiled the path we measure. Each case reports metrics per repetition; rows keep every
sample and the table shows the median.
"""

from __future__ import annotations

import math
import os
import statistics
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field

from bench import workloads
from bench.workers import WorkerPool
from bench.targets import Target, rss_bytes

KIB = 1024
MB = 1_000_000
START_MARGIN_S = 0.5  # workers build their clients and connect before the common start
MAX_STRIKES = 2  # a server that fails this many cases in a row (hung, crashed) is left out


@dataclass(frozen=True)
class Settings:
    mode: str
    duration: float  # seconds of load per throughput run
    repeats: int
    producers: int  # producer (and consumer) processes for throughput runs
    partitions: int  # partitions of the throughput topics (and of every topic the sink knows)
    consume_records: int  # records pre-filled for the consume run (1 KiB each)
    latency_rate: int  # records/s for the end-to-end latency run
    latency_duration: float
    partition_counts: tuple[int, ...] = (1, 100, 1000)
    connection_counts: tuple[int, ...] = (1, 50, 500)
    loopback_duration: float = 1.0
    rss_growth_step: int = 0  # bytes per step of the RSS-flatness case (0: skip it)
    scaling_repeats: int | None = None  # the scaling cases are many: fewer repetitions keep runs short
    idle_seconds: float = 2.0  # servers' CPU use measured while idle, before the workloads
    warmup_seconds: float = 60.0  # a JVM's unmeasured warm-up before its first case (plus one pass per case)
    # each Odradek and Kafka process in a memory cgroup of this size, page cache filled first
    # (bench/memory_cgroup.py says why); 0: unconfined
    memory_limit_mib: int = 2048
    # --scale (bench/scale.py): topics × partitions each, and the quiet topic's latency run
    scale_topics: int = 50
    scale_partitions_per_topic: int = 200
    scale_latency_rate: int = 2000
    scale_latency_duration: float = 5.0


# Producer processes: one per two cores. Each librdkafka client is a Python loop plus C threads, and
# the broker needs the other core; on a 2-core machine a second producer only steals the broker's CPU.
PRODUCERS = max(1, min(4, (os.cpu_count() or 2) // 2))

QUICK = Settings("quick", duration=1.0, repeats=1, producers=PRODUCERS, partitions=2, consume_records=60_000,
                 latency_rate=5000, latency_duration=3.0, loopback_duration=0.5, idle_seconds=1.0,
                 warmup_seconds=30.0, memory_limit_mib=0)
FULL = Settings("full", duration=3.0, repeats=3, producers=PRODUCERS, partitions=2, consume_records=300_000,
                latency_rate=5000, latency_duration=6.0, scaling_repeats=2, rss_growth_step=1 << 30,
                scale_latency_duration=10.0)


@dataclass
class Row:
    """One line of the table: a metric of a case, with every sample per server."""

    case: str
    metric: str
    higher_is_better: bool
    samples: dict[str, list[float]] = field(default_factory=dict)

    def median(self, target: str) -> float | None:
        values = self.samples.get(target)
        return statistics.median(values) if values else None

    def ratio(self, numerator: str, denominator: str) -> float | None:
        top, bottom = self.median(numerator), self.median(denominator)
        if top is None or not bottom:
            return None
        return top / bottom


@dataclass
class Case:
    """A named workload; `run(target)` returns {metric: value} for one repetition."""

    name: str
    run: Callable[[Target], dict[str, float]]
    metrics: list[tuple[str, bool]]  # (metric, higher_is_better), in table order
    targets: tuple[str, ...] = ("odradek", "peer", "kafka", "sink")
    repeats: int | None = None  # None: the suite's setting
    prepare: Callable[[Target], None] | None = None  # once per server, not timed
    finish: Callable[[Target], None] | None = None
    warmup: bool = True  # servers that want it (Kafka's JVM) run it once unmeasured first (after the
    # suite's JVM warm-up, which every case gets)


class Suite:
    def __init__(self, settings: Settings, targets: list[Target], log: Callable[[str], None] = print,
                 profiler=None):
        self.settings = settings
        self.targets = {target.name: target for target in targets}
        self.log = log
        self.profiler = profiler
        self.rows: list[Row] = []
        self.errors: list[str] = []
        self.rss_timeline: list[dict] = []
        self._admins: dict[str, object] = {}
        self._pool = None
        self._strikes: dict[str, int] = {}  # consecutive failed cases per server
        self._warmed: set[str] = set()

    # -- plumbing ---------------------------------------------------------------------------------

    def __enter__(self) -> "Suite":
        return self

    def __exit__(self, *exc) -> None:
        self._admins.clear()  # destroys the admin clients before anyone stops the servers
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    @property
    def pool(self) -> WorkerPool:
        if self._pool is None:
            self._pool = WorkerPool(max(self.settings.producers, 2) + 1)
        return self._pool

    def _gather(self, calls: list[tuple[Callable, tuple]], timeout: float) -> list[dict]:
        return self.pool.run(calls, timeout)

    def forget(self, name: str) -> None:
        """Before a server stops for good: its admin client goes first (no reconnect noise)."""
        self._admins.pop(name, None)
        self.targets.pop(name, None)

    def _admin(self, target: Target):
        if target.name not in self._admins:
            from confluent_kafka.admin import AdminClient

            # log_level 3: errors only, so servers stopping at the end do not print disconnect notices
            self._admins[target.name] = AdminClient({"bootstrap.servers": target.bootstrap, "log_level": 3})
        return self._admins[target.name]

    def create_topic(self, target: Target, prefix: str, partitions: int) -> str:
        """A fresh topic (the sink knows every name, with its fixed partition count)."""
        name = f"bench-{prefix}-{uuid.uuid4().hex[:8]}"
        if not target.can_create_topics:
            return name
        from confluent_kafka.admin import NewTopic

        admin = self._admin(target)
        replicas = target.replication_factor
        future = admin.create_topics([NewTopic(name, partitions, replicas)], operation_timeout=30)[name]
        future.result(timeout=60)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # wait until every partition has a leader and a full ISR
            topic = admin.list_topics(name, timeout=10).topics.get(name)
            if topic and topic.error is None and len(topic.partitions) == partitions and all(
                    p.leader >= 0 and len(p.isrs) >= replicas for p in topic.partitions.values()):
                return name
            time.sleep(0.1)
        raise RuntimeError(f"topic {name} has no leaders (or not all replicas in sync) after 30s")

    def prefilled_topic(self, target: Target, prefix: str, size: int, records: int
                        ) -> tuple[str, dict[int, int]]:
        """A fresh topic filled with `records` batched `size`-byte records (acks=1), spread evenly
        over the partitions; returns it with the records each partition got."""
        partitions = self.settings.partitions
        topic = self.create_topic(target, prefix, partitions)
        config = {**BATCHED, "acks": "1"}
        calls = [(workloads.fill, (target.bootstrap, topic, p, size, records // partitions, config))
                 for p in range(partitions)]
        results = self._gather(calls, timeout=300)
        bad = [r for r in results if r["errors"]]
        if bad:
            raise RuntimeError(f"pre-fill failed: {bad[0]['first_error']}")
        return topic, {r["partition"]: r["records"] for r in results}

    def delete_topic(self, target: Target, name: str) -> None:
        """Best effort: keeps the in-memory peer's RSS and Odradek's disk use from piling up."""
        if not target.can_create_topics:
            return
        try:
            self._admin(target).delete_topics([name], operation_timeout=30)[name].result(timeout=60)
        except Exception as error:  # noqa: BLE001 - cleanup must not fail the run
            self.log(f"  ({target.name}: could not delete {name}: {error})")

    @contextmanager
    def _topic(self, target: Target, prefix: str, partitions: int) -> Iterator[str]:
        name = self.create_topic(target, prefix, partitions)
        try:
            yield name
        finally:
            self.delete_topic(target, name)

    # -- running ----------------------------------------------------------------------------------

    def run(self, cases: list[Case]) -> list[Row]:
        for case in cases:
            self.run_case(case)
        return self.rows

    def run_case(self, case: Case) -> None:
        rows = {metric: Row(case.name, metric, better) for metric, better in case.metrics}
        self.rows.extend(rows.values())
        names = list(case.targets)
        for odradek, candidate in (("odradek", "candidate"), ("odradek-rf3", "candidate-rf3")):
            if odradek in names:  # an A/B candidate runs wherever Odradek runs, right after it
                names.insert(names.index(odradek) + 1, candidate)
        active = [self.targets[name] for name in names
                  if name in self.targets and self._strikes.get(name, 0) < MAX_STRIKES]
        failed: set[str] = set()
        self.log(f"{case.name}")
        case_began = time.monotonic()
        ready = []
        for target in active:
            try:
                if not target.alive():
                    raise RuntimeError("server process has exited")
                if case.prepare:
                    case.prepare(target)
                ready.append(target)
            except Exception as error:  # noqa: BLE001 - one server failing must not stop the run
                self._record_error(case, target, error)
                failed.add(target.name)
        for target in list(ready):  # a JVM compiles its hot paths first: that is not what we measure
            if getattr(target, "warmup", False):
                try:
                    if target.name not in self._warmed:
                        self._warm_up(target)
                    if case.warmup:
                        began = time.monotonic()
                        case.run(target)
                        self.log(f"  {target.name:9} warm-up pass: {time.monotonic() - began:.1f} s (discarded)")
                except Exception as error:  # noqa: BLE001
                    self._record_error(case, target, error)
                    failed.add(target.name)
                    ready.remove(target)
        for repeat in range(case.repeats or self.settings.repeats):
            for target in list(ready):
                if not target.alive():
                    self._record_error(case, target, RuntimeError("server process has exited"))
                    failed.add(target.name)
                    ready.remove(target)
                    continue
                profile = self.profiler.record(target, case.name) if self.profiler else nullcontext()
                try:
                    for prepare in getattr(target, "before_run", ()):  # a memory cgroup's top-up
                        prepare()
                    with profile:
                        values = case.run(target)
                except Exception as error:  # noqa: BLE001
                    self._record_error(case, target, error)
                    failed.add(target.name)
                    ready.remove(target)
                    continue
                column = getattr(target, "column", target.name)  # a durable twin fills its kind's column
                for metric, value in values.items():
                    rows[metric].samples.setdefault(column, []).append(value)
                self.log(f"  {target.name:9} #{repeat + 1}: " + ", ".join(
                    f"{metric} {_short(value)}" for metric, value in values.items()))
        for target in ready:
            if case.finish:
                try:
                    case.finish(target)
                except Exception as error:  # noqa: BLE001
                    self._record_error(case, target, error)
        self.log(f"  ({time.monotonic() - case_began:.1f} s)")
        for target in active:
            self._strikes[target.name] = self._strikes.get(target.name, 0) + 1 if target.name in failed else 0
            if self._strikes[target.name] == MAX_STRIKES:
                self.log(f"  {target.name} failed {MAX_STRIKES} cases in a row: left out from now on")
        for target in active:
            self.rss_timeline.append({"after": case.name, "target": target.name, "rss_bytes": target.rss_bytes()})

    def _record_error(self, case: Case, target: Target, error: Exception) -> None:
        reason = f"{type(error).__name__}: {error}".strip().rstrip(":")
        self.errors.append(f"{case.name} / {target.name}: {reason}")
        self.log(f"  {target.name:9} FAILED: {reason}")

    def _warm_up(self, target: Target) -> None:
        """Before a JVM's first measured case: `warmup_seconds` of unbatched and batched produce and
        a consume, unmeasured. Its JIT needs tens of thousands of requests through a path before it
        runs at full speed (a 1 s pass left Kafka's unbatched produce at ~7× its warm CPU/request)."""
        self._warmed.add(target.name)
        if self.settings.warmup_seconds <= 0:
            return
        began = time.monotonic()
        rounds = 0
        with self._topic(target, "warmup", self.settings.partitions) as topic:
            while time.monotonic() - began < self.settings.warmup_seconds:
                self.produce_run(target, topic, 100, UNBATCHED)
                self.produce_run(target, topic, KIB, {**BATCHED, "acks": "all"})
                [filled] = self._gather([(workloads.fill, (target.bootstrap, topic, 0, KIB, 20_000,
                                                           {**BATCHED, "acks": "1"}))], timeout=300)
                self._gather([(workloads.consume, (target.bootstrap, topic, {0: filled["records"]}, KIB, 0.0,
                                                   120, CONSUME_CONFIG))], timeout=200)
                rounds += 1
        self.log(f"  {target.name:9} JVM warm-up: {rounds} round(s) of unbatched + batched produce and "
                 f"consume, {time.monotonic() - began:.0f} s (discarded)")

    # -- workload building blocks -----------------------------------------------------------------

    def produce_run(self, target: Target, topic: str, record_size: int, config: dict,
                    producers: int | None = None, bootstrap: str | None = None) -> dict[str, float]:
        """`bootstrap`: another listener of the target (its SSL one) instead of its PLAINTEXT one."""
        producers = producers or self.settings.producers
        start_at = time.time() + START_MARGIN_S
        args = (bootstrap or target.bootstrap, topic, record_size, self.settings.duration, config, start_at)
        cpu_before = target.cpu_seconds()
        results = self._gather([(workloads.produce, args)] * producers, timeout=self.settings.duration + 120)
        return _with_cpu(_throughput(results), target, cpu_before, results)


def _throughput(results: list[dict]) -> dict[str, float]:
    errors = sum(r["errors"] for r in results)
    records = sum(r["records"] for r in results)
    if errors or not records:
        first = next((r["first_error"] for r in results if r.get("first_error")),
                     "not acknowledged before the flush/read timeout")
        raise RuntimeError(f"{errors} records failed ({records} acknowledged): {first}")
    span = max(r["end"] for r in results) - min(r["start"] for r in results)
    return {"records/s": records / span, "MB/s": sum(r["bytes"] for r in results) / span / MB}


def _with_cpu(values: dict[str, float], target: Target, cpu_before: float | None,
              results: list[dict]) -> dict[str, float]:
    """Adds the server's CPU time per record over the run: steadier than records/s on a busy machine.

    It covers the whole call, the short wait for the common start included (an idle broker should
    burn nothing then).
    """
    cpu_after = target.cpu_seconds()
    records = sum(r["records"] for r in results)
    if cpu_before is not None and cpu_after is not None and records:
        values[CPU_METRIC] = (cpu_after - cpu_before) / records * 1e6
    return values


def _short(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def percentile(sorted_values: list[float], fraction: float) -> float:
    """Nearest-rank percentile of an already sorted list."""
    if not sorted_values:
        raise ValueError("no samples")
    rank = math.ceil(fraction * len(sorted_values) - 1e-9)  # 1-based; the epsilon absorbs float error
    return sorted_values[min(max(rank, 1), len(sorted_values)) - 1]


# -- the cases ------------------------------------------------------------------------------------

BATCHED = {"linger.ms": 5, "batch.size": 1 << 20}
# The consume runs: a broker that outpaces this Python loop fills librdkafka's 64 MiB fetch queue,
# after which the client pauses fetching for fetch.queue.backoff.ms (1 s by default) and the run
# measures that timer, not the broker (a 300,000-record read took 1.2 s instead of 0.25 s).
CONSUME_CONFIG = {"fetch.wait.max.ms": 100, "fetch.queue.backoff.ms": 10}
# One record per request; a small local queue keeps the backlog (and so the final flush) short.
UNBATCHED = {"linger.ms": 0, "batch.num.messages": 1, "acks": "1", "queue.buffering.max.messages": 2_000}
CPU_METRIC = "server CPU µs/record"
DURABLE_NOTE = "Odradek log.flush.before.acknowledge=true, Kafka log.flush.interval.messages=1"
THROUGHPUT = [("records/s", True), ("MB/s", True), (CPU_METRIC, False)]


def build_cases(suite: Suite) -> list[Case]:
    s = suite.settings
    cases: list[Case] = []

    def produce_case(name: str, slug: str, size: int, config: dict, partitions: int | None = None,
                     targets=("odradek", "peer", "kafka", "sink"), with_rss: bool = False) -> Case:
        def run(target: Target) -> dict[str, float]:
            with suite._topic(target, slug, partitions or s.partitions) as topic:
                values = suite.produce_run(target, topic, size, config)
            if with_rss:
                values["RSS MiB"] = (target.rss_bytes() or 0) / (1 << 20)
            return values

        metrics = THROUGHPUT + ([("RSS MiB", False)] if with_rss else [])
        return Case(name, run, metrics, targets=targets, repeats=s.scaling_repeats if with_rss else None)

    for size, label in ((100, "100 B"), (KIB, "1 KiB")):
        for acks in ("1", "all"):
            cases.append(produce_case(f"produce batched {label} acks={acks}", f"p{size}-{acks}", size,
                                      {**BATCHED, "acks": acks}))
    cases.append(produce_case("produce unbatched 100 B acks=1", "unbatched", 100, UNBATCHED))
    cases.append(produce_case("produce unbatched 100 B acks=all", "unbatched-all", 100,
                              {**UNBATCHED, "acks": "all"}))
    # "Acknowledged means on disk" on both: the durable twins fill the Odradek and Kafka columns.
    durable = ("odradek-durable", "kafka-durable")
    cases.append(produce_case(f"durable: produce batched 100 B acks=all ({DURABLE_NOTE})", "durable-b", 100,
                              {**BATCHED, "acks": "all"}, targets=durable))
    cases.append(produce_case(f"durable: produce unbatched 100 B acks=all ({DURABLE_NOTE})", "durable-u", 100,
                              {**UNBATCHED, "acks": "all"}, targets=durable))
    cases.append(_consume_case(suite))
    cases.append(_latency_case(suite))
    for count in s.partition_counts:
        cases.append(produce_case(f"scaling: {count} partition{'s' * (count > 1)} (100 B acks=1)",
                                  f"parts{count}", 100, {**BATCHED, "acks": "1"}, partitions=count,
                                  targets=("odradek", "peer", "kafka"), with_rss=True))
    for count in s.connection_counts:
        cases.append(_connections_case(suite, count))
    if s.rss_growth_step:
        cases.append(_rss_growth_case(suite))
    return cases


def _consume_case(suite: Suite, targets=("odradek", "peer", "kafka"), prefix: str = "") -> Case:
    s = suite.settings
    size = KIB
    filled: dict[str, tuple[str, dict[int, int]]] = {}

    def prepare(target: Target) -> None:
        filled[target.name] = suite.prefilled_topic(target, "consume", size, s.consume_records)

    def run(target: Target) -> dict[str, float]:
        topic, expected = filled[target.name]
        consumers = max(1, min(s.producers, len(expected)))
        shares = [dict(list(expected.items())[i::consumers]) for i in range(consumers)]
        start_at = time.time() + START_MARGIN_S
        config = CONSUME_CONFIG
        calls = [(workloads.consume, (target.bootstrap, topic, share, size, start_at, 120, config))
                 for share in shares]
        cpu_before = target.cpu_seconds()
        results = suite._gather(calls, timeout=200)
        return _with_cpu(_throughput(results), target, cpu_before, results)

    def finish(target: Target) -> None:
        suite.delete_topic(target, filled.pop(target.name)[0])

    return Case(f"{prefix}consume from earliest, 1 KiB ({s.consume_records:,} records)", run, THROUGHPUT,
                targets=targets, prepare=prepare, finish=finish)


def _latency_case(suite: Suite, targets=("odradek", "peer", "kafka"), prefix: str = "") -> Case:
    s = suite.settings
    size = 100

    def run(target: Target) -> dict[str, float]:
        with suite._topic(target, "latency", 1) as topic:
            start_at = time.time() + 1.5
            total = int(s.latency_rate * s.latency_duration)
            producer_config = {"linger.ms": 1, "acks": "all"}  # 1 ms, as OpenMessaging Benchmark runs Kafka
            consumer_config = {"fetch.wait.max.ms": 500, "fetch.min.bytes": 1}
            calls = [
                (workloads.latency_consumer,
                 (target.bootstrap, topic, [0], total, consumer_config, start_at, s.latency_duration + 30)),
                (workloads.latency_producer,
                 (target.bootstrap, topic, size, s.latency_rate, s.latency_duration, producer_config, start_at)),
            ]
            consumed, produced = suite._gather(calls, timeout=s.latency_duration + 90)
        for result in (produced, consumed):
            if result["errors"]:
                raise RuntimeError(f"{result['errors']} records lost: {result['first_error']}")
        latencies = sorted(consumed["latencies_ms"])
        return {"p50 ms": percentile(latencies, 0.50), "p99 ms": percentile(latencies, 0.99),
                "p99.9 ms": percentile(latencies, 0.999)}

    return Case(f"{prefix}end-to-end latency at {s.latency_rate:,} records/s (100 B, acks=all, linger.ms=1)", run,
                [("p50 ms", False), ("p99 ms", False), ("p99.9 ms", False)], targets=targets)


def _connections_case(suite: Suite, count: int) -> Case:
    """One producer plus `count - 1` idle connections that finished an ApiVersions handshake."""
    from bench.idle import IdleConnections

    def run(target: Target) -> dict[str, float]:
        host, port = target.bootstrap.rsplit(":", 1)
        with IdleConnections(host, int(port), count - 1), \
                suite._topic(target, f"conns{count}", suite.settings.partitions) as topic:
            values = suite.produce_run(target, topic, 100, {**BATCHED, "acks": "1"}, producers=1)
            values["RSS MiB"] = (target.rss_bytes() or 0) / (1 << 20)
        return values

    name = f"scaling: {count} connection{'s' * (count > 1)} (1 producer{f' + {count - 1} idle' if count > 1 else ''})"
    return Case(name, run, THROUGHPUT + [("RSS MiB", False)], targets=("odradek", "peer", "kafka"),
                repeats=suite.settings.scaling_repeats)


def _rss_growth_case(suite: Suite) -> Case:
    """Odradek's anonymous RSS after writing one step (1 GiB) and after two: a disk log should stay
    flat. (Not VmRSS: mapped index pages count there, and a memory cgroup reclaims them.)

    Only Odradek runs it: the peer keeps every byte in memory, so its RSS grows by design.
    """
    s = suite.settings
    size = KIB
    per_partition = s.rss_growth_step // size // s.partitions
    first, second = _size_label(s.rss_growth_step), _size_label(2 * s.rss_growth_step)

    def run(target: Target) -> dict[str, float]:
        config = {**BATCHED, "acks": "1"}
        rss = []
        with suite._topic(target, "rss", s.partitions) as topic:
            for _ in range(2):
                calls = [(workloads.fill, (target.bootstrap, topic, p, size, per_partition, config))
                         for p in range(s.partitions)]
                results = suite._gather(calls, timeout=600)
                bad = [r for r in results if r["errors"]]
                if bad:
                    raise RuntimeError(f"write failed: {bad[0]['first_error']}")
                rss.append((rss_bytes(target.pid, "RssAnon") or 0) / (1 << 20))
        return {f"anonymous RSS MiB after {first}": rss[0], f"anonymous RSS MiB after {second}": rss[1],
                "growth %": 100.0 * (rss[1] - rss[0]) / rss[0]}

    return Case(f"RSS while writing {second} (1 KiB batched, acks=1)", run,
                [(f"anonymous RSS MiB after {first}", False), (f"anonymous RSS MiB after {second}", False),
                 ("growth %", False)],
                targets=("odradek",), repeats=1)


def _size_label(nbytes: int) -> str:
    return f"{nbytes / (1 << 30):g} GiB" if nbytes % (1 << 30) == 0 else f"{nbytes / (1 << 20):.0f} MiB"
