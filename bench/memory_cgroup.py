"""Each disk-backed server under test in a memory cgroup of its own, its page cache already full.

Why: on a VM that hands free memory back to its host (free page reporting, as this Firecracker
guest does), the first write into a page the guest gave away costs a host page fault inside the
kernel's copy. A broker whose page cache grows into such memory runs 3-4x slower per byte than one
whose page cache recycles its own pages, and which of the two a repetition gets depends on what ran
before it, not on the broker. A server that runs for a while on any machine is in the second state:
its page cache is full and the kernel reclaims old pages for new writes. A memory limit (what a
Kubernetes pod's limit is) with the cgroup filled beforehand puts every broker there from its first
measured write, Odradek and Kafka alike. The in-memory peer and the null sink keep no page cache and
stay outside (a limit would only kill the peer).

Works with cgroup v1's memory controller (`/sys/fs/cgroup/memory`) or cgroup v2 with `memory`
available; without either (or without root) `create` says why and the run goes on unconfined.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

V1_ROOT = Path("/sys/fs/cgroup/memory")
V2_ROOT = Path("/sys/fs/cgroup")
FILL_CHUNK = 64 << 20
# The filler (run inside the cgroup): write chunks around the ring until usage is within a chunk of
# the limit (rewriting a page still cached charges nothing, hence the bound of two laps), then flush.
_FILL = f"""
import os, sys
path, usage_path, limit, offset = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
usage = lambda: int(open(usage_path).read())
fd = os.open(path, os.O_WRONLY | os.O_CREAT)
chunk, written = bytes({FILL_CHUNK}), 0
while usage() < limit - {FILL_CHUNK} and written < 2 * limit:
    os.pwrite(fd, chunk, offset)
    offset, written = (offset + {FILL_CHUNK}) % limit, written + {FILL_CHUNK}
os.fdatasync(fd)
print(offset)
"""


class MemoryCgroup:
    """A memory cgroup with a limit; processes join it with `adopt`, `remove` deletes it."""

    def __init__(self, path: Path, limit_file: str, usage_file: str, limit_bytes: int):
        self.path = path
        self._usage_file = usage_file
        self._ring_offset = 0
        self.limit_bytes = limit_bytes
        (path / limit_file).write_text(str(limit_bytes))
        self._scratch = Path(tempfile.mkdtemp(prefix="bench-page-cache-"))

    def adopt(self, pid: int) -> None:
        """Move `pid` and every process below it into the cgroup (later children inherit it)."""
        for member in [pid, *_descendants(pid)]:
            try:
                (self.path / "cgroup.procs").write_text(str(member))
            except ProcessLookupError:
                pass

    def fill(self) -> None:
        """Top the cgroup up to its limit with clean pages of a scratch file, written from inside.

        Its page cache then recycles its own pages for the server's next writes. Run again before
        every measured run: a topic the bench deleted frees its pages, which would otherwise be
        handed back to the host before the next run writes into them. The scratch file is a ring of
        the limit's size; only the missing amount is written, so a full cgroup costs one read."""
        join_then_run = 'echo $$ > "$0" && exec "$@"'  # the filler's pages are charged to the cgroup
        done = subprocess.run(["sh", "-c", join_then_run, str(self.path / "cgroup.procs"),
                               sys.executable, "-c", _FILL, str(self._scratch / "fill"),
                               str(self.path / self._usage_file), str(self.limit_bytes), str(self._ring_offset)],
                              check=True, timeout=300, capture_output=True, text=True)
        self._ring_offset = int(done.stdout)

    def remove(self) -> None:
        shutil.rmtree(self._scratch, ignore_errors=True)
        try:
            self.path.rmdir()  # its processes have exited; charged page cache moves to the parent
        except OSError:
            pass

    def describe(self) -> str:
        return f"memory cgroup of {self.limit_bytes / (1 << 30):g} GiB, its page cache topped up before each run"


def create(name: str, limit_bytes: int) -> tuple[MemoryCgroup | None, str]:
    """A fresh cgroup named `name` (a stale one of that name is replaced), or None and why not."""
    if (V1_ROOT / "cgroup.procs").exists():
        root, limit_file, usage_file = V1_ROOT, "memory.limit_in_bytes", "memory.usage_in_bytes"
    elif "memory" in _read(V2_ROOT / "cgroup.controllers").split():
        root, limit_file, usage_file = V2_ROOT, "memory.max", "memory.current"
        if "memory" not in _read(root / "cgroup.subtree_control").split():
            try:
                (root / "cgroup.subtree_control").write_text("+memory")
            except OSError as error:
                return None, f"cannot enable the memory controller: {error}"
    else:
        return None, "no memory cgroup controller on this machine"
    path = root / name
    try:
        if path.exists():
            path.rmdir()
        path.mkdir()
        return MemoryCgroup(path, limit_file, usage_file, limit_bytes), ""
    except OSError as error:
        return None, f"cannot create {path}: {error}"


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                parent = int(_read(Path("/proc", entry, "stat")).rsplit(")", 1)[1].split()[1])
            except (IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry))
    found, pending = [], [pid]
    while pending:
        for child in children.get(pending.pop(), []):
            found.append(child)
            pending.append(child)
    return found


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def confine(target, limit_bytes: int) -> str:
    """Every process of a bench `Target` (each node of a cluster too) into a filled cgroup of its
    own, removed when the target stops; returns what the run should say about it."""
    free = shutil.disk_usage(tempfile.gettempdir()).free
    pids = target.all_pids()
    if free < 2 * limit_bytes * len(pids):
        return f"not confined: {free >> 30} GiB free on disk, the page cache fill needs {limit_bytes >> 30} GiB a process"
    for index, pid in enumerate(pids):
        group, why = create(f"odradek-bench-{target.name}-{index}", limit_bytes)
        if group is None:
            return f"not confined: {why}"
        target.after_stop.append(group.remove)
        target.before_run.append(group.fill)
        group.adopt(pid)
        group.fill()
    return ("each node in a " if len(pids) > 1 else "in a ") + group.describe()
