"""Kubernetes pods as local processes, for the Helm chart tests.

`PodNetwork` gives each "pod" a network namespace on a private bridge (a veth pair each, test
addresses 10.201.<n>.0/24) and an /etc/hosts that maps the pods' headless-service DNS names
(``<pod>.<headless>.<namespace>.svc``) and the client service to their addresses, as cluster DNS
would: ``ip netns exec`` bind-mounts ``/etc/netns/<ns>/hosts`` over /etc/hosts for whatever it runs.
`PodNetwork.start_container` runs a rendered container — its command, args and env exactly as
rendered, the downward-API fields (metadata.name, metadata.namespace, status.hostIP, status.podIP)
and HOSTNAME filled in as the kubelet would — in that namespace, inside a mount namespace where
the pod's volumes (ConfigMap and Secret files, the data volume, an emptyDir /tmp) are bind-mounted
at the rendered mount paths. Everything (processes, namespaces, links, files) is removed on exit.

Needs root, ``ip`` (iproute2) and ``mount``; `available()` says whether this machine has them.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def available() -> str | None:
    """None when network namespaces can be made here, else why not."""
    if os.geteuid() != 0:
        return "needs root for network namespaces"
    if not shutil.which("ip") or not shutil.which("mount"):
        return "needs iproute2 and mount"
    probe = f"odrprobe{os.getpid() % 100000}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True, timeout=20)
    if made.returncode != 0:
        return f"ip netns add failed: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "delete", probe], capture_output=True, timeout=20)
    return None


def _run(*args: str) -> None:
    subprocess.run(args, check=True, capture_output=True, text=True, timeout=30)


class Pod:
    """A running container: the process, its log, its address."""

    def __init__(self, name: str, address: str, netns: str, log: Path) -> None:
        self.name, self.address, self.netns, self.log = name, address, netns, log
        self.process: subprocess.Popen | None = None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def http_status(self, port: int, path: str, timeout: float = 3.0) -> int | None:
        try:
            with urllib.request.urlopen(f"http://{self.address}:{port}{path}", timeout=timeout) as r:
                return r.status
        except urllib.error.HTTPError as exc:
            return exc.code
        except OSError:
            return None

    def terminate(self, timeout: float) -> int:
        """SIGTERM, as the kubelet sends it; SIGKILL after `timeout` (the grace period)."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


