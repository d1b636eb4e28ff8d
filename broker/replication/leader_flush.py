"""With ``log.flush.before.acknowledge`` a leader counts only its fsynced records toward the high
watermark (``ReplicaManager.local_end``). A follower appends without fsync, so a follower that becomes
leader holds records the old leader may already have acknowledged, above its own recovery point:
only its next local produce would flush them, and until then the high watermark stays below records
that were acknowledged (found by the fault suite: after a leader was killed and the producer had
stopped, the last acknowledged record of a partition was never visible). So a new leader flushes its
log at once, off the event loop, many partitions per worker trip, then lets the high watermark move.
"""

from __future__ import annotations

import logging

import trio

from storage.errors import StorageError

log = logging.getLogger("odradek.replication")


class LeaderFlusher:
    def __init__(self, broker, on_flushed):
        self.broker = broker
        self.on_flushed = on_flushed        # partition -> None, on the event loop
        self._partitions: dict[int, object] = {}
        self._pending = trio.Event()
        self.running = False

    def flush_later(self, partition) -> None:
        """Make `partition`'s log durable to its end soon (now, when no flusher task runs: a
        broker that was never started, a test), then call `on_flushed(partition)`."""
        if not self.running:
            if _flush(partition.log):
                self.on_flushed(partition)
            return
        self._partitions[id(partition)] = partition
        self._pending.set()

    async def run(self) -> None:
        self.running = True
        try:
            while True:
                await self._pending.wait()
                self._pending = trio.Event()
                partitions, self._partitions = list(self._partitions.values()), {}
                flushed = await self.broker.run_blocking(
                    lambda: [p for p in partitions if _flush(p.log)])
                for partition in flushed:
                    self.on_flushed(partition)
        finally:
            self.running = False


def _flush(partition_log) -> bool:
    try:
        partition_log.flush()
        return True
    except StorageError as exc:      # gone offline or deleted meanwhile: nothing to make visible
        log.warning("flushing a new leader's log failed: %s", exc)
        return False
