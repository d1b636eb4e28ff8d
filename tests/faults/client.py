"""The clients of a fault trial, run as a process in the client namespace.

``python -m tests.faults.client --bootstrap HOSTS produce --topic T --partitions N --seconds S
--rate R --history FILE [--stop-file F]`` streams records from an idempotent acks=all producer (librdkafka) and
writes its history, one JSON object a line: ``{"t": <monotonic>, "type": "invoke"|"ok"|"fail"|"info",
"p": partition, "v": value, "offset": ..., "error": ...}``. ``ok`` is an acknowledged write, ``fail``
one the client knows did not happen, ``info`` one whose outcome is unknown (it may be in the log).
Meanwhile a consumer tails the topic and adds ``{"type": "seen", "p", "offset", "v"}`` per record.

``... read --topic T --history FILE [--acknowledged-in PRODUCER_HISTORY]`` reads every partition from
the start to its high watermark and writes ``{"p": partition, "offset": ..., "v": value}`` lines
(and a final ``{"complete": bool}``).

``... transform --input I --output O --group G --transactional-id X --history FILE`` seeds I, then
copies it to O in transactions, see `transform`. ``... group --input I --group G --history FILE``
seeds I, then consumes it with a group whose members come and go, see `group`.

Every loop is bounded by the given seconds plus the clients' own timeouts.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time

from confluent_kafka import (OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer,
                             TopicPartition)

# Errors after which librdkafka knows the records were not written (the rest leave it unknown).
DEFINITE_FAILURES = {
    KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.INVALID_RECORD, KafkaError.TOPIC_AUTHORIZATION_FAILED,
    KafkaError._INVALID_ARG, KafkaError.UNKNOWN_TOPIC_OR_PART,
}


class History:
    """Buffered, but never more than FLUSH_EVERY_S behind: the runner watches the file (it strikes
    at the first acknowledgement), so an event must not sit in a 64 KiB buffer for seconds."""

    FLUSH_EVERY_S = 0.25

    def __init__(self, path: str):
        self.handle = open(path, "w", buffering=1 << 16)
        self.flushed = time.monotonic()
        self.lock = threading.Lock()       # the producer's and the tail reader's threads

    def add(self, **event) -> None:
        with self.lock:
            event["t"] = now = time.monotonic()
            self.handle.write(json.dumps(event, separators=(",", ":")) + "\n")
            if now - self.flushed >= self.FLUSH_EVERY_S:
                self.handle.flush()
                self.flushed = now

    def close(self) -> None:
        self.handle.close()


def produce(args) -> int:
    history = History(args.history)
    producer = Producer({
        "bootstrap.servers": args.bootstrap, "enable.idempotence": True, "acks": "all",
        "linger.ms": 5, "message.timeout.ms": args.message_timeout_ms,
        "request.timeout.ms": 5000, "socket.timeout.ms": 5000,
        "reconnect.backoff.max.ms": 1000, "retry.backoff.max.ms": 1000,
        "topic.metadata.refresh.interval.ms": 2000,
        # the idempotence state machine's own account (drains, epoch bumps and why) in the log
        "debug": "eos",
    })
    fatal = []

    def on_delivery(partition, value):
        def report(error, message):
            if error is None:
                history.add(type="ok", p=partition, v=value, offset=message.offset())
            else:
                kind = "fail" if error.code() in DEFINITE_FAILURES else "info"
                history.add(type=kind, p=partition, v=value, error=error.name())
                if error.fatal():
                    fatal.append(error.name())
        return report

    done = threading.Event()
    tail = threading.Thread(target=_tail, args=(args, history, done), daemon=True)
    tail.start()
    sequence = [0] * args.partitions
    interval = 1.0 / args.rate
    began = time.monotonic()
    next_send = began
    count = 0
    while time.monotonic() - began < args.seconds and not fatal:
        if args.stop_file and os.path.exists(args.stop_file):
            break
        partition = count % args.partitions
        value = f"{partition}-{sequence[partition]}"
        history.add(type="invoke", p=partition, v=value)
        try:
            producer.produce(args.topic, value=value.encode(), partition=partition,
                             on_delivery=on_delivery(partition, value))
            sequence[partition] += 1
        except (BufferError, KafkaException) as error:
            history.add(type="fail", p=partition, v=value, error=str(error))
        count += 1
        next_send += interval
        producer.poll(max(0.0, next_send - time.monotonic()))
    left = producer.flush(min(args.message_timeout_ms / 1000 + 10, 150))
    done.set()
    tail.join(30)
    history.add(type="end", unflushed=left, fatal=fatal)
    history.close()
    return 0


def _tail(args, history: History, done: threading.Event) -> None:
    """While the producer runs, a consumer reads every partition as records become visible and
    notes each as ``seen`` (p, offset, v): a broker shows a consumer only committed records, so each
    must still be at that offset when the trial ends, whatever the nemesis did meanwhile."""
    consumer = Consumer({
        "bootstrap.servers": args.bootstrap, "group.id": f"tail-{args.topic}",
        "enable.auto.commit": False, "isolation.level": "read_uncommitted",
        "topic.metadata.refresh.interval.ms": 2000, "reconnect.backoff.max.ms": 1000,
    })
    consumer.assign([TopicPartition(args.topic, p, OFFSET_BEGINNING)
                     for p in range(args.partitions)])
    try:
        while not done.is_set():
            for message in consumer.consume(100, 0.5):
                if not message.error():
                    history.add(type="seen", p=message.partition(), offset=message.offset(),
                                v=message.value().decode())
    finally:
        consumer.close()


def _transactional_producer(args):
    producer = Producer({
        "bootstrap.servers": args.bootstrap, "transactional.id": args.transactional_id,
        "transaction.timeout.ms": 20000, "message.timeout.ms": 20000, "linger.ms": 5,
        "request.timeout.ms": 5000, "socket.timeout.ms": 5000, "reconnect.backoff.max.ms": 1000,
        "retry.backoff.max.ms": 1000,
    })
    producer.init_transactions(30)
    return producer


class ClientHung(Exception):
    """A librdkafka call outlived its own timeout (the client's bug, not the broker's)."""


def _bounded(call, timeout: float, *args):
    """`call(*args, timeout)` in a daemon thread, given `timeout` plus a margin to return.

    librdkafka's send_offsets_to_transaction can block forever past its timeout when the group
    coordinator it cached leaves the cluster's metadata (librdkafka issues 5456 and 5511; it happens
    against Apache Kafka 3.9 under the same nemesis): the thread is then abandoned with its producer
    and ClientHung raised, so the trial goes on with a new producer instead of hanging."""
    outcome: list = []

    def run():
        try:
            outcome.append((True, call(*args, timeout)))
        except BaseException as error:      # handed to the caller's thread
            outcome.append((False, error))

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(timeout + 30)
    if not outcome:
        raise ClientHung(f"{getattr(call, '__name__', call)} still blocked {timeout + 30:.0f} s "
                         f"after it was called with a {timeout:.0f} s timeout")
    succeeded, value = outcome[0]
    if not succeeded:
        raise value
    return value


def _rewind(consumer) -> None:
    """Back to the group's committed offsets (an aborted transaction's inputs are read again)."""
    assignment = consumer.assignment()
    if not assignment:
        return
    for position in consumer.committed(assignment, timeout=10):
        if position.offset < 0:
            position.offset = OFFSET_BEGINNING
        consumer.seek(position)


def _all_committed(consumer, topic: str, ends: dict[int, int]) -> bool:
    committed = consumer.committed([TopicPartition(topic, p) for p in ends], timeout=10)
    return all(c.offset >= ends[c.partition] for c in committed)


def transform(args) -> int:
    """Seed the input topic, then consume-transform-produce it in transactions (read_committed in,
    offsets sent to the transaction). History: ``invoke``/``ok``/``fail``/``info`` per transaction
    with its inputs; ``fail`` means aborted before a commit was asked for (never visible)."""
    history = History(args.history)
    ends = _seed(args, history)
    if ends is None:
        history.close()
        return 3
    consumer = Consumer({
        "bootstrap.servers": args.bootstrap, "group.id": args.group,
        "isolation.level": "read_committed", "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "session.timeout.ms": 10000,
        "heartbeat.interval.ms": 1000,
    })
    consumer.subscribe([args.input])
    producer = None
    abandoned: list = []     # producers left blocked in a hung librdkafka call (see _bounded)
    deadline = time.monotonic() + args.seconds
    attempt = 0
    done = False
    while time.monotonic() < deadline:
        if producer is None:
            try:
                producer = _transactional_producer(args)
            except KafkaException as error:
                history.add(type="note", error=f"init_transactions: {error}")
                time.sleep(1)
                continue
        messages = [message for message in consumer.consume(args.batch, 1.0)
                    if not message.error()]
        if not messages:
            try:
                if _all_committed(consumer, args.input, ends):
                    done = True
                    break
            except KafkaException:
                pass
            continue
        attempt += 1
        inputs = [message.value().decode() for message in messages]
        history.add(type="invoke", txn=attempt, inputs=inputs)
        commit_asked = False
        try:
            producer.begin_transaction()
            for message, value in zip(messages, inputs):
                producer.produce(args.output, value=f"{value}@{attempt}".encode(),
                                 partition=message.partition())
            offsets = {}
            for message in messages:
                offsets[message.partition()] = message.offset() + 1
            _bounded(producer.send_offsets_to_transaction, 30,
                     [TopicPartition(args.input, p, o) for p, o in offsets.items()],
                     consumer.consumer_group_metadata())
            commit_asked = True
            for retry in range(5):
                try:
                    producer.commit_transaction(30)
                    break
                except KafkaException as error:
                    if not error.args[0].retriable() or retry == 4:
                        raise
            history.add(type="ok", txn=attempt)
        except ClientHung as hung:
            # commit was never asked: the next producer's InitProducerId fences this one and its
            # coordinator aborts the transaction
            history.add(type="fail", txn=attempt, error=f"client hung: {hung}")
            abandoned.append(producer)
            producer = None
            try:
                _rewind(consumer)
            except KafkaException:
                pass
        except KafkaException as error:
            kafka_error = error.args[0]
            aborted = False
            if kafka_error.txn_requires_abort():
                try:
                    producer.abort_transaction(30)
                    aborted = True
                except KafkaException:
                    pass
            if aborted or not commit_asked:
                history.add(type="fail", txn=attempt, error=kafka_error.name())
            else:
                history.add(type="info", txn=attempt, error=kafka_error.name())
            if not aborted:
                producer = None         # a new one fences this one (its transaction aborts)
            try:
                _rewind(consumer)
            except KafkaException:
                pass
        time.sleep(args.pause)
    history.add(type="end", done=done, transactions=attempt)
    history.close()
    consumer.close()
    return 0 if done else 3


def _seed(args, history: History) -> dict[int, int] | None:
    """Write `args.inputs` records round robin over the input's partitions; their end offsets."""
    seeder = Producer({"bootstrap.servers": args.bootstrap, "enable.idempotence": True,
                       "acks": "all", "linger.ms": 5})
    for index in range(args.inputs):
        partition = index % args.partitions
        seeder.produce(args.input, value=f"{partition}-{index // args.partitions}".encode(),
                       partition=partition)
    if seeder.flush(60):
        history.add(type="end", done=False, error="could not seed the input")
        return None
    history.add(type="seeded", count=args.inputs)
    return {p: (args.inputs - p + args.partitions - 1) // args.partitions
            for p in range(args.partitions)}


