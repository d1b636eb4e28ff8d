"""Prometheus metrics with the names a Kafka JMX-exporter setup produces.

One :class:`BrokerMetrics` per broker, each with its own ``CollectorRegistry`` (never the global
default), so several in-process brokers in one test run never collide.

Two kinds of metrics, chosen so the hot path pays (almost) nothing:

* **Counters and latency histograms** the broker records as things happen. The recording methods
  are a dict lookup plus an integer add (no locks, no prometheus-client label lookups, never any
  per-record work): call them from the event-loop thread.
  ``request_received`` / ``request_done``, ``observe_request`` (``observe_answered``: the
  common case, folded into the histograms in bulk), ``connection_opened`` /
  ``connection_closed``, ``record_produce``, ``record_fetch``, ``record_failed_produce``,
  ``record_failed_fetch``, ``isr_shrink`` / ``isr_expand``. ``observe_flush``,
  ``observe_election`` and ``set_recovery_duration`` are thread-safe (storage flushes in worker
  threads).
* **Gauges read lazily at scrape time** from the broker's components through three source
  callables given to :meth:`BrokerMetrics.set_sources`: partitions (log size, log end offset,
  leadership, ISR), consumer groups (members, committed offsets -> lag) and the controller. Each
  returns snapshot dataclasses defined here, so this module depends on no broker internals.

``render()`` returns the Prometheus text exposition; ``broker/health.py`` serves it over HTTP.
Label cardinality is bounded: request metrics are labelled by API name (and version for the rate),
never by client id; topic and group series are capped (see ``max_topic_series`` and
``max_lag_series``); deleted topics are dropped with ``forget_topic``.

Durations are passed in seconds (``time.monotonic()`` differences) and exported in
milliseconds, the unit of Kafka's own time metrics.
``broker_sources(broker)`` (``broker.metrics_sources``) builds the three sources from a running
``broker.server.Broker``; the scrape-time collection is ``broker.metrics_collector``.
"""

from __future__ import annotations

import bisect
import importlib.metadata
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, PlatformCollector, ProcessCollector
from prometheus_client.exposition import generate_latest
from prometheus_client.metrics_core import Metric

from broker.metrics_sources import broker_sources

#: Upper bounds in milliseconds for request and flush latency histograms.
LATENCY_BUCKETS_MS = (0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)

#: Topic label value used once ``max_topic_series`` distinct topics have been seen.
OTHER_TOPICS = "__other__"


# --------------------------------------------------------------------------- snapshots


@dataclass(frozen=True, slots=True)
class PartitionSnapshot:
    """One partition replica hosted on this broker, as the partition source reports it."""

    topic: str
    partition: int
    is_leader: bool = True
    size_bytes: int = 0
    log_start_offset: int = 0
    log_end_offset: int = 0
    #: The offset consumers see as "latest" (the high watermark); lag is measured against it.
    high_watermark: int | None = None
    num_segments: int = 0
    replicas: int = 1
    isr: int = 1
    #: True when the partition has no live leader anywhere in the cluster.
    offline: bool = False


