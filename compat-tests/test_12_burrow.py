"""Scenario 12: LinkedIn's Burrow (Debian's `burrow` 1.2.1, sarama inside), the consumer-lag monitor.

Burrow reads `__consumer_offsets` itself and decodes the binary offset-commit records, fetches each
partition's high watermark with ListOffsets, and answers over HTTP with every group's lag. Burrow 1.2.1
will not start without ZooKeeper (its own coordinator), so the test runs ZooKeeper 3.9 from the
reference Kafka's jars. Apache Kafka 3.9 gave the same answers (calibrate with
`bash compat-tests/against-apache-kafka.sh -k burrow`)."""

from __future__ import annotations

import glob
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek_compat.brokers import free_port, terminate

HERE = os.path.dirname(os.path.abspath(__file__))
BURROW = "/usr/bin/Burrow"
PER_PARTITION = 20
BURROW_CONFIG = """[general]
pidfile="{work}/burrow.pid"
[logging]
filename="{work}/burrow.log"
level="debug"
[zookeeper]
servers=["127.0.0.1:{zk_port}"]
timeout=6
root-path="/burrow"
[client-profile.compat]
client-id="burrow"
kafka-version="2.0.0"
[cluster.local]
class-name="kafka"
servers=["{bootstrap}"]
client-profile="compat"
topic-refresh=1
offset-refresh=1
[consumer.local]
class-name="kafka"
cluster="local"
servers=["{bootstrap}"]
client-profile="compat"
[httpserver.default]
address="127.0.0.1:{http_port}"
[storage.default]
class-name="inmemory"
workers=4
intervals=10
min-distance=1
"""
LAGGING_COMMITS = {0: 5, 1: 15}   # partition -> committed offset of the lagging group


def _kafka_libs() -> str | None:
    for home in (os.environ.get("APACHE_KAFKA_HOME"), os.path.join(HERE, "..", "..", "shared", "apache-kafka"),
                 "/work/shared/apache-kafka"):
        if home and glob.glob(os.path.join(home, "libs", "zookeeper-3*.jar")):
            return os.path.join(home, "libs")
    return None


def _missing() -> str | None:
    if not os.access(BURROW, os.X_OK):
        return "no Burrow (apt-get install burrow, or run compat-tests/setup.sh)"
    if shutil.which("java") is None:
        return "no java for Burrow's ZooKeeper (run compat-tests/setup.sh)"
    if _kafka_libs() is None:
        return "no ZooKeeper jar (shared/apache-kafka/libs) for Burrow's coordinator"
    return None


