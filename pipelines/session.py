"""A SparkSession with Spark's Kafka connector: local jars when given, else Maven coordinates."""

from __future__ import annotations

import glob
import os

# Spark 4.0.1 on Scala 2.13: what `spark.jars.packages` resolves when the machine can reach Maven.
CONNECTOR_PACKAGE = "org.apache.spark:spark-sql-kafka-0-10_2.13:4.0.1"


def connector_jars(jars_dir: str | None) -> list[str]:
    """The connector's jars in `jars_dir` (or $SPARK_KAFKA_JARS); [] when neither is set."""
    jars_dir = jars_dir or os.environ.get("SPARK_KAFKA_JARS")
    if not jars_dir:
        return []
    jars = sorted(glob.glob(os.path.join(jars_dir, "*.jar")))
    if not any("spark-sql-kafka-0-10" in os.path.basename(j) for j in jars):
        raise SystemExit(f"no spark-sql-kafka-0-10 jar in {jars_dir}")
    return jars


def spark_session(jars_dir: str | None = None, *, app_name: str = "odradek-pipeline"):
    from pyspark.sql import SparkSession
    builder = (SparkSession.builder.master(os.environ.get("SPARK_MASTER", "local[2]")).appName(app_name)
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false"))
    jars = connector_jars(jars_dir)
    builder = (builder.config("spark.jars", ",".join(jars)) if jars
               else builder.config("spark.jars.packages", CONNECTOR_PACKAGE))
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session
