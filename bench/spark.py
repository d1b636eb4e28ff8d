"""`python -m bench.spark`: Spark's Kafka connector reading from Odradek and from the peer, same run.

Each broker gets a fresh topic filled with `--gib` GiB of 1 KiB records (librdkafka, batched, lz4 off),
then Spark (local[2], the connector from --jars / $SPARK_KAFKA_JARS) measures:

- batch read: `spark.read.format("kafka")` earliest→latest, summing value lengths (every byte fetched);
- streaming: `readStream` over the same topic with an availableNow trigger and `maxOffsetsPerTrigger`,
  counting rows per micro-batch in foreachBatch (records/s, micro-batch overhead included).

After one unmeasured warm-up read per broker (Spark's JIT), medians of `--repeats` alternating runs, printed as a table with Odradek/peer ratios; JSON in
bench/results/. Needs the `spark` and `bench` extras and a JDK.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from datetime import datetime, timezone

from bench import report, targets
from bench.suite import Row

RECORD_SIZE = 1024


def fill_topic(target: targets.Target, topic: str, partitions: int, total_bytes: int) -> int:
    """Create `topic` and produce `total_bytes` of 1 KiB records; return the record count."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": target.bootstrap, "log_level": 3})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(60)
    producer = Producer({"bootstrap.servers": target.bootstrap, "linger.ms": 20, "batch.size": 1 << 20,
                         "acks": "1", "log_level": 3})
    count = total_bytes // RECORD_SIZE
    value = bytes(RECORD_SIZE)
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10_000 == 0:
            producer.poll(0)
    if producer.flush(300):
        raise RuntimeError(f"{target.name}: records left unsent after 300 s")
    return count


def batch_read(spark, bootstrap: str, topic: str) -> tuple[float, int]:
    """Seconds to read the whole topic in one Spark job, and the bytes of values read."""
    began = time.monotonic()
    df = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
          .option("startingOffsets", "earliest").option("endingOffsets", "latest").load())
    (row,) = df.selectExpr("sum(length(value)) AS n").collect()
    return time.monotonic() - began, int(row["n"] or 0)


def stream_read(spark, bootstrap: str, topic: str, checkpoint: str, per_trigger: int) -> tuple[float, int]:
    """Seconds for an availableNow streaming query to consume the topic, and the rows it saw."""
    seen = []

    def count(batch_df, _batch_id):
        seen.append(batch_df.count())
    began = time.monotonic()
    query = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", topic).option("startingOffsets", "earliest")
             .option("maxOffsetsPerTrigger", str(per_trigger)).load()
             .writeStream.foreachBatch(count).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    query.awaitTermination()
    return time.monotonic() - began, sum(seen)


