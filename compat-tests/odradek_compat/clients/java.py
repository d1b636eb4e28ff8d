"""The official Java client (kafka-clients 4.x and 3.9.0) through drivers/Driver.java, one JVM per version."""

from __future__ import annotations

import glob
import hashlib
import os
import shutil
import subprocess
import tempfile

from ..records import from_json, to_json
from .base import Delivery, PollResult
from .driver_process import DriverClient, DriverProcess

HERE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CACHE = os.path.join(HERE, ".cache")
SOURCE = os.path.join(HERE, "drivers", "Driver.java")
JAR_SETS = {"java-4": "java4", "java-3.9": "java3"}


def jars_missing(name: str) -> str | None:
    if shutil.which("javac") is None or shutil.which("java") is None:
        return "no JDK (run compat-tests/setup.sh)"
    if not glob.glob(os.path.join(CACHE, JAR_SETS[name], "kafka-clients-*.jar")):
        return f"no kafka-clients jars in compat-tests/.cache/{JAR_SETS[name]} (run compat-tests/setup.sh)"
    return None


def compiled_classes(jar_set: str, source: str = SOURCE) -> str:
    """Compiles a driver (Driver.java unless told) against the jar set once per version of the source:
    the classes live under the source's hash, so worktrees sharing one .cache never run each other's
    driver."""
    with open(source, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:12]
    classes = os.path.join(CACHE, f"classes-{jar_set}-{digest}")
    main_class = os.path.splitext(os.path.basename(source))[0] + ".class"
    if os.path.exists(os.path.join(classes, main_class)):
        return classes
    tmp = tempfile.mkdtemp(dir=CACHE, prefix=f"classes-{jar_set}.")
    subprocess.run(["javac", "-nowarn", "-encoding", "UTF-8", "-d", tmp, "-cp",
                    os.path.join(CACHE, jar_set, "*"), source], check=True, capture_output=True, timeout=180)
    try:
        os.replace(tmp, classes)
    except OSError:   # another run compiled the same source meanwhile
        shutil.rmtree(tmp, ignore_errors=True)
    return classes


class JavaClient(DriverClient):
    def __init__(self, bootstrap: str, name: str, client_properties: str | None = None,
                 extra_classpath: list[str] = ()) -> None:
        """`client_properties`: a Kafka client properties file applied to every client
        (security.protocol, ssl.*, sasl.jaas.config, ...); `extra_classpath`: jars some of those
        need (e.g. jackson-databind for OAUTHBEARER's login)."""
        super().__init__(bootstrap)
        self.name = name
        jar_set = JAR_SETS[name]
        classes = compiled_classes(jar_set)
        classpath = os.pathsep.join([classes, os.path.join(CACHE, jar_set, "*"), *extra_classpath])
        self.driver = DriverProcess(name, ["java", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                                           "-cp", classpath, "Driver", bootstrap,
                                           *([client_properties] if client_properties else [])])

    def produce(self, topic, records, *, acks="all", compression="none", idempotent=None, linger_ms=5, timeout=60):
        config = {"acks": acks, "compression.type": compression, "linger.ms": linger_ms,
                  "delivery.timeout.ms": int(timeout * 1000) - 5000, "request.timeout.ms": 15000,
                  "max.block.ms": 30000}
        if idempotent is not None:
            config["enable.idempotence"] = str(idempotent).lower()
        elif acks != "all":
            config["enable.idempotence"] = "false"  # idempotence requires acks=all
        answers = self.driver.call("produce", timeout=timeout + 30, topic=topic, config=config,
                                   records=[to_json(r) for r in records])
        return [Delivery(a.get("partition"), a.get("offset"), a.get("error")) for a in answers]

    def consume(self, topic, *, partitions=None, start=None, isolation="read_uncommitted", timeout=30):
        answer = self.driver.call(
            "consume", timeout=timeout + 30, topic=topic, partitions=partitions, timeout_ms=int(timeout * 1000),
            start="earliest" if start is None else {str(p): o for p, o in start.items()},
            config={"isolation.level": isolation})
        return [from_json(r) for r in answer["records"]]

    def offsets_for_times(self, topic, partition, timestamps):
        return self.driver.call("offsets_for_times", topic=topic, partition=partition, timestamps=timestamps)

    def list_offsets(self, topic, partitions):
        answer = self.driver.call("list_offsets", topic=topic, partitions=partitions)
        return {int(p): tuple(v) for p, v in answer.items()}

    def commit(self, group, topic, offsets):
        self.driver.call("commit", group=group, topic=topic,
                         offsets={str(p): [o, m] for p, (o, m) in offsets.items()})

    def committed(self, group, topic, partitions):
        answer = self.driver.call("committed", group=group, topic=topic, partitions=partitions)
        return {int(p): (tuple(v) if v is not None else None) for p, v in answer.items()}

    ASSIGNORS = {
        "range": "org.apache.kafka.clients.consumer.RangeAssignor",
        "cooperative-sticky": "org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
    }

    def group_offsets(self, group):
        return {(t, p): o for t, p, o in self.driver.call("group_offsets", group=group)}

    def group_open(self, group, topic, *, instance_id=None, assignor="range", session_timeout_ms=10000):
        config = {"partition.assignment.strategy": self.ASSIGNORS[assignor],
                  "session.timeout.ms": session_timeout_ms, "heartbeat.interval.ms": 1000,
                  "max.poll.interval.ms": 60000}
        if instance_id is not None:
            config["group.instance.id"] = instance_id
        return self.driver.call("group_open", group=group, topic=topic, config=config)

    def group_poll(self, member, timeout_ms=200):
        a = self.driver.call("group_poll", handle=member, timeout_ms=timeout_ms)
        return PollResult([from_json(r) for r in a["records"]], a["assignment"],
                          a["assigned_events"], a["revoked_events"])

    def group_commit(self, member):
        self.driver.call("group_commit", handle=member)

    def group_close(self, member):
        self.driver.call("group_close", handle=member)

    def txn_produce(self, topic, transactional_id, batches):
        self.driver.call("txn_produce", timeout=120, topic=topic, transactional_id=transactional_id,
                         config={"transaction.timeout.ms": 60000, "max.block.ms": 30000},
                         batches=[{"records": [to_json(r) for r in recs], "commit": commit}
                                  for recs, commit in batches])

    def txn_open(self, topic, transactional_id, records):
        return self.driver.call("txn_open", timeout=90, topic=topic, transactional_id=transactional_id,
                                records=[to_json(r) for r in records], config={"transaction.timeout.ms": 60000, "max.block.ms": 30000})

    def txn_close(self, handle, commit):
        self.driver.call("txn_close", timeout=90, handle=handle, commit=commit)

    def consume_transform_produce(self, in_topic, out_topic, group, transactional_id, count, timeout=60):
        return self.driver.call("consume_transform_produce", timeout=timeout + 30, in_topic=in_topic,
                                out_topic=out_topic, group=group, transactional_id=transactional_id,
                                count=count, timeout_ms=int(timeout * 1000),
                                config={"transaction.timeout.ms": 60000, "max.block.ms": 30000})
