"""9 quotas: real clients under Kafka's client quotas, against an `odradek serve` process.

- librdkafka (confluent-kafka) and the Java client report the throttling in their own metrics
  (stats ``brokers[].throttle``; ``produce-throttle-time-max`` / ``fetch-throttle-time-max``), and
  nothing they send or read is lost;
- a producer (and a consumer) with a 1 MiB/s quota is held at that rate while a client without a
  quota on the same broker keeps going much faster: a short run here (quota.window.num=4), the
  30-second measurement of issue 20 behind ``-m slow``;
- quotas survive a broker restart.
"""

from __future__ import annotations

import json
import threading
import time

import pytest

from odradek_compat import brokers
from odradek_compat.clients import unavailable
from odradek_compat.records import Rec, to_json

confluent_kafka = pytest.importorskip("confluent_kafka")
confluent_admin = pytest.importorskip("confluent_kafka.admin")

from broker.admin.client import KafkaClient  # noqa: E402
from broker.admin.quotas import alter_quotas, describe_quotas  # noqa: E402

MiB = 1 << 20
VALUE = b"q" * 10_000
# Rates are computed over (windows - 1) whole windows at least: 3 s keeps the short tests short.
SHORT_WINDOWS = {"quota.window.num": "4", "quota.window.size.seconds": "1"}


def _start(overrides) -> brokers.BrokerProcess:
    if brokers.external_bootstrap():
        pytest.skip("needs a broker the harness starts itself (COMPAT_BOOTSTRAP is set)")
    process = brokers.BrokerProcess("quotas", overrides=overrides)
    process.start()
    return process


@pytest.fixture(scope="module")
def quota_broker():
    process = _start(SHORT_WINDOWS)
    yield process
    process.close()


def set_quota(bootstrap, entity, **values):
    with KafkaClient(bootstrap, timeout=15) as admin:
        alter_quotas(admin, entity, add=values)


def create_topic(bootstrap, topic):
    admin = confluent_admin.AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([confluent_admin.NewTopic(topic, 1, 1)])[topic].result(30)


def fill(bootstrap, topic, total_bytes, client_id="filler"):
    """Produce `total_bytes` of VALUE records without any quota; returns the record count."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "client.id": client_id,
                                         "linger.ms": 5, "batch.size": 64 * 1024})
    count = total_bytes // len(VALUE)
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, VALUE)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(60) == 0
    return count


class StatsThrottle:
    """The largest broker throttle librdkafka's statistics report (``brokers[].throttle.max``)."""

    def __init__(self):
        self.max_ms = 0

    def __call__(self, stats_json):
        stats = json.loads(stats_json)
        for broker in stats.get("brokers", {}).values():
            self.max_ms = max(self.max_ms, broker.get("throttle", {}).get("max", 0))


# ------------------------------------------------------------------- clients report throttling

def test_librdkafka_reports_throttling_and_loses_nothing(quota_broker):
    bootstrap = quota_broker.bootstrap
    create_topic(bootstrap, "q-rdk")
    set_quota(bootstrap, [("client-id", "rdk-limited")], producer_byte_rate=250_000,
              consumer_byte_rate=250_000)
    seen = StatsThrottle()
    producer = confluent_kafka.Producer({
        "bootstrap.servers": bootstrap, "client.id": "rdk-limited", "linger.ms": 5,
        "statistics.interval.ms": 200, "stats_cb": seen})
    delivered = []
    count = 100   # 1 MB: a third above what 3 windows of 250 kB/s allow at once
    for i in range(count):
        producer.produce("q-rdk", VALUE, key=str(i).encode(),
                         on_delivery=lambda err, msg: delivered.append((err, msg.offset())))
        producer.poll(0)
    assert producer.flush(60) == 0
    deadline = time.monotonic() + 10
    while seen.max_ms == 0 and time.monotonic() < deadline:
        producer.poll(0.2)
    assert [err for err, _ in delivered if err is not None] == []
    assert sorted(offset for _, offset in delivered) == list(range(count))
    print(f"librdkafka produce throttle max {seen.max_ms} ms")
    assert seen.max_ms > 0, "librdkafka saw no produce throttle"

    seen_by_consumer = StatsThrottle()
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "client.id": "rdk-limited", "group.id": "q-rdk",
        "enable.auto.commit": False, "statistics.interval.ms": 200,
        "stats_cb": seen_by_consumer})
    try:
        consumer.assign([confluent_kafka.TopicPartition("q-rdk", 0, 0)])
        keys, deadline = [], time.monotonic() + 60
        while len(keys) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                keys.append(int(message.key()))
        while seen_by_consumer.max_ms == 0 and time.monotonic() < deadline:
            consumer.poll(0.2)
    finally:
        consumer.close()
    assert keys == list(range(count)), "every record, in order, once"
    print(f"librdkafka fetch throttle max {seen_by_consumer.max_ms} ms")
    assert seen_by_consumer.max_ms > 0, "librdkafka saw no fetch throttle"


