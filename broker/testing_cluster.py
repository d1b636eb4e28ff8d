"""A real multi-process Odradek cluster on loopback, for tests.

::

    from broker.testing_cluster import running_cluster

    def test_three_nodes(tmp_path):
        with running_cluster(tmp_path, nodes=3) as cluster:          # 3 × broker,controller
            producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap})
            ...
            cluster.kill(cluster.active_controller())                 # kill -9
            cluster.restart(2)                                        # same ports, same data

``running_cluster(tmp_path, nodes=3, topology="combined" | "split", controllers=3, overrides={},
node_overrides={id: {...}}, timeout=60)`` starts real ``odradek serve`` subprocesses on free loopback
ports, each with its own data dir ``tmp_path/node-<id>/`` and log ``tmp_path/node-<id>.log``, and
returns once the cluster has formed: every broker is registered and unfenced and every broker's
Metadata lists all of them. ``combined``: nodes 1..n are brokers and controllers. ``split``:
``controllers`` dedicated controllers (ids 1..c) and ``nodes`` brokers (ids c+1..c+n), the brokers
replicating the metadata log as observers. Overrides are Kafka config keys for every node
(``overrides``) or one node (``node_overrides``). The cluster is always torn down (SIGKILL whatever
is still running) when the block exits.

``Cluster``: ``.bootstrap`` (every running broker's address), ``.brokers`` / ``.controllers`` (ids),
``.nodes[id]`` (``ClusterNode``: ``.port``, ``.controller_port``, ``.data_dir``, ``.running``,
``.log()``), ``kill(id)`` (SIGKILL), ``stop(id)`` (SIGTERM, waits, returns the exit code),
``start(id)`` / ``restart(id)``, ``active_controller()`` (the quorum leader's id, asked with
DescribeQuorum), ``metadata(id)`` (a decoded Metadata v12 response from that broker),
``wait_formed()``, and ``wait_until(predicate, timeout, what)``.
"""

from __future__ import annotations

import os
import signal
import socket
import struct
import subprocess
import sys
import time
from contextlib import contextmanager
from typing import Callable, Mapping

import protocol
from protocol import messages as m

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_SIZE = struct.Struct(">i")
FAST_SETTINGS = {
    # Kafka's defaults, except that a broker whose heartbeats stop is fenced in 6 s, not 9.
    "broker.heartbeat.interval.ms": "1000",
    "broker.session.timeout.ms": "6000",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def call(address: tuple[str, int], api_key: int, version: int, body, timeout: float = 5.0):
    """One request/response round trip on a fresh connection (raises OSError on failure)."""
    with socket.create_connection(address, timeout=timeout) as sock:
        data = protocol.encode_request(api_key, version, 1, "odradek-test-cluster", body)
        sock.sendall(_SIZE.pack(len(data)) + data)
        head = _read_exactly(sock, 4)
        frame = _read_exactly(sock, _SIZE.unpack(head)[0])
    return protocol.decode_response(api_key, version, frame)[1]


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    out = bytearray()
    while len(out) < size:
        chunk = sock.recv(size - len(out))
        if not chunk:
            raise ConnectionError("connection closed")
        out += chunk
    return bytes(out)


class ClusterNode:
    def __init__(self, node_id: int, roles: str, root: str, settings: Mapping[str, str],
                 host: str = "127.0.0.1", launcher: list[str] | None = None):
        self.node_id = node_id
        self.host = host                        # the address every listener binds and advertises
        self.launcher = list(launcher or [])    # a prefix for the command (e.g. `ip netns exec ns`)
        # what runs the broker (before `serve`): this checkout, unless an A/B bench names another
        self.program = [sys.executable, "-m", "broker.cli"]
        self.roles = roles
        self.data_dir = os.path.join(root, f"node-{node_id}")
        self.log_path = os.path.join(root, f"node-{node_id}.log")
        # a host of its own has every port to itself; on loopback each node takes free ones
        own_host = host != "127.0.0.1"
        self.port = (9092 if own_host else free_port()) if "broker" in roles else None
        self.controller_port = (9093 if own_host else free_port()) if "controller" in roles else None
        self.settings = dict(settings)
        self.process: subprocess.Popen | None = None
        self._log_offset = 0

    @property
    def is_broker(self) -> bool:
        return "broker" in self.roles

    @property
    def is_controller(self) -> bool:
        return "controller" in self.roles

    @property
    def address(self) -> tuple[str, int]:
        return (self.host, self.port)

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def command(self) -> list[str]:
        listeners = []
        if self.is_broker:
            listeners.append(f"PLAINTEXT://{self.host}:{self.port}")
        if self.is_controller:
            listeners.append(f"CONTROLLER://{self.host}:{self.controller_port}")
        settings = {"node.id": str(self.node_id), "process.roles": self.roles,
                    "listeners": ",".join(listeners), "log.dirs": self.data_dir,
                    "controller.listener.names": "CONTROLLER", **self.settings}
        command = self.launcher + self.program + ["serve"]
        for key, value in settings.items():
            command += ["--override", f"{key}={value}"]
        return command

    def start(self) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = REPO_ROOT + os.pathsep + env.get("PYTHONPATH", "")
        with open(self.log_path, "ab") as log:
            self._log_offset = log.tell()
            self.process = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                            cwd=REPO_ROOT, env=env)

    def log(self) -> str:
        """Everything this node wrote, across restarts."""
        try:
            with open(self.log_path, errors="replace") as handle:
                return handle.read()
        except FileNotFoundError:
            return ""

    def started(self) -> bool:
        """Whether the current run printed its `listening on` line."""
        with open(self.log_path, "rb") as handle:
            handle.seek(self._log_offset)
            return b"odradek: listening on" in handle.read()

    def signal(self, signum: int) -> None:
        if self.running:
            self.process.send_signal(signum)

    def wait(self, timeout: float) -> int:
        return self.process.wait(timeout)


