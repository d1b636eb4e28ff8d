"""The broker under test: an `odradek serve` subprocess (default), any other command, or an external one.

- default: `odradek serve` on a free loopback port with a fresh data dir (`BrokerProcess`);
- ``COMPAT_BROKER_CMD``: a shell-style command template started the same way instead of Odradek, with
  ``{port}`` and ``{data_dir}`` filled in (e.g. a peer broker binary, to check the drivers themselves);
  a test's broker settings go to ``{data_dir}/extra.properties``, which Apache Kafka's run.sh appends;
- ``COMPAT_BOOTSTRAP=host:port``: an already running broker; nothing is started, restart scenarios skip.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

STARTUP_TIMEOUT = float(os.environ.get("COMPAT_STARTUP_TIMEOUT", "30"))  # a JVM broker may need more


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def terminate(proc: subprocess.Popen, timeout: float) -> int:
    """SIGTERM `proc` (a clean stop), SIGKILL it after `timeout` seconds; its exit code."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


class BrokerProcess:
    """A broker subprocess on a fixed loopback port, restartable over the same data dir."""

    def __init__(self, name: str = "broker", advertised_port: int | None = None,
                 overrides: dict[str, str] | None = None) -> None:
        self.overrides = dict(overrides or {})   # extra server.properties
        self.port = free_port()
        self.advertised_port = advertised_port or self.port
        self.controller_port = free_port()   # for brokers that need a second listener (Kafka's KRaft)
        self.data_dir = tempfile.mkdtemp(prefix=f"odradek-compat-{name}-")
        self.log_path = os.path.join(self.data_dir, "broker.log")
        self.proc: subprocess.Popen | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.advertised_port}"

    def command(self) -> list[str]:
        template = os.environ.get("COMPAT_BROKER_CMD")
        if template:   # placeholders: {port} {data_dir} {advertised_port} {controller_port}
            return shlex.split(template.format(
                port=self.port, data_dir=os.path.join(self.data_dir, "data"),
                advertised_port=self.advertised_port, controller_port=self.controller_port))
        return [sys.executable, "-c", "import sys; from broker.cli import main; sys.exit(main())", "serve",
                "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
                "--override", f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.advertised_port}",
                "--override", f"log.dirs={os.path.join(self.data_dir, 'data')}",
                "--override", "node.id=1",
                *[arg for key, value in self.overrides.items() for arg in ("--override", f"{key}={value}")]]

    def start(self) -> None:
        if os.environ.get("COMPAT_BROKER_CMD") and self.overrides:
            self._write_extra_properties()
        log = open(self.log_path, "ab")
        repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT, cwd=repo,
                                     start_new_session=True)
        log.close()
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while not _accepts(self.port):
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited with {self.proc.returncode} at start-up:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"broker not listening on {self.port} after {STARTUP_TIMEOUT}s:\n{self.log_tail()}")
            time.sleep(0.05)

    def _write_extra_properties(self) -> None:
        data = os.path.join(self.data_dir, "data")
        os.makedirs(data, exist_ok=True)
        with open(os.path.join(data, "extra.properties"), "w") as f:
            f.writelines(f"{key}={value}\n" for key, value in self.overrides.items())

    # A clean stop on SIGTERM: Odradek exits 0; a JVM broker (Kafka) exits 143 (128 + SIGTERM).
    CLEAN_EXIT_CODES = (0, 143) if os.environ.get("COMPAT_BROKER_CMD") else (0,)

    def stop(self, timeout: float = 20) -> int | None:
        """SIGTERM (a clean shutdown), SIGKILL after `timeout`; returns the exit code."""
        if self.proc is None:
            return None
        code = terminate(self.proc, timeout)
        self.proc = None
        return code

    def restart(self) -> None:
        self.stop()
        self.start()

    def close(self) -> int | None:
        """Stop the broker and remove its data dir (a quota test alone writes gigabytes)."""
        try:
            return self.stop()
        finally:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def log_tail(self, lines: int = 30) -> str:
        try:
            with open(self.log_path, "rb") as f:
                return b"\n".join(f.read().splitlines()[-lines:]).decode(errors="replace")
        except OSError:
            return "(no log)"


def external_bootstrap() -> str | None:
    return os.environ.get("COMPAT_BOOTSTRAP") or None
