"""The garbage collector at scale: long-lived partition state kept out of its full passes.

CPython's full (generation-2) collection walks every container object alive, in one go, on whatever
step allocates; at 10,000 partitions (logs, segments, indexes, partition states, metadata images) that
was 60–800 ms of held event loop, several times a minute while the heap grew, and it set the p99 of
every client. A JVM collects concurrently; CPython cannot, but objects moved to its permanent
generation (`gc.freeze`) are never walked again. So once a bulk change of partitions has settled
(thousands opened or deleted), the broker freezes what survives: later full passes see only what was
allocated since. Frozen objects that die are still freed by reference counting; only reference cycles
among them would wait, so a bulk deletion unfreezes first and collects them in one full pass.

After openings alone the settle collects only the young generations before freezing: freezing is
O(1) (a list splice), but a full collection walks the whole heap, 2.75 s of held loop at 20,000
partitions on a loaded machine (577,562 objects, nothing to free). Cycles that reached the old
generation before the freeze stay frozen with it; a bulk open makes next to none.
"""

from __future__ import annotations

import gc
import logging
import time

log = logging.getLogger("odradek.collector")

# Partitions opened or deleted since the last settle that make the next one collect and freeze.
BULK_PARTITIONS = 1000
YOUNG_GENERATIONS = 1   # gc.collect(1): generations 0 and 1, not the old one


class CollectorSteward:
    def __init__(self, bulk_partitions: int = BULK_PARTITIONS):
        self.bulk_partitions = bulk_partitions
        self._opened = 0
        self._deleted = 0

    def note_opened(self, partitions: int) -> None:
        self._opened += partitions

    def note_deleted(self, partitions: int) -> None:
        self._deleted += partitions

    @property
    def due(self) -> bool:
        return self._opened + self._deleted >= self.bulk_partitions

    @property
    def due_after_openings_alone(self) -> bool:
        """Due with no deletion noted: settling is then a young collection and an O(1) freeze,
        cheap enough to do every BULK_PARTITIONS during a long bulk open (so the automatic full
        collections that come while the heap grows never walk the partitions opened so far)."""
        return self._opened >= self.bulk_partitions and not self._deleted

    def settle(self) -> bool:
        """After a bulk change: one full collection, then its survivors frozen. True if it ran."""
        if not self.due:
            return False
        began = time.perf_counter()
        deleted = self._deleted
        self._opened = self._deleted = 0
        if deleted:
            gc.unfreeze()   # cycles among deleted partitions' objects are collectable again
        collected = gc.collect() if deleted else gc.collect(YOUNG_GENERATIONS)
        gc.freeze()
        # (no gc.get_freeze_count() here: it walks the whole frozen list, a million objects at 50,000)
        log.info("%s collection after a bulk partition change: %d objects collected, the rest frozen, "
                 "in %.0f ms", "full" if deleted else "young", collected, (time.perf_counter() - began) * 1e3)
        return True
