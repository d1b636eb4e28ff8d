"""Scenario 7 (continued): Spark Structured Streaming and the batch options Spark users lean on.

Each case drives Spark's own Kafka source or sink against the broker and checks the exact rows that come
back (partition, offset, key, value, timestamp), never just counts. Streaming queries run with
`availableNow` triggers where the case allows (deterministic), and with a processing-time trigger where
the point is what happens under a query that keeps running (new partitions, data deleted under it).
"""

import json
import time

import pytest
from confluent_kafka import TopicPartition

from odradek_compat.checks import Step
from odradek_compat.records import Rec
from odradek_compat.spark import SparkName, read_batch, read_stream, rows, wait_until
from odradek_compat.topics import create_topic

SCENARIO = "7 spark"
pytestmark = pytest.mark.parametrize("client", ["spark"])

QUERY_TIMEOUT_S = 180


def run_available_now(df, checkpoint, sink):
    """Run a streaming query over everything available now; `sink(batch_df, batch_id)` sees each batch."""
    query = (df.writeStream.foreachBatch(sink).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    query.awaitTermination(QUERY_TIMEOUT_S)
    query.stop()
    if query.exception() is not None:
        raise AssertionError(f"streaming query failed: {query.exception()}")


def collecting(columns):
    """A foreachBatch sink that keeps each batch's rows (as tuples of `columns`), keyed by batch id."""
    batches = {}

    def sink(batch_df, batch_id):
        batches[batch_id] = [tuple(r[c] for c in columns) for r in batch_df.select(*columns).collect()]
    return batches, sink


def test_batch_exact_offsets_and_timestamps(spark, broker, helper, names, client):
    step = Step(SparkName)
    topic = create_topic(helper, names("spark-exact"), partitions=2)
    base = int(time.time() * 1000) - 3_600_000
    helper.produce(topic, [Rec(f"k{i}".encode(), f"v{i}".encode(), partition=i % 2, timestamp=base + i)
                           for i in range(20)])
    stored = helper.consume(topic)
    df = read_batch(spark, broker["bootstrap"], subscribe=topic, startingOffsets="earliest",
                    endingOffsets="latest")
    got = rows(df.selectExpr("partition", "offset", "CAST(key AS STRING) k", "CAST(value AS STRING) v",
                             "CAST(timestamp AS DOUBLE) * 1000 AS ts", "timestampType"),
               "partition", "offset", "k", "v", "ts", "timestampType")
    expected = sorted((r.partition, r.offset, r.key.decode(), r.value.decode(), float(r.timestamp), 0)
                      for r in stored)
    step("partition, offset, key, value, CreateTime timestamp of every record", expected,
         [(p, o, k, v, round(ts), t) for p, o, k, v, ts, t in got])


def test_batch_json_offsets_and_min_partitions(spark, broker, helper, names, client):
    step = Step(SparkName)
    topic = create_topic(helper, names("spark-json"), partitions=3)
    helper.produce(topic, [Rec(None, f"p{i % 3}-{i // 3}".encode(), partition=i % 3) for i in range(30)])
    df = read_batch(spark, broker["bootstrap"], subscribe=topic,
                    startingOffsets=json.dumps({topic: {"0": 2, "1": -2, "2": 7}}),
                    endingOffsets=json.dumps({topic: {"0": 5, "1": 4, "2": -1}}))
    expected = sorted([(0, o) for o in range(2, 5)] + [(1, o) for o in range(0, 4)] + [(2, o) for o in range(7, 10)])
    step("startingOffsets/endingOffsets as JSON (-2 earliest, -1 latest)", expected,
         rows(df, "partition", "offset"))

    df = read_batch(spark, broker["bootstrap"], subscribe=topic, startingOffsets="earliest",
                    endingOffsets="latest", minPartitions="6")
    step("minPartitions splits the read into at least that many Spark partitions", True,
         df.rdd.getNumPartitions() >= 6)
    step("minPartitions: still every record exactly once", sorted((p, o) for p in range(3) for o in range(10)),
         rows(df, "partition", "offset"))


def test_streaming_max_offsets_per_trigger_and_restart(spark, broker, helper, names, tmp_path, client):
    step = Step(SparkName)
    topic = create_topic(helper, names("spark-trigger"), partitions=2)
    checkpoint = str(tmp_path / "checkpoint")
    helper.produce(topic, [Rec(None, f"a{i}".encode(), partition=i % 2) for i in range(24)])
    source = read_stream(spark, broker["bootstrap"], subscribe=topic, startingOffsets="earliest",
                         maxOffsetsPerTrigger="5")
    batches, sink = collecting(["partition", "offset"])
    run_available_now(source, checkpoint, sink)
    step("maxOffsetsPerTrigger bounds every micro-batch", True, all(len(b) <= 5 for b in batches.values()))
    step("first run: every record once", sorted((p, o) for p in range(2) for o in range(12)),
         sorted(r for b in batches.values() for r in b))

    helper.produce(topic, [Rec(None, f"b{i}".encode(), partition=i % 2) for i in range(6)])
    batches.clear()
    run_available_now(source, checkpoint, sink)
    step("restart from the checkpoint: only the new records, no gap, no duplicate",
         sorted((p, o) for p in range(2) for o in range(12, 15)), sorted(r for b in batches.values() for r in b))


def test_streaming_subscribe_pattern_and_assign(spark, broker, helper, names, tmp_path, client):
    step = Step(SparkName)
    prefix = names("spark-spat")
    t1 = create_topic(helper, f"{prefix}-one", partitions=2)
    t2 = create_topic(helper, f"{prefix}-two", partitions=1)
    helper.produce(t1, [Rec(None, f"one-{i}".encode(), partition=i % 2) for i in range(4)])
    helper.produce(t2, [Rec(None, f"two-{i}".encode()) for i in range(3)])

    source = read_stream(spark, broker["bootstrap"], subscribePattern=f"{prefix}-.*", startingOffsets="earliest")
    batches, sink = collecting(["topic", "partition", "offset"])
    run_available_now(source, str(tmp_path / "pattern"), sink)
    step("subscribePattern streams both topics", sorted([(t1, 0, 0), (t1, 0, 1), (t1, 1, 0), (t1, 1, 1)]
                                                        + [(t2, 0, o) for o in range(3)]),
         sorted(r for b in batches.values() for r in b))

    source = read_stream(spark, broker["bootstrap"], assign=json.dumps({t1: [1], t2: [0]}),
                         startingOffsets=json.dumps({t1: {"1": 1}, t2: {"0": -2}}))
    batches, sink = collecting(["topic", "partition", "offset"])
    run_available_now(source, str(tmp_path / "assign"), sink)
    step("assign with JSON starting offsets streams only those partitions from there",
         sorted([(t1, 1, 1)] + [(t2, 0, o) for o in range(3)]), sorted(r for b in batches.values() for r in b))


def test_streaming_starting_offsets_by_timestamp_and_headers(spark, broker, helper, names, tmp_path, client):
    step = Step(SparkName)
    topic = create_topic(helper, names("spark-sts"), partitions=1)
    base = int(time.time() * 1000) - 60_000
    helper.produce(topic, [Rec(None, f"r{i}".encode(), [("n", str(i).encode()), ("n", None)],
                               timestamp=base + i * 1000) for i in range(8)])
    source = read_stream(spark, broker["bootstrap"], subscribe=topic, includeHeaders="true",
                         startingOffsetsByTimestamp=json.dumps({topic: {"0": base + 2500}}))
    seen = []

    def sink(batch_df, _batch_id):
        for r in batch_df.select("offset", "headers").collect():
            seen.append((r["offset"], [(h["key"], None if h["value"] is None else bytes(h["value"]))
                                       for h in r["headers"]]))
    run_available_now(source, str(tmp_path / "checkpoint"), sink)
    step("streaming from a timestamp, headers with duplicate keys and nulls",
         [(o, [("n", str(o).encode()), ("n", None)]) for o in range(3, 8)], sorted(seen))


def test_streaming_read_committed_over_transactions(spark, broker, helper, names, tmp_path, client):
    step = Step(SparkName)
    topic = create_topic(helper, names("spark-txn"), partitions=2)
    helper.txn_produce(topic, names("txn"), [
        ([Rec(None, f"c1-{i}".encode(), partition=i % 2) for i in range(4)], True),
        ([Rec(None, f"ab-{i}".encode(), partition=i % 2) for i in range(4)], False),
        ([Rec(None, f"c2-{i}".encode(), partition=i % 2) for i in range(2)], True),
    ])
    expected = sorted([f"c1-{i}" for i in range(4)] + [f"c2-{i}" for i in range(2)])

    df = read_batch(spark, broker["bootstrap"], subscribe=topic, startingOffsets="earliest",
                    endingOffsets="latest", **{"kafka.isolation.level": "read_committed"})
    step("batch read_committed: committed records only", expected,
         [r[0] for r in rows(df.selectExpr("CAST(value AS STRING) v"), "v")])

    source = read_stream(spark, broker["bootstrap"], subscribe=topic, startingOffsets="earliest",
                         **{"kafka.isolation.level": "read_committed"})
    batches, sink = collecting(["value"])
    run_available_now(source.selectExpr("CAST(value AS STRING) AS value"), str(tmp_path / "cp"), sink)
    step("streaming read_committed: committed records only, across offset gaps of markers", expected,
         sorted(r[0] for b in batches.values() for r in b))


def test_streaming_sees_partitions_added_while_running(spark, broker, helper, names, tmp_path, client):
    step = Step(SparkName)
    topic = create_topic(helper, names("spark-grow"), partitions=1)
    helper.produce(topic, [Rec(None, b"first", partition=0)])
    seen = set()

    def sink(batch_df, _batch_id):
        seen.update((r["partition"], r["v"]) for r in
                    batch_df.selectExpr("partition", "CAST(value AS STRING) v").collect())
    query = (read_stream(spark, broker["bootstrap"], subscribe=topic, startingOffsets="earliest")
             .writeStream.foreachBatch(sink).option("checkpointLocation", str(tmp_path / "cp"))
             .trigger(processingTime="500 milliseconds").start())
    try:
        wait_until(lambda: (0, "first") in seen, QUERY_TIMEOUT_S, "the first record", query)
        helper.create_partitions(topic, 3)
        helper.produce(topic, [Rec(None, f"new-{p}".encode(), partition=p) for p in (1, 2)])
        wait_until(lambda: {(1, "new-1"), (2, "new-2")} <= seen, QUERY_TIMEOUT_S,
                   "records of the added partitions", query)
    finally:
        query.stop()
    step("a running query picks up added partitions from their start", {(0, "first"), (1, "new-1"), (2, "new-2")},
         seen)


@pytest.mark.parametrize("fail_on_data_loss", [True, False], ids=["failOnDataLoss", "tolerate"])
def test_streaming_data_deleted_under_the_query(spark, broker, helper, names, tmp_path, client, fail_on_data_loss):
    step = Step(SparkName)
    topic = create_topic(helper, names("spark-loss"), partitions=1)
    checkpoint = str(tmp_path / "cp")
    helper.produce(topic, [Rec(None, f"a{i}".encode(), partition=0) for i in range(5)])
    options = dict(subscribe=topic, startingOffsets="earliest", failOnDataLoss=str(fail_on_data_loss).lower())
    batches, sink = collecting(["offset"])
    run_available_now(read_stream(spark, broker["bootstrap"], **options), checkpoint, sink)
    step("first run reads offsets 0-4", [(o,) for o in range(5)], sorted(r for b in batches.values() for r in b))

    # Offsets 5-9 arrive and 0-7 are deleted before the query runs again: 5, 6, 7 are lost to it.
    helper.produce(topic, [Rec(None, f"b{i}".encode(), partition=0) for i in range(5)])
    (result,) = helper.admin.delete_records([TopicPartition(topic, 0, 8)]).values()
    step("DeleteRecords moves the log start offset", 8, result.result(30).low_watermark)
    batches.clear()
    source = read_stream(spark, broker["bootstrap"], **options)
    if fail_on_data_loss:
        query = (source.writeStream.foreachBatch(sink).option("checkpointLocation", checkpoint)
                 .trigger(availableNow=True).start())
        with pytest.raises(Exception) as failure:
            query.awaitTermination(QUERY_TIMEOUT_S)
        query.stop()
        step("failOnDataLoss=true stops the query naming the lost offsets", True,
             "data loss" in str(failure.value).lower() or "lost" in str(failure.value).lower())
    else:
        run_available_now(source, checkpoint, sink)
        step("failOnDataLoss=false carries on from the new log start", [(8,), (9,)],
             sorted(r for b in batches.values() for r in b))
