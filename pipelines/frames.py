"""The DataFrame pieces both jobs share: parsing orders, the product table, and the output records."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from .events import WINDOW_MS

ORDER_SCHEMA = T.StructType([
    T.StructField("order_id", T.StringType()),
    T.StructField("product_id", T.StringType()),
    T.StructField("quantity", T.LongType()),
    T.StructField("unit_price_cents", T.LongType()),
    T.StructField("event_time_ms", T.LongType()),
])
PRODUCT_SCHEMA = T.StructType([T.StructField("name", T.StringType()), T.StructField("category", T.StringType())])
WINDOW = f"{WINDOW_MS // 1000} seconds"


def parse_orders(kafka_rows: DataFrame) -> DataFrame:
    """Kafka rows → one column per order field plus `event_time` (a timestamp from event_time_ms)."""
    orders = kafka_rows.select(F.from_json(F.col("value").cast("string"), ORDER_SCHEMA).alias("o")).select("o.*")
    return orders.withColumn("event_time", F.timestamp_millis("event_time_ms"))


def totals_by_window(orders: DataFrame) -> DataFrame:
    """Orders and revenue per (one-minute event-time window, product)."""
    return (orders.groupBy(F.window("event_time", WINDOW), "product_id")
            .agg(F.count(F.lit(1)).alias("orders"),
                 F.sum(F.col("quantity") * F.col("unit_price_cents")).alias("revenue_cents")))


def latest_products(spark: SparkSession, bootstrap: str, topic: str) -> DataFrame:
    """The compacted reference topic as a table: the latest record per key, tombstones removed.

    A key always lands in one partition, so its highest offset is its latest version — whether or not
    the cleaner has compacted the older ones away yet.
    """
    records = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
               .option("subscribe", topic).option("startingOffsets", "earliest")
               .option("endingOffsets", "latest").load())
    newest_first = Window.partitionBy("key").orderBy(F.col("offset").desc())
    latest = (records.withColumn("rank", F.row_number().over(newest_first))
              .where((F.col("rank") == 1) & F.col("value").isNotNull()))
    return latest.select(F.col("key").cast("string").alias("product_id"),
                         F.from_json(F.col("value").cast("string"), PRODUCT_SCHEMA).alias("p")
                         ).select("product_id", "p.name", "p.category")


def output_records(totals: DataFrame, products: DataFrame) -> DataFrame:
    """Window totals joined with products, as Kafka key/value: key "<window start ms>|<product id>"."""
    start_ms = F.unix_millis(F.col("window.start"))
    joined = totals.join(products, "product_id", "left")
    return joined.select(
        F.concat_ws("|", start_ms.cast("string"), F.col("product_id")).alias("key"),
        F.to_json(F.struct(start_ms.alias("window_start_ms"), "product_id", "name", "category",
                           "orders", "revenue_cents")).alias("value"))


def write_records(records: DataFrame, bootstrap: str, topic: str) -> None:
    (records.write.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
     .save())
