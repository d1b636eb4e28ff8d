"""A private test network: a bridge, one network namespace per host, and partitions between them.

Each host (a node or the clients) gets a namespace ``flt<tag>-<name>`` joined to the bridge
``fbr<tag>`` by a veth pair, with an address in ``10.213.<n>.0/24`` that only this suite uses (the
bridge itself is ``.1``: the test process reaches every host through it, as a control network that
partitions never cut). The tag is the owning process' pid and a letter, one per lab, so one process
can run several labs at once (``--parallel``); each lab takes a subnet no live bridge holds. Partitions are drop rules inside the namespaces, made with nft when it is
installed and with blackhole routes (iproute2 only) otherwise; either kind dies with its namespace.

Everything is removed by `close()`, which the context manager, an atexit hook and SIGINT/SIGTERM
all reach; `sweep_stale()` removes what a run killed with SIGKILL left behind.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import signal
import string
import subprocess
import threading

PREFIX = "flt"
SUBNET_BASE = "10.213"
SUBNETS = range(20, 250)            # third octets the suite may use
TAG = r"(\d+)[a-z]?"                 # a lab's tag: its process' pid, then the lab's letter
_allocation = threading.Lock()      # labs of one process pick tags and subnets one at a time


def available() -> str | None:
    """None when this machine can build the lab, else the reason it cannot."""
    if os.geteuid() != 0:
        return "needs root for network namespaces"
    if not shutil.which("ip"):
        return "needs iproute2 (ip)"
    probe = f"{PREFIX}probe{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True, timeout=20)
    if made.returncode != 0:
        return f"ip netns add failed: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "delete", probe], capture_output=True, timeout=20)
    return None


def _run(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(args, capture_output=True, text=True, timeout=30)
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed: {result.stderr.strip()}")
    return result


def sweep_stale() -> None:
    """Remove namespaces and bridges of earlier runs whose process is gone."""
    names = _run("ip", "netns", "list", check=False).stdout.split()
    for name in names:
        found = re.fullmatch(rf"{PREFIX}{TAG}-\w+", name)
        if found and not _alive(int(found.group(1))):
            _run("ip", "netns", "delete", name, check=False)
    for line in _run("ip", "-o", "link", "show", "type", "bridge", check=False).stdout.splitlines():
        found = re.search(rf"\d+: (fbr{TAG}):", line)
        if found and not _alive(int(found.group(2))):
            _run("ip", "link", "delete", found.group(1), check=False)


def _subnets_in_use() -> set[int]:
    """Third octets of the 10.213.x.0/24 subnets some interface of this host holds."""
    listing = _run("ip", "-o", "-4", "addr", "show", check=False).stdout
    return {int(octet) for octet in re.findall(rf"inet {re.escape(SUBNET_BASE)}\.(\d+)\.", listing)}


def _bridges() -> set[str]:
    listing = _run("ip", "-o", "link", "show", "type", "bridge", check=False).stdout
    return set(re.findall(r"\d+: (fbr\w+):", listing))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Host:
    def __init__(self, name: str, netns: str, address: str, veth: str = ""):
        self.name, self.netns, self.address, self.veth = name, netns, address, veth

    def exec_prefix(self) -> list[str]:
        """Prefix a command with this to run it inside the host's namespace."""
        return ["ip", "netns", "exec", self.netns]


