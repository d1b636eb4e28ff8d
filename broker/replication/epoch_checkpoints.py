"""Leader-epoch checkpoint files written off the event loop, many partitions per trip.

Becoming leader starts a new epoch at the log end (``Log.assign_epoch_start``). The entry is in
memory at once (OffsetForLeaderEpoch answers it, appends carry it); the file is written here, in
one worker-thread trip for every partition whose epoch changed meanwhile, the files written and
then made durable together. A broker taking over thousands of partitions (a CreateTopics of 10,000,
a restart, a failover) would otherwise fsync a file per partition on its event loop, for seconds
to minutes, missing its own heartbeats. The log writes a pending entry itself before it makes any
record durable (``Log.flush``), so no durable record outlives its epoch's entry.
"""

from __future__ import annotations

import logging
import os

import trio

from storage import checkpoints

log = logging.getLogger("odradek.replication")


class EpochCheckpointWriter:
    def __init__(self, broker):
        self.broker = broker
        self._logs: dict[int, object] = {}   # id(log) -> log with an unwritten epoch entry
        self._pending = trio.Event()
        self.running = False

    def write_later(self, partition_log) -> None:
        """`partition_log` has an epoch entry in memory only: write it soon (or now, when no
        writer task runs: a broker that was never started, a test)."""
        if not self.running:
            partition_log.write_epochs()
            return
        self._logs[id(partition_log)] = partition_log
        self._pending.set()

    async def run(self) -> None:
        self.running = True
        try:
            while True:
                await self._pending.wait()
                self._pending = trio.Event()
                logs, self._logs = list(self._logs.values()), {}
                await self.broker.run_blocking(write_all, logs)
        finally:
            self.running = False
            for partition_log in self._logs.values():   # stopping: nothing is left behind
                _write_one(partition_log, sync=True)


def write_all(logs) -> None:
    """Write each log's pending checkpoint, then make them durable in one go (syncfs of each
    filesystem, or an fsync per file where syncfs is unavailable)."""
    written = [partition_log for partition_log in logs if _write_one(partition_log, sync=False)]
    synced: dict[int, bool] = {}   # filesystem (st_dev) -> syncfs worked
    for partition_log in written:
        try:
            device = os.stat(partition_log.directory).st_dev
        except OSError:   # deleted meanwhile: nothing to keep
            continue
        if device not in synced:
            synced[device] = checkpoints.sync_filesystem(partition_log.directory)
        if not synced[device]:
            _write_one(partition_log, sync=True, force=True)


def _write_one(partition_log, sync: bool, force: bool = False) -> bool:
    try:
        if force:
            partition_log.epochs.unwritten = True
        return partition_log.write_epochs(sync)
    except OSError as exc:   # the log's next flush tries again (the entry stays unwritten)
        log.warning("%r: could not write its leader-epoch checkpoint: %s", partition_log, exc)
        return False
