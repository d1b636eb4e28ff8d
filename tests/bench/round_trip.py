"""A produce-then-consume check shared by the bench target tests."""

from __future__ import annotations


def round_trip(bootstrap: str, client: dict, topic: str, count: int = 5, acks: str = "all") -> list[bytes]:
    """Produces `count` records and reads them back from earliest: what came back."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "log_level": 3, **client})
    values = [f"{topic}-{i}".encode() for i in range(count)]
    for value in values:
        producer.produce(topic, value, partition=0)
    assert producer.flush(60) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "rows", "log_level": 3, **client})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got = []
    for _ in range(240):
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got.append(message.value())
        if len(got) == count:
            break
    consumer.close()
    return got
