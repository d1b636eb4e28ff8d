"""`--broker kafka`: the fault lab with Apache Kafka 3.9 nodes (kafka_nodes.py) as the oracle.

The default run checks how the Kafka nodes are configured and what the runner refuses; `-m slow`
runs one real trial (kill -9 of a partition leader, librdkafka producer) on three Kafka JVMs in
network namespaces."""

from __future__ import annotations

import functools
import json
import os

import pytest

from tests.faults import checker, kafka_nodes, labs
from tests.faults.env import CLUSTER_SETTINGS
from tests.faults.run import _keep_logs, ensure_tools, run_trial
from tests.faults.run import main as run_main


def _cluster(tmp_path):
    hosts = {1: "10.213.9.10", 2: "10.213.9.11", 3: "10.213.9.12"}
    return kafka_nodes.KafkaCluster(tmp_path, 3, CLUSTER_SETTINGS,
                                    lambda node_id: (hosts[node_id], ["ip", "netns", "exec",
                                                                      f"ns{node_id}"]))


def test_kafka_nodes_get_the_lab_settings_in_kafka_terms(tmp_path):
    cluster = _cluster(tmp_path)
    node = cluster.nodes[2]
    properties = node.properties()
    assert properties["listeners"] == "PLAINTEXT://10.213.9.11:9092,CONTROLLER://10.213.9.11:9093"
    assert properties["advertised.listeners"] == "PLAINTEXT://10.213.9.11:9092"
    assert properties["controller.quorum.voters"] == (
        "1@10.213.9.10:9093,2@10.213.9.11:9093,3@10.213.9.12:9093")
    assert properties["process.roles"] == "broker,controller" and properties["node.id"] == "2"
    assert properties["log.dirs"] == node.data_dir == str(tmp_path / "node-2")
    for key in ("min.insync.replicas", "default.replication.factor", "replica.lag.time.max.ms",
                "broker.session.timeout.ms", "unclean.leader.election.enable",
                "transaction.state.log.min.isr", "auto.create.topics.enable"):
        assert properties[key] == CLUSTER_SETTINGS[key]
    # Odradek's fsync-before-acknowledge becomes Kafka's flush after every message
    assert "log.flush.before.acknowledge" not in properties
    assert properties["log.flush.interval.messages"] == "1"
    # the process the lab signals is the JVM itself, started in the node's namespace
    command = node.command()
    assert command[:4] == ["ip", "netns", "exec", "ns2"] and command[4] == "java"
    assert command[-2:] == ["kafka.Kafka", node.properties_path]
    node.write_properties()
    assert "log.flush.interval.messages=1\n" in (tmp_path / "node-2.properties").read_text()


def test_cluster_ids_are_kafka_uuids():
    ids = {kafka_nodes.new_cluster_id() for _ in range(200)}
    assert len(ids) == 200
    assert all(len(i) == 22 and not i.startswith("-") and
               set(i) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
               for i in ids)


def test_the_runner_refuses_what_kafka_nodes_cannot_run(tmp_path, capsys):
    with pytest.raises(SystemExit) as refused:
        run_main(["--broker", "kafka", "--nemesis", "kill-leader,slow-fsync",
                  "--out", str(tmp_path / "a")])
    assert refused.value.code == 2
    assert "--broker kafka cannot run slow-fsync" in capsys.readouterr().err
    # one results directory holds one broker's trials
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "results.jsonl").write_text(json.dumps(
        {"nemesis": "kill-leader", "ok": True, "trial": 1}) + "\n")
    with pytest.raises(SystemExit):
        run_main(["--broker", "kafka", "--nemesis", "kill-leader", "--resume",
                  "--out", str(tmp_path / "b")])
    assert "holds results of odradek nodes" in capsys.readouterr().err


@pytest.mark.slow
def test_a_kafka_cluster_keeps_acknowledged_writes_when_a_leader_is_killed(tmp_path):
    """One trial, as `python -m tests.faults.run --broker kafka --nemesis kill-leader --trials 1
    --quick` runs it: three Kafka JVMs in namespaces, kill -9 of a partition leader, restart, the
    librdkafka producer's acknowledged records all read back once and in order."""
    problem = ensure_tools() or kafka_nodes.missing()
    if problem:
        pytest.skip(f"needs network namespaces and Apache Kafka: {problem}")
    kind = ("producer", "librdkafka", "kill-leader")
    run = labs.Run(str(tmp_path / "out"), [kind], 1, [], seed=3, labs=1, quick=True,
                   trial=functools.partial(run_trial, max_seconds=45), keep_logs=_keep_logs,
                   broker="kafka")
    results = run.go()
    if run.interrupted:
        raise KeyboardInterrupt
    assert len(results) == 1, results
    result = results[0]
    trial_dir = tmp_path / "out" / f"trial-{result['trial']}"
    evidence = json.dumps(result) + (f" (logs in {trial_dir})" if os.path.isdir(trial_dir) else "")
    assert result["broker"] == "kafka" and not result.get("unrecovered"), evidence
    assert result["acknowledged"] > 0 and checker.ok(result), evidence
