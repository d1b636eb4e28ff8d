"""Retention of a partition log: segments past retention.ms / retention.bytes, DeleteRecords,
and the delayed unlinking of deleted segments.

A mixin of `storage.log.Log`.
"""

from __future__ import annotations

import os

from protocol.records import NO_TIMESTAMP
from storage.errors import ErrorCode, OffsetOutOfRangeError, StorageError
from storage.segment import DELETED_SUFFIX


class LogRetention:
    # ======================================================================= retention
    def apply_retention(self, now_ms: int | None = None) -> int:
        """Delete whole segments past retention.ms / retention.bytes (cleanup.policy
        delete) or wholly below the log start offset; returns how many went."""
        now = self.clock() if now_ms is None else now_ms
        config = self.config
        with self._lock:
            if self.offline is not None:
                return 0
            doomed = 0
            segments = self._segments
            # Only segments wholly below the high watermark may go (Kafka's rule).
            def upper(i):
                return segments[i + 1].base_offset if i + 1 < len(segments) else self.log_end_offset

            def deletable(i):
                # never the empty active segment (Kafka's rule; there is nothing to roll)
                if i == len(segments) - 1 and segments[i].size == 0:
                    return False
                return upper(i) <= self.high_watermark

            while doomed < len(segments) and upper(doomed) <= self.log_start_offset and \
                    doomed < len(segments) - 1:
                doomed += 1
            if config.delete:
                if config.retention_ms >= 0:
                    while doomed < len(segments) and deletable(doomed) and \
                            segments[doomed].max_timestamp != NO_TIMESTAMP and \
                            now - segments[doomed].max_timestamp > config.retention_ms:
                        doomed += 1
                if config.retention_bytes >= 0:
                    excess = self.size_bytes - config.retention_bytes
                    for i in range(doomed):
                        excess -= segments[i].size
                    while doomed < len(segments) and deletable(doomed) and excess - segments[doomed].size >= 0:
                        excess -= segments[doomed].size
                        doomed += 1
            if doomed:
                self._delete_segments(doomed, now)
            return doomed

    def _delete_segments(self, count: int, now: int) -> None:
        """Remove the first `count` segments (rolling first if that includes the active one)."""
        if count >= len(self._segments):
            if self.active_segment.size:
                self._roll(self.log_end_offset, now)
            count = len(self._segments) - 1
            if not count:
                return
        doomed, self._segments = self._segments[:count], self._segments[count:]
        self._bases = self._bases[count:]
        self.log_start_offset = max(self.log_start_offset, self._segments[0].base_offset)
        self.high_watermark = max(self.high_watermark, self.log_start_offset)
        self.producer_state.on_high_watermark(self.high_watermark)
        self.recovery_point = max(self.recovery_point, self.log_start_offset)
        due = now + self.config.file_delete_delay_ms
        for segment in doomed:
            try:
                segment.rename_all(DELETED_SUFFIX)
            except OSError as exc:
                raise self._go_offline(exc) from exc
            self._pending_deletes.append((due, segment.paths()))
        self.on_segments_deleted(self.log_start_offset)

    def on_segments_deleted(self, log_start_offset: int) -> None:
        """Producers whose data is gone are forgotten; old snapshots go."""
        self.producer_state.evict_below(log_start_offset)
        self.producer_state.delete_snapshots(below=self._segments[0].base_offset)

    def delete_due_files(self, now_ms: int | None = None) -> None:
        """Unlink `.deleted` files whose file.delete.delay.ms has passed."""
        now = self.clock() if now_ms is None else now_ms
        with self._lock:
            due = [paths for t, paths in self._pending_deletes if t <= now]
            self._pending_deletes = [(t, p) for t, p in self._pending_deletes if t > now]
        for paths in due:
            for path in paths:
                try:
                    os.remove(path)
                except FileNotFoundError:
                    pass

    def delete_records(self, offset: int) -> int:
        """DeleteRecords: move the log start offset up to `offset` (-1: the high
        watermark); segments wholly below it are deleted.  Returns the new log start."""
        with self._lock:
            self._check_online()
            if not self.config.delete:
                raise StorageError(
                    f"Records of partition {self.topic}-{self.partition} can not be deleted due to "
                    f"the configured policy", ErrorCode.POLICY_VIOLATION)
            if offset == -1:
                offset = self.high_watermark
            if offset < 0 or offset > self.high_watermark:
                raise OffsetOutOfRangeError(
                    f"cannot delete records of {self.topic}-{self.partition} below {offset}: "
                    f"the high watermark is {self.high_watermark}")
            if offset > self.log_start_offset:
                self.log_start_offset = offset
                self.apply_retention()
            return self.log_start_offset

    def advance_log_start_offset(self, offset: int) -> int:
        """A follower follows its leader's log start offset (learnt from Fetch responses, whatever
        moved it: retention, DeleteRecords): never past its own log end; whole segments below it go."""
        with self._lock:
            self._check_online()
            offset = min(offset, self.log_end_offset)
            if offset > self.log_start_offset:
                self.log_start_offset = offset
                self.high_watermark = max(self.high_watermark, offset)
                self.producer_state.on_high_watermark(self.high_watermark)
                self.apply_retention()
            return self.log_start_offset

    def flush_rolled_segments(self) -> None:
        """Kafka flushes a segment soon after it is rolled; the manager calls this."""
        base = self.active_segment.base_offset
        if self.recovery_point < base:
            self.flush(base)