def group(args) -> int:
    """Consumer group under membership churn: `args.members` consumers share the input; every
    `args.churn` seconds one leaves (closes) and a new one joins. Each processes a few records at a
    time and commits them synchronously. History: ``consumed`` (p, offset) per record, ``commit``
    invoke/ok/fail with offsets, and ``observed`` committed offsets read by a watcher that is no
    member, every half second."""
    import threading

    history = History(args.history)
    lock = threading.Lock()

    def add(**event):
        with lock:
            history.add(**event)
    ends = _seed(args, history)
    if ends is None:
        history.close()
        return 3
    stop = threading.Event()

    def member(name: str, leave: threading.Event):
        consumer = Consumer({
            "bootstrap.servers": args.bootstrap, "group.id": args.group,
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000,
            "max.poll.interval.ms": 60000, "client.id": name,
        })
        consumer.subscribe([args.input])
        try:
            while not leave.is_set() and not stop.is_set():
                messages = [m for m in consumer.consume(5, 0.5) if not m.error()]
                if not messages:
                    continue
                offsets = {}
                for message in messages:
                    add(type="consumed", member=name, p=message.partition(), offset=message.offset())
                    offsets[message.partition()] = message.offset() + 1
                commit = [TopicPartition(args.input, p, o) for p, o in offsets.items()]
                add(type="invoke", member=name, offsets={str(p): o for p, o in offsets.items()})
                try:
                    consumer.commit(offsets=commit, asynchronous=False)
                    add(type="ok", member=name, offsets={str(p): o for p, o in offsets.items()})
                except KafkaException as error:
                    add(type="info", member=name, error=error.args[0].name())
                time.sleep(args.pause)
        finally:
            consumer.close()

    watcher = Consumer({"bootstrap.servers": args.bootstrap, "group.id": args.group,
                        "enable.auto.commit": False})
    partitions = [TopicPartition(args.input, p) for p in ends]
    members: list[tuple[threading.Thread, threading.Event]] = []
    serial = 0

    def join():
        nonlocal serial
        serial += 1
        leave = threading.Event()
        thread = threading.Thread(target=member, args=(f"m{serial}", leave), daemon=True)
        thread.start()
        members.append((thread, leave))
    for _ in range(args.members):
        join()
    deadline = time.monotonic() + args.seconds
    next_churn = time.monotonic() + args.churn
    done = False
    while time.monotonic() < deadline:
        try:
            committed = watcher.committed(partitions, timeout=5)
            add(type="observed", offsets={str(c.partition): c.offset for c in committed})
            if all(c.offset >= ends[c.partition] for c in committed):
                done = True
                break
        except KafkaException:
            pass
        if time.monotonic() >= next_churn:
            thread, leave = members.pop(0)
            leave.set()
            join()
            next_churn = time.monotonic() + args.churn
        time.sleep(0.5)
    stop.set()
    for thread, _ in members:
        thread.join(30)
    watcher.close()
    add(type="end", done=done, ends={str(p): e for p, e in ends.items()})
    history.close()
    return 0 if done else 3


