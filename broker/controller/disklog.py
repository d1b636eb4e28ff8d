"""The durable side of the metadata quorum: log entries, quorum state and snapshots in one directory.

Layout of `<log dir>/__cluster_metadata-0/` (names follow Kafka's KRaft layout):

- `quorum-state` — JSON {leaderEpoch, votedId, leaderId, ...}, replaced atomically (temp + fsync + rename).
- `<base offset, 20 digits>.log` — entries from the log start offset on, each framed as
  `u32 size | u32 crc32c | i64 offset | i32 epoch | u8 flags | data`; a torn or corrupt tail is cut off
  at open. Truncating a divergent suffix cuts the file; compaction after a snapshot writes a new file
  from the snapshot offset and then removes the old one.
- `<end offset, 20 digits>-<epoch, 10 digits>.checkpoint` — snapshot: `u32 crc32c | data`, where data
  is the state machine's serialized state covering every entry below `end offset`.

Every mutating method returns only once the change is on disk (fsync of file and, for renames, of the
directory). This module is synchronous; callers run it in a worker thread where latency matters.
"""

from __future__ import annotations

import json
import os
import struct
from typing import NamedTuple

import crc32c

DIR_NAME = "__cluster_metadata-0"
_FRAME = struct.Struct(">IIqiB")        # size, crc, offset, epoch, flags
_CONTROL = 0x01


class Entry(NamedTuple):
    """One log entry. `control` entries (leader change markers) carry no state-machine data."""

    offset: int
    epoch: int
    data: bytes
    control: bool = False


class QuorumState(NamedTuple):
    epoch: int = 0
    voted_id: int = -1
    leader_id: int = -1


class Snapshot(NamedTuple):
    end_offset: int      # first offset NOT covered by the snapshot
    epoch: int           # epoch of the entry at end_offset - 1
    data: bytes