def test_java_client_reports_throttling(quota_broker):
    reason = unavailable("java-4")
    if reason:
        pytest.skip(reason)
    from odradek_compat.clients.java import JavaClient

    bootstrap = quota_broker.bootstrap
    create_topic(bootstrap, "q-java")
    set_quota(bootstrap, [("client-id", "java-limited")], producer_byte_rate=250_000,
              consumer_byte_rate=250_000)
    java = JavaClient(bootstrap, "java-4")
    try:
        count = 100
        records = [to_json(Rec(key=str(i).encode(), value=VALUE)) for i in range(count)]
        produced = java.driver.call(
            "produce", timeout=120, topic="q-java", records=records,
            config={"client.id": "java-limited", "acks": "all", "linger.ms": 5},
            metrics=["produce-throttle-time-max", "produce-throttle-time-avg"])
        assert [r.get("error") for r in produced["results"]] == [None] * count
        assert sorted(r["offset"] for r in produced["results"]) == list(range(count))
        assert produced["metrics"]["produce-throttle-time-max"] > 0, produced["metrics"]

        consumed = java.driver.call(
            "consume", timeout=120, topic="q-java", timeout_ms=60_000, start="earliest",
            partitions=None, config={"client.id": "java-limited"},
            metrics=["fetch-throttle-time-max", "fetch-throttle-time-avg"])
        assert len(consumed["records"]) == count
        assert [r["offset"] for r in consumed["records"]] == list(range(count))
        assert consumed["metrics"]["fetch-throttle-time-max"] > 0, consumed["metrics"]
    finally:
        java.close()


def test_quotas_survive_a_restart(quota_broker):
    set_quota(quota_broker.bootstrap, [("user", None)], request_percentage=150.0)
    quota_broker.restart()
    with KafkaClient(quota_broker.bootstrap, timeout=15) as admin:
        quotas = describe_quotas(admin, [("user", None)])
    assert quotas == [{"entity": {"user": None}, "values": {"request_percentage": 150.0}}]


# ------------------------------------------------------------------------------- rates held

class Flow(threading.Thread):
    """A producer (or consumer) running flat out; remembers when each value was acknowledged
    (or read), so the rate over any interval can be measured afterwards."""

    def __init__(self, bootstrap, topic, client_id, consume=False):
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.client_id, self.consume = bootstrap, topic, client_id, consume
        self.stop = threading.Event()
        self.events: list[float] = []   # monotonic time of each VALUE acked / read
        self.errors: list = []

    def run(self):
        try:
            self._consume() if self.consume else self._produce()
        except Exception as exc:   # reported by the test
            self.errors.append(exc)

    def _produce(self):
        producer = confluent_kafka.Producer({
            "bootstrap.servers": self.bootstrap, "client.id": self.client_id, "linger.ms": 5,
            "acks": 1, "queue.buffering.max.kbytes": 4096})

        def delivered(err, _msg):
            if err is None:
                self.events.append(time.monotonic())
            else:
                self.errors.append(err)
        while not self.stop.is_set():
            try:
                producer.produce(self.topic, VALUE, on_delivery=delivered)
            except BufferError:
                producer.poll(0.02)
                continue
            producer.poll(0)
        producer.flush(30)

    def _consume(self):
        consumer = confluent_kafka.Consumer({
            "bootstrap.servers": self.bootstrap, "client.id": self.client_id,
            "group.id": self.client_id, "enable.auto.commit": False})
        consumer.assign([confluent_kafka.TopicPartition(self.topic, 0, 0)])
        try:
            while not self.stop.is_set():
                message = consumer.poll(0.2)
                if message is not None and message.error() is None:
                    self.events.append(time.monotonic())
        finally:
            consumer.close()

    def rate(self, start, end) -> float:
        """Bytes of values per second in [start, end)."""
        return sum(1 for t in self.events if start <= t < end) * len(VALUE) / (end - start)

    def quota_window_rate(self, start, end, span) -> float:
        """The rate as the quota defines it, over a trailing window of `span` seconds (the
        quota's samples x window), averaged at every second of [start, end)."""
        points = [start + i for i in range(int(end - start))]
        return sum(self.rate(t - span, t) for t in points) / len(points)

    def active_rate(self) -> float:
        """Bytes per second from the first to the last value (a client that ran out of data)."""
        if len(self.events) < 2:
            return 0.0
        return len(self.events) * len(VALUE) / (self.events[-1] - self.events[0])