def read(args) -> int:
    floors = acknowledged_ends(args.acknowledged_in) if args.acknowledged_in else None
    return read_topic(args.bootstrap, args.topic, args.history, args.seconds, floors)


# How long the reader waits for a high watermark to reach an acknowledged offset. A new leader
# learns its followers' log ends only from their next fetches, so right after a failover its high
# watermark can sit below records the old leader acknowledged (Kafka's too): not yet visible is not
# lost. A record that never becomes visible within this bound is reported lost.
VISIBILITY_WAIT_S = 30.0


def acknowledged_ends(history_path: str) -> dict[int, int]:
    """Per partition, one past the highest offset this client saw acknowledged."""
    ends: dict[int, int] = {}
    try:
        with open(history_path) as handle:
            for line in handle:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                offset = event.get("offset")
                # librdkafka acknowledges some records without their offset (None)
                if event.get("type") == "ok" and offset is not None and offset >= 0:
                    ends[event["p"]] = max(ends.get(event["p"], 0), offset + 1)
    except FileNotFoundError:
        pass
    return ends


def _high_watermark(consumer, topic: str, partition: int, floor: int, deadline: float) -> int:
    """The partition's high watermark, waiting (bounded) until it reaches `floor`."""
    settle_by = time.monotonic() + VISIBILITY_WAIT_S
    while True:
        try:
            end = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)[1]
            if end >= floor or time.monotonic() > min(settle_by, deadline):
                return end
        except KafkaException:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.5)


