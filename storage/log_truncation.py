"""Truncation of a partition log: a follower cutting a divergent suffix (to an offset) or
restarting empty at an offset; segments, indexes, producer state and epoch cache follow.

A mixin of `storage.log.Log`.
"""

from __future__ import annotations

import os

from storage.segment import LogSegment


class LogTruncation:
    # ======================================================================= truncation
    def truncate_to(self, offset: int) -> None:
        """Replica truncation: drop everything at or above `offset`."""
        with self._lock:
            self._check_online()
            if offset >= self.log_end_offset:
                # Nothing to cut, but an epoch this node started as leader without appending
                # anything must go: the new leader's log continues from here (as Kafka).
                self.epochs.truncate_from(self.log_end_offset)
                return
            if offset < self.log_start_offset:
                self.truncate_fully_and_start_at(offset)
                return
            try:
                while len(self._segments) > 1 and self._segments[-1].base_offset >= offset:
                    gone = self._segments.pop()
                    self._bases.pop()
                    gone.close()
                    for path in gone.paths():
                        if os.path.exists(path):
                            os.remove(path)
                active = self._segments[-1]
                if not active.active:
                    active.activate()
                active.truncate_to(offset)
            except OSError as exc:
                raise self._go_offline(exc) from exc
            if self.log_end_offset < self.log_start_offset:
                # The cut batch straddled the log start: keep the log start, empty.
                self.truncate_fully_and_start_at(self.log_start_offset)
                return
            self._after_truncation()

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop every segment and restart the log empty at `offset`."""
        with self._lock:
            self._check_online()
            now = self.clock()
            for segment in self._segments:
                segment.close()
                for path in segment.paths():
                    if os.path.exists(path):
                        os.remove(path)
            segment = LogSegment(self.directory, offset, self.handles, created_ms=now)
            segment.activate()
            self._segments = [segment]
            self._bases = [offset]
            self.log_start_offset = offset
            self.epochs.clear()
            self.producer_state.delete_snapshots(above=-1)  # nothing of the old log survives
            self.producer_state.reset(offset)
            self._after_truncation()

    def _after_truncation(self) -> None:
        end = self.log_end_offset
        self.log_start_offset = min(self.log_start_offset, end)
        self.high_watermark = min(max(self.high_watermark, self.log_start_offset), end)
        self.recovery_point = min(self.recovery_point, end)
        self.epochs.truncate_from(end)
        self.on_truncated(end)
        self.producer_state.on_high_watermark(self.high_watermark)

    def on_truncated(self, end_offset: int) -> None:
        """Producer state is rebuilt from the last snapshot below the new end."""
        self.producer_state.delete_snapshots(above=end_offset)
        self._rebuild_producer_state(end_offset)