class NetLab:
    """The bridge and namespaces; `partition()` / `heal()` cut and restore links between hosts."""

    _open: list["NetLab"] = []

    def __init__(self):
        self.tag = ""           # chosen with the subnet when the lab is built
        self.subnet = ""
        self.bridge = ""
        self.hosts: dict[str, Host] = {}
        self.use_nft = shutil.which("nft") is not None
        self._cuts: set[tuple[str, str]] = set()
        self._lossy: set[str] = set()
        self._closed = False

    # -- set-up and tear-down ----------------------------------------------------------------------
    def __enter__(self) -> "NetLab":
        install_cleanup_hooks()
        with _allocation:
            sweep_stale()
            NetLab._open.append(self)
            try:
                self._allocate()
                _run("ip", "link", "add", self.bridge, "type", "bridge")
                _run("ip", "addr", "add", f"{self.subnet}.1/24", "dev", self.bridge)
                _run("ip", "link", "set", self.bridge, "up")
            except BaseException:
                self.close()
                raise
        return self

    def _allocate(self) -> None:
        """A tag no bridge of this process has and a subnet no interface holds (the pid picks
        where to start looking, so that labs of different processes rarely race for one)."""
        pid = os.getpid()
        bridges = _bridges()
        letter = next((c for c in string.ascii_lowercase if f"fbr{pid}{c}" not in bridges), None)
        taken = _subnets_in_use()
        start = pid % len(SUBNETS)
        octet = next((SUBNETS[(start + i) % len(SUBNETS)] for i in range(len(SUBNETS))
                      if SUBNETS[(start + i) % len(SUBNETS)] not in taken), None)
        if letter is None or octet is None:
            raise RuntimeError("no free lab tag or subnet left")
        self.tag = f"{pid}{letter}"
        self.subnet = f"{SUBNET_BASE}.{octet}"
        self.bridge = f"fbr{self.tag}"

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Idempotent; bounded (every command has a 30 s timeout)."""
        if self._closed:
            return
        self._closed = True
        if not self.bridge:         # never built
            if self in NetLab._open:
                NetLab._open.remove(self)
            return
        for host in self.hosts.values():
            # deleting a namespace removes its veth end (so the pair), its routes and nft tables,
            # but the kernel does so in the background: delete the pair first, at once, so that a
            # next lab of this process (same names) can make its own
            subprocess.run(["ip", "link", "delete", host.veth], capture_output=True, timeout=30)
            subprocess.run(["ip", "netns", "delete", host.netns], capture_output=True, timeout=30)
        subprocess.run(["ip", "link", "delete", self.bridge], capture_output=True, timeout=30)
        if self in NetLab._open:
            NetLab._open.remove(self)

    def add_host(self, name: str) -> Host:
        index = len(self.hosts) + 10
        netns, veth = f"{PREFIX}{self.tag}-{name}", f"fv{self.tag}x{index}"
        address = f"{self.subnet}.{index}"
        host = Host(name, netns, address, veth)
        _run("ip", "netns", "add", netns)
        self.hosts[name] = host
        _run("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", netns)
        _run("ip", "link", "set", veth, "master", self.bridge, "up")
        _run("ip", "-n", netns, "addr", "add", f"{address}/24", "dev", "eth0")
        _run("ip", "-n", netns, "link", "set", "eth0", "up")
        _run("ip", "-n", netns, "link", "set", "lo", "up")
        if self.use_nft:
            _run("ip", "netns", "exec", netns, "nft", "add", "table", "inet", "faults")
            for hook in ("input", "output"):
                _run("ip", "netns", "exec", netns, "nft",
                     f"add chain inet faults {hook} {{ type filter hook {hook} priority 0; }}")
        return host

    # -- partitions --------------------------------------------------------------------------------
    def cut(self, source: str, target: str) -> None:
        """Drop every packet `source` sends to `target` (one way)."""
        if (source, target) in self._cuts:
            return
        src, dst = self.hosts[source], self.hosts[target]
        if self.use_nft:
            _run("ip", "netns", "exec", src.netns, "nft", "add", "rule", "inet", "faults", "output",
                 "ip", "daddr", dst.address, "drop")
            _run("ip", "netns", "exec", dst.netns, "nft", "add", "rule", "inet", "faults", "input",
                 "ip", "saddr", src.address, "drop")
        else:
            _run("ip", "-n", src.netns, "route", "add", "blackhole", f"{dst.address}/32")
        self._cuts.add((source, target))

    def partition(self, *groups: list[str]) -> None:
        """Cut every link between hosts of different groups, both ways (hosts not named keep
        talking to everyone)."""
        for group in groups:
            for other in groups:
                if other is group:
                    continue
                for source in group:
                    for target in other:
                        self.cut(source, target)

    def lossy(self, name: str, percent: int) -> None:
        """Drop `percent`% of the packets `name` sends and receives, at random (nft numgen; tc
        netem is not in every kernel)."""
        if not self.use_nft:
            raise RuntimeError("packet loss needs nft")
        netns = self.hosts[name].netns
        for hook in ("input", "output"):
            _run("ip", "netns", "exec", netns, "nft", "add", "rule", "inet", "faults", hook,
                 "ip", "saddr" if hook == "input" else "daddr", f"{self.subnet}.0/24",
                 "numgen", "random", "mod", "100", "<", str(percent), "drop")
        self._lossy.add(name)

    def heal(self) -> None:
        """Remove every cut and every loss rule."""
        touched = {self.hosts[source].netns for source, _ in self._cuts}
        touched |= {self.hosts[target].netns for _, target in self._cuts}
        touched |= {self.hosts[name].netns for name in self._lossy}
        if self.use_nft:
            for netns in touched:
                for hook in ("input", "output"):
                    _run("ip", "netns", "exec", netns, "nft", "flush", "chain", "inet", "faults",
                         hook, check=False)
        else:
            for source, target in self._cuts:
                _run("ip", "-n", self.hosts[source].netns, "route", "delete", "blackhole",
                     f"{self.hosts[target].address}/32", check=False)
        self._cuts.clear()
        self._lossy.clear()

    @property
    def cuts(self) -> set[tuple[str, str]]:
        return set(self._cuts)


_atexit_registered = False
_term_handled = False


def install_cleanup_hooks() -> None:
    """Tear every open lab down on exit, Ctrl-C or SIGTERM (the context managers handle the
    ordinary exceptions; these cover a signal arriving while no `with` block unwinds). Call it
    from the main thread before building labs in other threads: only it can set the handler."""
    global _atexit_registered, _term_handled
    if not _atexit_registered:
        _atexit_registered = True
        atexit.register(close_all)
    if _term_handled or signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, None):
        return

    def on_term(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")     # unwinds through every finally block
    try:
        signal.signal(signal.SIGTERM, on_term)
        _term_handled = True
    except ValueError:                                    # not the main thread: a later call
        pass


def close_all() -> None:
    for lab in list(NetLab._open):
        lab.close()
