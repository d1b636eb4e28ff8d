"""The environment of a fault trial: a real Odradek cluster whose nodes each live in a network
namespace of their own, with a small tmpfs as their data disk, and a client namespace.

::

    with FaultEnv(tmp_path) as env:          # 3 combined nodes, RF 3, min.insync.replicas=2
        env.create_topic("t", partitions=3)
        env.client(["produce", ...])          # a subprocess in the client namespace
        env.cluster.kill(env.leader("t", 0))
        env.recover()                         # every node running, heals, ISR full again

Every node runs with the slow-fsync shim preloaded (delay off until a nemesis switches it on, see
slowdisk.py) when a C compiler is there. Everything it makes (namespaces, veths, the bridge, nft
rules, tmpfs mounts, processes, the compiled shim) is removed when the block exits, on failure too;
every wait is bounded.
"""

from __future__ import annotations

import glob
import shutil
import os
import signal
import subprocess
import sys
import tempfile
import time

import protocol
from broker.testing_cluster import REPO_ROOT, Cluster, call
from protocol import messages as m

from tests.faults import kafka_nodes, slowdisk
from tests.faults.netlab import NetLab

# acks=all, RF 3, min.insync.replicas=2 everywhere, internal topics included; failure detection
# fast enough for short trials (a broker silent for 6 s is fenced, a follower 6 s behind leaves ISR).
CLUSTER_SETTINGS = {
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.num.partitions": "3",
    "transaction.state.log.min.isr": "2",
    "broker.heartbeat.interval.ms": "1000",
    "broker.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "6000",
    "replica.fetch.backoff.ms": "200",
    "unclean.leader.election.enable": "false",
    "auto.create.topics.enable": "false",
    # fsync before acknowledging: what makes the slow-fsync nemesis bite on the produce path (the
    # leader's high watermark waits for its own fsync); on tmpfs an fsync is otherwise free
    "log.flush.before.acknowledge": "true",
}
SESSION_TIMEOUT_S = 6.0
LIBFAKETIME_GLOBS = ("/usr/lib/*/faketime/libfaketimeMT.so.1", "/usr/lib/faketime/libfaketimeMT.so.1",
                     "/usr/local/lib/faketime/libfaketimeMT.so.1")
DISK_MB = 256
BROKERS = ("odradek", "kafka")      # what the nodes run (--broker)
# Where the nodes and clients keep their compiled bytecode. This machine sets
# PYTHONDONTWRITEBYTECODE, so without a cache every (re)start compiled the broker's sources anew:
# ~10 s of a restarted node's ~13 s start under load, most of a trial's recovery. Python checks
# each entry against its source's mtime and size, so a stale one is never used.
PYCACHE = os.path.join(tempfile.gettempdir(), "odradek-faults-pycache")
BYTECODE_ENV = {"PYTHONPYCACHEPREFIX": PYCACHE}


def _dump_stacks(pid: int, log_path: str) -> None:
    """A client that outlived its time: where its threads hang goes to its log (py-spy, with the
    native frames of librdkafka's calls), so a hung trial says whether the client or the broker
    kept it waiting."""
    py_spy = shutil.which("py-spy") or os.path.join(os.path.dirname(sys.executable), "py-spy")
    if not os.path.exists(py_spy):
        return
    with open(log_path, "ab") as log:
        log.write(b"\n--- still running at its deadline; its stacks (py-spy dump --native):\n")
        log.flush()
        subprocess.run([py_spy, "dump", "--native", "--pid", str(pid)], stdout=log,
                       stderr=subprocess.STDOUT, timeout=30, check=False)


