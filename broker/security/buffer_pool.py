"""Reusable fixed-size buffers for the TLS data path (all on the one trio thread).

A connection holds one only while it moves bytes (a burst being read, a response being encrypted)
and gives it back before it waits on an idle socket. Reusing them spares a fresh large allocation
per burst: above malloc's mmap threshold that is an mmap, a page fault per 4 KiB on first use and
an munmap, and below it still a zero-fill of the whole buffer.
"""

from __future__ import annotations


class BufferPool:
    def __init__(self, size: int, keep: int):
        self.size, self.keep = size, keep
        self._free: list[bytearray] = []

    def take(self) -> bytearray:
        return self._free.pop() if self._free else bytearray(self.size)

    def give(self, buffer: bytearray) -> None:
        if len(self._free) < self.keep:
            self._free.append(buffer)
