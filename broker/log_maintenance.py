"""Periodic storage housekeeping of a broker's logs: flush.ms, rolled segments, retention, delayed
file deletes, producer expiry, checkpoints; all of it in worker threads, in slices.

Retention keeps Kafka's schedule: the first check 30 s after start (Kafka's LogManager initial task
delay; sooner when log.retention.check.interval.ms is shorter), then one every
log.retention.check.interval.ms. The other chores run every few seconds. Checking retention on every
pass instead made a record with an old timestamp (a backfill, a replay that keeps event time) vanish
within seconds of its write where Kafka keeps it until its next check, up to five minutes later: a
Quix Streams app replaying last week's events found every input partition already empty."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

import trio

if TYPE_CHECKING:
    from broker.partitions import PartitionManager

log = logging.getLogger("odradek.partitions")

MAINTENANCE_SLICE = 250          # logs per worker trip of the periodic housekeeping
MAX_TICK_S = 5.0                 # the chores other than retention run at least this often
RETENTION_INITIAL_DELAY_S = 30.0  # Kafka's LogManager InitialTaskDelayMs


class RetentionSchedule:
    """When the next retention check is due (monotonic seconds)."""

    def __init__(self, interval_s: float, now: float) -> None:
        self.interval_s = interval_s
        self.next_due = now + min(interval_s, RETENTION_INITIAL_DELAY_S)

    def due(self, now: float) -> bool:
        if now < self.next_due:
            return False
        self.next_due = now + self.interval_s
        return True


async def run_log_maintenance(partitions: PartitionManager) -> None:
    """The loop: each pass walks the logs in slices of MAINTENANCE_SLICE, one worker trip each,
    spread over half the tick: at 10,000 partitions one trip for all held the GIL (and so the loop)
    for 100 ms and more every few seconds."""
    config = partitions.broker.config
    retention_interval_s = config["log.retention.check.interval.ms"] / 1000
    tick_every = min(retention_interval_s, MAX_TICK_S)
    retention = RetentionSchedule(retention_interval_s, time.monotonic())
    checkpoint_every = config["log.flush.offset.checkpoint.interval.ms"] / 1000
    next_checkpoint = time.monotonic() + checkpoint_every
    while True:
        await trio.sleep(tick_every)
        try:
            await maintenance_pass(partitions, tick_every / 2, retention.due(time.monotonic()))
            if time.monotonic() >= next_checkpoint:
                next_checkpoint = time.monotonic() + checkpoint_every
                await partitions.broker.run_blocking(partitions.logs.checkpoint)
        except Exception:
            log.exception("log maintenance failed")


async def maintenance_pass(partitions: PartitionManager, spread_s: float, retention: bool) -> None:
    logs, replicas = list(partitions.logs.logs().values()), partitions.all()
    slices = range(0, max(len(logs), len(replicas)), MAINTENANCE_SLICE)
    pause = spread_s / len(slices) if len(slices) > 1 else 0.0
    now_ms = partitions.logs.clock()
    for first in slices:
        await partitions.broker.run_blocking(
            partitions.logs.tick_logs, logs[first:first + MAINTENANCE_SLICE], now_ms, retention)
        for partition in replicas[first:first + MAINTENANCE_SLICE]:
            if partition.log.log_start_offset > partition.high_watermark:
                partition.wake()   # retention passed the high watermark: long polls answer
        await trio.sleep(pause)
    await partitions.broker.run_blocking(partitions.logs.tick_files, now_ms)
