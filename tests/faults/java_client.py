"""Workload 1 with the official Java client: java/FaultProducer.java, compiled against the
kafka-clients 4.x jars that compat-tests/setup.sh caches, by compat-tests' own compile step (classes
kept in compat-tests/.cache under the source's hash, so a second run starts at once)."""

from __future__ import annotations

import os
import sys

from broker.testing_cluster import REPO_ROOT

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "java", "FaultProducer.java")
COMPAT = os.path.join(REPO_ROOT, "compat-tests")
CLIENT = "java-4"


def _java():
    if COMPAT not in sys.path:
        sys.path.insert(0, COMPAT)
    from odradek_compat.clients import java
    return java


def missing() -> str | None:
    """None when the Java producer can run, else why not."""
    return _java().jars_missing(CLIENT)


def producer_command(bootstrap: str, topic: str, partitions: int, seconds: float, rate: float,
                     history: str, stop_file: str) -> list[str]:
    java = _java()
    jar_set = java.JAR_SETS[CLIENT]
    classes = java.compiled_classes(jar_set, SOURCE)
    classpath = os.pathsep.join([classes, os.path.join(java.CACHE, jar_set, "*")])
    # a small heap and the quick JIT: the machine is shared with three brokers
    return ["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", classpath,
            "FaultProducer", bootstrap, topic, str(partitions), str(seconds), str(rate), history,
            stop_file]
