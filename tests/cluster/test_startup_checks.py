"""Start-up checks of the cluster settings, and a node that cannot reach its quorum.

Misconfigurations stop `odradek serve` at once with one `odradek: configuration error: ...` line and
exit 2; a node whose quorum is unreachable keeps retrying, says so in its log and on /readyz, and still
stops cleanly on SIGTERM.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from broker.testing_cluster import REPO_ROOT, Cluster, free_port


def _serve(settings: dict, timeout: float = 30.0) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "broker.cli", "serve"]
    for key, value in settings.items():
        command += ["--override", f"{key}={value}"]
    env = {**os.environ, "PYTHONPATH": REPO_ROOT}
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=REPO_ROOT,
                          env=env)


BAD = [
    ({"node.id": "4", "process.roles": "broker,controller",
      "controller.quorum.voters": "1@127.0.0.1:1,2@127.0.0.1:2,3@127.0.0.1:3",
      "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0"}, "is not in"),
    ({"node.id": "1", "process.roles": "broker,controller",
      "controller.quorum.voters": "1@127.0.0.1:1,2@127.0.0.1:2,2@127.0.0.1:3",
      "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0"}, "more than once"),
    ({"node.id": "1", "process.roles": "broker,controller",
      "controller.quorum.voters": "1@127.0.0.1:1",
      "listeners": "PLAINTEXT://127.0.0.1:0"}, "controller listener CONTROLLER"),
    ({"node.id": "5", "process.roles": "broker",
      "controller.quorum.voters": "1@127.0.0.1:1",
      "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0"}, "must not hold"),
    ({"node.id": "5", "process.roles": "broker",
      "listeners": "PLAINTEXT://127.0.0.1:0"}, "controller.quorum.voters or"),
    ({"node.id": "1", "process.roles": "controller",
      "controller.quorum.voters": "1@127.0.0.1:1",
      "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0"}, "may only hold"),
]


@pytest.mark.parametrize("settings, reason", BAD, ids=[
    "controller-not-a-voter", "duplicate-voter-ids", "controller-listener-missing",
    "broker-with-controller-listener", "broker-without-quorum", "controller-with-client-listener"])
def test_misconfiguration_stops_at_start_up(tmp_path, settings, reason):
    result = _serve({"controller.listener.names": "CONTROLLER", "log.dirs": str(tmp_path),
                     **settings})
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("odradek: configuration error: "), lines
    assert reason in lines[0]


def _format(node, cluster_id: str) -> None:
    """What `kafka-storage format` leaves: meta.properties with the cluster id."""
    metadata_dir = os.path.join(node.data_dir, "metadata")   # the metadata log's home
    os.makedirs(metadata_dir)
    with open(os.path.join(metadata_dir, "meta.properties"), "w") as handle:
        handle.write(f"version=1\ncluster.id={cluster_id}\nnode.id={node.node_id}\n")


def _readyz(port: int):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_a_broker_without_a_reachable_quorum_keeps_trying_and_says_so(tmp_path):
    metrics_port = free_port()
    cluster = Cluster(tmp_path, nodes=1, topology="split", controllers=1,
                      node_overrides={2: {"metrics.port": str(metrics_port)}})
    try:
        _format(cluster.nodes[2], "SomeClusterIdAAAAAAAAAA")   # a formatted broker:
        cluster.start(2)                 # its only controller never starts
        status, body = cluster.wait_until(
            lambda: (lambda answer: answer if answer[0] == 503 else None)(_readyz(metrics_port)),
            30, "/readyz to answer")
        assert status == 503
        assert "unreachable" in body["checks"]["metadata"], body
        assert "registration" in body["checks"]["controller"], body
        cluster.wait_until(lambda: "retrying" in cluster.nodes[2].log(), 30, "a retry logged")
        assert cluster.nodes[2].running                      # never gives up
        cluster.nodes[2].signal(signal.SIGTERM)
        assert cluster.nodes[2].wait(20) == 0
    finally:
        cluster.close()


def test_a_broker_of_another_cluster_is_refused(tmp_path):
    cluster = Cluster(tmp_path, nodes=1, topology="split", controllers=1)
    try:
        cluster.start(1)
        cluster.wait_started([1], 30)
        broker = cluster.nodes[2]
        _format(broker, "AnotherClusterIdAAAAAA")
        cluster.start(2)
        assert broker.wait(30) == 2
        errors = [l for l in broker.log().splitlines() if l.startswith("odradek: configuration error")]
        assert len(errors) == 1 and "AnotherClusterIdAAAAAA" in errors[0], broker.log()[-2000:]
    finally:
        cluster.close()
