"""The coordinators' durable writes: appends to the internal topics and their acknowledgement.

`DurableWritesMixin` is part of `CoordinatorService` (which supplies `broker`, `owned` and the write
bookkeeping it initialises: `_unacked`, `_next_write`, `_outstanding`, `_acked`, `_write_failures`,
`_wake`); kept apart so each module has one job. An append is a synchronous page-cache write on the
event loop; `settle` waits for the disk and the followers (acks=all) off it and completes each append's
acknowledgement, which is what lets the cores show a write's effects only once it has committed.
"""

from __future__ import annotations

import logging
from typing import Optional

import trio

from protocol import ErrorCode

from .group_offsets import append_error
from .ownership import OFFSETS_TOPIC, SHARE_STATE_TOPIC, LoadState
from .pending import Pending

log = logging.getLogger("odradek.coordinator")
E = ErrorCode


class CoordinatorError(Exception):
    def __init__(self, code: ErrorCode):
        super().__init__(code.name)
        self.code = code


class DurableWritesMixin:
    def append(self, topic: str, partition_index: int, batch: bytes,
               timeout_ms: Optional[int] = None) -> Pending[ErrorCode]:
        """Append to an internal partition this broker coordinates. Answers the write's
        acknowledgement, which `settle` completes: NONE once it is committed (durable as configured
        and replicated to the ISR) within `timeout_ms` (by default the topic's, see `_timeout_ms`),
        else the error that kept it from committing."""
        from storage.log import AppendOrigin

        from broker.log_dir_moves import append_following_moves
        from broker.partitions import PartitionError

        owned = self.owned.get((topic, partition_index))
        if owned is None or owned.state is not LoadState.ACTIVE:
            raise CoordinatorError(E.NOT_COORDINATOR)   # lost (or never had) leadership: write nothing
        try:
            partition = self.broker.partitions.leader(topic, partition_index)
        except PartitionError:
            raise CoordinatorError(E.NOT_COORDINATOR) from None
        if len(partition.isr) < partition.min_insync_replicas:
            raise CoordinatorError(E.NOT_ENOUGH_REPLICAS)   # acks=all could not be met: append nothing
        result = append_following_moves(partition, batch, leader_epoch=partition.leader_epoch,
                                        origin=AppendOrigin.COORDINATOR)
        seq = self._next_write
        self._next_write += 1
        written: Pending[ErrorCode] = Pending()
        self._unacked.append((seq, partition, result, written, timeout_ms or self._timeout_ms(topic)))
        self._outstanding.add(seq)
        return written

    def write_mark(self) -> int:
        """A position in the coordinators' writes: `settle(since=mark)` reports failures of writes after it."""
        return self._next_write

    async def settle(self, since: Optional[int] = None) -> ErrorCode:
        """Return once everything appended so far is acknowledged: durable as configured and, as
        acks=all, replicated to the ISR (each append within its timeout). An append another request's settle is still
        acknowledging is waited for too, so no answer overtakes the write it depends on.

        With `since` (a `write_mark()`), answers the error a client gets for the writes made after
        it (Kafka's mapping: COORDINATOR_NOT_AVAILABLE when replication fell short or timed out,
        NOT_COORDINATOR when leadership moved), else NONE."""
        target = self._next_write
        pending, self._unacked = self._unacked, []
        if pending:
            try:
                await self._acknowledge(pending)
            finally:
                unfinished = [item for item in pending if not item[3].done]
                if unfinished:
                    # cancelled midway: another settle (the timer task's) acknowledges the rest, so
                    # no write is left pending for good
                    self._unacked[:0] = unfinished
                    self._wake.set()
                for seq, _, _, written, _ in pending:
                    if written.done:
                        self._outstanding.discard(seq)
                self._acked.set()
                self._acked = trio.Event()
        while self._outstanding and min(self._outstanding) < target:
            await self._acked.wait()
        if since is None:
            return E.NONE
        return next((code for seq, code in self._write_failures.items() if since <= seq < target), E.NONE)

    async def caught_up(self, topic: str, partition_index: int, timeout_ms: Optional[int] = None) -> ErrorCode:
        """Wait until the partition's high watermark covers its whole log as it is now: every write an
        answer about its keys may rest on, including another request's write whose own acknowledgement
        already gave up (it stays in this leader's log). As Kafka's new group coordinator, which answers
        once its last written offset commits. NONE, or the client's error when that does not happen in
        `timeout_ms` (by default the topic's) / leadership moved. Immediate when nothing is outstanding."""
        from broker.partitions import PartitionError

        owned = self.owned.get((topic, partition_index))
        if owned is None or owned.state is not LoadState.ACTIVE:
            return E.NOT_COORDINATOR
        try:
            partition = self.broker.partitions.leader(topic, partition_index)
        except PartitionError:
            return E.NOT_COORDINATOR
        end = partition.log.log_end_offset
        replication = getattr(self.broker.partitions, "replication", None)
        if partition.log.high_watermark >= end or replication is None:
            return E.NONE
        timeout_ms = timeout_ms or self._timeout_ms(topic)
        code, = await replication.wait_for_replicas([(partition, end)], timeout_ms / 1000)
        return append_error(CoordinatorError(ErrorCode(code))) if code else E.NONE

    async def _acknowledge(self, pending) -> None:
        """Wait for `pending` appends to commit and complete each one's acknowledgement."""
        partitions = self.broker.partitions
        try:
            await partitions.acknowledge_many([(partition, result) for _, partition, result, _, _ in pending])
        except Exception as exc:
            log.warning("acknowledging internal appends failed: %s", exc)
            self._failed(pending, getattr(exc, "error_code", E.KAFKA_STORAGE_ERROR))
            return
        replication = getattr(partitions, "replication", None)
        by_timeout: dict[int, list] = {}
        for item in pending:
            by_timeout.setdefault(item[4], []).append(item)
        if replication is None:
            for waits in by_timeout.values():
                self._replicated(waits, [E.NONE] * len(waits))
            return
        # writes with different timeouts wait side by side: a long one must not delay a short one's answer
        async with trio.open_nursery() as nursery:
            for timeout_ms, waits in by_timeout.items():
                nursery.start_soon(self._wait_for_replicas, replication, waits, timeout_ms)

    async def _wait_for_replicas(self, replication, waits, timeout_ms: int) -> None:
        codes = await replication.wait_for_replicas(
            [(partition, result.last_offset + 1) for _, partition, result, _, _ in waits], timeout_ms / 1000)
        self._replicated(waits, codes)

    def _replicated(self, waits, codes) -> None:
        for item, code in zip(waits, codes):
            if code:
                log.info("internal write to %s-%d not acknowledged: %s", item[1].topic, item[1].index,
                         ErrorCode(code).name)
                self._failed([item], code)
            else:
                item[3].complete(E.NONE)

    def _timeout_ms(self, topic: str) -> int:
        """How long a write to `topic` may take to commit unless its caller says otherwise: Kafka's
        group and share coordinators' write timeouts; for `__transaction_state` the transaction's
        own timeout is passed in, and this one (`request.timeout.ms`) is for writes without a
        transaction (tombstones of expired transactional ids)."""
        config = self.broker.config
        if topic == OFFSETS_TOPIC:
            return config["offsets.commit.timeout.ms"]
        if topic == SHARE_STATE_TOPIC:
            return config["share.coordinator.write.timeout.ms"]
        return config["request.timeout.ms"]

    def _failed(self, items, code) -> None:
        code = ErrorCode(code)
        mapped = append_error(CoordinatorError(code))
        for seq, _, _, written, _ in items:
            self._write_failures[seq] = mapped
            written.complete(code)
        while len(self._write_failures) > 10_000:           # only recent writes are ever asked about
            self._write_failures.pop(next(iter(self._write_failures)))
