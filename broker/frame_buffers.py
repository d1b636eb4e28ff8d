"""Buffers for large frames (a batched Produce request, a follower's Fetch answer), lent for one frame
and taken back when nothing views them any more. Each broker has its pool (``Broker.frame_buffers``),
used on its trio thread only.

A fresh buffer per large frame costs an mmap, a page fault per 4 KiB on first use (in a VM that
gives freed memory back to its host, a fault on the host too) and an munmap: for 1 MiB Produce
requests that was 9-18% of the broker's time. Kafka reads requests into a heap that is already
warm; this pool is the same idea for the few buffers that are in use at any one time.

A buffer is taken back only when no view of it is alive (a bytearray refuses to resize while it
is exported): a request that kept a slice of its frame (a group member's metadata, a response
that echoes bytes) keeps its buffer to itself and the pool simply forgets it.
"""

from __future__ import annotations

KEEP_BYTES = 16 << 20       # the pool never holds more than this, in all
LARGEST_KEPT = 8 << 20      # a buffer larger than this goes back to the allocator
ROUND = 64 << 10            # capacities are rounded up so frames of nearly equal size share buffers


def rounded(size: int) -> int:
    """The capacity a new buffer for a `size`-byte frame gets."""
    return -(-size // ROUND) * ROUND


class FrameBuffers:
    def __init__(self, keep_bytes: int = KEEP_BYTES, largest_kept: int = LARGEST_KEPT):
        self.keep_bytes, self.largest_kept = keep_bytes, largest_kept
        self._free: list[bytearray] = []
        self._held = 0   # bytes in _free
        self.reused = 0  # buffers lent again (tests and curious operators)

    def take(self, size: int) -> bytearray | None:
        """The smallest free buffer of at least `size` bytes, or None (the caller allocates)."""
        best = None
        for index, buffer in enumerate(self._free):
            if len(buffer) >= size and (best is None or len(buffer) < len(self._free[best])):
                best = index
        if best is None:
            return None
        buffer = self._free.pop(best)
        self._held -= len(buffer)
        self.reused += 1
        return buffer

    def give_back(self, frame: memoryview) -> None:
        """Take back the buffer under `frame` (a view made by the reader) once nothing else views
        it; `frame` is released either way and must not be used again."""
        buffer = frame.obj
        try:
            frame.release()
        except BufferError:   # something made a view of the frame view itself: it keeps both
            return
        size = len(buffer)
        if size > self.largest_kept or not _unviewed(buffer):
            return
        while self._free and self._held + size > self.keep_bytes:
            self._held -= len(self._free.pop(0))   # the oldest go first
        if self._held + size <= self.keep_bytes:
            self._free.append(buffer)
            self._held += size


def _unviewed(buffer: bytearray) -> bool:
    """True when no memoryview of `buffer` is alive: only then may a bytearray change size."""
    try:
        last = buffer.pop()
    except BufferError:
        return False
    buffer.append(last)   # (within the allocation: neither step reallocates)
    return True