def _wait_port(port: int, proc: subprocess.Popen, what: str, log: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            with open(log, errors="replace") as f:
                raise AssertionError(f"{what} exited with {proc.returncode}: {f.read()[-3000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"{what} did not listen on {port} within {timeout} s")


@pytest.fixture
def burrow(broker):
    """start() runs Burrow watching the broker as cluster `local` and answers get(path) for its
    /v3/kafka/local API and the path of its JSON log."""
    reason = _missing()
    if reason:
        pytest.skip(reason)
    work = tempfile.mkdtemp(prefix="odradek-compat-burrow-")
    processes, outputs = [], []

    def spawn(what: str, argv: list[str], port: int) -> None:
        output = open(os.path.join(work, f"{what}.out"), "w")
        outputs.append(output)
        proc = subprocess.Popen(argv, stdout=output, stderr=subprocess.STDOUT)
        processes.append(proc)
        _wait_port(port, proc, what, output.name)

    def start():
        zk_port, http_port = free_port(), free_port()
        with open(os.path.join(work, "zoo.cfg"), "w") as f:
            f.write(f"tickTime=2000\ndataDir={work}/zk\nclientPort={zk_port}\nclientPortAddress=127.0.0.1\n"
                    "admin.enableServer=false\n")
        with open(os.path.join(work, "burrow.toml"), "w") as f:
            f.write(BURROW_CONFIG.format(work=work, zk_port=zk_port, http_port=http_port,
                                         bootstrap=broker["bootstrap"]))
        spawn("zookeeper", ["java", "-Xmx96m", "-XX:+UseSerialGC", "-cp", os.path.join(_kafka_libs(), "*"),
                            "org.apache.zookeeper.server.ZooKeeperServerMain", os.path.join(work, "zoo.cfg")],
              zk_port)
        spawn("burrow", [BURROW, "--config-dir", work], http_port)

        def get(path: str) -> dict:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/v3/kafka/local{path}", timeout=5) as r:
                    return json.load(r)
            except urllib.error.HTTPError as e:   # Burrow answers a 404 with a JSON body
                return json.load(e)

        return get, os.path.join(work, "burrow.log")

    try:
        yield start
    finally:
        for proc in reversed(processes):
            terminate(proc, 10)
        for output in outputs:
            output.close()
        shutil.rmtree(work, ignore_errors=True)


def _until(what: str, probe, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while True:
        answer = probe()
        if answer is not None:
            return answer
        assert time.monotonic() < deadline, f"Burrow never reported {what}"
        time.sleep(0.5)


def _commit(bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    """A group member that reads the topic and commits `offsets` (partition -> next offset)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 20
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.5)
        assert len(consumer.assignment()) == len(offsets), f"{group} was never assigned {topic}"
        consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    finally:
        consumer.close()


def test_burrow_reports_the_lag_of_a_lagging_and_a_caught_up_group(broker, burrow, names):
    bootstrap = broker["bootstrap"]
    topic, lagging, caught_up = names("burrow"), names("lagging"), names("caught-up")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(2 * PER_PARTITION):
        producer.produce(topic, value=b"v%d" % i, partition=i % 2)
    assert producer.flush(30) == 0
    # Burrow 1.2.1 exits when its first Metadata request for __consumer_offsets is answered with an
    # error, as Kafka's first answer is while it creates that topic: a group commits once before
    _commit(bootstrap, names("warm-up"), topic, {0: 0, 1: 0})
    get, log_path = burrow()

    # Burrow drops a commit for a partition whose high watermark it has not fetched yet: wait for them
    def watermarks():
        answer = get(f"/topic/{topic}")
        return answer if answer.get("offsets") == [PER_PARTITION, PER_PARTITION] else None
    _until(f"the high watermarks of {topic}", watermarks)

    _commit(bootstrap, lagging, topic, LAGGING_COMMITS)
    _commit(bootstrap, caught_up, topic, {0: PER_PARTITION, 1: PER_PARTITION})

    def status(group: str, total: int):
        def probe():
            answer = get(f"/consumer/{group}/lag")
            found = answer.get("status") or {}
            return found if found.get("partition_count") == 2 and found.get("totallag") == total else None
        return probe

    slow = _until(f"{lagging} with lag 20", status(lagging, 20))
    assert {p["partition"]: p["current_lag"] for p in slow["partitions"]} == \
        {p: PER_PARTITION - o for p, o in LAGGING_COMMITS.items()}
    assert {p["topic"] for p in slow["partitions"]} == {topic}
    ok = _until(f"{caught_up} with lag 0", status(caught_up, 0))
    assert [(p["current_lag"], p["status"]) for p in ok["partitions"]] == [(0, "OK"), (0, "OK")]
    assert ok["status"] == "OK"

    detail = get(f"/consumer/{lagging}")
    assert detail["error"] is False
    last = [[o for o in partition["offsets"] if o][-1] for partition in detail["topics"][topic]]
    assert [(o["offset"], o["lag"]) for o in last] == [(5, 15), (15, 5)]
    assert {lagging, caught_up} <= set(get("/consumer")["consumers"])

    # Burrow decoded every offset commit of these groups; the only thing it skips is the group
    # metadata record at value version 3, which Kafka 3.9 writes too (Burrow 1.2.1 knows 0-2)
    with open(log_path) as f:
        entries = [json.loads(line) for line in f if line.startswith("{")]
    ours = [e for e in entries if e.get("group") in (lagging, caught_up)]
    commits = [e for e in ours if e.get("msg") == "consumer offset"]
    assert {(e["group"], e["partition"], e["offset"]) for e in commits} == \
        {(lagging, p, o) for p, o in LAGGING_COMMITS.items()} | {(caught_up, p, PER_PARTITION) for p in (0, 1)}
    undecoded = [e for e in ours if e.get("msg") == "failed to decode"]
    assert all((e.get("message_type"), e.get("reason"), e.get("version")) == ("metadata", "value version", 3)
               for e in undecoded), undecoded
    old_keys = [e for e in entries if e.get("reason") == "key version" and e.get("version", 99) < 3]
    assert not old_keys, old_keys