def results_section(args, started: datetime, running, table: str, notes: list[str],
                    load_at_start: tuple[float, ...]) -> str:
    """This run's section of bench/RESULTS.md."""
    loads = (f"{' '.join(f'{x:.2f}' for x in load_at_start)} at start, "
             f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end")
    servers = "\n".join(f"- **{t.name}**: {t.label}" for t in running)
    wrong = "\n".join(f"- {note}" for note in dict.fromkeys(notes)) or "- none"
    return f"""Latest run of `python -m bench.spark --gib {args.gib:g}` on {started.isoformat()}: each broker gets a
fresh topic of {args.gib:g} GiB of 1 KiB records on {args.partitions} partitions; Spark (local[2], the
Kafka connector's jars) reads it whole with `spark.read` and with an availableNow `readStream`; median of
{args.repeats} alternating runs after one unmeasured warm-up read per broker. Load average (1, 5, 15 min):
{loads}, on {os.cpu_count()} cores shared with other work: the ratios are what we compare.

Servers:
{servers}

{table}

Wrong answers (every byte and row read is checked against what was written):
{wrong}
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.spark", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gib", type=float, default=1.0, help="GiB written to each broker (default 1)")
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--per-trigger", type=int, default=200_000, help="maxOffsetsPerTrigger when streaming")
    parser.add_argument("--jars", help="Spark Kafka connector jars (default $SPARK_KAFKA_JARS)")
    parser.add_argument("--targets", default="odradek,peer")
    parser.add_argument("--no-results-md", action="store_true", help="do not update bench/RESULTS.md")
    args = parser.parse_args(argv)

    import tempfile

    from pipelines.session import spark_session

    started = datetime.now(timezone.utc).replace(microsecond=0)
    load_at_start = os.getloadavg()
    log_dir = report.RESULTS_DIR / f"logs-spark-{started.strftime('%Y%m%dT%H%M%SZ')}"
    log_dir.mkdir(parents=True, exist_ok=True)
    starters = {"odradek": lambda: targets.start_odradek(log_dir), "peer": lambda: targets.start_peer(log_dir)}
    running = []
    notes: list[str] = []   # wrong answers from a broker: reported, not hidden behind a rate
    batch_row = Row(f"Spark batch read, {args.gib:g} GiB of 1 KiB records", "MB/s", True)
    stream_row = Row(f"Spark streaming (availableNow, {args.per_trigger} per trigger)", "records/s", True)
    try:
        for name in args.targets.split(","):
            running.append(starters[name]())
            print(f"{running[-1].name}: {running[-1].label} at {running[-1].bootstrap}", flush=True)
        spark = spark_session(args.jars, app_name="odradek-bench-spark")
        topics = {}
        for target in running:
            topic = f"bench-spark-{int(time.time())}"
            began = time.monotonic()
            records = fill_topic(target, topic, args.partitions, int(args.gib * (1 << 30)))
            topics[target.name] = (topic, records)
            print(f"{target.name}: {records} records written in {time.monotonic() - began:.0f} s", flush=True)
        for target in running:     # warm Spark's JVM up (and each broker's caches) before measuring
            batch_read(spark, target.bootstrap, topics[target.name][0])
        for repeat in range(args.repeats):
            for target in running:
                topic, records = topics[target.name]
                seconds, nbytes = batch_read(spark, target.bootstrap, topic)
                if nbytes != records * RECORD_SIZE:
                    notes.append(f"{target.name}: batch read {nbytes} bytes of the {records * RECORD_SIZE} written")
                batch_row.samples.setdefault(target.name, []).append(nbytes / seconds / 1e6)
                with tempfile.TemporaryDirectory() as checkpoint:
                    seconds, rows = stream_read(spark, target.bootstrap, topic, checkpoint, args.per_trigger)
                if rows != records:
                    notes.append(f"{target.name}: streaming saw {rows} rows of the {records} written")
                stream_row.samples.setdefault(target.name, []).append(rows / seconds)
                print(f"round {repeat + 1} {target.name}: batch {batch_row.samples[target.name][-1]:.0f} MB/s, "
                      f"streaming {stream_row.samples[target.name][-1]:.0f} records/s", flush=True)
        spark.stop()
    finally:
        for target in running:
            target.stop()
    rows = [batch_row, stream_row]
    table = report.format_table(rows)
    path = report.RESULTS_DIR / f"spark-{started.strftime('%Y%m%dT%H%M%SZ')}.json"
    path.write_text(json.dumps({"date": started.isoformat(), "args": vars(args),
                                "machine": report.machine_info(),
                                "targets": {t.name: t.label for t in running},
                                "rows": [{"case": r.case, "metric": r.metric, "samples": r.samples} for r in rows],
                                "notes": notes},
                               indent=2))
    if not args.no_results_md:
        report.write_section(report.RESULTS_MD, "Spark (`python -m bench.spark`)",
                             results_section(args, started, running, table, notes, load_at_start))
    print()
    print(table)
    if notes:
        print("\nwrong answers:\n" + "\n".join(f"  {note}" for note in notes))
    print(f"\nresults in {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
