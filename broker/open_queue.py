"""The queue of partitions whose logs a large image change left to open off the loop.

A CreateTopics of tens of thousands of partitions queues their logs (`PartitionManager._open_queued`
opens them in a worker thread, a chunk at a time). Meanwhile the metadata already names this broker
the leader, so clients produce to them at once. Answering NOT_LEADER_OR_FOLLOWER made librdkafka
refresh metadata and retry every such partition again and again (86,000 requests for 4,000 records
at 20,000 partitions), each failed request taking loop time from the opener. So a Produce for a
partition still queued waits for its log instead: its keys go to the head of the queue and the
request resumes once the chunk holding them is installed (bounded by the request's timeout).
"""

from __future__ import annotations

from collections import deque

import trio


class OpenQueue:
    def __init__(self, opening: set):
        self._opening = opening          # keys queued or being opened (owned by PartitionManager)
        self._queue: deque = deque()     # in image order
        self._first: deque = deque()     # keys a request waits for: opened before the rest
        self._taken_early: set = set()   # keys taken from _first, still to be skipped in _queue
        self._installed = trio.Event()

    def __bool__(self) -> bool:
        return bool(self._queue) or bool(self._first)

    def append(self, key) -> None:
        self._queue.append(key)

    def next_chunk(self, size: int) -> list:
        """Up to `size` keys to open next: those requests wait for first, then in image order."""
        chunk = []
        while self._first and len(chunk) < size:
            key = self._first.popleft()
            if key in self._opening and key not in self._taken_early:
                self._taken_early.add(key)
                chunk.append(key)
        while self._queue and len(chunk) < size:
            key = self._queue.popleft()
            if key in self._taken_early:
                self._taken_early.discard(key)   # opened already, ahead of its turn
                continue
            chunk.append(key)
        return chunk

    def chunk_installed(self) -> None:
        """Wake the requests waiting for logs (each checks whether its own are there)."""
        self._installed.set()
        self._installed = trio.Event()

    async def wait_opened(self, keys: list, timeout_s: float) -> None:
        """Until none of `keys` is still being opened, or `timeout_s` passed."""
        self._first.extend(key for key in keys if key not in self._taken_early)
        with trio.move_on_after(max(timeout_s, 0.0)):
            while any(key in self._opening for key in keys):
                await self._installed.wait()
