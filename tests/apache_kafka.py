"""The reference Apache Kafka (3.9, built from source, in ../shared/apache-kafka): started once per
test session for the tests that compare Odradek's answers with Kafka's.

    from tests.apache_kafka import apache_kafka          # a session fixture: "host:port"

Where: $APACHE_KAFKA_HOME, else `shared/apache-kafka` next to the checkout or its parents. Tests
using it skip, saying why, when Java or that directory is missing. It starts in about 6 s (more on a
loaded machine) and is stopped with SIGTERM at the end of the session.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

START_TIMEOUT = 90.0


def kafka_home() -> Path | None:
    candidates = [os.environ.get("APACHE_KAFKA_HOME")]
    here = Path(__file__).resolve().parent.parent
    candidates += [str(parent / "shared" / "apache-kafka") for parent in (here, *here.parents)]
    for candidate in candidates:
        if candidate and (Path(candidate) / "run.sh").is_file():
            return Path(candidate)
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _ready(port: int) -> bool:
    """Kafka answers ApiVersions (listening alone is not enough: the broker may still be starting)."""
    from tests.broker.raw_client import RawClient
    from protocol import messages

    try:
        with RawClient("127.0.0.1", port, timeout=2) as client:
            meta = client.request(3, 1, messages.MetadataRequest(topics=None))
            return bool(meta.brokers)
    except (OSError, ConnectionError):
        return False


class ApacheKafka:
    def __init__(self, data_dir: Path):
        self.home = kafka_home()
        self.port = _free_port()
        self.data_dir = data_dir
        self.process: subprocess.Popen | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        env = dict(os.environ, KAFKA_HEAP=os.environ.get("KAFKA_HEAP", "512m"))
        log = open(self.data_dir / "kafka.out", "wb")
        self.process = subprocess.Popen(
            ["bash", str(self.home / "run.sh"), str(self.port), str(self.data_dir / "data"),
             str(_free_port())], stdout=log, stderr=subprocess.STDOUT, env=env,
            start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT
        while not _ready(self.port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                tail = (self.data_dir / "kafka.out").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"Apache Kafka did not start:\n{tail}")
            time.sleep(0.3)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)


def skip_reason() -> str | None:
    if kafka_home() is None:
        return "no Apache Kafka (set APACHE_KAFKA_HOME or put it in ../shared/apache-kafka)"
    if shutil.which("java") is None:
        return "no java on PATH to run the reference Apache Kafka"
    return None


@pytest.fixture(scope="session")
def apache_kafka(tmp_path_factory):
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    kafka = ApacheKafka(tmp_path_factory.mktemp("apache-kafka"))
    kafka.start()
    try:
        yield kafka
    finally:
        kafka.stop()
