"""Appending to a partition log: validation, offsets and the leader epoch stamped, producer
state, segment roll, the write into the active segment and its indexes.

A mixin of `storage.log.Log` (the state it uses: `_segments`, `_bases`, `_lock`, `config`,
`producer_state`, `epochs`, `clock`; `_check_online`, `_go_offline`, `_index_aborted`,
`_flush_locked`).
"""

from __future__ import annotations

import os
import random
from typing import NamedTuple

from protocol.records import (
    NO_PARTITION_LEADER_EPOCH, NO_TIMESTAMP, RecordBatch, RecordBatchError, patched_header,
)
from storage.errors import ErrorCode, InvalidBatchError
from storage.segment import LogSegment
from storage.validation import AppendOrigin, apply_topic_compression, validate_append

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


class AppendResult(NamedTuple):
    first_offset: int
    last_offset: int
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int
    duplicate: bool = False  # an idempotent retry: offsets are those of the original append


def _read_control(batch: RecordBatch):
    return batch.control_record()


class LogAppends:
    # ======================================================================= append
    def start_verification(self, producer_id: int, producer_epoch: int) -> object:
        """A verification guard for append() (see ProducerStateManager.start_verification)."""
        with self._lock:
            return self.producer_state.start_verification(producer_id, producer_epoch)

    def append(self, records, *, leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
               origin: AppendOrigin = AppendOrigin.CLIENT, now_ms: int | None = None,
               verification_guard: object | None = None,
               batch: RecordBatch | None = None) -> AppendResult:
        """Validate and append the batches in `records` (bytes/memoryview, never copied).

        CLIENT and COORDINATOR appends get offsets from the log end, the leader epoch
        stamped and, for LogAppendTime topics, the append time; REPLICATION appends
        keep the offsets they carry (which must not go backwards). `batch`: the header of
        the one batch that is all of `records`, when the caller parsed it already (Produce
        checks it first), so it is not parsed twice; validated all the same.
        """
        config = self.config
        now = self.clock() if now_ms is None else now_ms
        if batch is not None:
            batches = validate_append(None, origin, config, now, self.name, [batch])
        else:
            view = records if isinstance(records, memoryview) else memoryview(records)
            if view.format != "B" or view.ndim != 1:
                view = view.cast("B")
            batches = validate_append(view, origin, config, now, self.name)
        replication = origin is AppendOrigin.REPLICATION
        if not replication and config.compression_type != "producer" and origin is AppendOrigin.CLIENT:
            batches = apply_topic_compression(batches, config)
        log_append_time = now if config.log_append_time and not replication else None
        if (len(batches) == 1 and not replication and batches[0].producer_id < 0
                and verification_guard is None):
            return self._append_one(batches[0], leader_epoch, log_append_time, now)
        with self._lock:
            self._check_online()
            if verification_guard is not None:
                self.producer_state.check_verification(batches, verification_guard)
            next_offset = self._segments[-1].next_offset
            buffers: list = []
            placed: list[tuple[RecordBatch, int, int]] = []  # (batch, base offset, max timestamp)
            max_ts_all = NO_TIMESTAMP
            has_producers = False
            total = 0
            for batch in batches:
                if replication:
                    if batch.base_offset < next_offset or batch.last_offset >= INT64_MAX:
                        raise InvalidBatchError(
                            f"out of order offsets: batch at {batch.base_offset} below log end {next_offset}",
                            ErrorCode.INVALID_RECORD)
                    base = batch.base_offset
                    buffers.append(batch.view())
                    max_ts = batch.max_timestamp
                else:
                    base = next_offset
                    buffers.append(patched_header(batch, base_offset=base,
                                                  partition_leader_epoch=leader_epoch,
                                                  log_append_time=log_append_time))
                    buffers.append(batch.body())
                    max_ts = log_append_time if log_append_time is not None else batch.max_timestamp
                placed.append((batch, base, max_ts))
                if max_ts > max_ts_all:
                    max_ts_all = max_ts
                if batch.producer_id >= 0:
                    has_producers = True
                next_offset = base + batch.last_offset_delta + 1
                total += batch.size
            first_offset = placed[0][1]
            last_offset = next_offset - 1
            pending = None
            if has_producers:
                try:
                    pending = self.producer_state.prepare(
                        [(b, base, base + b.last_offset_delta, ts) for b, base, ts in placed],
                        validate=not replication, read_control=_read_control,
                        sequences=origin is AppendOrigin.CLIENT)
                except RecordBatchError as exc:  # an unreadable control record
                    raise InvalidBatchError(exc.message, exc.error_code) from exc
                if pending.duplicate is not None:
                    dup = pending.duplicate
                    return AppendResult(dup.first_offset, dup.last_offset, -1, self.log_start_offset, True)
            try:
                segment = self._maybe_roll(first_offset, last_offset, total, now, max_ts_all)
                position = segment.size
                segment.write(buffers, total)  # cut back to `position` if it fails
                if pending is not None:
                    self._index_aborted_after_commit(segment, pending, next_offset)
                interval = config.index_interval_bytes
                for batch, base, max_ts in placed:
                    segment.note_appended(position, batch, base + batch.last_offset_delta, max_ts, interval)
                    position += batch.size
                    epoch = batch.partition_leader_epoch if replication else leader_epoch
                    if epoch >= 0:
                        self.epochs.assign(epoch, base)
                    self._unflushed_messages += batch.record_count
            except OSError as exc:
                # Disk full or failing: the log goes offline; what is on disk stays a
                # valid prefix (a torn write was cut back, indexes are rebuilt on restart).
                raise self._go_offline(exc) from exc
            result = AppendResult(first_offset, last_offset,
                                  log_append_time if log_append_time is not None else -1,
                                  self.log_start_offset)
            if self._unflushed_messages >= config.flush_messages:
                self._flush_locked()
        return result

    def _append_one(self, batch: RecordBatch, leader_epoch: int, log_append_time: int | None,
                    now: int) -> AppendResult:
        """append() of one validated batch without a producer id that takes its offsets from
        the log end: an unbatched Produce. The same steps with no lists, loops or producer
        state (a batch without a producer id has none to check, nor a verification guard)."""
        config = self.config
        with self._lock:
            if self.offline is not None:
                self._check_online()
            first_offset = self._segments[-1].next_offset
            last_offset = first_offset + batch.last_offset_delta
            max_ts = log_append_time if log_append_time is not None else batch.max_timestamp
            size = batch.size
            try:
                segment = self._maybe_roll(first_offset, last_offset, size, now, max_ts)
                position = segment.size
                segment.write([patched_header(batch, base_offset=first_offset,
                                              partition_leader_epoch=leader_epoch,
                                              log_append_time=log_append_time),
                               batch.body()], size)   # cut back to `position` if it fails
                segment.note_appended(position, batch, last_offset, max_ts,
                                      config.index_interval_bytes)
                epochs = self.epochs
                if leader_epoch >= 0 and (not epochs.entries or leader_epoch > epochs.entries[-1][0]):
                    epochs.assign(leader_epoch, first_offset)   # (a new epoch: rare)
                self._unflushed_messages += batch.record_count
            except OSError as exc:
                raise self._go_offline(exc) from exc   # as append(): a valid prefix stays
            result = AppendResult(first_offset, last_offset,
                                  -1 if log_append_time is None else log_append_time,
                                  self.log_start_offset)
            if self._unflushed_messages >= config.flush_messages:
                self._flush_locked()
        return result

    def _index_aborted_after_commit(self, segment: LogSegment, pending, end_offset: int) -> None:
        completed = self.producer_state.commit(pending, end_offset)
        if completed:
            self._index_aborted(segment, completed)

    def _maybe_roll(self, first_offset: int, last_offset: int, size: int, now: int,
                    max_timestamp: int = NO_TIMESTAMP) -> LogSegment:
        segment = self._segments[-1]
        config = self.config
        if segment.size == 0:
            if first_offset != segment.base_offset and first_offset > segment.base_offset:
                # Replication (or a log start moved by DeleteRecords) can skip ahead.
                return self._roll(first_offset, now, replace_empty=True)
            return segment
        # Kafka measures segment age in record time when it can: the incoming batch's
        # max timestamp against the first batch's (so replayed old data does not roll
        # a segment per append), else wall time since the segment was created.
        if segment.first_batch_timestamp >= 0 and max_timestamp >= 0:
            waited = max_timestamp - segment.first_batch_timestamp
        else:
            waited = now - segment.created_ms
        # (Age can roll it only past segment.ms less the largest jitter, or on a compacted
        # topic: the jitter is drawn and the limit worked out only then.)
        if (segment.size > config.segment_bytes - size
                or ((waited > config.segment_ms - config.segment_jitter_ms or config.compact)
                    and waited > self._max_segment_ms() - self._roll_jitter(segment))
                or segment.index_full(config.segment_index_bytes)
                or last_offset - segment.base_offset > INT32_MAX):
            return self._roll(first_offset, now)
        return segment

    def _max_segment_ms(self) -> int:
        """segment.ms, or max.compaction.lag.ms when smaller on a compacted topic (the
        active segment must roll for its records to become cleanable in time)."""
        config = self.config
        if config.compact:
            return min(config.segment_ms, config.max_compaction_lag_ms)
        return config.segment_ms

    def _roll_jitter(self, segment: LogSegment) -> int:
        """Kafka draws each segment's jitter at random below segment.jitter.ms, so
        partitions created together do not all roll at once."""
        jitter = self.config.segment_jitter_ms
        if jitter <= 0:
            return 0
        if segment.roll_jitter_ms is None:
            segment.roll_jitter_ms = random.randrange(jitter)
        return segment.roll_jitter_ms

    def _roll(self, base_offset: int, now: int, replace_empty: bool = False) -> LogSegment:
        old = self._segments[-1]
        if replace_empty:
            old.close()
            for path in old.paths():
                if os.path.exists(path):
                    os.remove(path)
            self._segments.pop()
            self._bases.pop()
        else:
            old.seal()
            # Kafka snapshots producer state at each roll so recovery replays one segment.
            self.producer_state.map_end_offset = base_offset
            self.producer_state.take_snapshot()
        segment = LogSegment(self.directory, base_offset, self.handles, created_ms=now)
        segment.activate()
        self._segments.append(segment)
        self._bases.append(base_offset)
        if len(self._segments) == 1:
            self.log_start_offset = max(self.log_start_offset, base_offset)
            self.high_watermark = max(self.high_watermark, self.log_start_offset)
            self.producer_state.on_high_watermark(self.high_watermark)
        return segment

    def roll(self) -> None:
        """Force a new active segment (tests, admin)."""
        with self._lock:
            if self.active_segment.size:
                self._roll(self.log_end_offset, self.clock())

