"""The pipeline's Kafka side outside Spark: topics, feeding generated events, reading the output table.

It uses Odradek's own protocol client (`broker.admin`), which talks to any Kafka-compatible broker.
"""

from __future__ import annotations

from broker.admin.client import KafkaClient
from broker.admin.console import produce
from broker.admin.consumer import Fetcher
from broker.admin.offsets import EARLIEST, LATEST, list_offsets
from broker.admin.topics import create_topics
from protocol.records import SimpleRecord

from .events import Order, Product, WindowTotal

TOPIC_EXISTS = 36


def ensure_topics(client: KafkaClient, *, orders: str, products: str, output: str,
                  partitions: int = 3) -> None:
    """Orders as a plain topic; the product reference and the output compacted (latest per key)."""
    compacted = {"cleanup.policy": "compact"}
    for name, count, configs in ((orders, partitions, {}), (products, 1, compacted), (output, 2, compacted)):
        (result,) = create_topics(client, [name], partitions=count, configs=configs)
        if result.error_code not in (0, TOPIC_EXISTS):
            raise SystemExit(f"cannot create topic {name}: {result.error_message or result.error_code}")


def send_products(client: KafkaClient, topic: str, products: list[Product]) -> None:
    _check(produce(client, topic, [SimpleRecord(p.to_json(), p.product_id.encode()) for p in products]))


def send_orders(client: KafkaClient, topic: str, orders: list[Order]) -> None:
    """Keyed by order id; the record timestamp is the event time, so time-range reads line up."""
    _check(produce(client, topic, [SimpleRecord(o.to_json(), o.order_id.encode(), timestamp=o.event_time_ms)
                                   for o in orders]))


def _check(ranges) -> None:
    failed = [r for r in ranges if r.error]
    if failed:
        raise SystemExit(f"produce failed: {failed[0].error}")


def read_table(client: KafkaClient, topic: str) -> dict[str, WindowTotal]:
    """The output topic as a table: the latest record per key, as the compacted topic defines it."""
    info = client.topic(topic)
    tps = [(topic, p) for p in sorted(info.partitions)]
    start = _offsets(client, tps, EARLIEST)
    end = _offsets(client, tps, LATEST)
    table: dict[str, WindowTotal] = {}
    fetcher = Fetcher(client)
    fetcher.assign(start)
    remaining = {tp for tp in tps if end[tp] > start[tp]}
    while remaining:
        for record in fetcher.poll():
            tp = (record.topic, record.partition)
            if record.value is None:
                table.pop(record.key.decode(), None)
            else:
                table[record.key.decode()] = WindowTotal.from_json(record.value)
            if record.offset + 1 >= end[tp]:
                remaining.discard(tp)
    return table


def _offsets(client: KafkaClient, tps: list[tuple[str, int]], when: int) -> dict[tuple[str, int], int]:
    offsets = {}
    for r in list_offsets(client, tps, when):
        if r.error:
            raise SystemExit(f"cannot list offsets of {r.topic}-{r.partition}: {r.error}")
        offsets[(r.topic, r.partition)] = r.offset
    return offsets


def partitions_of(client: KafkaClient, topic: str) -> list[int]:
    return sorted(client.topic(topic).partitions)
