"""Kafka's small text checkpoint files, written atomically (temp file, fsync, rename).

- per log dir: `recovery-point-offset-checkpoint`, `log-start-offset-checkpoint`,
  `replication-offset-checkpoint` (high watermarks): "0\\n<count>\\n<topic> <partition> <offset>\\n..."
- per partition: `leader-epoch-checkpoint`: "0\\n<count>\\n<epoch> <start offset>\\n..."
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

RECOVERY_POINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET = "log-start-offset-checkpoint"
HIGH_WATERMARK = "replication-offset-checkpoint"
CLEANER_OFFSET = "cleaner-offset-checkpoint"
CLEAN_SHUTDOWN = ".kafka_cleanshutdown"
_VERSION = 0


def write_atomically(path: str, text: str, sync: bool = True) -> None:
    """Replace `path` by `text` (write a temporary file, rename it over); sync=False leaves the
    fsyncs to a caller that syncs the whole filesystem afterwards."""
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        if sync:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)
    if sync:
        fsync_dir(os.path.dirname(path) or ".")


def fsync_dir(directory: str) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


_libc = None


def sync_filesystem(path: str) -> bool:
    """syncfs(2) on the filesystem holding `path`: one call makes every file there
    durable (cheaper than an fsync per file at shutdown).  False if unavailable."""
    global _libc
    try:
        if _libc is None:
            _libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        fd = os.open(path, os.O_RDONLY)
    except (OSError, AttributeError):
        return False
    try:
        return getattr(_libc, "syncfs", None) is not None and _libc.syncfs(fd) == 0
    finally:
        os.close(fd)


def _read_lines(path: str) -> list[str] | None:
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return None
    if len(lines) < 2 or lines[0].strip() != str(_VERSION):
        raise ValueError(f"unreadable checkpoint file {path}")
    count = int(lines[1])
    body = [line for line in lines[2:] if line.strip()]
    if len(body) != count:
        raise ValueError(f"checkpoint file {path} holds {len(body)} entries, header says {count}")
    return body


def write_offsets(path: str, offsets: dict[tuple[str, int], int]) -> None:
    lines = [str(_VERSION), str(len(offsets))]
    lines += [f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(offsets.items())]
    write_atomically(path, "\n".join(lines) + "\n")


def read_offsets(path: str) -> dict[tuple[str, int], int]:
    """{(topic, partition): offset}; an unreadable file counts as empty (recovery then scans)."""
    try:
        body = _read_lines(path)
    except (ValueError, OSError):
        return {}
    out = {}
    for line in body or ():
        topic, partition, offset = line.rsplit(" ", 2)
        out[(topic, int(partition))] = int(offset)
    return out


def write_leader_epochs(path: str, epochs: list[tuple[int, int]], sync: bool = True) -> None:
    lines = [str(_VERSION), str(len(epochs))] + [f"{e} {s}" for e, s in epochs]
    write_atomically(path, "\n".join(lines) + "\n", sync)


def read_leader_epochs(path: str) -> list[tuple[int, int]]:
    try:
        body = _read_lines(path)
    except (ValueError, OSError):
        return []
    out = []
    for line in body or ():
        epoch, start = line.split()
        out.append((int(epoch), int(start)))
    return out
