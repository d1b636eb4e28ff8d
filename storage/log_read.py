"""Reading a partition log: Fetch byte ranges, offsets by time, leader-epoch lookups.

A mixin of `storage.log.Log` (the state it reads: `_segments`, `_bases`, `_lock`,
the log start/end offsets and the epoch cache lives there).
"""

from __future__ import annotations

import bisect
import os
from typing import NamedTuple

from protocol.records import NO_TIMESTAMP, RecordBatch, iter_batches
from storage.errors import OffsetOutOfRangeError
from storage.files import FileSlice


class TimestampOffset(NamedTuple):
    offset: int
    timestamp: int
    leader_epoch: int = -1


class LogReads:
    # ======================================================================= leader epochs
    @property
    def latest_epoch(self) -> int:
        return self.epochs.latest

    def assign_epoch_start(self, epoch: int, write: bool = True) -> None:
        """Becoming leader for `epoch` starts it at the log end (Kafka's maybeAssignEpochStartOffset),
        so OffsetForLeaderEpoch answers it before the first append of the epoch. write=False leaves
        the checkpoint file to `write_epochs` (a broker becoming leader of thousands of partitions
        at once must not fsync a file per partition on its event loop)."""
        with self._lock:
            self.epochs.assign(epoch, self.log_end_offset, write=write)

    def write_epochs(self, sync: bool = True) -> bool:
        """Write the leader-epoch checkpoint if `assign_epoch_start(write=False)` left it behind
        (the file write happens outside the log's lock: appends do not wait for it)."""
        return self.epochs.write_unwritten(sync)

    def _write_epochs_before_flush(self) -> None:
        """The records a flush makes durable must not outlive their leader epoch's entry."""
        try:
            self.epochs.write_unwritten()
        except OSError as exc:
            with self._lock:
                raise self._go_offline(exc) from exc

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (largest known epoch <= epoch, its end offset), or (-1, -1)."""
        with self._lock:
            return self.epochs.end_offset_for(epoch, self.log_end_offset)

    # ======================================================================= reads
    def read(self, fetch_offset: int, max_bytes: int, max_offset: int | None = None,
             min_one_batch: bool = True) -> list[FileSlice]:
        """Byte ranges for Fetch, from the batch containing `fetch_offset`.

        Whole batches only, at most `max_bytes` unless the first batch alone is larger
        and `min_one_batch` (Kafka sends it whole), and only batches whose last offset
        is below `max_offset` (the high watermark or last stable offset; default: log end).
        """
        with self._lock:
            self._check_online()
            if fetch_offset < self.log_start_offset or fetch_offset > self.log_end_offset:
                raise OffsetOutOfRangeError(
                    f"fetch offset {fetch_offset} is out of range for {self.topic}-{self.partition}: "
                    f"[{self.log_start_offset}, {self.log_end_offset}]")
            limit_offset = self.log_end_offset if max_offset is None else min(max_offset, self.log_end_offset)
            if fetch_offset >= limit_offset:
                return []
            try:
                return self._read_locked(fetch_offset, max_bytes, limit_offset, min_one_batch)
            except OSError as exc:
                raise self._go_offline(exc) from exc

    def _read_locked(self, fetch_offset, max_bytes, limit_offset, min_one_batch) -> list[FileSlice]:
        segments = self._segments
        i = max(0, bisect.bisect_right(self._bases, fetch_offset) - 1)
        for j in range(i, len(segments)):
            segment = segments[j]
            if segment.base_offset >= limit_offset:
                return []
            found = segment.find_batch(fetch_offset)
            if found is None:
                continue  # the rest of this segment was compacted away: try the next
            start, first = found
            if first.last_offset >= limit_offset:
                return []
            end = segment.size
            upper = segments[j + 1].base_offset if j + 1 < len(segments) else self.log_end_offset
            if limit_offset < upper:  # the high watermark / LSO falls inside this segment
                bound = segment.find_batch(limit_offset, start)
                if bound is not None:
                    end = bound[0]
            if end - start > max_bytes:
                cut = segment.boundary_at_or_before(start, start + max(max_bytes, 0))
                if cut == start:
                    if not min_one_batch:
                        return []
                    cut = start + first.size
                end = cut
            return [segment.slice(start, end - start)]
        return []

    def read_batches(self, fetch_offset: int, max_bytes: int = 1 << 30,
                     max_offset: int | None = None) -> list[RecordBatch]:
        """Convenience for tests and internal consumers: the batches read() would send."""
        out = []
        for piece in self.read(fetch_offset, max_bytes, max_offset):
            out.extend(iter_batches(piece.read()))
        return out

    # ======================================================================= offsets by time
    def offset_for_timestamp(self, timestamp: int) -> TimestampOffset | None:
        """The first record with timestamp >= `timestamp` (None when there is none)."""
        with self._lock:
            for segment in list(self._segments):
                if segment.max_timestamp < timestamp:
                    continue
                for pos, header in segment.find_timestamp(timestamp, self.log_start_offset):
                    batch = segment.read_batch(pos, header.size)
                    for record in batch.records():
                        if record.timestamp >= timestamp and record.offset >= self.log_start_offset:
                            return TimestampOffset(record.offset, record.timestamp,
                                                   batch.partition_leader_epoch)
            return None

    def max_timestamp_offset(self) -> TimestampOffset | None:
        """ListOffsets MAX_TIMESTAMP (-3): the record with the largest timestamp."""
        with self._lock:
            best = None
            for segment in self._segments:
                if segment.max_timestamp != NO_TIMESTAMP and (best is None or segment.max_timestamp > best.max_timestamp):
                    best = segment
            if best is None:
                return None
            found = best.find_batch(best.offset_of_max_timestamp)
            if found is None:
                return TimestampOffset(best.offset_of_max_timestamp, best.max_timestamp)
            pos, header = found
            batch = best.read_batch(pos, header.size)
            for record in batch.records():
                if record.timestamp == batch.max_timestamp:
                    return TimestampOffset(record.offset, record.timestamp, batch.partition_leader_epoch)
            return TimestampOffset(batch.last_offset, batch.max_timestamp, batch.partition_leader_epoch)

    def legacy_offsets_before(self, timestamp: int, max_count: int, now_ms: int) -> list[int]:
        """ListOffsets v0's answer (Kafka's legacyFetchOffsetsBefore): up to `max_count` offsets,
        largest first, from the segments' base offsets and the log end, each dated by its segment
        file's last modification (the log end by `now_ms`); -1 (latest) starts from the log end,
        -2 (earliest) from the first segment, a time from the newest entry dated at or before it."""
        with self._lock:
            dated = []
            for segment in self._segments:
                try:
                    modified = int(os.path.getmtime(segment.log_path) * 1000)
                except OSError:
                    modified = now_ms
                dated.append((max(segment.base_offset, self.log_start_offset), modified))
            if self._segments[-1].size > 0:
                dated.append((self.log_end_offset, now_ms))
        if timestamp == -1:
            start = len(dated) - 1
        elif timestamp == -2:
            start = 0
        else:
            start = len(dated) - 1
            while start >= 0 and dated[start][1] > timestamp:
                start -= 1
        count = max(0, min(max_count, start + 1))
        return sorted((dated[start - j][0] for j in range(count)), reverse=True)
