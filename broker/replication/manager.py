"""``ReplicaManager``: this broker's side of replication for every partition it hosts.

The ``PartitionManager`` calls ``on_partition(partition, image_partition)`` whenever the metadata image
places a partition here or changes it; from the image's leader and leader epoch this broker becomes:

- **leader**: a ``LeaderState`` tracks the followers (fed by their Fetch requests through
  ``on_replica_fetch``); the high watermark follows the ISR's smallest log end offset; an ISR change is
  proposed to the controller with AlterPartition (``isr_updates``), never decided here; becoming
  leader starts the new epoch at the log end in the leader-epoch cache (and, with
  ``log.flush.before.acknowledge``, flushes what it got as a follower: ``leader_flush``);
- **follower**: the partition moves to the fetcher of its leader (``fetcher``); it accepts no produce
  (NOT_LEADER_OR_FOLLOWER) and waiting acks=all produces are answered so at once.

acks=all produces wait here (``wait_for_replicas``) until the high watermark covers them.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import time

import trio

from protocol import ErrorCode

from .acks import acks_all_outcome
from .epoch_checkpoints import EpochCheckpointWriter
from .leader import LeaderState
from .leader_flush import LeaderFlusher

log = logging.getLogger("odradek.replication")


def _now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class ReplicaManager:
    def __init__(self, broker, partitions):
        self.broker = broker
        self.partitions = partitions
        self.node_id = broker.node_id
        self.purgatory_size = 0
        # acks=all waiters per partition: a heap of (end offset needed, seq, event); a high watermark
        # move wakes only those it covers (not every waiter on every append).
        self._acks_waiters: dict[object, list] = {}
        self._seq = itertools.count()
        self.fetchers = None          # FetcherPool, once started
        self.isr_updates = None       # IsrUpdates, once started
        self._isr_check = trio.Event()
        self.epoch_checkpoints = EpochCheckpointWriter(broker)
        self.leader_flushes = LeaderFlusher(broker, self._advance)

    # ------------------------------------------------------------------------------ leadership
    def on_partition(self, partition, image_partition) -> None:
        """Follow the image's state of one local partition (synchronous, on the event loop)."""
        now = _now_ms()
        state = partition.replica_state
        if image_partition.leader == self.node_id:
            if state is not None and state.leader_epoch == image_partition.leader_epoch:
                if image_partition.partition_epoch > state.partition_epoch:
                    state.update_assignment(image_partition.partition_epoch,
                                            image_partition.replicas, image_partition.isr, now)
                partition.isr = state.isr
                self._release_acks(partition, everyone=True)   # the ISR may have changed
                self._advance(partition)
                return
            self._become_leader(partition, image_partition, now)
        else:
            self._become_follower(partition, image_partition)

    def _become_leader(self, partition, image_partition, now: int) -> None:
        log_ = partition.log
        if self.fetchers is not None:
            self.fetchers.remove(partition)
        if partition.replica_io:
            # A follower append or truncation is still running off the loop: the new epoch starts
            # where the log ends once it is done (the fetcher calls epoch_start_after_io).
            partition.deferred_epoch_start = True
        else:
            log_.assign_epoch_start(image_partition.leader_epoch, write=False)
            self.epoch_checkpoints.write_later(log_)
        if len(image_partition.replicas) <= 1:
            # One replica: everything in the log is committed.
            log_.set_high_watermark(log_.log_end_offset)
        partition.replica_state = LeaderState(
            self.node_id, image_partition.leader_epoch, image_partition.partition_epoch,
            image_partition.replicas, image_partition.isr, epoch_start_offset=log_.log_end_offset,
            high_watermark=log_.high_watermark, now_ms=now)
        partition.isr = tuple(image_partition.isr)
        self._release_acks(partition, everyone=True)
        log.info("%s-%d: leader in epoch %d, ISR %s, high watermark %d", partition.topic,
                 partition.index, image_partition.leader_epoch, list(image_partition.isr),
                 log_.high_watermark)
        self._flush_follower_records(partition)
        self._advance(partition)

    def _flush_follower_records(self, partition) -> None:
        """Durable acks count only fsynced records: flush those this new leader appended as a
        follower (unflushed), or the high watermark would wait for the next produce."""
        log_ = partition.log
        if self.partitions.durable_acks and log_.recovery_point < log_.log_end_offset:
            self.leader_flushes.flush_later(partition)

    def _become_follower(self, partition, image_partition) -> None:
        partition.replica_state = None
        partition.isr = tuple(image_partition.isr)
        self._release_acks(partition, everyone=True)   # they answer NOT_LEADER_OR_FOLLOWER
        partition.wake()     # long polls re-check
        if self.fetchers is None:
            return
        if image_partition.leader >= 0 and image_partition.leader != self.node_id:
            self.fetchers.add(partition, image_partition.leader, image_partition.leader_epoch)
        else:
            self.fetchers.remove(partition)

    def epoch_start_after_io(self, partition) -> None:
        """A follower's off-loop append/truncation finished after this broker became its leader."""
        partition.deferred_epoch_start = False
        state = partition.replica_state
        if state is not None:
            partition.log.assign_epoch_start(state.leader_epoch, write=False)
            self.epoch_checkpoints.write_later(partition.log)
            state.epoch_start_offset = partition.log.log_end_offset
            self._flush_follower_records(partition)
            self._advance(partition)

    def on_partition_removed(self, partition) -> None:
        partition.replica_state = None
        self._release_acks(partition, everyone=True)
        if self.fetchers is not None:
            self.fetchers.remove(partition)

    # ---------------------------------------------------------------------------- high watermark
    def local_end(self, partition) -> int:
        """What the leader counts as its own log end for the high watermark: the flushed offset when
        acknowledged records must be durable, else the log end."""
        log_ = partition.log
        if self.partitions.durable_acks:
            return min(log_.recovery_point, log_.log_end_offset)
        return log_.log_end_offset

    def _advance(self, partition) -> None:
        state = partition.replica_state
        if state is None:
            return
        end = self.local_end(partition) if self.partitions.durable_acks else partition.log.log_end_offset
        if state.advance_high_watermark(end):
            partition.log.set_high_watermark(state.high_watermark)
            self._release_acks(partition)
            partition.wake()
        else:
            partition.wake_replicas()    # new records for the followers, nothing new for consumers

    def _release_acks(self, partition, everyone: bool = False) -> None:
        """Wake the acks=all waiters the high watermark now covers (all of them on a leadership or
        ISR change: each re-checks its own outcome)."""
        waiters = self._acks_waiters.get(partition)
        if not waiters:
            return
        high_watermark = partition.log.high_watermark
        while waiters and (everyone or waiters[0][0] <= high_watermark):
            heapq.heappop(waiters)[2].set()
        if not waiters:
            del self._acks_waiters[partition]

    def on_local_append(self, partition) -> None:
        """Records were appended (and, if configured, flushed): the high watermark may move, and
        followers long-polling for data must wake."""
        self._advance(partition)

    def on_replica_fetch(self, partition, replica_id: int, broker_epoch: int, fetch_offset: int,
                         log_start_offset: int = -1) -> bool:
        """A follower fetched at `fetch_offset`; False when it is not a replica of the partition."""
        state = partition.replica_state
        if state is None:
            return False
        progress = state.followers.get(replica_id)
        previous_start = progress.log_start_offset if progress is not None else -1
        progress = state.on_follower_fetch(replica_id, fetch_offset, partition.log.log_end_offset,
                                           _now_ms(), broker_epoch, log_start_offset)
        if progress is None:
            return False
        before = partition.log.high_watermark
        if state.advance_high_watermark(self.local_end(partition)):
            partition.log.set_high_watermark(state.high_watermark)
        if partition.log.high_watermark != before:
            self._release_acks(partition)
            partition.wake()
        elif progress.log_start_offset != previous_start:
            partition.wake()
        if replica_id not in state.isr and replica_id in state.caught_up(self.isr_eligible):
            self._isr_check.set()     # a replica caught up: propose it into the ISR now
        return True

    def isr_eligible(self, replica_id: int, broker_epoch: int) -> bool:
        """As Kafka's leader (KIP-841, KIP-903): only a replica on a registered, unfenced broker
        that is not shutting down, fetching in that broker's current epoch (-1: a fetch that did
        not say), may be proposed into the ISR; the controller refuses the others."""
        broker = self.broker.image.brokers.get(replica_id)
        return (broker is not None and not broker.fenced and not broker.in_controlled_shutdown
                and broker_epoch in (-1, broker.epoch))

    # ------------------------------------------------------------------------------- acks=all
    async def wait_for_replicas(self, waits, timeout_s: float) -> list[int]:
        """acks=all: [(partition, end offset of its appended batches)] -> error code per item, once
        the high watermark covers each (or the ISR fell below min.insync.replicas meanwhile:
        NOT_ENOUGH_REPLICAS_AFTER_APPEND; leadership lost: NOT_LEADER_OR_FOLLOWER; the request's
        timeout: REQUEST_TIMED_OUT)."""
        codes: list = [None] * len(waits)
        deadline = trio.current_time() + max(timeout_s, 0)
        waiting = len(waits)
        self.purgatory_size += waiting
        try:
            while True:
                event = trio.Event()
                try:
                    for i, (partition, required) in enumerate(waits):
                        if codes[i] is None:
                            codes[i] = self._acks_outcome(partition, required)
                            if codes[i] is None:
                                heapq.heappush(self._acks_waiters.setdefault(partition, []),
                                               (required, next(self._seq), event))
                            else:
                                waiting -= 1
                                self.purgatory_size -= 1
                    remaining = deadline - trio.current_time()
                    if not waiting or remaining <= 0:
                        break
                    with trio.move_on_after(remaining):
                        await event.wait()
                finally:
                    if not event.is_set():
                        event.set()    # a stale heap entry: whoever pops it wakes nobody
        finally:
            self.purgatory_size -= waiting
        return [ErrorCode.REQUEST_TIMED_OUT if code is None else code for code in codes]

    def replicated_now(self, waits) -> list[int] | None:
        """wait_for_replicas() when it would not wait: the error code per (partition, end
        offset) if the high watermark already decides every one (a single replica, or
        followers already caught up), else None."""
        codes = []
        for partition, required in waits:
            code = self._acks_outcome(partition, required)
            if code is None:
                return None
            codes.append(code)
        return codes

    def low_watermark(self, partition) -> int:
        """The smallest log start offset over the leader and its followers on live brokers (Kafka's
        lowWatermarkIfLeader): what DeleteRecords reports once every replica has moved."""
        low = partition.log.log_start_offset
        state = partition.replica_state
        if state is None:
            return low
        brokers = self.broker.image.brokers
        for replica, progress in state.followers.items():
            broker = brokers.get(replica)
            if broker is not None and not broker.fenced and progress.log_start_offset >= 0:
                low = min(low, progress.log_start_offset)
        return low

    async def wait_for_low_watermarks(self, waits, timeout_s: float) -> list[tuple[int, int]]:
        """DeleteRecords: [(partition, offset)] -> (error code, low watermark) once every live
        replica's log start reached `offset` (REQUEST_TIMED_OUT after `timeout_s`)."""
        def outcome(partition, offset):
            if partition.replica_state is None:
                return ErrorCode.NOT_LEADER_OR_FOLLOWER, -1
            low = self.low_watermark(partition)
            return (ErrorCode.NONE, low) if low >= offset else None

        results: list = [None] * len(waits)
        deadline = trio.current_time() + max(timeout_s, 0)
        while True:
            event = trio.Event()
            try:
                for i, (partition, offset) in enumerate(waits):
                    if results[i] is None:
                        results[i] = outcome(partition, offset)
                        if results[i] is None:
                            partition.waiters.add(event)
                remaining = deadline - trio.current_time()
                if all(results) or remaining <= 0:
                    break
                with trio.move_on_after(remaining):
                    await event.wait()
            finally:
                for partition, _ in waits:
                    partition.waiters.discard(event)
        return [(ErrorCode.REQUEST_TIMED_OUT, -1) if r is None else r for r in results]

    def _acks_outcome(self, partition, required: int):
        if partition.replica_state is None or \
                self.partitions.get(partition.topic, partition.index) is not partition:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return acks_all_outcome(required, partition.log.high_watermark, len(partition.isr),
                                partition.min_insync_replicas)

    # ------------------------------------------------------------------------------- background
    def start(self, nursery: trio.Nursery) -> None:
        from .fetcher import FetcherPool
        from .isr_updates import IsrUpdates

        from .metrics import ReplicationCollector

        self.fetchers = FetcherPool(self.broker, self.partitions, nursery)
        self.isr_updates = IsrUpdates(self.broker, self)
        metrics = getattr(self.broker, "metrics", None)
        if metrics is not None:
            metrics.registry.register(ReplicationCollector(self))
        for partition in self.partitions.all():
            image_partition = self.broker.image.partition(partition.topic, partition.index)
            if image_partition is not None and image_partition.leader != self.node_id:
                self._become_follower(partition, image_partition)
        nursery.start_soon(self._isr_loop)
        nursery.start_soon(self.epoch_checkpoints.run)
        nursery.start_soon(self.leader_flushes.run)

    async def _isr_loop(self) -> None:
        """Kafka's isr-expiration task (every replica.lag.time.max.ms / 2) plus prompt expansion.

        A check that runs later than its deadline finds this broker was away (stopped, or its loop
        held): that span is credited to the followers before their lag is judged.
        """
        deadline = None
        while True:
            lag_max = self.broker.config["replica.lag.time.max.ms"]
            interval_ms = max(lag_max // 2, 50)
            with trio.move_on_after(interval_ms / 1000):
                await self._isr_check.wait()
            self._isr_check = trio.Event()
            now = _now_ms()
            absent_ms = now - deadline if deadline is not None else 0
            deadline = now + interval_ms
            for count, partition in enumerate(self.partitions.all(), 1):
                if count % 1000 == 0:
                    await trio.lowlevel.checkpoint()   # 10,000 partitions: a few ms per 1,000
                state = partition.replica_state
                if state is None or not state.followers:
                    continue
                state.credit_absence(absent_ms)
                proposal = state.propose(now, lag_max, self.isr_eligible)
                if proposal is not None:
                    self.isr_updates.send(partition, state, proposal)

    def on_isr_committed(self, partition, state, shrank: bool) -> None:
        """The controller committed our proposal (its answer may come before the image)."""
        metrics = getattr(self.broker, "metrics", None)
        if metrics is not None:
            (metrics.isr_shrink if shrank else metrics.isr_expand)()
        partition.isr = state.isr
        self._release_acks(partition, everyone=True)   # a smaller ISR may fail them (min.insync)
        self._advance(partition)
