"""The container image, built without an engine (image/build-oci.sh) and run with runc as a container.

One build per session (about three minutes: Debian packages and PyPI wheels). The container runs the
image's own entry point (tini → odradek) as the image's user, in its own PID, mount, IPC and UTS
namespaces but on the host's network, so real clients on 127.0.0.1 reach it. Needs root, mmdebstrap,
umoci and runc (the build script installs the first two; runc comes from Debian's package).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="building and running the image needs root")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def oci_layout(tmp_path_factory):
    """The image built once for this module (ODRADEK_IMAGE_LAYOUT=DIR/oci reuses a built one)."""
    if os.environ.get("ODRADEK_IMAGE_LAYOUT"):
        return Path(os.environ["ODRADEK_IMAGE_LAYOUT"])
    if shutil.which("runc") is None:
        apt_env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-qq"], check=True, env=apt_env, capture_output=True)
        subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", "runc"], check=True,
                       env=apt_env, capture_output=True)
    out = tmp_path_factory.mktemp("image")
    subprocess.run(["bash", str(REPO / "image" / "build-oci.sh"), str(out)], check=True, timeout=900,
                   env={**os.environ, "PYTHON": sys.executable})
    return out / "oci"


class Container:
    """An unpacked bundle run by `runc run` in the foreground (its exit status is the container's)."""

    def __init__(self, layout: Path, workdir: Path, args: list[str]):
        self.id = f"odradek-test-{uuid.uuid4().hex[:8]}"
        self.bundle = workdir / "bundle"
        subprocess.run(["umoci", "unpack", "--image", f"{layout}:odradek:0.1.0", str(self.bundle)], check=True,
                       capture_output=True)
        config_path = self.bundle / "config.json"
        config = json.loads(config_path.read_text())
        # host network (clients on loopback reach it); everything else stays as the image says
        config["linux"]["namespaces"] = [ns for ns in config["linux"]["namespaces"] if ns["type"] != "network"]
        config["process"]["terminal"] = False
        # the data volume as Kubernetes provides it: a directory of the host (a PVC), owned by the
        # pod's fsGroup, instead of the root-owned tmpfs umoci puts there
        self.volume = workdir / "volume"
        self.volume.mkdir()
        os.chown(self.volume, 1000, 1000)
        for mount in config["mounts"]:
            if mount["destination"] == "/var/lib/odradek":
                mount.update(type="bind", source=str(self.volume), options=["rbind", "rw"])
        self.entrypoint = config["process"]["args"]
        config["process"]["args"] = self.entrypoint[:3] + args      # tini -- odradek <args>
        config_path.write_text(json.dumps(config))
        self.log = open(workdir / "container.log", "w+")
        self.process = subprocess.Popen(["runc", "run", "--bundle", str(self.bundle), self.id],
                                         stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def output(self) -> str:
        self.log.flush()
        return Path(self.log.name).read_text()

    def pids(self) -> list[int]:
        result = subprocess.run(["runc", "ps", "--format", "json", self.id], capture_output=True, text=True)
        return json.loads(result.stdout or "[]") if result.returncode == 0 else []

    def kill(self, signal_name: str) -> None:
        subprocess.run(["runc", "kill", self.id, signal_name], check=True, capture_output=True)

    def close(self) -> None:
        if self.process.poll() is None:
            subprocess.run(["runc", "kill", self.id, "KILL"], capture_output=True)
            self.process.wait(timeout=30)
        subprocess.run(["runc", "delete", "--force", self.id], capture_output=True)
        self.log.close()
        shutil.rmtree(self.bundle, ignore_errors=True)


def _uid(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[1])
    raise AssertionError(f"no Uid line for pid {pid}")


def test_image_runs_as_non_root_serves_clients_and_stops_on_sigterm(oci_layout, tmp_path):
    from confluent_kafka import Consumer, Producer, TopicPartition

    port = _free_port()
    listener = f"PLAINTEXT://127.0.0.1:{port}"
    container = Container(oci_layout, tmp_path, ["serve", "--override", "log.dirs=/var/lib/odradek/data",
                                                 "--override", f"listeners={listener}"])
    try:
        deadline = time.monotonic() + 60
        while "listening on" not in container.output():
            assert container.process.poll() is None, f"container exited:\n{container.output()}"
            assert time.monotonic() < deadline, f"broker not listening after 60 s:\n{container.output()}"
            time.sleep(0.2)
        assert container.entrypoint[:3] == ["tini", "--", "odradek"], container.entrypoint
        pids = container.pids()
        assert len(pids) >= 2, f"expected tini and the broker, got {pids}"
        assert {_uid(pid) for pid in pids} == {1000}, "every process of the container runs as user 1000"

        bootstrap = f"127.0.0.1:{port}"
        producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
        sent = [(f"k{i}".encode(), f"value-{i}".encode()) for i in range(200)]
        for key, value in sent:
            producer.produce("image-check", key=key, value=value, partition=0)
        assert producer.flush(60) == 0
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "image-check",
                             "enable.partition.eof": True})
        consumer.assign([TopicPartition("image-check", 0, 0)])
        got, deadline = [], time.monotonic() + 60
        while len(got) < len(sent) and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                got.append((msg.key(), msg.value()))
        consumer.close()
        assert got == sent

        container.kill("TERM")           # runc → tini (PID 1) → the broker
        assert container.process.wait(timeout=60) == 0, container.output()
        assert "odradek: stopped" in container.output()
        data = container.volume / "data"
        assert (data / "image-check-0").is_dir() and data.stat().st_uid == 1000, "data written to the volume"
    finally:
        container.close()
