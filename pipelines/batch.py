"""The batch job: recompute the totals of a time range from the order log.

Spark finds each partition's first offset at or after `from_ms` and before `to_ms` with ListOffsets by
timestamp (`startingOffsetsByTimestamp` / `endingOffsetsByTimestamp`), reads just that slice, and the
job keeps the events whose event time falls in the range (the record timestamp is the event time).
"""

from __future__ import annotations

import json

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from .frames import latest_products, output_records, parse_orders, totals_by_window, write_records


def reprocess(spark: SparkSession, bootstrap: str, *, orders_topic: str, products_topic: str,
              partitions: list[int], from_ms: int, to_ms: int, output_topic: str | None = None):
    """The totals of windows in [from_ms, to_ms) as output records; written to `output_topic` if given."""
    by_time = lambda ms: json.dumps({orders_topic: {str(p): ms for p in partitions}})  # noqa: E731
    records = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
               .option("subscribe", orders_topic)
               .option("startingOffsetsByTimestamp", by_time(from_ms))
               # a partition with nothing at or after from_ms contributes nothing instead of failing
               .option("startingOffsetsByTimestampStrategy", "latest")
               .option("endingOffsetsByTimestamp", by_time(to_ms)).load())
    orders = parse_orders(records).where(
        (F.col("event_time_ms") >= from_ms) & (F.col("event_time_ms") < to_ms))
    out = output_records(totals_by_window(orders), latest_products(spark, bootstrap, products_topic))
    if output_topic:
        write_records(out, bootstrap, output_topic)
    return out