class Cluster:
    def __init__(self, root, nodes: int = 3, topology: str = "combined", controllers: int = 3,
                 overrides: Mapping[str, str] | None = None,
                 node_overrides: Mapping[int, Mapping[str, str]] | None = None,
                 placement: Callable[[int], tuple[str, list[str]]] | None = None):
        """`placement(node_id)`: (address, launcher prefix) when a node runs on a host of its own
        (the fault suite puts each in a network namespace); loopback by default."""
        if topology not in ("combined", "split"):
            raise ValueError(f"topology must be combined or split, not {topology!r}")
        root = os.fspath(root)
        if topology == "combined":
            layout = [(i, "broker,controller") for i in range(1, nodes + 1)]
        else:
            layout = [(i, "controller") for i in range(1, controllers + 1)]
            layout += [(controllers + i, "broker") for i in range(1, nodes + 1)]
        settings = {**FAST_SETTINGS, **(overrides or {})}
        self.nodes: dict[int, ClusterNode] = {}
        for node_id, roles in layout:
            own = {**settings, **(node_overrides or {}).get(node_id, {})}
            host, launcher = placement(node_id) if placement else ("127.0.0.1", [])
            self.nodes[node_id] = ClusterNode(node_id, roles, root, own, host, launcher)
        voters = ",".join(f"{n.node_id}@{n.host}:{n.controller_port}"
                          for n in self.nodes.values() if n.is_controller)
        for node in self.nodes.values():
            node.settings.setdefault("controller.quorum.voters", voters)

    # -- views -------------------------------------------------------------------------------------
    @property
    def brokers(self) -> list[int]:
        return [n.node_id for n in self.nodes.values() if n.is_broker]

    @property
    def controllers(self) -> list[int]:
        return [n.node_id for n in self.nodes.values() if n.is_controller]

    @property
    def bootstrap(self) -> str:
        running = [n for n in self.nodes.values() if n.is_broker and n.running]
        return ",".join(f"{n.host}:{n.port}" for n in running or
                        [n for n in self.nodes.values() if n.is_broker])

    def metadata(self, node_id: int, topics=None):
        """Metadata v12 from one broker (topics None: all)."""
        R = m.MetadataRequest
        body = R(topics=None if topics is None else [R.MetadataRequestTopic(name=t)
                                                        for t in topics],
                 allow_auto_topic_creation=False)
        return call(self.nodes[node_id].address, 3, 12, body)

    def describe_quorum(self, node_id: int | None = None):
        """DescribeQuorum v2 from a controller (by default: the first running one that answers
        as the leader)."""
        from broker.cluster.discovery import describe_quorum_request

        candidates = [node_id] if node_id is not None else self.controllers
        last = None
        for candidate in candidates:
            node = self.nodes[candidate]
            if not node.running:
                continue
            try:
                last = call((node.host, node.controller_port), 55, 2, describe_quorum_request())
            except OSError:
                continue
            if not last.topics[0].partitions[0].error_code:
                return last
        return last

    def active_controller(self) -> int:
        """The quorum leader's node id (-1 when no running controller knows one)."""
        response = self.describe_quorum()
        if response is None or response.topics[0].partitions[0].error_code:
            return -1
        return response.topics[0].partitions[0].leader_id

    # -- control -----------------------------------------------------------------------------------
    def start(self, node_id: int) -> None:
        self.nodes[node_id].start()

    def kill(self, node_id: int) -> None:
        node = self.nodes[node_id]
        node.signal(signal.SIGKILL)
        if node.process is not None:
            node.wait(10)

    def stop(self, node_id: int, timeout: float = 30.0) -> int:
        node = self.nodes[node_id]
        node.signal(signal.SIGTERM)
        try:
            return node.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill(node_id)
            raise

    def restart(self, node_id: int, timeout: float = 60.0) -> None:
        if self.nodes[node_id].running:
            self.stop(node_id)
        self.start(node_id)
        self.wait_started([node_id], timeout)

    def close(self) -> None:
        for node in self.nodes.values():
            if node.running:
                node.signal(signal.SIGKILL)
        for node in self.nodes.values():
            if node.process is not None:
                try:
                    node.wait(10)
                except subprocess.TimeoutExpired:
                    pass

    # -- waiting -----------------------------------------------------------------------------------
    def wait_until(self, predicate: Callable[[], object], timeout: float, what: str):
        deadline = time.monotonic() + timeout
        while True:
            try:
                value = predicate()
            except (OSError, ConnectionError, protocol.DecodeError):
                value = None
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}\n"
                                   + self._log_tails())
            for node in self.nodes.values():
                if node.process is not None and node.process.poll() not in (None, 0, -9, -15):
                    raise RuntimeError(f"node {node.node_id} exited with "
                                       f"{node.process.returncode}\n" + self._log_tails())
            time.sleep(0.1)

    def wait_started(self, node_ids, timeout: float) -> None:
        self.wait_until(lambda: all(self.nodes[i].started() for i in node_ids), timeout,
                        f"nodes {sorted(node_ids)} to start")

    def wait_formed(self, timeout: float = 60.0) -> None:
        """Every running broker registered, unfenced and listed by every running broker."""
        running = [i for i in self.brokers if self.nodes[i].running]

        def formed():
            for broker in running:
                listed = {b.node_id for b in self.metadata(broker).brokers}
                if listed != set(running):
                    return False
            return True
        self.wait_until(formed, timeout, f"brokers {running} to form one cluster")

    def _log_tails(self, lines: int = 15) -> str:
        out = []
        for node in self.nodes.values():
            tail = node.log().splitlines()[-lines:]
            out.append(f"--- node {node.node_id} ({node.roles}) ---\n" + "\n".join(tail))
        return "\n".join(out)


@contextmanager
def running_cluster(tmp_path, nodes: int = 3, topology: str = "combined", controllers: int = 3,
                    overrides: Mapping[str, str] | None = None,
                    node_overrides: Mapping[int, Mapping[str, str]] | None = None,
                    timeout: float = 60.0, cluster: Cluster | None = None):
    """Start a cluster (see the module docstring), yield it once formed, always tear it down.
    `cluster`: a `Cluster` built beforehand (e.g. to edit a node's settings with the ports known)."""
    if cluster is None:
        cluster = Cluster(tmp_path, nodes, topology, controllers, overrides, node_overrides)
    try:
        for node_id in cluster.nodes:
            cluster.start(node_id)
        cluster.wait_started(list(cluster.nodes), timeout)
        cluster.wait_formed(timeout)
        yield cluster
    finally:
        cluster.close()