def measure(bootstrap, *, consume, warm_up, seconds, quota, span):
    """(limited rate, its plain average, free rate) in bytes/s over `seconds` that start once
    `warm_up` and then one whole quota window (`span`) have passed."""
    topic = f"q-rate-{'c' if consume else 'p'}-{int(time.time() * 1000)}"
    create_topic(bootstrap, topic)
    key = "consumer_byte_rate" if consume else "producer_byte_rate"
    set_quota(bootstrap, [("client-id", f"{topic}-limited")], **{key: quota})
    if consume:
        # enough for the limited consumer (burst + warm-up + measurement) with room to spare
        fill(bootstrap, topic, int(quota * (2 * span + warm_up + seconds + 5)))
    limited = Flow(bootstrap, topic, f"{topic}-limited", consume)
    free = Flow(bootstrap, topic, f"{topic}-free", consume)
    started = time.monotonic()
    limited.start()
    free.start()
    time.sleep(warm_up + span + seconds)
    limited.stop.set()
    free.stop.set()
    limited.join(60)
    free.join(60)
    assert not limited.errors and not free.errors, (limited.errors, free.errors)
    start = started + warm_up + span
    end = start + seconds
    free_rate = free.active_rate() if consume else free.rate(start, end)
    return limited.quota_window_rate(start, end, span), limited.rate(start, end), free_rate


def _check_rates(measured, quota, low, high):
    """Judged over the quota's own window: a plain average swings with the phase of Kafka's
    sampled windows (a burst-filled sample rolling out lets a new burst in, a throttled fetch
    returns a whole response's worth of nothing), by 20 % or more over 30 s."""
    limited, plain, free = measured
    print(f"limited {limited / MiB:.3f} MiB/s over the quota window, {plain / MiB:.3f} plain "
          f"average, quota {quota / MiB:.3f}; free {free / MiB:.3f} MiB/s")
    assert low * quota <= limited <= high * quota, (limited, quota)
    # the client without a quota is not held to it (a loaded 2-core test machine still manages
    # several MiB/s through one broker)
    assert free > 2 * quota, (free, quota)


@pytest.mark.parametrize("consume", [False, True], ids=["producer", "consumer"])
def test_quota_holds_the_rate_short_run(quota_broker, consume):
    """Four one-second windows are coarse: for this very run Apache Kafka 3.9 (same settings)
    held a producer at 1.17x the quota and a consumer at 0.57-0.88x; Odradek 1.17x and
    0.85-0.94x. A consumer stays below the quota: a fetch that would exceed it is answered empty
    (only throttled), so data flows when a sample rolls out of the window; and a fetch returns at
    least a whole batch, so the topic is filled in 64 KiB batches (1 MB ones: 0.55-0.67x)."""
    quota = MiB // 2
    _check_rates(measure(quota_broker.bootstrap, consume=consume, warm_up=3, seconds=6,
                         quota=quota, span=4), quota, low=0.5 if consume else 0.8, high=1.3)


@pytest.fixture(scope="module")
def default_windows_broker(request):
    if "slow" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("a minute-long soak: run with -m slow")
    process = _start({})
    yield process
    process.close()


@pytest.mark.slow
@pytest.mark.parametrize("consume", [False, True], ids=["producer", "consumer"])
def test_quota_holds_1mib_per_second_over_30s(default_windows_broker, consume):
    """Issue 20's measurement: Kafka's default windows (11 x 1 s), 1 MiB/s, 30 s after a 12 s
    warm-up (the first burst a fresh quota allows is about 10 windows' worth).

    The rate is the quota's own, over a trailing 11 s window averaged at each second of the 30 s
    (which start one whole window after the warm-up; see _check_rates). Apache Kafka 3.9, this
    very run: producer 0.96-0.97 MiB/s, consumer 0.84-0.88 (held below the quota as in the short
    run); Odradek 0.96-0.97 and 0.91-0.98."""
    _check_rates(measure(default_windows_broker.bootstrap, consume=consume, warm_up=12,
                         seconds=30, quota=MiB, span=11), MiB, low=0.75 if consume else 0.9, high=1.1)
