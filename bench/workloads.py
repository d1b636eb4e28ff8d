"""Client-side workloads, each run inside a worker process with librdkafka (confluent-kafka).

Every function takes plain arguments and returns a plain dict, so a spawn-context process pool can
run several at once against one broker. Workers that run together share an absolute `start_at`
(wall clock): each builds its client and connects first, then waits for the common start, so
connection setup is not measured and all of them load the broker at the same time.
"""

from __future__ import annotations

import os
import struct
import threading
import time

PAYLOAD_BYTE = b"x"
_stamp = struct.Struct(">q")
LATENCY_WARMUP_S = 0.5


def _wait_until(start_at: float) -> None:
    delay = start_at - time.time()
    if delay > 0:
        time.sleep(delay)


def _producer(bootstrap: str, config: dict, errors: list):
    from confluent_kafka import Producer

    def on_delivery(error, message):
        if error is not None:
            errors.append(str(error))

    settings = {
        "bootstrap.servers": bootstrap,
        "enable.idempotence": False,
        "compression.type": "none",
        "delivery.report.only.error": True,
        "on_delivery": on_delivery,
        **config,
    }
    return Producer(settings)


def _connect(client, topic: str, timeout: float = 15.0) -> None:
    """Fetches the topic's metadata so the first measured record does not pay for the handshake."""
    client.list_topics(topic, timeout=timeout)


def produce(bootstrap: str, topic: str, record_size: int, duration: float, config: dict,
            start_at: float, flush_timeout: float = 60.0) -> dict:
    """Produces fixed-size records as fast as the client can for `duration` seconds, then flushes.

    Returns the records acknowledged and the span from the common start to the end of the flush.
    """
    errors: list[str] = []
    producer = _producer(bootstrap, config, errors)
    _connect(producer, topic)
    payload = PAYLOAD_BYTE * record_size
    send = producer.produce
    sent = 0
    _wait_until(start_at)
    began = time.time()
    stop_at = began + duration
    while time.time() < stop_at:
        for _ in range(1000):
            try:
                send(topic, payload)
            except BufferError:  # local queue full: let librdkafka drain it
                producer.poll(0.001)
                continue
            sent += 1
        producer.poll(0)
    unflushed = producer.flush(flush_timeout)
    ended = time.time()
    delivered = sent - len(errors) - unflushed
    return {"records": delivered, "bytes": delivered * record_size, "start": began, "end": ended,
            "errors": len(errors) + unflushed, "first_error": errors[0] if errors else None}


def fill(bootstrap: str, topic: str, partition: int, record_size: int, count: int, config: dict) -> dict:
    """Writes exactly `count` records into one partition (the consume workload reads them back)."""
    errors: list[str] = []
    producer = _producer(bootstrap, config, errors)
    _connect(producer, topic)
    payload = PAYLOAD_BYTE * record_size
    sent = 0
    while sent < count:
        try:
            producer.produce(topic, payload, partition=partition)
        except BufferError:
            producer.poll(0.01)
            continue
        sent += 1
    unflushed = producer.flush(120)
    return {"partition": partition, "records": sent - len(errors) - unflushed,
            "errors": len(errors) + unflushed, "first_error": errors[0] if errors else None}


def _consumer(bootstrap: str, config: dict):
    from confluent_kafka import Consumer

    return Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "odradek-bench",
        "enable.auto.commit": False,
        "enable.partition.eof": False,
        **config,
    })


def thread_cpu_seconds() -> dict[tuple[int, str], float]:
    """CPU seconds each live thread of this process has used, by (thread id, name): librdkafka
    names its threads (``rdk:broker1`` does a broker connection's I/O, TLS included)."""
    ticks = os.sysconf("SC_CLK_TCK")
    spent = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as handle:
                name = handle.read().strip()
            with open(f"/proc/self/task/{tid}/stat") as handle:
                fields = handle.read().rpartition(")")[2].split()
        except OSError:   # the thread ended meanwhile
            continue
        spent[(int(tid), name)] = (int(fields[11]) + int(fields[12])) / ticks
    return spent


