"""The aborted-transaction index (`.txnindex`), in Kafka's binary format.

One 34-byte entry per aborted transaction whose abort marker lies in the segment:
version int16 (0), producer id int64, first offset int64, last offset int64
(the marker's offset), last stable offset int64 (the LSO right after the abort).
read_committed consumers get the entries overlapping their fetch and drop those
producers' records themselves.
"""

from __future__ import annotations

import os
import struct
from typing import NamedTuple

_ENTRY = struct.Struct(">hqqqq")


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TxnIndex:
    def __init__(self, path: str):
        self.path = path
        self._entries: list[AbortedTxn] | None = None  # loaded on first use

    def _load(self) -> list[AbortedTxn]:
        entries = self._entries
        if entries is None:
            entries = []
            try:
                with open(self.path, "rb") as f:
                    data = f.read()
            except FileNotFoundError:
                data = b""
            whole = len(data) - len(data) % _ENTRY.size
            for pos in range(0, whole, _ENTRY.size):
                version, pid, first, last, lso = _ENTRY.unpack_from(data, pos)
                if version != 0:
                    break
                entries.append(AbortedTxn(pid, first, last, lso))
            self._entries = entries
        return entries

    @property
    def entries(self) -> list[AbortedTxn]:
        return list(self._load())

    def append(self, txn: AbortedTxn) -> None:
        entries = self._load()
        with open(self.path, "ab") as f:
            f.write(_ENTRY.pack(0, *txn))
        entries.append(txn)

    def collect(self, fetch_offset: int, upper_bound: int) -> tuple[list[AbortedTxn], bool]:
        """Entries overlapping [fetch_offset, upper_bound); True when no later segment
        can hold more (an entry's LSO reached the bound), as Kafka decides."""
        out = []
        for txn in self._load():
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound:
                out.append(txn)
            if txn.last_stable_offset >= upper_bound:
                return out, True
        return out, False

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose marker is at or above `offset`."""
        entries = self._load()
        kept = [t for t in entries if t.last_offset < offset]
        if len(kept) != len(entries):
            self.rewrite(kept)

    def rewrite(self, entries: list[AbortedTxn]) -> None:
        if not entries:
            self.reset()
            return
        tmp = self.path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(b"".join(_ENTRY.pack(0, *t) for t in entries))
        os.replace(tmp, self.path)
        self._entries = list(entries)

    def reset(self) -> None:
        try:
            os.remove(self.path)
        except FileNotFoundError:
            pass
        self._entries = []

    def flush(self) -> None:
        if os.path.exists(self.path):
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def release(self) -> None:
        self._entries = None