class PodNetwork:
    """A bridge, one network namespace per pod, and per-namespace hosts files."""

    def __init__(self, workdir: Path, namespace: str, headless: str, services: dict[str, str]):
        """`services`: extra DNS names (``<svc>.<namespace>.svc``) -> the pod name they resolve to."""
        self.workdir, self.namespace, self.headless = workdir, namespace, headless
        self.services = services
        tag = os.getpid() % 100000
        self.subnet = f"10.201.{tag % 200 + 20}"
        self.bridge = f"obr{tag}"
        self.prefix = f"odr{tag}"
        self.pods: dict[str, Pod] = {}
        self._netns: list[str] = []
        self._veths: list[str] = []
        self._made_dirs: list[Path] = []

    # ---- set-up and tear-down
    def __enter__(self) -> "PodNetwork":
        try:
            _run("ip", "link", "add", self.bridge, "type", "bridge")
            _run("ip", "addr", "add", f"{self.subnet}.1/24", "dev", self.bridge)
            _run("ip", "link", "set", self.bridge, "up")
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc) -> None:
        for pod in self.pods.values():
            if pod.running:
                pod.process.kill()
                pod.process.wait()
        for veth in self._veths:
            # (deleting a namespace frees its veth pair only later: the next test of this process
            # reuses the name, and `ip link add` then found it still there)
            subprocess.run(["ip", "link", "delete", veth], capture_output=True, timeout=30)
        for netns in self._netns:
            subprocess.run(["ip", "netns", "delete", netns], capture_output=True, timeout=30)
            shutil.rmtree(f"/etc/netns/{netns}", ignore_errors=True)
        subprocess.run(["ip", "link", "delete", self.bridge], capture_output=True, timeout=30)
        for path in reversed(self._made_dirs):
            try:
                path.rmdir()
            except OSError:
                pass

    def add(self, names: list[str]) -> None:
        """Give each pod (and a 'client' pseudo-pod, if listed) a namespace and an address."""
        for name in names:
            index = len(self.pods) + 10
            netns, veth = f"{self.prefix}-{index}", f"ov{self.prefix[3:]}x{index}"
            _run("ip", "netns", "add", netns)
            self._netns.append(netns)
            _run("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", netns)
            self._veths.append(veth)
            _run("ip", "link", "set", veth, "master", self.bridge, "up")
            address = f"{self.subnet}.{index}"
            _run("ip", "-n", netns, "addr", "add", f"{address}/24", "dev", "eth0")
            _run("ip", "-n", netns, "link", "set", "eth0", "up")
            _run("ip", "-n", netns, "link", "set", "lo", "up")
            self.pods[name] = Pod(name, address, netns, self.workdir / f"{name}.log")
        lines = ["127.0.0.1 localhost"]
        for pod in self.pods.values():
            lines.append(f"{pod.address} {pod.name}.{self.headless}.{self.namespace}.svc "
                         f"{pod.name}.{self.headless}.{self.namespace}.svc.cluster.local")
        for service, pod_name in self.services.items():
            lines.append(f"{self.pods[pod_name].address} {service}.{self.namespace}.svc "
                         f"{service}.{self.namespace}.svc.cluster.local")
        self._mount_point("/etc/netns")
        for pod in self.pods.values():
            etc = Path("/etc/netns") / pod.netns
            etc.mkdir(parents=True, exist_ok=True)
            (etc / "hosts").write_text("\n".join(lines) + "\n")

    # ---- running containers
    def _mount_point(self, path: str) -> None:
        """Create a (host) directory a volume is bind-mounted over, remembering it for removal."""
        missing = []
        target = Path(path)
        while not target.exists():
            missing.append(target)
            target = target.parent
        for directory in reversed(missing):
            directory.mkdir()
            self._made_dirs.append(directory)

    def start_container(self, pod_name: str, container: dict, volumes: dict[str, Path],
                        extra_env: dict[str, str] | None = None) -> Pod:
        """Run `container` (a rendered container spec) as pod `pod_name`. `volumes` maps each
        volume name to a host directory holding its files; every volumeMount is bind-mounted
        from there (an emptyDir /tmp is mounted last, since the sources may live under /tmp)."""
        pod = self.pods[pod_name]
        env = {"PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
               "PYTHONPATH": os.environ.get("PYTHONPATH", str(REPO_ROOT)),
               "HOME": "/tmp", "HOSTNAME": pod_name}
        fields = {"metadata.name": pod_name, "metadata.namespace": self.namespace,
                  "status.hostIP": f"{self.subnet}.1", "status.podIP": pod.address}
        for item in container.get("env", []):
            if "value" in item:
                env[item["name"]] = str(item["value"])
            else:
                env[item["name"]] = fields[item["valueFrom"]["fieldRef"]["fieldPath"]]
        env.update(extra_env or {})
        mounts = sorted(container.get("volumeMounts", []),
                        key=lambda m: (m["mountPath"] == "/tmp", len(m["mountPath"])))
        steps, read_only = [], []
        for mount in mounts:
            self._mount_point(mount["mountPath"])
            source = volumes[mount["name"]]
            source.mkdir(parents=True, exist_ok=True)
            target = shlex.quote(mount["mountPath"])
            bind = "--bind"
            if mount["mountPath"] == "/tmp":
                # The checkout and its venv (the pod's `odradek`) may live under /tmp too: bind them
                # into the emptyDir at the same paths first, then mount it recursively over /tmp.
                for needed in _host_paths_under("/tmp"):
                    inside = shlex.quote(str(source / needed.relative_to("/tmp")))
                    steps.append(f"mkdir -p {inside} && mount --bind {shlex.quote(str(needed))} {inside}")
                bind = "--rbind"
            # a mount inside another volume needs its mount point there (the runtime makes it)
            steps.append(f"mkdir -p {target} && mount {bind} {shlex.quote(str(source))} {target}")
            if mount.get("readOnly"):
                read_only.append(f"mount -o remount,bind,ro {target}")
        steps += read_only[::-1]
        argv = list(container.get("command", [])) + list(container.get("args", []))
        # ip netns exec: network namespace + a fresh mount namespace with /etc/netns/<ns>/hosts
        # over /etc/hosts; the volumes are bound inside it, then the container's argv replaces
        # the shell with exactly the rendered environment.
        setup = " && ".join(steps + ['exec env -i "$@"'])
        command = ["ip", "netns", "exec", pod.netns, "/bin/sh", "-c", setup, "sh"] + \
            [f"{key}={value}" for key, value in env.items()] + argv
        log = open(pod.log, "ab")
        try:
            pod.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                           stdin=subprocess.DEVNULL)
        finally:
            log.close()
        return pod

    def run_in(self, pod_name: str, argv: list[str], timeout: float,
               env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        """Run a command to completion in a pod's network namespace (its hosts file applies)."""
        full_env = {**os.environ, **(env or {})}
        return subprocess.run(["ip", "netns", "exec", self.pods[pod_name].netns] + argv,
                              capture_output=True, text=True, timeout=timeout, env=full_env)

    def wait_until(self, predicate, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            time.sleep(0.2)
        raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}\n" + "\n".join(
            f"--- {p.name} ---\n{p.log_tail()}" for p in self.pods.values() if p.log.exists()))


def _host_paths_under(top: str) -> list[Path]:
    """The checkout and the Python environment, where they lie under `top` (outermost only)."""
    paths = sorted({Path(REPO_ROOT).resolve(), Path(sys.prefix).resolve()}, key=lambda p: len(p.parts))
    chosen: list[Path] = []
    for path in paths:
        if path.is_relative_to(top) and not any(path.is_relative_to(c) for c in chosen):
            chosen.append(path)
    return chosen
