"""Scenario 7: Spark's built-in Kafka connector (PySpark) against the broker.

Needs pyspark (the optional extra `spark`) and the connector jars, which no reachable registry carries:
SPARK_KAFKA_JARS names a directory holding spark-sql-kafka-0-10, spark-token-provider-kafka-0-10,
kafka-clients and commons-pool2 jars matching the installed pyspark. Without them every test skips
with that reason. One SparkSession (the `spark` fixture in conftest.py) serves every Spark test: its JVM
start-up is the cost. Streaming cases are in test_7_spark_streaming.py.
"""

import json
import time

import pytest

from odradek_compat.checks import Step
from odradek_compat.records import Rec
from odradek_compat.spark import SparkName, read_batch, rows
from odradek_compat.topics import create_topic

SCENARIO = "7 spark"
pytestmark = pytest.mark.parametrize("client", ["spark"])


def test_batch_write_then_read(spark, broker, helper, names, client):
    step = Step(SparkName)
    topic = create_topic(helper, names("spark-sink"), partitions=4)
    data = [(f"k{i}", f"value-{i}") for i in range(200)]
    df = spark.createDataFrame(data, ["key", "value"])
    (df.write.format("kafka").option("kafka.bootstrap.servers", broker["bootstrap"]).option("topic", topic).save())
    got = helper.consume(topic)
    step("batch sink: every row once", sorted((k.encode(), v.encode()) for k, v in data),
         sorted((r.key, r.value) for r in got))

    df = read_batch(spark, broker["bootstrap"], subscribe=topic, startingOffsets="earliest", endingOffsets="latest")
    got_rows = rows(df.selectExpr("CAST(key AS STRING) k", "CAST(value AS STRING) v", "partition", "offset"),
                    "partition", "offset", "k", "v")
    expected = sorted((r.partition, r.offset, r.key.decode(), r.value.decode()) for r in got)
    step("batch read earliest→latest: exact content of all 4 partitions", expected, got_rows)


def test_streaming_aggregation_restarts_from_checkpoint(spark, broker, helper, names, tmp_path, client):
    step = Step(SparkName)
    source = create_topic(helper, names("spark-words"), partitions=2)
    sink = create_topic(helper, names("spark-counts"))
    checkpoint = str(tmp_path / "checkpoint")

    def run_once():
        words = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", broker["bootstrap"])
                 .option("subscribe", source).option("startingOffsets", "earliest").load()
                 .selectExpr("CAST(value AS STRING) AS word"))
        counts = words.groupBy("word").count().selectExpr("word AS key", "CAST(count AS STRING) AS value")
        query = (counts.writeStream.format("kafka").option("kafka.bootstrap.servers", broker["bootstrap"])
                 .option("topic", sink).option("checkpointLocation", checkpoint).outputMode("update")
                 .trigger(availableNow=True).start())
        query.awaitTermination(180)
        query.stop()

    first = ["a", "b", "a", "c"] * 5
    helper.produce(source, [Rec(None, w.encode()) for w in first])
    run_once()
    second = ["a", "d"] * 5
    helper.produce(source, [Rec(None, w.encode()) for w in second])
    run_once()
    latest = {}
    for r in sorted(helper.consume(sink), key=lambda r: r.offset):
        latest[r.key.decode()] = int(r.value)
    expected = {}
    for w in first + second:
        expected[w] = expected.get(w, 0) + 1
    step("counts after a restart from the checkpoint (no loss, no duplicates)", expected, latest)


def test_starting_offsets_by_timestamp(spark, broker, helper, names, client):
    step = Step(SparkName)
    topic = create_topic(helper, names("spark-ts"), partitions=1)
    base = int(time.time() * 1000) - 60_000
    helper.produce(topic, [Rec(None, f"r{i}".encode(), timestamp=base + i * 1000) for i in range(10)])
    df = read_batch(spark, broker["bootstrap"], subscribe=topic,
                    startingOffsetsByTimestamp=json.dumps({topic: {"0": base + 4500}}), endingOffsets="latest")
    step("records at or after the timestamp", [(5 + i, f"r{5 + i}") for i in range(5)],
         rows(df.selectExpr("offset", "CAST(value AS STRING) v"), "offset", "v"))


def test_subscribe_pattern_assign_and_headers(spark, broker, helper, names, client):
    step = Step(SparkName)
    prefix = names("spark-pat")
    t1 = create_topic(helper, f"{prefix}-one", partitions=2)
    t2 = create_topic(helper, f"{prefix}-two", partitions=2)
    helper.produce(t1, [Rec(None, f"one-{i}".encode(), [("h", b"x"), ("h", None)], partition=i % 2) for i in range(6)])
    helper.produce(t2, [Rec(None, f"two-{i}".encode(), partition=i % 2) for i in range(6)])

    df = read_batch(spark, broker["bootstrap"], subscribePattern=f"{prefix}-.*", startingOffsets="earliest",
                    endingOffsets="latest")
    step("subscribePattern reads both topics", 12, df.count())

    df = read_batch(spark, broker["bootstrap"], assign=json.dumps({t1: [1]}), startingOffsets="earliest",
                    endingOffsets="latest")
    step("assign reads only the assigned partition", [f"one-{i}" for i in (1, 3, 5)],
         [r[0] for r in rows(df.selectExpr("CAST(value AS STRING) v"), "v")])

    df = read_batch(spark, broker["bootstrap"], subscribe=t1, includeHeaders="true", startingOffsets="earliest",
                    endingOffsets="latest")
    headers = [[(h["key"], None if h["value"] is None else bytes(h["value"])) for h in r["headers"]]
               for r in df.select("headers").collect()]
    step("includeHeaders: duplicate keys and null values", [[("h", b"x"), ("h", None)]] * 6, headers)
