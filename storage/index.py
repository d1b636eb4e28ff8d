"""Kafka's sparse segment indexes, in Kafka's binary formats.

- `.index` (OffsetIndex): 8-byte entries (relative offset int32, file position int32),
  one per `index.interval.bytes` of log; the offset is the *last* offset of the
  batch that starts at that position, as Kafka writes it.
- `.timeindex` (TimeIndex): 12-byte entries (timestamp int64, relative offset int32),
  the largest timestamp so far and the last offset of the batch carrying it.

Entries are big-endian and the files hold nothing else, so Kafka's DumpLogSegments
reads them.  The active segment's index lives in a bytearray (bounded by
`segment.index.bytes`) and is appended to the file as it grows; a sealed segment's
index is memory-mapped on first use and can be released when idle, so memory does
not grow with the amount of data.

An active segment's index file is created by its first entry, not with the segment:
a partition holding less than `index.interval.bytes` has no entry to write, and at
tens of thousands of partitions the two empty files per log were a third of the cost
of opening one.  A segment gets both files when it is sealed (`create_if_missing`).
"""

from __future__ import annotations

import mmap
import os
import struct

from storage.files import SharedFile


class _Index:
    ENTRY: struct.Struct

    def __init__(self, path: str, base_offset: int, *, writable: bool, new: bool = False):
        """`new`: a segment just created, whose file cannot exist yet: writable and empty."""
        self.path = path
        self.base_offset = base_offset
        self._mem: bytearray | None = None
        self._map: mmap.mmap | None = None
        self._file: SharedFile | None = None
        self._count = 0
        if new:
            self._mem = bytearray()
        elif writable:
            self.make_writable()
        else:
            try:
                size = os.path.getsize(path)
            except FileNotFoundError:
                size = 0
            self._count = size // self.ENTRY.size

    # -- lifecycle --------------------------------------------------------------
    def make_writable(self) -> None:
        """Load entries into memory and open the file for appends (active segment);
        a missing file is an empty index, created by the first append."""
        if self._mem is not None:
            return
        self._map = None
        if not os.path.exists(self.path):
            self._mem = bytearray()
            self._count = 0
            return
        f = self._open()
        size = os.fstat(f.fd).st_size
        whole = size - size % self.ENTRY.size
        if whole != size:  # a torn last entry from a crash
            os.ftruncate(f.fd, whole)
        self._mem = bytearray(os.pread(f.fd, whole, 0)) if whole else bytearray()
        self._count = whole // self.ENTRY.size

    def _open(self) -> SharedFile:
        f = self._file
        if f is None:
            f = self._file = SharedFile(self.path)
        return f

    def create_if_missing(self) -> None:
        """Give an index that never had an entry its (empty) file."""
        if not os.path.exists(self.path):
            self._open()

    def seal(self) -> None:
        """Stop appending; later lookups go through a read-only mapping."""
        self._file = None
        self._mem = None

    def release(self) -> None:
        """Drop descriptors and mappings (reopened on demand).  Only references are
        dropped, so a lookup running in another thread keeps its own alive."""
        self._map = None
        self._file = None

    def close(self) -> None:
        self.seal()
        self.release()

    def flush(self) -> None:
        f = self._file
        if f is not None:
            os.fsync(f.fd)

    @property
    def entries(self) -> int:
        return self._count

    @property
    def size_bytes(self) -> int:
        return self._count * self.ENTRY.size

    def _buffer(self):
        if self._mem is not None:
            return self._mem
        m = self._map
        if m is None and self._count:
            with open(self.path, "rb") as f:
                m = self._map = mmap.mmap(f.fileno(), self._count * self.ENTRY.size, access=mmap.ACCESS_READ)
        return m

    def entry(self, i: int) -> tuple:
        return self.ENTRY.unpack_from(self._buffer(), i * self.ENTRY.size)

    def _append_raw(self, *fields) -> None:
        data = self.ENTRY.pack(*fields)
        f = self._open()  # a local reference keeps the descriptor open
        os.pwrite(f.fd, data, len(self._mem))
        self._mem += data
        self._count += 1

    def _search(self, field: int, target: int, strict: bool = False) -> int:
        """Index of the last entry whose `field` is <= target (< when strict), or -1."""
        buf = self._buffer()
        lo, hi = 0, self._count - 1
        size, unpack = self.ENTRY.size, self.ENTRY.unpack_from
        found = -1
        while lo <= hi:
            mid = (lo + hi) // 2
            value = unpack(buf, mid * size)[field]
            if value < target or (value == target and not strict):
                found = mid
                lo = mid + 1
            else:
                hi = mid - 1
        return found

    def truncate_entries(self, keep: int) -> None:
        if keep >= self._count:
            return
        self.make_writable()
        f = self._open()  # a local reference keeps the descriptor open
        os.ftruncate(f.fd, keep * self.ENTRY.size)
        del self._mem[keep * self.ENTRY.size:]
        self._count = keep

    def reset(self) -> None:
        self.truncate_entries(0)


class OffsetIndex(_Index):
    ENTRY = struct.Struct(">ii")

    def append(self, offset: int, position: int) -> None:
        self._append_raw(offset - self.base_offset, position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the last entry with offset <= target; (base, 0) if none."""
        i = self._search(0, offset - self.base_offset)
        if i < 0:
            return self.base_offset, 0
        rel, pos = self.entry(i)
        return self.base_offset + rel, pos

    def lookup_position(self, position: int) -> tuple[int, int]:
        """(offset, position) of the last entry at or before a file position."""
        i = self._search(1, position)
        if i < 0:
            return self.base_offset, 0
        rel, pos = self.entry(i)
        return self.base_offset + rel, pos

    def last_entry(self) -> tuple[int, int]:
        if not self._count:
            return self.base_offset, 0
        rel, pos = self.entry(self._count - 1)
        return self.base_offset + rel, pos

    def truncate_to(self, offset: int) -> None:
        """Drop entries for offsets >= offset."""
        self.truncate_entries(self._search(0, offset - self.base_offset, strict=True) + 1)

    def truncate_to_position(self, position: int) -> None:
        """Drop entries pointing at or past a file position."""
        self.truncate_entries(self._search(1, position, strict=True) + 1)


class TimeIndex(_Index):
    ENTRY = struct.Struct(">qi")

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Append only when the timestamp grew (the index is monotonic)."""
        if self._count:
            last_ts, last_rel = self.entry(self._count - 1)
            if timestamp <= last_ts or offset - self.base_offset < last_rel:
                return
        self._append_raw(timestamp, offset - self.base_offset)

    def lookup_before(self, timestamp: int) -> tuple[int, int] | None:
        """(timestamp, offset) of the last entry with timestamp < target, or None."""
        i = self._search(0, timestamp, strict=True)
        if i < 0:
            return None
        ts, rel = self.entry(i)
        return ts, self.base_offset + rel

    def last_entry(self) -> tuple[int, int] | None:
        if not self._count:
            return None
        ts, rel = self.entry(self._count - 1)
        return ts, self.base_offset + rel

    def truncate_to(self, offset: int) -> None:
        """Drop entries for offsets >= offset (searching linearly from the end: few entries move)."""
        keep = self._count
        while keep and self.base_offset + self.entry(keep - 1)[1] >= offset:
            keep -= 1
        self.truncate_entries(keep)
