"""Three-node clusters as bench targets: Odradek and Apache Kafka, replication factor 3, acks=all,
``min.insync.replicas=2``, every node broker and controller (KRaft), all on loopback.

A `ClusterTarget` is one column of the table: its bootstrap lists the three brokers, its CPU time and
RSS are the three processes' sums (the cluster's whole cost per record), and `node_cpu_seconds()`
keeps them apart (leader against follower work). Both clusters get the same settings: Kafka's own
defaults for everything else (replica.fetch.wait.max.ms=500, replica.fetch.min.bytes=1, heartbeats
every 2 s, 9 s session), internal topics replicated 3 times too, as a production cluster would be.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench import kafka
from bench.targets import Target, TargetError, cpu_seconds, free_port, rss_bytes

NODES = 3
CLUSTER_SETTINGS = {
    "min.insync.replicas": "2",
    "default.replication.factor": "3",
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
}
# Odradek's test cluster shortens heartbeats and sessions; the bench runs Kafka's defaults on both.
ODRADEK_CLUSTER_SETTINGS = {**CLUSTER_SETTINGS, "broker.heartbeat.interval.ms": "2000",
                            "broker.session.timeout.ms": "9000"}
FORMED_TIMEOUT_S = 180.0  # three JVMs (or Pythons) starting at once on a loaded 2-core machine
SETTINGS_TEXT = ", ".join(f"{k}={v}" for k, v in CLUSTER_SETTINGS.items())


@dataclass
class ClusterTarget(Target):
    """One table column backed by several processes (`processes`; `process` is the first)."""

    processes: dict[int, subprocess.Popen] = field(default_factory=dict)  # node id -> process
    node_logs: dict[int, Path] = field(default_factory=dict)

    def alive(self) -> bool:
        return all(process.poll() is None for process in self.processes.values())

    def rss_bytes(self) -> int | None:
        values = [rss_bytes(process.pid) for process in self.processes.values()]
        return None if None in values else sum(values)

    def cpu_seconds(self) -> float | None:
        values = list(self.node_cpu_seconds().values())
        return None if None in values else sum(values)

    def node_cpu_seconds(self) -> dict[int, float | None]:
        return {node: cpu_seconds(process.pid) for node, process in self.processes.items()}

    def stop(self) -> None:
        for process in self.processes.values():  # all at once: a controlled shutdown takes seconds each
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes.values():
            try:
                process.wait(timeout=self.stop_timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
        self.clean_up()

    def all_pids(self) -> list[int]:
        return [process.pid for process in self.processes.values()]


def _wait(predicate, timeout: float, what: str, processes: dict[int, subprocess.Popen], logs: dict[int, Path]):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        dead = [node for node, process in processes.items() if process.poll() is not None]
        if dead:
            break
        time.sleep(0.2)
    tails = "\n".join(f"--- node {node} ---\n" + "\n".join(
        path.read_text(errors="replace").splitlines()[-10:]) for node, path in logs.items() if path.exists())
    raise TargetError(f"{what} (timeout {timeout:.0f} s or a node exited):\n{tails}")


def _brokers_listed(bootstrap: str, count: int) -> bool:
    """Every broker registered and unfenced, as a client sees it."""
    from confluent_kafka.admin import AdminClient

    try:
        metadata = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0}).list_topics(timeout=5)
    except Exception:  # noqa: BLE001 - not up yet
        return False
    return len(metadata.brokers) == count


def start_odradek_cluster(log_dir: Path, overrides: dict[str, str] | None = None,
                          name: str = "odradek-rf3", column: str = "odradek",
                          program: list[str] | None = None) -> ClusterTarget:
    """Three `odradek serve` processes (broker.testing_cluster's layout) with the cluster settings;
    `program` replaces `python -m broker.cli` (an A/B candidate's command)."""
    from broker.testing_cluster import Cluster

    root = Path(tempfile.mkdtemp(prefix=f"{name}-bench-"))
    cluster = Cluster(root, nodes=NODES, overrides={**ODRADEK_CLUSTER_SETTINGS, **(overrides or {})})
    for node in cluster.nodes.values():
        node.log_path = str(log_dir / f"{name}-node-{node.node_id}.log")
        if program:
            node.program = list(program)
        node.start()
    processes = {node_id: node.process for node_id, node in cluster.nodes.items()}
    logs = {node_id: Path(node.log_path) for node_id, node in cluster.nodes.items()}
    target = ClusterTarget(
        name, f"Odradek, {NODES} nodes (each broker and controller; {SETTINGS_TEXT}, Kafka's default "
              "heartbeat/session and replica fetch settings)",
        cluster.bootstrap, processes[1], logs[1], cleanup=[root], column=column, replication_factor=NODES,
        processes=processes, node_logs=logs, details={"settings": ODRADEK_CLUSTER_SETTINGS})
    try:
        _wait(lambda: all(node.started() for node in cluster.nodes.values()), FORMED_TIMEOUT_S,
              f"{name} did not start", processes, logs)
        _wait(lambda: _brokers_listed(target.bootstrap, NODES), FORMED_TIMEOUT_S,
              f"{name} did not form", processes, logs)
    except BaseException:
        target.stop()
        raise
    return target


def start_kafka_cluster(log_dir: Path, heap: str | None = None, name: str = "kafka-rf3",
                        column: str = "kafka") -> ClusterTarget:
    """Three Kafka JVMs from run.sh, formatted with one cluster id so that their quorum forms."""
    reason = kafka.available()
    if reason:
        raise TargetError(f"not available: {reason}")
    heap = heap or os.environ.get("KAFKA_HEAP") or kafka.DEFAULT_HEAP
    home = kafka.kafka_home()
    root = Path(tempfile.mkdtemp(prefix=f"{name}-bench-"))
    ports = {node: (free_port(), free_port()) for node in range(1, NODES + 1)}
    voters = ",".join(f"{node}@127.0.0.1:{controller}" for node, (_, controller) in ports.items())
    cluster_id = _kafka_cluster_id(home)
    processes: dict[int, subprocess.Popen] = {}
    logs: dict[int, Path] = {}
    try:
        formats = []
        for node, (port, controller) in ports.items():
            data_dir = root / f"node-{node}"
            data_dir.mkdir()
            extra = {"node.id": str(node), "controller.quorum.voters": voters, **CLUSTER_SETTINGS}
            (data_dir / "extra.properties").write_text("".join(f"{k}={v}\n" for k, v in extra.items()))
            format_config = data_dir / "format.properties"
            format_config.write_text("".join(f"{k}={v}\n" for k, v in {
                "process.roles": "broker,controller", "node.id": node, "controller.quorum.voters": voters,
                "controller.listener.names": "CONTROLLER",
                "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}",
                "log.dirs": data_dir / "kraft-logs"}.items()))
            formats.append(subprocess.Popen(
                ["java", "-cp", f"{home}/libs/*", f"-Dlog4j2.configurationFile={home}/config/log4j2.properties",
                 "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(format_config)],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        for process in formats:
            output, _ = process.communicate(timeout=180)
            if process.returncode != 0:
                raise TargetError(f"kafka StorageTool format failed: {output[-1000:]}")
        env = {**os.environ, "KAFKA_HEAP": heap}
        env.pop("KAFKA_EXTRA_PROPS", None)
        for node, (port, controller) in ports.items():
            logs[node] = log_dir / f"{name}-node-{node}.log"
            with open(logs[node], "wb") as log:
                processes[node] = subprocess.Popen(
                    [str(home / "run.sh"), str(port), str(root / f"node-{node}"), str(controller)],
                    stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
        bootstrap = ",".join(f"127.0.0.1:{port}" for port, _ in ports.values())
        _wait(lambda: all(kafka.STARTED.search(path.read_text(errors="replace")) for path in logs.values()),
              FORMED_TIMEOUT_S, f"{name} did not start", processes, logs)
        _wait(lambda: _brokers_listed(bootstrap, NODES), FORMED_TIMEOUT_S, f"{name} did not form", processes, logs)
    except BaseException:
        for process in processes.values():
            process.kill()
            process.wait(timeout=10)
        shutil.rmtree(root, ignore_errors=True)
        raise
    version = kafka.VERSION.search(logs[1].read_text(errors="replace"))
    jvm = kafka.jvm_settings(processes[1].pid)
    label = (f"Apache Kafka {version.group(1) if version else '?'} (KRaft), {NODES} nodes (each broker and "
             f"controller), heap {jvm['heap']} each, {jvm['gc']}, {SETTINGS_TEXT}, otherwise run.sh defaults "
             "(flush left to the OS); unmeasured warm-up passes of every workload first")
    return ClusterTarget(name, label, bootstrap, processes[1], logs[1], cleanup=[root], column=column,
                         warmup=True, stop_timeout=kafka.STOP_TIMEOUT_S, replication_factor=NODES,
                         processes=processes, node_logs=logs,
                         details={"jvm_flags": jvm["flags"], "settings": CLUSTER_SETTINGS})


def _kafka_cluster_id(home: Path) -> str:
    result = subprocess.run(["java", "-cp", f"{home}/libs/*",
                             f"-Dlog4j2.configurationFile={home}/config/log4j2.properties",
                             "kafka.tools.StorageTool", "random-uuid"],
                            capture_output=True, text=True, timeout=120)
    cluster_id = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    if result.returncode != 0 or len(cluster_id) != 22:
        raise TargetError(f"kafka StorageTool random-uuid failed: {result.stdout[-500:]}{result.stderr[-500:]}")
    return cluster_id
