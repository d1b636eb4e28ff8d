"""A Kafka Connect 3.9.0 distributed worker (a JVM over compat-tests/.cache/connect) and its REST API."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request

from .brokers import free_port, terminate

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JARS = os.path.join(HERE, ".cache", "connect")
FILE_SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
FILE_SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"

_LOG4J = """\
rootLogger.level=INFO
rootLogger.appenderRef.file.ref=FILE
appender.file.type=File
appender.file.name=FILE
appender.file.fileName={log}
appender.file.layout.type=PatternLayout
appender.file.layout.pattern=[%d] %p %m (%c{{1}})%n
"""


def missing() -> str | None:
    if shutil.which("java") is None:
        return "no java (run compat-tests/setup.sh)"
    if not glob.glob(os.path.join(JARS, "connect-runtime-*.jar")) or not glob.glob(
            os.path.join(JARS, "jetty9-server-*.jar")):
        return "no Kafka Connect jars in compat-tests/.cache/connect (run compat-tests/setup.sh)"
    return None


class ConnectWorker:
    """One worker of a distributed Connect cluster: restartable over the same config (and REST port)."""

    def __init__(self, bootstrap: str, workdir: str, group: str, **settings: str) -> None:
        self.port = free_port()
        self.dir = workdir
        os.makedirs(workdir, exist_ok=True)
        self.log_path = os.path.join(workdir, "worker.log")
        self.proc: subprocess.Popen | None = None
        config = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "config.storage.topic": f"{group}-configs",
            "offset.storage.topic": f"{group}-offsets",
            "status.storage.topic": f"{group}-status",
            "config.storage.replication.factor": "1",
            "offset.storage.replication.factor": "1",
            "status.storage.replication.factor": "1",
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            "listeners": f"http://127.0.0.1:{self.port}",
            "offset.flush.interval.ms": "500",
            "plugin.discovery": "service_load",   # no classpath scan (a faster start)
            **settings,
        }
        self.properties = os.path.join(workdir, "worker.properties")
        with open(self.properties, "w") as f:
            f.writelines(f"{key}={value}\n" for key, value in config.items())
        self.log4j = os.path.join(workdir, "log4j2.properties")
        with open(self.log4j, "w") as f:
            f.write(_LOG4J.format(log=self.log_path))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def worker_id(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 60) -> None:
        """Starts the JVM and waits until GET /health says the worker has started: its internal topics
        exist, it has read them and joined its group (the REST API answers well before that)."""
        command = ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
                   f"-Dlog4j2.configurationFile={self.log4j}", "-cp", os.path.join(JARS, "*"),
                   "org.apache.kafka.connect.cli.ConnectDistributed", self.properties]
        with open(os.path.join(self.dir, "stdout.log"), "ab") as out:
            self.proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"Connect worker exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                if self.rest("GET", "/health")[0] == 200:
                    return
            except (OSError, RuntimeError):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"Connect worker not ready after {timeout}s:\n{self.log_tail()}")
            time.sleep(0.3)

    def stop(self, timeout: float = 30) -> None:
        """SIGTERM: the worker leaves its group and commits its tasks' offsets; SIGKILL after `timeout`."""
        if self.proc is None:
            return
        terminate(self.proc, timeout)
        self.proc = None

    def rest(self, method: str, path: str, body: dict | None = None) -> tuple[int, object]:
        """(HTTP status, decoded JSON or None); a 5xx or HTML answer (the worker not ready) raises."""
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                status, text = answer.status, answer.read()
        except urllib.error.HTTPError as error:
            status, text = error.code, error.read()
        if status >= 500 or text.startswith(b"<"):   # Jetty's own page before the API is up
            raise RuntimeError(f"{method} {path}: {status} {text[:500]!r}")
        return status, json.loads(text) if text else None

    def put_connector(self, name: str, config: dict[str, str]) -> None:
        status, answer = self.rest("PUT", f"/connectors/{name}/config", config)
        assert status in (200, 201), f"PUT connector {name}: {status} {answer}"

    def status(self, name: str) -> dict | None:
        status, answer = self.rest("GET", f"/connectors/{name}/status")
        return answer if status == 200 else None

    def log_tail(self, lines: int = 40) -> str:
        try:
            with open(self.log_path, "rb") as f:
                return b"\n".join(f.read().splitlines()[-lines:]).decode(errors="replace")
        except OSError:
            return "(no log)"

    def log_problems(self) -> list[str]:
        """The worker log's ERROR lines (a healthy run against Kafka has none)."""
        try:
            with open(self.log_path, errors="replace") as f:
                return [line.rstrip() for line in f if "] ERROR " in line]
        except OSError:
            return []


def running(status: dict | None) -> bool:
    """The connector and all of its (at least one) tasks RUNNING."""
    return bool(status and status["connector"]["state"] == "RUNNING" and status["tasks"]
                and all(task["state"] == "RUNNING" for task in status["tasks"]))


def owners(status: dict) -> set[str]:
    """The workers running the connector or one of its tasks."""
    return {status["connector"]["worker_id"], *(task["worker_id"] for task in status["tasks"])}