def read_topic(bootstrap: str, topic: str, history_path: str, seconds: float,
               floors: dict[int, int] | None = None) -> int:
    args = argparse.Namespace(bootstrap=bootstrap, topic=topic, seconds=seconds)
    floors = floors or {}
    out = History(history_path)
    consumer = Consumer({
        "bootstrap.servers": args.bootstrap, "group.id": "faults-reader",
        "enable.auto.commit": False, "isolation.level": "read_committed",
        "enable.partition.eof": True,
    })
    deadline = time.monotonic() + args.seconds
    partitions = []
    while not partitions:
        try:
            metadata = consumer.list_topics(args.topic, timeout=10)
            partitions = sorted(metadata.topics[args.topic].partitions)
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    ends = {p: _high_watermark(consumer, args.topic, p, floors.get(p, 0), deadline)
            for p in partitions}
    consumer.assign([TopicPartition(args.topic, p, OFFSET_BEGINNING) for p in partitions])
    positions = {p: 0 for p in partitions}
    while any(positions[p] < ends[p] for p in partitions) and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is None:
            continue
        if message.error():
            if message.error().code() == KafkaError._PARTITION_EOF:
                positions[message.partition()] = max(positions[message.partition()],
                                                     message.offset())
            continue
        out.add(p=message.partition(), offset=message.offset(), v=message.value().decode())
        positions[message.partition()] = message.offset() + 1
    complete = all(positions[p] >= ends[p] for p in partitions)
    out.add(complete=complete, ends={str(p): e for p, e in ends.items()})
    out.close()
    consumer.close()
    return 0 if complete else 3


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="tests.faults.client")
    parser.add_argument("--bootstrap", required=True)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("produce")
    p.add_argument("--topic", required=True)
    p.add_argument("--partitions", type=int, default=3)
    p.add_argument("--seconds", type=float, default=15)
    p.add_argument("--rate", type=float, default=100)
    # long enough that no record times out in a trial: librdkafka bumps the producer epoch when
    # some do and re-sends the rest, which may already be in the log, as new records (a known
    # limit of the idempotent producer, confluentinc/librdkafka#4953), duplicating them
    p.add_argument("--message-timeout-ms", type=int, default=120000)
    p.add_argument("--history", required=True)
    p.add_argument("--stop-file", help="stop producing once this file exists")
    r = sub.add_parser("read")
    r.add_argument("--topic", required=True)
    r.add_argument("--seconds", type=float, default=60)
    r.add_argument("--history", required=True)
    r.add_argument("--acknowledged-in", help="a producer's history: wait (bounded) until each "
                   "high watermark covers the offsets it saw acknowledged")
    t = sub.add_parser("transform")
    t.add_argument("--input", required=True)
    t.add_argument("--output", required=True)
    t.add_argument("--partitions", type=int, default=3)
    t.add_argument("--inputs", type=int, default=600)
    t.add_argument("--batch", type=int, default=10)
    t.add_argument("--pause", type=float, default=0.2, help="seconds between transactions")
    t.add_argument("--group", required=True)
    t.add_argument("--transactional-id", required=True)
    t.add_argument("--seconds", type=float, default=120)
    t.add_argument("--history", required=True)
    g = sub.add_parser("group")
    g.add_argument("--input", required=True)
    g.add_argument("--partitions", type=int, default=3)
    g.add_argument("--inputs", type=int, default=900)
    g.add_argument("--members", type=int, default=3)
    g.add_argument("--churn", type=float, default=3.0, help="seconds between membership changes")
    g.add_argument("--pause", type=float, default=0.05)
    g.add_argument("--group", required=True)
    g.add_argument("--seconds", type=float, default=120)
    g.add_argument("--history", required=True)
    for command in (p, t):
        command.add_argument("--read-topic", help="once done and --read-when exists, read this "
                             "topic as `read` does (saves starting a reader process)")
        command.add_argument("--read-when")
        command.add_argument("--read-history")
    args = parser.parse_args(argv)
    status = {"produce": produce, "read": read, "transform": transform,
              "group": group}[args.command](args)
    if getattr(args, "read_topic", None):
        deadline = time.monotonic() + 300
        while not os.path.exists(args.read_when) and time.monotonic() < deadline:
            time.sleep(0.1)
        floors = acknowledged_ends(args.history) if args.command == "produce" else None
        read_status = read_topic(args.bootstrap, args.read_topic, args.read_history, 90, floors)
        status = status or read_status
    return status


if __name__ == "__main__":
    status = main()
    if threading.active_count() > 1:
        # a producer abandoned in a hung librdkafka call (see _bounded) would hang the exit too
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    sys.exit(status)