@dataclass(frozen=True, slots=True)
class GroupSnapshot:
    """One consumer group known to this broker's group coordinator."""

    group_id: str
    state: str = "Empty"  # Kafka's names: Empty, Stable, PreparingRebalance, CompletingRebalance, Dead
    members: int = 0
    #: (topic, partition) -> committed offset
    committed: Mapping[tuple[str, int], int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ControllerSnapshot:
    """The metadata quorum as this node sees it."""

    is_active: bool = False
    leader_id: int | None = None
    epoch: int = 0
    high_watermark: int = 0
    last_committed_offset: int = 0
    last_applied_offset: int = 0
    topic_count: int = 0
    partition_count: int = 0
    broker_count: int = 0
    fenced_broker_count: int = 0
    offline_partition_count: int = 0      # cluster-wide, on the active controller (else 0)
    replica_lag: dict = field(default_factory=dict)   # leader only: node id -> offsets behind


PartitionSource = Callable[[], Iterable[PartitionSnapshot]]
GroupSource = Callable[[], Iterable[GroupSnapshot]]
ControllerSource = Callable[[], ControllerSnapshot | None]


# --------------------------------------------------------------------------- primitives


class _Histogram:
    """A fixed-bucket histogram: one bisect and two adds per observation."""

    __slots__ = ("counts", "total", "count")

    def __init__(self) -> None:
        self.counts = [0] * (len(LATENCY_BUCKETS_MS) + 1)
        self.total = 0.0
        self.count = 0

    def observe(self, value_ms: float) -> None:
        self.counts[bisect.bisect_left(LATENCY_BUCKETS_MS, value_ms)] += 1
        self.total += value_ms
        self.count += 1

    def observe_zero(self) -> None:
        self.counts[0] += 1   # every bucket bound is positive: 0 falls in the first
        self.count += 1

    def add_to(self, metric: Metric, labels: dict[str, str]) -> None:
        running = 0
        for bound, n in zip(LATENCY_BUCKETS_MS, self.counts):
            running += n
            metric.add_sample(metric.name + "_bucket", {**labels, "le": _fmt(bound)}, running)
        metric.add_sample(metric.name + "_bucket", {**labels, "le": "+Inf"}, self.count)
        metric.add_sample(metric.name + "_count", labels, self.count)
        metric.add_sample(metric.name + "_sum", labels, self.total)


def _fmt(bound: float) -> str:
    return repr(float(bound))


class _TopicStats:
    """Per-topic BrokerTopicMetrics counters (and the all-topics total, under key None)."""

    __slots__ = ("messages_in", "bytes_in", "bytes_out", "produce_requests", "fetch_requests",
                 "failed_produce", "failed_fetch")

    def __init__(self) -> None:
        self.messages_in = self.bytes_in = self.bytes_out = 0
        self.produce_requests = self.fetch_requests = 0
        self.failed_produce = self.failed_fetch = 0


class _RequestStats:
    """Per-API request metrics: latency phases, plus per-version counts and per-error counts."""

    __slots__ = ("by_version", "errors", "total", "queue", "local", "remote", "send", "pending")

    def __init__(self) -> None:
        self.by_version: dict[int, int] = {}
        self.errors: dict[int, int] = {}
        self.total, self.queue, self.local = _Histogram(), _Histogram(), _Histogram()
        self.remote, self.send = _Histogram(), _Histogram()
        # (version, queue s, local s) of answers not yet in the histograms (observe_answered)
        self.pending: list[tuple[int, float, float]] = []

    def fold(self) -> None:
        """Move the pending answers into the counts: one tight loop for many requests instead
        of five histogram calls per request."""
        pending, self.pending = self.pending, []
        if not pending:
            return
        by_version = self.by_version
        buckets, place = LATENCY_BUCKETS_MS, bisect.bisect_left
        queue, local, total = self.queue, self.local, self.total
        queue_counts, local_counts, total_counts = queue.counts, local.counts, total.counts
        queue_sum = local_sum = total_sum = 0.0
        for version, queue_s, local_s in pending:
            by_version[version] = by_version.get(version, 0) + 1
            queue_ms, local_ms = queue_s * 1000.0, local_s * 1000.0
            total_ms = (queue_s + local_s) * 1000.0
            queue_counts[place(buckets, queue_ms)] += 1
            local_counts[place(buckets, local_ms)] += 1
            total_counts[place(buckets, total_ms)] += 1
            queue_sum += queue_ms
            local_sum += local_ms
            total_sum += total_ms
        n = len(pending)
        queue.total += queue_sum
        local.total += local_sum
        total.total += total_sum
        for histogram in (queue, local, total):
            histogram.count += n
        for histogram in (self.remote, self.send):   # nobody waited on, not timed while sent
            histogram.counts[0] += n
            histogram.count += n


#: BrokerTopicMetrics name suffix -> (_TopicStats attribute, help text)
_TOPIC_COUNTERS = {
    "messagesin": ("messages_in", "Messages appended to the log (record counts from batch headers)."),
    "bytesin": ("bytes_in", "Record batch bytes received from producers."),
    "bytesout": ("bytes_out", "Record batch bytes sent to consumers and followers."),
    "totalproducerequests": ("produce_requests", "Partition appends requested by Produce (one per partition, as Kafka counts)."),
    "totalfetchrequests": ("fetch_requests", "Partition reads requested by Fetch (one per partition, as Kafka counts)."),
    "failedproducerequests": ("failed_produce", "Produce partition results that carried an error."),
    "failedfetchrequests": ("failed_fetch", "Fetch partition results that carried an error."),
}

#: Request latency phases, as Kafka's RequestMetrics names them.
_PHASES = {
    "totaltimems": ("total", "Time from reading the request to having sent the response (ms)."),
    "requestqueuetimems": ("queue", "Time the request waited before a handler started on it (ms)."),
    "localtimems": ("local", "Time the handler spent on this broker (ms)."),
    "remotetimems": ("remote", "Time waiting on others: long-poll fetch, acks=all replication (ms)."),
    "responsesendtimems": ("send", "Time writing the response to the socket (ms)."),
}


def _api_names() -> dict[int, str]:
    """Kafka's request names by api key, taken from the codec when it is importable."""
    try:
        import protocol
        specs = protocol.API_SPECS
    except Exception:  # the codec is optional for metrics: fall back to numbers
        return {}
    names = {}
    for key, spec in specs.items():
        name = spec.get("name") if isinstance(spec, Mapping) else getattr(spec, "name", None)
        if name:
            names[int(key)] = str(name).removesuffix("Request")
    return names


# Source values pinned for the render running in this thread (BrokerMetrics.render(sources)).
_PINNED = threading.local()

#: Per body class: (has an error_code slot, the slots holding arrays of structs).
_PLANS: dict[type, tuple[bool, tuple[str, ...]]] = {}
_SCALARS = (int, float, str, bytes, bytearray, memoryview, bool, type(None))


def _plan(obj) -> tuple[bool, tuple[str, ...]]:
    cls = type(obj)
    plan = _PLANS.get(cls)
    if plan is None:
        slots = getattr(cls, "__slots__", ())
        plan = ("error_code" in slots,
                tuple(name for name in slots if isinstance(getattr(obj, name, None), list)))
        _PLANS[cls] = plan
    return plan


def response_error_counts(body) -> dict[int, int]:
    """{error code: occurrences} over the ``error_code`` fields of a response body and of the
    structs in its arrays (where Kafka puts per-topic/per-partition errors)."""
    counts: dict[int, int] = {}
    stack = [body]
    plans = _PLANS   # looked up inline: this runs once per answered request
    while stack:
        obj = stack.pop()
        has_error, arrays = plans.get(type(obj)) or _plan(obj)
        if has_error:
            code = obj.error_code
            if code:
                counts[code] = counts.get(code, 0) + 1
        for name in arrays:
            items = getattr(obj, name)
            if items and not isinstance(items[0], _SCALARS):
                first_has_error, first_arrays = plans.get(type(items[0])) or _plan(items[0])
                if first_has_error or first_arrays:  # e.g. AbortedTransaction: nothing to see
                    stack.extend(items)
    return counts


def _installed_version() -> str:
    try:
        return importlib.metadata.version("odradek")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _error_name(code: int) -> str:
    try:
        import protocol
        return protocol.ErrorCode(code).name
    except Exception:
        return str(code)


# --------------------------------------------------------------------------- the registry


class BrokerMetrics:
    """All of one broker's metrics and its private Prometheus registry."""

    def __init__(self, node_id: int = 0, *, version: str | None = None,
                 max_topic_series: int = 1000,
                 max_lag_series: int = 10000, process_metrics: bool = True) -> None:
        self.node_id = node_id
        self.version = version if version is not None else _installed_version()
        self.max_topic_series = max_topic_series
        self.max_lag_series = max_lag_series
        self.registry = CollectorRegistry(auto_describe=False)

        self._topics: dict[str | None, _TopicStats] = {None: _TopicStats()}
        self._requests: dict[int, _RequestStats] = {}
        self._api_names = _api_names()
        self.in_flight = 0
        self._connections: dict[str, list[int]] = {}  # listener -> [open, created, closed]
        self.isr_shrinks = 0
        self.isr_expands = 0
        self.loop_lag_seconds = 0.0

        self._lock = threading.Lock()  # guards only the thread-safe (non hot path) recorders
        self._flush = _Histogram()
        self._elections = _Histogram()
        self.recovery_duration_ms: float | None = None
        self.recovered_segments = 0

        self._partition_source: PartitionSource | None = None
        self._group_source: GroupSource | None = None
        self._controller_source: ControllerSource | None = None
        self._started = time.time()

        from broker.metrics_collector import Collector
        self.registry.register(Collector(self))
        if process_metrics:
            ProcessCollector(registry=self.registry)
            PlatformCollector(registry=self.registry)

    # ---------------------------------------------------------------- wiring

    def set_sources(self, *, partitions: PartitionSource | None = None,
                    groups: GroupSource | None = None,
                    controller: ControllerSource | None = None) -> None:
        """Give the callables read at scrape time; each may be left out (series are omitted)."""
        if partitions is not None:
            self._partition_source = partitions
        if groups is not None:
            self._group_source = groups
        if controller is not None:
            self._controller_source = controller

    def render(self, sources: dict | None = None) -> bytes:
        """The Prometheus text exposition of everything in this broker's registry; with `sources`
        (from `read_sources`), their values instead of calling them: rendering can then run in a
        worker thread while the sources, some of which read trio state, were read on the loop."""
        if sources is None:
            return generate_latest(self.registry)
        _PINNED.sources = sources
        try:
            return generate_latest(self.registry)
        finally:
            _PINNED.sources = None

    def read_sources(self, names=("controller",)) -> dict:
        """The values of the sources `names` now (the controller's reads trio state: on the loop),
        for render(); the others (partitions: thousands of plain reads) are called while rendering."""
        values = {}
        for name in names:
            source = getattr(self, f"_{name}_source")
            if source is None:
                continue
            try:
                values[name] = (source(),)
            except Exception:   # as at scrape time: a failing source yields no series
                values[name] = (None,)
        return values

    def source(self, name: str):
        """The scrape-time source `name` ("partition", "group", "controller"), or one returning
        the value pinned for this render."""
        pinned = getattr(_PINNED, "sources", None)
        if pinned is None or name not in pinned:
            return getattr(self, f"_{name}_source")
        value = pinned[name]
        return lambda: value[0]

    # ---------------------------------------------------------------- hot path: requests

    def request_received(self) -> None:
        self.in_flight += 1

    def request_done(self) -> None:
        self.in_flight -= 1

    def observe_request(self, api_key: int, api_version: int, *, queue_s: float = 0.0,
                        local_s: float = 0.0, remote_s: float = 0.0, send_s: float = 0.0,
                        error_code: int = 0) -> None:
        """Record one answered request (or one acks=0 produce). Times in seconds: queue =
        received until a handler started, local = the handler, remote = waiting on others
        (long poll, replication), send = writing the response."""
        stats = self._requests.get(api_key)
        if stats is None:
            stats = self._requests[api_key] = _RequestStats()
        stats.by_version[api_version] = stats.by_version.get(api_version, 0) + 1
        if error_code:
            stats.errors[error_code] = stats.errors.get(error_code, 0) + 1
        stats.queue.observe(queue_s * 1000.0)
        stats.local.observe(local_s * 1000.0)
        # Most requests wait on nobody and are not timed while sent: a zero skips the bisect.
        for histogram, seconds in ((stats.remote, remote_s), (stats.send, send_s)):
            if seconds:
                histogram.observe(seconds * 1000.0)
            else:
                histogram.observe_zero()
        stats.total.observe((queue_s + local_s + remote_s + send_s) * 1000.0)

    def observe_answered(self, api_key: int, api_version: int, queue_s: float,
                         local_s: float) -> None:
        """observe_request() of the common answer (no remote wait, no send time, its errors
        counted apart): kept as a tuple, folded into the histograms every 256 answers and
        before a scrape reads them."""
        stats = self._requests.get(api_key)
        if stats is None:
            stats = self._requests[api_key] = _RequestStats()
        pending = stats.pending
        pending.append((api_version, queue_s, local_s))
        if len(pending) >= 256:
            stats.fold()

    def request_stats(self) -> list[tuple[int, "_RequestStats"]]:
        """(api key, stats) by api key, every pending answer folded in (for the scrape)."""
        for stats in self._requests.values():
            stats.fold()
        return sorted(self._requests.items())

    def count_response_errors(self, api_key: int, body) -> int:
        """Count every non-zero ``error_code`` in a response body, as Kafka's ErrorsPerSec does
        (walks the response's structs and arrays: work per partition, never per record).
        Returns the top-level error code, or the first nested one (0 if none), for logs."""
        counts = response_error_counts(body)
        if counts:
            stats = self._requests.get(api_key)
            if stats is None:
                stats = self._requests[api_key] = _RequestStats()
            for code, n in counts.items():
                stats.errors[code] = stats.errors.get(code, 0) + n
        top = getattr(body, "error_code", 0)
        return top or next(iter(counts), 0)

    def count_error(self, api_key: int, error_code: int, n: int = 1) -> None:
        """Count errors found inside a response (per partition) beyond the top-level one."""
        stats = self._requests.get(api_key)
        if stats is None:
            stats = self._requests[api_key] = _RequestStats()
        stats.errors[error_code] = stats.errors.get(error_code, 0) + n

    # ---------------------------------------------------------------- hot path: connections

    def connection_opened(self, listener: str = "PLAINTEXT") -> None:
        c = self._connections.get(listener)
        if c is None:
            c = self._connections[listener] = [0, 0, 0]
        c[0] += 1
        c[1] += 1

    def connection_closed(self, listener: str = "PLAINTEXT") -> None:
        c = self._connections.get(listener)
        if c is None:
            c = self._connections[listener] = [0, 0, 0]
        c[0] -= 1
        c[2] += 1

    # ---------------------------------------------------------------- hot path: topics

    def _topic(self, topic: str) -> _TopicStats:
        stats = self._topics.get(topic)
        if stats is None:
            if len(self._topics) > self.max_topic_series:
                topic = OTHER_TOPICS
                stats = self._topics.get(topic)
            if stats is None:
                stats = self._topics[topic] = _TopicStats()
        return stats

    def record_produce(self, topic: str, messages: int, nbytes: int) -> None:
        """One partition's batches appended: record count from the batch headers, their bytes."""
        t, total = self._topic(topic), self._topics[None]
        t.messages_in += messages
        t.bytes_in += nbytes
        t.produce_requests += 1
        total.messages_in += messages
        total.bytes_in += nbytes
        total.produce_requests += 1

    def record_fetch(self, topic: str, nbytes: int) -> None:
        """One partition's record bytes put into a fetch response."""
        t, total = self._topic(topic), self._topics[None]
        t.bytes_out += nbytes
        t.fetch_requests += 1
        total.bytes_out += nbytes
        total.fetch_requests += 1

    def record_failed_produce(self, topic: str) -> None:
        self._topic(topic).failed_produce += 1
        self._topics[None].failed_produce += 1

    def record_failed_fetch(self, topic: str) -> None:
        self._topic(topic).failed_fetch += 1
        self._topics[None].failed_fetch += 1

    def forget_topic(self, topic: str) -> None:
        """Drop a deleted topic's series (the all-topics totals keep its counts)."""
        self._topics.pop(topic, None)

    # ---------------------------------------------------------------- replication, storage, raft

    def isr_shrink(self, n: int = 1) -> None:
        self.isr_shrinks += n

    def isr_expand(self, n: int = 1) -> None:
        self.isr_expands += n

    def observe_flush(self, seconds: float) -> None:
        """One log flush (fsync) and its duration; thread-safe."""
        with self._lock:
            self._flush.observe(seconds * 1000.0)

    def observe_election(self, seconds: float) -> None:
        """One completed controller (Raft) election and its duration; thread-safe."""
        with self._lock:
            self._elections.observe(seconds * 1000.0)

    def set_recovery_duration(self, seconds: float, segments: int = 0) -> None:
        """How long start-up log recovery took, and how many segments it scanned."""
        with self._lock:
            self.recovery_duration_ms = seconds * 1000.0
            self.recovered_segments = segments

    # ---------------------------------------------------------------- scrape-time helpers

    def api_name(self, api_key: int) -> str:
        return self._api_names.get(api_key, str(api_key))


__all__ = ["BrokerMetrics", "ControllerSnapshot", "GroupSnapshot", "PartitionSnapshot", "broker_sources"]
