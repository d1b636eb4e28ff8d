"""Scenario 13: kafka-node 5.0.0 and no-kafka 3.4, JavaScript clients that speak the old protocol
themselves (Produce v1-v2 with message format v0/v1, Fetch v0-v2, ListOffsets v0, Metadata v0-v1,
the group APIs at v0, OffsetCommit v0-v2, OffsetFetch v0-v1, CreateTopics v1, DescribeConfigs v2)
and assign partitions with their own code, driven by drivers/old_js_clients.js. Every expected value
is what Apache Kafka 3.9 answered to the same script (calibrate with
`bash compat-tests/against-apache-kafka.sh -k old_js`)."""

from __future__ import annotations

import os
import shutil

import pytest

from odradek_compat.node_drivers import run_scenario

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "drivers", "old_js_clients.js")


def run(broker, scenario: str, timeout: float = 90) -> dict:
    if shutil.which("node") is None:
        pytest.skip("no node (run compat-tests/setup.sh)")
    for package in ("kafka-node", "no-kafka"):
        if not os.path.isdir(os.path.join(HERE, "node_modules", package)):
            pytest.skip(f"{package} not installed (run compat-tests/setup.sh)")
    if not os.path.isfile(os.path.join(HERE, "node_modules", "snappy", "build", "Release", "binding.node")):
        pytest.skip("kafka-node's optional snappy did not build (npm needs python3, make and g++ for it)")
    return run_scenario(SCRIPT, broker["bootstrap"], scenario, "old", timeout)


def test_kafka_node_admin_produce_fetch_offsets(broker):
    out = run(broker, "kafka_node")
    assert out["created"] == [] and out["duplicate"] == [{"topic": "kn", "error": "Topic 'kn' already exists."}]
    assert out["configs"] == {"retention.ms": ["3600000", 1], "cleanup.policy": ["delete", 5]}
    # the cyclic partitioner's none, gzip and snappy message sets, then the keyed one's a, b, a
    assert out["produced"] == [{"kn": {"0": 0}}, {"kn": {"1": 0}}, {"kn": {"2": 0}},
                               {"kn": {"1": 2}}, {"kn": {"2": 2}}, {"kn": {"1": 3}}]
    assert out["read"] == ["0:0:k00:v00", "0:1:k01:v01", "1:0:k10:v10", "1:1:k11:v11", "1:2:a:keyed-a",
                           "1:3:a:keyed-a", "2:0:k20:v20", "2:1:k21:v21", "2:2:b:keyed-b"]
    # Fetch v2 predates KIP-74: a message set larger than fetchMaxBytes is not sent at all
    assert out["readTooSmall"] == []
    assert out["latest"] == {"kn": {"0": 2, "1": 4, "2": 3}}
    assert out["earliest"] == {"kn": {"0": 0, "1": 0, "2": 0}}
    # the Metadata request that auto-creates a topic answers it unknown; the next one finds it
    assert out["latestOfMissing"] == {"error": "Error:Topic(s) does not exist"}
    assert out["latestOfMissingLater"] == {"kn-auto": {"0": 0}}


def test_kafka_node_consumer_group_rebalance_and_commits(broker):
    out = run(broker, "kafka_node_groups")
    assert all(list(p["kng"].values()) == [0] for p in out["produced"])
    assert out["firstOwned"] == [0, 1, 2, 3]
    assert out["firstRead"] == sorted(f"{p}:{i}:v{p}-{i}" for p in range(4) for i in range(4))
    assert out["commit"]["kng"]["errorCode"] == 0
    assert out["committed"] == {"kng": {str(p): 2 for p in range(4)}}
    # a second member joins: roundrobin splits the partitions, the newcomer starts at the commit
    assert out["split"] == [[0, 2], [1, 3]]
    assert out["secondRead"] == sorted(f"{p}:{i}" for p in out["secondOwned"] for i in (2, 3))
    assert out["described"] == {"state": "Stable", "protocolType": "consumer", "protocol": "roundrobin",
                                "assignments": [[0, 2], [1, 3]]}
    assert out["listed"] == "consumer"
    assert out["afterLeave"] == [0, 1, 2, 3]
    assert out["describedEmpty"] == ["Empty", 0]
    assert out["errors"] == []


def test_no_kafka_message_format_v0_and_groups(broker):
    out = run(broker, "no_kafka")
    assert out["produced"] == [["0@0"], ["0@2"], ["1@0"], ["1@2"]]   # none, gzip, snappy, none
    records = ["0:0:k00:c0-0", "0:1:k01:c0-1", "0:2:k10:c1-0", "0:3:k11:c1-1", "1:0:k20:c2-0",
               "1:1:k21:c2-1", "1:2:k00:c0-0", "1:3:k01:c0-1"]
    assert out["read"] == records and out["groupRead"] == records
    assert out["offsets"] == [4, 0]
    # OffsetCommit v0 (ZooKeeper offsets) is refused per partition with UNSUPPORTED_VERSION (35)
    assert out["commitV0"] == ["Error:Unknown error code: 35"]
    assert out["commit"] == ["0:null", "1:null"]
    assert out["fetched"] == ["0:3:meta", "1:3:meta"]   # no-kafka commits the offset after the one given
    assert out["described"] == {"state": "Stable", "protocolType": "consumer",
                                "protocol": "DefaultAssignmentStrategy", "assignment": [[[0, 1]]]}
    assert out["lag"] == [[0, 3, 4], [1, 3, 4]]
