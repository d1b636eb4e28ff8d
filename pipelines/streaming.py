"""The streaming job: order events → per-minute product totals → a compacted output topic.

Totals are kept in Spark state under a watermark (`WATERMARK`: how late an event may arrive and still
count) and emitted in update mode: every micro-batch writes the new value of each (window, product) it
changed, keyed by window and product. The output topic is compacted, so its latest record per key is the
table; after a crash Spark replays the unfinished micro-batch from its checkpoint and writes the same
values again, which compaction folds away: the table converges to exactly the right totals.
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from .frames import latest_products, output_records, parse_orders, totals_by_window, write_records

WATERMARK = "30 seconds"


def start(spark: SparkSession, bootstrap: str, *, orders_topic: str, products_topic: str,
          output_topic: str, checkpoint: str, trigger_seconds: float | None = 1.0,
          max_offsets_per_trigger: int | None = None):
    """Start the query; `trigger_seconds=None` processes what is there now and stops (availableNow)."""
    source = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", orders_topic).option("startingOffsets", "earliest"))
    if max_offsets_per_trigger:
        source = source.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
    orders = parse_orders(source.load()).withWatermark("event_time", WATERMARK)

    def write_batch(totals, _batch_id):
        # The reference table is read per micro-batch, so product updates reach the next results.
        write_records(output_records(totals, latest_products(spark, bootstrap, products_topic)),
                      bootstrap, output_topic)

    writer = (totals_by_window(orders).writeStream.outputMode("update").foreachBatch(write_batch)
              .option("checkpointLocation", checkpoint).queryName(f"totals-{output_topic}"))
    writer = (writer.trigger(availableNow=True) if trigger_seconds is None
              else writer.trigger(processingTime=f"{trigger_seconds} seconds"))
    return writer.start()
