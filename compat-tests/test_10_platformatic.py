"""Scenario 10: @platformatic/kafka, a pure-JS client on recent protocol versions (Produce v11,
Fetch v17, ListOffsets v9, JoinGroup v9, DescribeConfigs v4, ConsumerGroupHeartbeat), driven through
its documented API by drivers/platformatic_scenarios.mjs; these tests check the data it gets back.
Every expected value here is what Apache Kafka 3.9 answered to the same script (calibrate with
`bash compat-tests/against-apache-kafka.sh -k platformatic`)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from odradek_compat.node_drivers import run_scenario

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "drivers", "platformatic_scenarios.mjs")
MIN_NODE = (20, 19)   # the package's engines field


def _missing() -> str | None:
    if shutil.which("node") is None:
        return "no node (run compat-tests/setup.sh)"
    if not os.path.isdir(os.path.join(HERE, "node_modules", "@platformatic", "kafka")):
        return "@platformatic/kafka not installed (run compat-tests/setup.sh)"
    version = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout
    found = tuple(int(n) for n in re.findall(r"\d+", version)[:2])
    if found < MIN_NODE:
        return f"@platformatic/kafka needs node {'.'.join(map(str, MIN_NODE))}+, found {version.strip()}"
    return None


def run(broker, scenario: str, timeout: float = 120) -> dict:
    reason = _missing()
    if reason:
        pytest.skip(reason)
    return run_scenario(SCRIPT, broker["bootstrap"], scenario, "plt", timeout)


def test_admin(broker):
    out = run(broker, "admin")
    assert out["created"] == [{"name": out["created"][0]["name"], "partitions": 2, "replicas": 1,
                               "retention": "86400000", "cleanup": "compact,delete"}]
    assert out["duplicate"] == "TOPIC_ALREADY_EXISTS"
    assert out["partitions"] == 3
    # values, sources and synonyms as Kafka lists them: a topic config names its broker synonyms
    # only from its primary broker key on (retention.ms lists no log.retention.hours)
    assert out["configs"] == {
        "retention.ms": {"value": "86400000", "source": 1, "synonyms": [["retention.ms", "86400000", 1]]},
        "segment.ms": {"value": "604800000", "source": 5, "synonyms": []},
        "max.message.bytes": {"value": "20000", "source": 1, "synonyms": [
            ["max.message.bytes", "20000", 1], ["message.max.bytes", "1048588", 5]]},
        "cleanup.policy": {"value": "compact,delete", "source": 1, "synonyms": [
            ["cleanup.policy", "compact,delete", 1], ["log.cleanup.policy", "delete", 5]]},
    }
    # offsets by special and real timestamps (record i at base + i seconds)
    listed = {name: (o["offset"], o["timestamp"]) for name, o in out["listOffsets"].items()}
    assert listed == {"earliest": ("0", "-1"), "latest": ("5", "-1"), "byTime": ("3", "3000"),
                      "beyond": ("-1", "-1"), "maxTimestamp": ("4", "4000")}
    assert [p["lowWatermark"] for t in out["deleteRecords"] for p in t["partitions"]] == ["2"]
    assert out["earliestAfterDelete"] == "2"
    topic = out["created"][0]["name"]
    assert out["groupOffsets"] == [[topic, 0, "3", ""], [topic, 1, "0", ""]]
    assert (out["listedGroup"]["state"], out["listedGroup"]["groupType"]) == ("EMPTY", "classic")
    assert (out["describedGroup"]["state"], out["describedGroup"]["members"]) == ("EMPTY", {})
    assert out["groupOffsetsAfterDelete"] == [[topic, 0, "3", ""]]
    assert out["groupsAfterDelete"] == [] and out["topicsAfterDelete"] == []


def test_produce_every_acks_and_codec_then_read_back(broker):
    out = run(broker, "produce")
    codecs = ["none", "gzip", "snappy", "lz4"]
    # acks=0 answers nothing; acks 1 and all: three records a batch, one batch after another
    expected = [None] * 4 + [[{"topic": out["records"][0]["topic"], "partition": 0, "offset": str(3 * n)}]
                             for n in range(4, 12)]
    assert [s["offsets"] for s in out["sent"][:12]] == expected
    assert [[(o["partition"], o["offset"]) for o in s["offsets"]] for s in out["sent"][12:]] == [
        [(1, str(i)), (2, str(i))] for i in range(3)]
    records = out["records"]
    batches = [r for r in records if r["partition"] == 0]
    assert len(batches) == 36 and [r["offset"] for r in batches] == [str(i) for i in range(36)]
    for n, (acks, codec) in enumerate((a, c) for a in (0, 1, -1) for c in codecs):
        for i in range(3):
            r = batches[3 * n + i]
            assert (r["key"], r["timestamp"]) == (f"k{n}-{i}", str(n * 10 + i))
            assert r["value"] == f"{codec}-{acks}-{i}-" * (20 * (i + 1))
            assert r["headers"] == {"h": f"x{i}", "empty": ""}
    assert [(r["offset"], r["key"], r["value"]) for r in records if r["partition"] == 1] == [
        (str(i), f"i{i}", f"idempotent-{i}") for i in range(3)]
    assert [(r["offset"], r["key"], r["value"]) for r in records if r["partition"] == 2] == [
        (str(i), None, f"other-{i}") for i in range(3)] + [("3", "tombstone", None)]


def test_group_members_split_rebalance_commit_pause(broker):
    out = run(broker, "groups")
    assert out["firstMember"] == sorted(f"{p}:{i}:k{p}-{i}:v{p}-{i}:{p * 100 + i}"
                                        for p in range(4) for i in range(5))
    assert [a["partitions"] for a in out["firstAssignment"]] == [[0, 1, 2, 3]]
    assert out["committed"] == {out["firstAssignment"][0]["topic"]: ["2", "2", "2", "2"]}
    split = [sorted(a["partitions"]) for side in ("first", "second") for a in out["split"][side]]
    assert sorted(p for owned in split for p in owned) == [0, 1, 2, 3] and [len(s) for s in split] == [2, 2]
    second = [a["partitions"] for a in out["split"]["second"]][0]
    # the new member starts from the committed offset 2 of each partition it took over
    assert out["secondMember"] == sorted(f"{p}:{i}" for p in second for i in (2, 3, 4))
    assert out["described"] == {"state": "STABLE", "protocolType": "consumer", "protocol": "roundrobin",
                                "members": [2, 2]}
    assert out["whilePaused"] == 0
    assert out["afterResume"] == sorted(f"late-{p}" for p in second)
    assert [a["partitions"] for a in out["afterLeave"]] == [[0, 1, 2, 3]]
    assert out["describedEmpty"] == "EMPTY"


def test_consumer_group_protocol(broker):
    out = run(broker, "consumer_protocol")
    if "skipped" in out:
        pytest.skip(out["skipped"])
    assert out["owned"] == [2, 2]
    assert out["records"] == sorted(f"{i % 4}:v{i}" for i in range(8))
    assert (out["listed"]["state"], out["listed"]["groupType"]) == ("STABLE", "consumer")


def test_transactions(broker):
    out = run(broker, "transactions")
    topic = next(iter(out["endOffsets"]))
    # partition 0: committed-1, marker, aborted, marker, committed-3, marker; 1: committed-2, marker,
    # pending (open), whose first offset is partition 1's last stable offset
    assert out["endOffsets"] == {topic: ["6", "3"]}
    assert out["stableOffsets"] == {topic: ["6", "2"]}
    assert out["readCommittedWhileOpen"] == ["0:0:committed-1", "0:4:committed-3", "1:0:committed-2"]
    assert out["readUncommittedWhileOpen"] == ["0:0:committed-1", "0:2:aborted", "0:4:committed-3",
                                               "1:0:committed-2", "1:2:pending"]
    assert out["readCommittedAfter"] == ["0:0:committed-1", "0:4:committed-3", "1:0:committed-2",
                                         "1:2:pending"]
    assert out["ctpCommitted"] == [[0, "5"], [1, "3"]]
    assert out["ctpOutput"] == ["0:0:x-committed-1", "0:2:x-committed-3", "1:0:x-committed-2",
                                "1:2:x-pending"]
