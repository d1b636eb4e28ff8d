"""A PySpark data pipeline on Odradek: revenue per product per minute, from order events.

- `events`: the event and product-reference formats, a seeded generator, and the same aggregates
  computed in plain Python (the reference the Spark jobs are checked against).
- `streaming`: the Structured Streaming job. Reads JSON order events, aggregates them in one-minute
  event-time windows under a watermark, joins the compacted product reference topic, and writes one
  record per (window, product) to a compacted output topic, keyed by window and product, so the latest
  record per key is the answer and a restart from the checkpoint converges to exactly the right table.
- `batch`: reprocesses a time range (startingOffsetsByTimestamp / endingOffsetsByTimestamp).
- `session`: a SparkSession with Spark's Kafka connector (local jars or spark.jars.packages).

Run it with `python -m pipelines --help` (README: "Spark").
"""
