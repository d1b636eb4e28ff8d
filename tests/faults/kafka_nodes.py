"""Apache Kafka 3.9 nodes for the fault lab (`--broker kafka`): the oracle under the same faults.

Each node is a JVM running `kafka.Kafka` directly (no wrapper script, so the pid the lab signals
is the JVM's: kill -9, SIGSTOP and SIGCONT reach the broker itself) inside the node's network
namespace, bound to the node's address, combined broker and controller, its log dir the node's
tmpfs. The cluster settings are the Odradek nodes' (`env.CLUSTER_SETTINGS`), translated where Odradek
has a key of its own. Every node is formatted with one cluster id before its first start, or the
quorum never forms. The lab asks these nodes what it asks Odradek's, over the wire with our own
protocol client: Metadata v12 on the broker listener, DescribeQuorum v2 on the controller one.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import uuid
from typing import Callable, Mapping

from broker.testing_cluster import Cluster, ClusterNode

KAFKA_HOME = os.environ.get("ODRADEK_KAFKA_HOME", "/work/shared/apache-kafka")
HEAP = os.environ.get("KAFKA_HEAP", "512m")
DISK_MB = 512               # a JVM broker's log dir wants more room than Odradek's 256 MiB
START_TIMEOUT_S = 240       # three JVMs starting on a small shared machine
# after kill-majority two JVMs restart, re-form the quorum and catch up: on a machine loaded to
# 50 that took over 120 s (Odradek's bound)
RECOVER_TIMEOUT_S = 300
STARTED = b"Kafka Server started"

# Odradek keys with a Kafka counterpart: key -> (Kafka key, value) by Odradek's value
TRANSLATED = {
    # Kafka cannot fsync before acknowledging; flushing after every message is its nearest
    "log.flush.before.acknowledge": {"true": ("log.flush.interval.messages", "1")},
}
# nemeses that need something the JVM nodes do not run with
UNSUPPORTED_NEMESES = {
    "slow-fsync": "its LD_PRELOAD shim is built for and tested with Odradek nodes only",
    "clock-skew": "libfaketime is not tested with the JVM (it may hang it)",
}


def missing() -> str | None:
    """None when Kafka nodes can run here, else why not."""
    if not os.path.isdir(os.path.join(KAFKA_HOME, "libs")):
        return f"no Apache Kafka in {KAFKA_HOME} (set ODRADEK_KAFKA_HOME)"
    if not shutil.which("java"):
        return "no java on PATH"
    return None


def kafka_settings(settings: Mapping[str, str]) -> dict[str, str]:
    """The Odradek-side settings as Kafka keys."""
    out = {}
    for key, value in settings.items():
        if key in TRANSLATED:
            translated = TRANSLATED[key].get(str(value).lower())
            if translated:
                out[translated[0]] = translated[1]
        else:
            out[key] = value
    return out


def new_cluster_id() -> str:
    """A Kafka Uuid as text: 16 random bytes, base64url without padding, not starting with '-'
    (what `StorageTool random-uuid` prints, without starting a JVM for it)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def _java(main_class: str, *args: str, heap: str = HEAP) -> list[str]:
    return ["java", f"-Xms{heap}", f"-Xmx{heap}", "-XX:+UseG1GC", "-XX:-UsePerfData",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={KAFKA_HOME}/config/log4j2.properties",
            "-cp", f"{KAFKA_HOME}/libs/*", main_class, *args]


class KafkaNode(ClusterNode):
    """A `ClusterNode` whose process is a Kafka JVM; its data dir is its log dir."""

    def __init__(self, node_id: int, roles: str, root: str, settings: Mapping[str, str],
                 host: str, launcher: list[str]):
        super().__init__(node_id, roles, root, settings, host, launcher)
        self.properties_path = os.path.join(root, f"node-{node_id}.properties")

    def properties(self) -> dict[str, str]:
        listeners = [f"PLAINTEXT://{self.host}:{self.port}",
                     f"CONTROLLER://{self.host}:{self.controller_port}"]
        return {"process.roles": self.roles, "node.id": str(self.node_id),
                "listeners": ",".join(listeners),
                "advertised.listeners": f"PLAINTEXT://{self.host}:{self.port}",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                "controller.listener.names": "CONTROLLER",
                "inter.broker.listener.name": "PLAINTEXT",
                "log.dirs": self.data_dir, "num.partitions": "1",
                **kafka_settings(self.settings)}

    def write_properties(self) -> None:
        with open(self.properties_path, "w") as handle:
            handle.writelines(f"{key}={value}\n" for key, value in self.properties().items())

    def command(self) -> list[str]:
        return self.launcher + _java("kafka.Kafka", self.properties_path)

    def start(self) -> None:
        self.write_properties()     # the launcher may have changed; the settings never do
        super().start()

    def started(self) -> bool:
        with open(self.log_path, "rb") as handle:
            handle.seek(self._log_offset)
            return STARTED in handle.read()


class KafkaCluster(Cluster):
    """A combined-mode KRaft cluster of `KafkaNode`s, each placed by `placement(node_id)` ->
    (address, launcher prefix) on a host of its own."""

    start_timeout_s = START_TIMEOUT_S

    def __init__(self, root, nodes: int, overrides: Mapping[str, str],
                 placement: Callable[[int], tuple[str, list[str]]]):
        super().__init__(root, nodes, "combined", overrides=overrides, placement=placement)
        self.nodes = {node_id: self._kafka_node(node, os.fspath(root))
                      for node_id, node in self.nodes.items()}
        self.cluster_id = new_cluster_id()

    @staticmethod
    def _kafka_node(node: ClusterNode, root: str) -> KafkaNode:
        kafka = KafkaNode(node.node_id, node.roles, root, node.settings, node.host, node.launcher)
        # on loopback each node took free ports, which the voters setting already names
        kafka.port, kafka.controller_port = node.port, node.controller_port
        return kafka

    def format(self, timeout: float = 180) -> None:
        """Format every node's log dir with the cluster's one id (all at once: a JVM each)."""
        formats = {}
        for node_id, node in self.nodes.items():
            node.write_properties()
            formats[node_id] = subprocess.Popen(
                _java("kafka.tools.StorageTool", "format", "-t", self.cluster_id,
                      "-c", node.properties_path, heap="128m"),
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        failures = []
        for node_id, process in formats.items():
            try:
                output, _ = process.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                output, _ = process.communicate()
            if process.returncode != 0:
                failures.append(f"node {node_id}: {output.strip()[-500:]}")
        if failures:
            raise RuntimeError("kafka StorageTool format failed: " + "; ".join(failures))
