"""The clients of a fault trial, run as a process in the client namespace.

``python -m tests.faults.client --bootstrap HOSTS produce --topic T --partitions N --seconds S
--rate R --history FILE [--stop-file F]`` streams records from an idempotent acks=all producer (librdkafka) and
writes its history, one JSON object a line: ``{"t": <monotonic>, "type": "invoke"|"ok"|"fail"|"info",
"p": partition, "v": value, "offset": ..., "error": ...}``. ``ok`` is an acknowledged write, ``fail``
one the client knows did not happen, ``info`` one whose outcome is unknown (it may be in the log).

``... read --topic T --history FILE`` reads every partition from the start to its high watermark and
writes ``{"p": partition, "offset": ..., "v": value}`` lines (and a final ``{"complete": bool}``).

Every loop is bounded by the given seconds plus the clients' own timeouts.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from confluent_kafka import (OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer,
                             TopicPartition)

# Errors after which librdkafka knows the records were not written (the rest leave it unknown).
DEFINITE_FAILURES = {
    KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.INVALID_RECORD, KafkaError.TOPIC_AUTHORIZATION_FAILED,
    KafkaError._INVALID_ARG, KafkaError.UNKNOWN_TOPIC_OR_PART,
}


class History:
    def __init__(self, path: str):
        self.handle = open(path, "w", buffering=1 << 16)

    def add(self, **event) -> None:
        event["t"] = time.monotonic()
        self.handle.write(json.dumps(event, separators=(",", ":")) + "\n")

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
    left = producer.flush(args.message_timeout_ms / 1000 + 10)
    history.add(type="end", unflushed=left, fatal=fatal)
    history.close()
    return 0


def read(args) -> int:
    out = History(args.history)
    consumer = Consumer({
        "bootstrap.servers": args.bootstrap, "group.id": "faults-reader",
        "enable.auto.commit": False, "isolation.level": "read_committed",
        "enable.partition.eof": True,
    })
    deadline = time.monotonic() + args.seconds
    metadata = consumer.list_topics(args.topic, timeout=30)
    partitions = sorted(metadata.topics[args.topic].partitions)
    ends = {}
    for partition in partitions:
        while partition not in ends:
            try:
                ends[partition] = consumer.get_watermark_offsets(
                    TopicPartition(args.topic, partition), timeout=10)[1]
            except KafkaException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
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
    p.add_argument("--message-timeout-ms", type=int, default=30000)
    p.add_argument("--history", required=True)
    p.add_argument("--stop-file", help="stop producing once this file exists")
    r = sub.add_parser("read")
    r.add_argument("--topic", required=True)
    r.add_argument("--seconds", type=float, default=60)
    r.add_argument("--history", required=True)
    args = parser.parse_args(argv)
    return {"produce": produce, "read": read}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
