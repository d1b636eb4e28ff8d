"""A confluent-kafka client run inside a test network namespace (see pod_sandbox.py), so that the
brokers' advertised pod DNS names resolve. Prints one JSON document on stdout.

    python pod_client.py create BOOTSTRAP TOPIC PARTITIONS REPLICATION
    python pod_client.py produce BOOTSTRAP TOPIC COUNT PREFIX
    python pod_client.py produce-until BOOTSTRAP TOPIC STOP_FILE PREFIX
    python pod_client.py consume BOOTSTRAP TOPIC EXPECTED GROUP
    python pod_client.py describe BOOTSTRAP TOPIC
"""

from __future__ import annotations

import json
import os
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

# Extra client settings (security.protocol, sasl.*, ssl.ca.location) as JSON in $CLIENT_CONFIG.
EXTRA = json.loads(os.environ.get("CLIENT_CONFIG") or "{}")


def create(bootstrap: str, topic: str, partitions: str, replication: str) -> dict:
    admin = AdminClient({"bootstrap.servers": bootstrap, **EXTRA})
    future = admin.create_topics([NewTopic(topic, int(partitions), int(replication))],
                                 request_timeout=60)[topic]
    future.result(timeout=90)
    return {"created": topic}


def _producer(bootstrap: str) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                     "message.timeout.ms": 180000, "linger.ms": 5, **EXTRA})


def produce(bootstrap: str, topic: str, count: str, prefix: str) -> dict:
    producer, delivered, errors = _producer(bootstrap), [], []

    def done(err, msg):
        (errors.append(str(err)) if err else delivered.append(msg.value().decode()))

    for i in range(int(count)):
        producer.produce(topic, f"{prefix}-{i}".encode(), key=str(i).encode(), on_delivery=done)
        producer.poll(0)
    left = producer.flush(200)
    return {"sent": int(count), "delivered": len(delivered), "errors": errors[:5], "left": left}


def produce_until(bootstrap: str, topic: str, stop_file: str, prefix: str) -> dict:
    """One record every 20 ms until `stop_file` exists, then wait for every delivery."""
    producer, delivered, errors, sent = _producer(bootstrap), [], [], 0

    def done(err, msg):
        (errors.append(str(err)) if err else delivered.append(msg.value().decode()))

    while not os.path.exists(stop_file):
        producer.produce(topic, f"{prefix}-{sent}".encode(), key=str(sent).encode(),
                         on_delivery=done)
        sent += 1
        producer.poll(0.02)
    left = producer.flush(200)
    return {"sent": sent, "delivered": len(delivered), "errors": errors[:5], "left": left}


def consume(bootstrap: str, topic: str, expected: str, group: str) -> dict:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": True, **EXTRA})
    consumer.subscribe([topic])
    values: list[str] = []
    where: dict[str, list[tuple[int, int]]] = {}   # value -> (partition, offset) it was read at
    deadline = time.monotonic() + 180
    try:
        # distinct values: a group rebalance (its coordinator moving) may hand back records read
        # since the last commit, as in Kafka (at least once); what matters is none is missing
        while len(where) < int(expected) and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                if msg.error().retriable() or not msg.error().fatal():
                    continue
                raise KafkaException(msg.error())
            values.append(msg.value().decode())
            where.setdefault(values[-1], []).append((msg.partition(), msg.offset()))
    finally:
        consumer.close()
    # A value read twice at one offset was read twice; at two offsets it was written twice.
    written_twice = {value: places for value, places in where.items() if len(set(places)) > 1}
    return {"count": len(values), "distinct": len(where), "values": sorted(where),
            "written_twice": dict(list(written_twice.items())[:5])}


def describe(bootstrap: str, topic: str) -> dict:
    """{partition: {"leader": id, "isr": [ids]}} from a Metadata request."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **EXTRA})
    partitions = admin.list_topics(topic, timeout=60).topics[topic].partitions
    return {str(index): {"leader": p.leader, "isr": sorted(p.isrs)}
            for index, p in sorted(partitions.items())}


if __name__ == "__main__":
    command, args = sys.argv[1], sys.argv[2:]
    result = {"create": create, "produce": produce, "produce-until": produce_until,
              "consume": consume, "describe": describe}[command](*args)
    print(json.dumps(result))