class DiskLog:
    """Entries kept in memory (metadata logs are small) and mirrored durably to disk."""

    def __init__(self, log_dir: str):
        self.path = os.path.join(log_dir, DIR_NAME)
        os.makedirs(self.path, exist_ok=True)
        self.quorum_state = self._read_quorum_state()
        self.snapshot = self._load_snapshot()
        self.entries: list[Entry] = []
        self._positions: list[int] = []      # file position of each entry
        self.start_offset = 0
        self._file = None
        self._open_log()

    # -- reading ---------------------------------------------------------------------------------

    @property
    def end_offset(self) -> int:
        return self.start_offset + len(self.entries)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    # -- quorum state ------------------------------------------------------------------------------

    def save_quorum_state(self, state: QuorumState, voters=()) -> None:
        doc = {"clusterId": "", "leaderId": state.leader_id, "leaderEpoch": state.epoch,
               "votedId": state.voted_id, "appliedOffset": 0,
               "currentVoters": [{"voterId": v} for v in sorted(voters)], "data_version": 0}
        self._atomic_write("quorum-state", json.dumps(doc).encode())
        self.quorum_state = state

    def _read_quorum_state(self) -> QuorumState:
        try:
            with open(os.path.join(self.path, "quorum-state"), "rb") as f:
                doc = json.loads(f.read())
            return QuorumState(int(doc["leaderEpoch"]), int(doc["votedId"]), int(doc["leaderId"]))
        except FileNotFoundError:
            return QuorumState()

    # -- log ---------------------------------------------------------------------------------------

    def append(self, entries) -> None:
        """Append entries whose offsets continue the log, durably."""
        expected = self.end_offset
        for entry in entries:
            if entry.offset != expected:
                raise ValueError(f"append at offset {entry.offset}, log ends at {expected}")
            expected += 1
        buf, pos = bytearray(), self._file.tell()
        for entry in entries:
            self._positions.append(pos + len(buf))
            buf += _encode_frame(entry)
        self._file.write(buf)
        self._file.flush()
        os.fsync(self._file.fileno())
        self.entries.extend(entries)

    def truncate_from(self, offset: int) -> None:
        """Durably drop every entry at or after `offset`."""
        if offset >= self.end_offset:
            return
        if offset < self.start_offset:
            raise ValueError(f"cannot truncate to {offset} below log start {self.start_offset}")
        index = offset - self.start_offset
        self._file.truncate(self._positions[index])
        self._file.seek(self._positions[index])
        os.fsync(self._file.fileno())
        del self.entries[index:]
        del self._positions[index:]

    def _open_log(self) -> None:
        logs = sorted(n for n in os.listdir(self.path) if n.endswith(".log"))
        for stale in logs[:-1]:                       # left behind by a crash during compaction
            os.remove(os.path.join(self.path, stale))
        if not logs:
            base = self.snapshot.end_offset if self.snapshot else 0
            self._create_log(base, [])
            return
        name = logs[-1]
        self.start_offset = int(name[:-4])
        path = os.path.join(self.path, name)
        with open(path, "rb") as f:
            data = f.read()
        pos = 0
        while True:
            entry, size = _decode_frame(data, pos)
            if entry is None or entry.offset != self.end_offset:
                break
            self.entries.append(entry)
            self._positions.append(pos)
            pos += size
        self._file = open(path, "r+b")
        if pos != len(data):                          # torn or corrupt tail from a crash
            self._file.truncate(pos)
            os.fsync(self._file.fileno())
        self._file.seek(pos)
        if self.snapshot and self.snapshot.end_offset > self.end_offset:
            self._create_log(self.snapshot.end_offset, [])   # crashed between snapshot and log reset

    def _create_log(self, base: int, entries: list[Entry]) -> None:
        """Atomically replace the log with one starting at `base` holding `entries`."""
        name = f"{base:020d}.log"
        tmp = os.path.join(self.path, name + ".tmp")
        positions, buf = [], bytearray()
        for entry in entries:
            positions.append(len(buf))
            buf += _encode_frame(entry)
        with open(tmp, "wb") as f:
            f.write(buf)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, os.path.join(self.path, name))
        _fsync_dir(self.path)
        self.close()
        for other in os.listdir(self.path):
            if other.endswith(".log") and other != name:
                os.remove(os.path.join(self.path, other))
        self._file = open(os.path.join(self.path, name), "r+b")
        self._file.seek(len(buf))
        self.start_offset, self.entries, self._positions = base, list(entries), positions

    # -- snapshots ---------------------------------------------------------------------------------

    def save_snapshot(self, snapshot: Snapshot) -> None:
        """Durably store a snapshot, then drop log entries it covers (or reset the log past it)."""
        name = f"{snapshot.end_offset:020d}-{snapshot.epoch:010d}.checkpoint"
        body = crc32c.crc32c(snapshot.data).to_bytes(4, "big") + snapshot.data
        self._atomic_write(name, body)
        for other in os.listdir(self.path):
            if other.endswith(".checkpoint") and other != name:
                os.remove(os.path.join(self.path, other))
        self.snapshot = snapshot
        if snapshot.end_offset <= self.end_offset and self.entry_at(snapshot.end_offset - 1, snapshot.epoch):
            keep = self.entries[snapshot.end_offset - self.start_offset:]
        else:
            keep = []                                  # log diverges from or ends before the snapshot
        self._create_log(snapshot.end_offset, keep)

    def entry_at(self, offset: int, epoch: int) -> bool:
        """Whether the log holds an entry at `offset` with `epoch` (below start: the snapshot's)."""
        if offset < self.start_offset:
            return self.snapshot is not None and offset == self.snapshot.end_offset - 1 \
                and epoch == self.snapshot.epoch
        if offset >= self.end_offset:
            return False
        return self.entries[offset - self.start_offset].epoch == epoch

    def _load_snapshot(self) -> Snapshot | None:
        best = None
        for name in sorted(os.listdir(self.path)):
            if name.endswith(".checkpoint.tmp") or name.endswith(".tmp"):
                os.remove(os.path.join(self.path, name))
                continue
            if not name.endswith(".checkpoint"):
                continue
            end, epoch = name[:-len(".checkpoint")].split("-")
            with open(os.path.join(self.path, name), "rb") as f:
                body = f.read()
            if len(body) < 4 or crc32c.crc32c(body[4:]) != int.from_bytes(body[:4], "big"):
                continue
            best = Snapshot(int(end), int(epoch), body[4:])
        return best

    def _atomic_write(self, name: str, data: bytes) -> None:
        tmp = os.path.join(self.path, name + ".tmp")
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, os.path.join(self.path, name))
        _fsync_dir(self.path)


def _encode_frame(entry: Entry) -> bytes:
    flags = _CONTROL if entry.control else 0
    rest = struct.pack(">qiB", entry.offset, entry.epoch, flags) + entry.data
    return struct.pack(">II", len(rest), crc32c.crc32c(rest)) + rest


def _decode_frame(data: bytes, pos: int) -> tuple[Entry | None, int]:
    if pos + _FRAME.size > len(data):
        return None, 0
    size, crc, offset, epoch, flags = _FRAME.unpack_from(data, pos)
    end = pos + 8 + size
    if size < 13 or end > len(data) or crc32c.crc32c(data[pos + 8:end]) != crc:
        return None, 0
    return Entry(offset, epoch, bytes(data[pos + _FRAME.size:end]), bool(flags & _CONTROL)), end - pos


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
