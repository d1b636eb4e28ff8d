"""PySpark for scenario 7: whether Spark's Kafka connector can run here, a session, and small readers.

The connector jars come from SPARK_KAFKA_JARS (a directory with spark-sql-kafka-0-10, its token
provider, kafka-clients and commons-pool2, matching the installed pyspark); `tests/run` points it at
../shared/spark-kafka-jars when that folder is there.
"""

from __future__ import annotations

import glob
import os
import time


class SparkName:
    """Stands in for a client adapter in `Step` messages."""

    name = "spark"


def missing() -> str | None:
    """Why Spark cannot run here (a skip reason), or None. A version mismatch raises: it is a set-up bug."""
    jars_dir = os.environ.get("SPARK_KAFKA_JARS")
    if not jars_dir:
        return "SPARK_KAFKA_JARS is not set (a directory with the spark-sql-kafka-0-10 connector jars)"
    try:
        import pyspark
    except ImportError:
        return "pyspark is not installed (pip install -e '.[spark]')"
    connectors = glob.glob(os.path.join(jars_dir, "spark-sql-kafka-0-10*.jar"))
    if not connectors:
        return f"no spark-sql-kafka-0-10 jar in SPARK_KAFKA_JARS={jars_dir}"
    # spark-sql-kafka-0-10_<scala>-<spark version>.jar must match the installed pyspark exactly
    if not any(os.path.basename(j).endswith(f"-{pyspark.__version__}.jar") for j in connectors):
        raise RuntimeError(f"connector {[os.path.basename(j) for j in connectors]} does not match "
                           f"pyspark {pyspark.__version__}: keep them in lockstep")
    return None


def start_session():
    from pyspark.sql import SparkSession
    jars = sorted(glob.glob(os.path.join(os.environ["SPARK_KAFKA_JARS"], "*.jar")))
    session = (SparkSession.builder.master("local[2]").appName("odradek-compat")
               .config("spark.jars", ",".join(jars))
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.ui.enabled", "false")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    return session


def read_batch(spark, bootstrap, **options):
    reader = spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def read_stream(spark, bootstrap, **options):
    reader = spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def rows(df, *columns):
    return sorted(tuple(r[c] for c in columns) for r in df.select(*columns).collect())


def wait_until(predicate, timeout: float, what: str, query=None):
    """Poll `predicate` until true; fail naming `what` (and a running query's own error) on timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        if query is not None and query.exception() is not None:
            raise AssertionError(f"{what}: the query failed: {query.exception()}")
        time.sleep(0.25)
    raise AssertionError(f"{what}: not reached within {timeout:.0f} s")