class FaultEnv:
    def __init__(self, root, nodes: int = 3, disk_mb: int | None = None, overrides=None,
                 quick: bool = False, broker: str = "odradek"):
        if broker not in BROKERS:
            raise ValueError(f"broker must be one of {', '.join(BROKERS)}, not {broker!r}")
        self.root = os.fspath(root)
        self.quick = quick          # nemeses hold their faults for the shortest span (CI)
        self.node_count = nodes
        self.broker = broker        # what the nodes run: odradek, or Apache Kafka (kafka_nodes.py)
        self.disk_mb = disk_mb or (kafka_nodes.DISK_MB if broker == "kafka" else DISK_MB)
        # how long a trial waits for the cluster to recover before it counts as unrecovered
        self.recover_timeout_s = kafka_nodes.RECOVER_TIMEOUT_S if broker == "kafka" else 120
        self.overrides = {**CLUSTER_SETTINGS, **(overrides or {})}
        self.lab = NetLab()
        self.cluster: Cluster | None = None
        self.mounts: list[str] = []
        self.clients: list[subprocess.Popen] = []
        self.paused: set[int] = set()
        self.fillers: dict[int, str] = {}
        self.skewed: dict[int, list[str]] = {}     # node -> its launcher before the skew
        self.fsync_shim: slowdisk.SlowFsyncShim | None = None
        self.slowed: set[int] = set()               # nodes whose fsyncs are being delayed
        # what a nemesis saw go wrong that no client history shows (a rolling restart's node that
        # kept its leaderships until it exited); run_trial clears it and fails the trial on any
        self.violations: list[str] = []
        self.closed = False

    # -- set-up and tear-down ----------------------------------------------------------------------
    def __enter__(self) -> "FaultEnv":
        self.lab.__enter__()
        try:
            for node_id in range(1, self.node_count + 1):
                self.lab.add_host(f"n{node_id}")
                self._mount(os.path.join(self.root, f"node-{node_id}"))
            self.lab.add_host("client")
            if self.broker == "kafka":
                self.cluster = self._kafka_cluster()
            else:
                self.cluster = self._odradek_cluster()
            for node_id in self.cluster.nodes:
                self.cluster.start(node_id)
            self.cluster.wait_started(list(self.cluster.nodes),
                                      getattr(self.cluster, "start_timeout_s", 120))
            self.cluster.wait_formed(120)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _odradek_cluster(self) -> Cluster:
        if slowdisk.compiler():
            self.fsync_shim = slowdisk.SlowFsyncShim()

        def placement(node_id):
            host = self.lab.hosts[f"n{node_id}"]
            return host.address, host.exec_prefix() + self._preload(node_id)
        return Cluster(self.root, self.node_count, overrides=self.overrides, placement=placement)

    def _kafka_cluster(self) -> Cluster:
        """JVM nodes, launched in their namespaces with nothing preloaded (see kafka_nodes.py)."""
        def placement(node_id):
            host = self.lab.hosts[f"n{node_id}"]
            return host.address, host.exec_prefix()
        cluster = kafka_nodes.KafkaCluster(self.root, self.node_count, self.overrides, placement)
        cluster.format()
        return cluster

    def close(self) -> None:
        """Idempotent; another thread may call it to cut a trial short (its waits then end)."""
        if self.closed:
            return
        self.closed = True
        for process in self.clients:
            if process.poll() is None:
                process.kill()
                try:
                    process.wait(10)
                except subprocess.TimeoutExpired:
                    pass
        if self.cluster is not None:
            self.cluster.close()        # SIGKILL reaches stopped processes too
        for mount in reversed(self.mounts):
            subprocess.run(["umount", "-l", mount], capture_output=True, timeout=30)
        self.mounts.clear()
        self.lab.close()
        if self.fsync_shim is not None:
            self.fsync_shim.close()
            self.fsync_shim = None

    def _preload(self, node_id: int, extra: tuple[str, ...] = ()) -> list[str]:
        """The launcher suffix that preloads `extra` libraries and the slow-fsync shim, and lets
        the node use (and write) the bytecode cache."""
        launcher = ["env", "-u", "PYTHONDONTWRITEBYTECODE",
                    *(f"{name}={value}" for name, value in BYTECODE_ENV.items())]
        libraries = list(extra) + ([self.fsync_shim.library] if self.fsync_shim else [])
        if libraries:
            launcher += [f"LD_PRELOAD={' '.join(libraries)}",
                         f"{slowdisk.CONTROL_ENV}={self.fsync_control(node_id)}"]
        return launcher

    def fsync_control(self, node_id: int) -> str:
        return os.path.join(self.root, f"fsync-{node_id}.control")

    def _mount(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={self.disk_mb}m", "tmpfs", path],
                              capture_output=True, text=True, timeout=30)
        if done.returncode != 0:
            raise RuntimeError(f"mount tmpfs on {path}: {done.stderr.strip()}")
        self.mounts.append(path)

    # -- clients -----------------------------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        return ",".join(f"{n.host}:{n.port}" for n in self.cluster.nodes.values())

    def client(self, args: list[str], log_name: str) -> subprocess.Popen:
        """Start `python -m tests.faults.client ARGS` in the client namespace."""
        return self.spawn([sys.executable, "-m", "tests.faults.client",
                           "--bootstrap", self.bootstrap, *args], log_name)

    def spawn(self, command: list[str], log_name: str) -> subprocess.Popen:
        """Start `command` in the client namespace, its output in ROOT/`log_name`; `close()`
        kills it if it is still running."""
        env = {**os.environ, **BYTECODE_ENV}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPATH"] = REPO_ROOT + os.pathsep + env.get("PYTHONPATH", "")
        log_path = os.path.join(self.root, log_name)
        log = open(log_path, "ab")
        command = self.lab.hosts["client"].exec_prefix() + command
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=REPO_ROOT,
                                   env=env)
        log.close()
        process.log_path = log_path
        self.clients.append(process)
        return process

    def wait_client(self, process: subprocess.Popen, timeout: float) -> int:
        try:
            return process.wait(timeout)
        except subprocess.TimeoutExpired:
            _dump_stacks(process.pid, process.log_path)
            process.kill()
            process.wait(10)
            return -9

    # -- views -------------------------------------------------------------------------------------
    def metadata(self, topics=None, nodes=None):
        """Metadata from the first running, unpaused broker (of `nodes`, default all) that answers."""
        for node_id, node in self.cluster.nodes.items():
            if node.running and node_id not in self.paused and (nodes is None or node_id in nodes):
                try:
                    return self.cluster.metadata(node_id, topics)
                except (OSError, ConnectionError):
                    continue
        return None

    def partitions(self, topic: str, nodes=None) -> dict[int, tuple[int, list[int]]]:
        """partition -> (leader, isr) as the cluster's metadata says ({} when nobody answers);
        `nodes`: ask only these (not one cut off from the controller)."""
        response = self.metadata([topic], nodes)
        if response is None or not response.topics or response.topics[0].error_code:
            return {}
        return {p.partition_index: (p.leader_id, sorted(p.isr_nodes))
                for p in response.topics[0].partitions}

    def leader(self, topic: str, partition: int = 0) -> int:
        return self.partitions(topic).get(partition, (-1, []))[0]

    def active_controller(self) -> int:
        try:
            return self.cluster.active_controller()
        except (OSError, ConnectionError):
            return -1

    # -- admin -------------------------------------------------------------------------------------
    def create_topic(self, topic: str, partitions: int = 3, configs=None, timeout: float = 60) -> None:
        R = m.CreateTopicsRequest
        settings = {"min.insync.replicas": "2", **(configs or {})}
        body = R(topics=[R.CreatableTopic(
            name=topic, num_partitions=partitions, replication_factor=3, assignments=[],
            configs=[R.CreatableTopicConfig(name=k, value=v)
                     for k, v in settings.items()])], timeout_ms=30000, validate_only=False)
        deadline = time.monotonic() + timeout
        while True:
            controller = self.active_controller()
            node = self.cluster.nodes.get(controller)
            try:
                if node is not None:
                    answer = call(node.address, 19, 5, body, timeout=35).topics[0]
                    if answer.error_code in (0, 36):        # created / already exists
                        break
            except (OSError, ConnectionError):
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"could not create {topic}")
            time.sleep(0.5)
        self.wait_until(lambda: self._settled(topic, partitions), deadline - time.monotonic(),
                        f"{topic}'s partitions with a leader and a full ISR")

    def _settled(self, topic: str, partitions: int, need_full_isr: bool = True) -> bool:
        state = self.partitions(topic)
        return len(state) == partitions and all(
            leader >= 0 and (len(isr) == self.node_count or not need_full_isr)
            for leader, isr in state.values())

    # -- faults the environment itself knows how to undo -------------------------------------------
    def pause(self, node_id: int) -> None:
        self.cluster.nodes[node_id].signal(signal.SIGSTOP)
        self.paused.add(node_id)

    def resume(self, node_id: int) -> None:
        self.cluster.nodes[node_id].signal(signal.SIGCONT)
        self.paused.discard(node_id)

    def fill_disk(self, node_id: int) -> None:
        """Take every free byte of the node's data disk (its tmpfs) with one file."""
        path = os.path.join(self.cluster.nodes[node_id].data_dir, ".faults-filler")
        self.fillers[node_id] = path
        with open(path, "wb", buffering=0) as handle:     # unbuffered: close must not flush
            for size in (1 << 20, 4096, 1):                  # megabytes, then the last crumbs
                try:
                    while handle.write(b"\0" * size):
                        pass
                except OSError:
                    pass

    def free_disk(self, node_id: int) -> None:
        path = self.fillers.pop(node_id, None)
        if path and os.path.exists(path):
            os.unlink(path)

    def skew_clock(self, node_id: int, seconds: float) -> None:
        """kill -9 the node and start it again with its wall clock `seconds` off (libfaketime: a
        constant offset, so intervals stay right; a running process cannot be re-clocked)."""
        library = libfaketime()
        if library is None:
            raise RuntimeError("libfaketime is not installed")
        node = self.cluster.nodes[node_id]
        self.skewed.setdefault(node_id, list(node.launcher))
        self.cluster.kill(node_id)
        host = self.lab.hosts[f"n{node_id}"]
        node.launcher = (host.exec_prefix() + self._preload(node_id, (library,)) +
                         ["env", f"FAKETIME={seconds:+.0f}s"])
        self.cluster.start(node_id)

    def unskew_clock(self, node_id: int) -> None:
        launcher = self.skewed.pop(node_id, None)
        if launcher is not None:
            self.cluster.kill(node_id)
            self.cluster.nodes[node_id].launcher = launcher
            self.cluster.start(node_id)

    def slow_fsync(self, node_id: int, low_ms: int, high_ms: int) -> None:
        """From now on every fsync of the running node takes low..high ms longer (no restart)."""
        if self.fsync_shim is None:
            raise RuntimeError("the slow-fsync shim is not loaded (no C compiler)")
        slowdisk.set_delay(self.fsync_control(node_id), low_ms, high_ms)
        self.slowed.add(node_id)

    def fast_fsync(self, node_id: int) -> None:
        slowdisk.set_delay(self.fsync_control(node_id), 0)
        self.slowed.discard(node_id)

    def fsyncs_delayed(self, node_id: int) -> int:
        return slowdisk.hits(self.fsync_control(node_id))

    def recover(self, topics=(), timeout: float = 120) -> float:
        """Undo every fault (heal the network, resume paused nodes, free disks, fsync at full speed,
        start dead nodes),
        then wait until every broker is registered and every partition of `topics` has a leader and
        its full ISR. Returns the seconds it took; raises TimeoutError when the cluster does not
        recover."""
        began = time.monotonic()
        self.lab.heal()
        for node_id in list(self.paused):
            self.resume(node_id)
        for node_id in list(self.fillers):
            self.free_disk(node_id)
        for node_id in list(self.slowed):
            self.fast_fsync(node_id)
        for node_id in list(self.skewed):
            self.unskew_clock(node_id)
        for node_id, node in self.cluster.nodes.items():
            if not node.running:
                self.cluster.start(node_id)
        deadline = began + timeout
        self.wait_until(lambda: all(n.started() for n in self.cluster.nodes.values()),
                        deadline - time.monotonic(), "every node to start")
        self.wait_until(self._formed, deadline - time.monotonic(), "every broker to register")
        for topic in topics:
            # a quick (CI) environment only needs leaders to read from; the next trial's topic
            # waits for every broker anyway
            self.wait_until(lambda: self._settled(topic, len(self.partitions(topic)) or 1,
                                                  need_full_isr=not self.quick),
                            deadline - time.monotonic(), f"{topic} to get its full ISR back")
        return time.monotonic() - began

    def fully_replicated(self) -> bool:
        """Every node running and registered, every partition of every topic (internal ones too)
        with a leader and its full ISR: what a rolling update waits for before the next node."""
        if not all(node.running and node.started() for node in self.cluster.nodes.values()):
            return False
        if not self._formed():
            return False
        response = self.metadata()
        return response is not None and all(
            not topic.error_code and all(p.leader_id >= 0 and len(p.isr_nodes) == self.node_count
                                         for p in topic.partitions)
            for topic in response.topics)

    def _formed(self) -> bool:
        ids = set(self.cluster.nodes)
        for node_id in ids:
            listed = {b.node_id for b in self.cluster.metadata(node_id).brokers}
            if listed != ids:
                return False
        return True

    def wait_until(self, predicate, timeout: float, what: str):
        deadline = time.monotonic() + max(timeout, 0)
        while True:
            try:
                value = predicate()
            except (OSError, ConnectionError, ValueError, protocol.DecodeError):
                value = None
            if value:
                return value
            if self.closed:
                raise TimeoutError(f"the environment was closed while waiting for {what}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out waiting for {what}")
            time.sleep(0.2)

    def log_tails(self, lines: int = 20) -> str:
        return self.cluster._log_tails(lines)


def libfaketime() -> str | None:
    for pattern in LIBFAKETIME_GLOBS:
        found = sorted(glob.glob(pattern))
        if found:
            return found[0]
    return None
