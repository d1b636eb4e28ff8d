"""Time for the coordinators: an injectable clock and a keyed timer queue.

The coordinator cores never read the wall clock or sleep. They read `clock.now_ms()` and register
deadlines in a `Timers` queue; whoever drives them (the trio service in production, a test with a
`FakeClock`) calls `Timers.run_due(now)` when time has passed. That keeps every state transition and
timeout deterministic under test.
"""

from __future__ import annotations

import heapq
import itertools
import time
from typing import Callable, Hashable


class SystemClock:
    """Wall-clock milliseconds (what Kafka stores as commit and state timestamps)."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


class FakeClock:
    """A clock that only moves when told to; for deterministic tests."""

    def __init__(self, start_ms: int = 1_700_000_000_000):
        self._now = start_ms

    def now_ms(self) -> int:
        return self._now

    def advance(self, ms: int) -> int:
        self._now += ms
        return self._now


class Timers:
    """Deadlines keyed by a hashable; scheduling a key again replaces its previous deadline.

    Kafka's coordinators keep one timer per purpose (a member's heartbeat, a group's join phase, a
    group's pending sync, ...). Replacing by key gives exactly that without tracking handles.
    """

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, Hashable]] = []
        self._live: dict[Hashable, tuple[int, int, Callable[[], None]]] = {}
        self._seq = itertools.count()
        self.on_change: Callable[[], None] | None = None  # driver hook: the earliest deadline may have moved

    def schedule(self, key: Hashable, deadline_ms: int, callback: Callable[[], None]) -> None:
        seq = next(self._seq)
        self._live[key] = (deadline_ms, seq, callback)
        heapq.heappush(self._heap, (deadline_ms, seq, key))
        if self.on_change is not None:
            self.on_change()

    def cancel(self, key: Hashable) -> None:
        self._live.pop(key, None)  # its heap entry is skipped lazily

    def is_scheduled(self, key: Hashable) -> bool:
        return key in self._live

    def deadline(self, key: Hashable) -> int | None:
        entry = self._live.get(key)
        return entry[0] if entry else None

    def next_deadline(self) -> int | None:
        self._drop_stale()
        return self._heap[0][0] if self._heap else None

    def run_due(self, now_ms: int) -> int:
        """Fire every timer whose deadline is at or before `now_ms`, in deadline order."""
        fired = 0
        while True:
            self._drop_stale()
            if not self._heap or self._heap[0][0] > now_ms:
                return fired
            _, seq, key = heapq.heappop(self._heap)
            _, _, callback = self._live.pop(key)
            callback()
            fired += 1

    def _drop_stale(self) -> None:
        heap = self._heap
        while heap:
            deadline, seq, key = heap[0]
            live = self._live.get(key)
            if live is not None and live[1] == seq:
                return
            heapq.heappop(heap)