def consume(bootstrap: str, topic: str, expected: dict[int, int], record_size: int, start_at: float,
            timeout: float, config: dict, threads: dict[str, float] | None = None) -> dict:
    """Reads the given partitions from earliest until `expected` records each have arrived.
    `threads`, a dict, gets the CPU seconds each client thread spent meanwhile, by thread name
    (this loop's own thread as "consume loop")."""
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition

    consumer = _consumer(bootstrap, config)
    _connect(consumer, topic)
    wanted = sum(expected.values())
    _wait_until(start_at)
    cpu_before = thread_cpu_seconds() if threads is not None else {}
    began = time.time()
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in expected])
    got = errors = 0
    first_error = None
    deadline = began + timeout
    while got < wanted and time.time() < deadline:
        # consume() waits until it has the whole batch or times out: never ask for more than is left
        for message in consumer.consume(min(10_000, wanted - got), 0.5):
            if message.error() is None:
                got += 1
            else:
                errors += 1
                first_error = first_error or str(message.error())
    ended = time.time()
    if threads is not None:   # before close(): librdkafka's threads end with it
        loop_thread = threading.get_native_id()
        for (tid, name), seconds in thread_cpu_seconds().items():
            spent = seconds - cpu_before.get((tid, name), 0.0)
            name = "consume loop" if tid == loop_thread else name
            threads[name] = threads.get(name, 0.0) + spent
    consumer.close()
    return {"records": got, "bytes": got * record_size, "start": began, "end": ended,
            "errors": errors + (wanted - got if got < wanted else 0), "first_error": first_error}


def latency_producer(bootstrap: str, topic: str, record_size: int, rate: float, duration: float,
                     config: dict, start_at: float) -> dict:
    """Sends records at a fixed rate, each stamped with CLOCK_MONOTONIC (shared by all processes)."""
    errors: list[str] = []
    producer = _producer(bootstrap, config, errors)
    _connect(producer, topic)
    padding = PAYLOAD_BYTE * max(record_size - _stamp.size, 0)
    _wait_until(start_at)
    began = time.monotonic()
    sent = 0
    total = int(rate * duration)
    while sent < total:
        due = min(int((time.monotonic() - began) * rate), total)
        while sent < due:
            producer.produce(topic, _stamp.pack(time.monotonic_ns()) + padding)
            sent += 1
        producer.poll(0)
        time.sleep(0.0005)
    unflushed = producer.flush(30)
    return {"records": sent - len(errors) - unflushed, "errors": len(errors) + unflushed,
            "first_error": errors[0] if errors else None}


def latency_consumer(bootstrap: str, topic: str, partitions: list[int], expected: int, config: dict,
                     start_at: float, timeout: float) -> dict:
    """Long-polls from earliest and records receive time minus the producer's stamp, in ms."""
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition

    consumer = _consumer(bootstrap, config)
    _connect(consumer, topic)
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
    consumer.poll(0.1)  # start fetching before the producer starts
    warmup_end_ns = int((start_at - time.time() + LATENCY_WARMUP_S) * 1e9) + time.monotonic_ns()
    latencies: list[float] = []
    got = errors = 0
    first_error = None
    deadline = start_at + timeout
    while got < expected and time.time() < deadline:
        message = consumer.poll(0.2)  # poll() returns as soon as one record is there
        if message is None:
            continue
        now = time.monotonic_ns()
        if message.error() is not None:
            errors += 1
            first_error = first_error or str(message.error())
            continue
        got += 1
        (sent_ns,) = _stamp.unpack_from(message.value())
        if sent_ns >= warmup_end_ns:
            latencies.append((now - sent_ns) / 1e6)
    consumer.close()
    return {"records": got, "latencies_ms": latencies, "errors": errors + max(expected - got, 0),
            "first_error": first_error}
