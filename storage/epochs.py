"""The leader epoch cache: (leader epoch, first offset) pairs, kept in Kafka's
`leader-epoch-checkpoint` beside the segments; it answers OffsetForLeaderEpoch."""

from __future__ import annotations

import threading

from storage import checkpoints

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"


class LeaderEpochCache:
    def __init__(self, path: str | None, *, read: bool = True):
        """`path` None keeps the cache in memory only (the replication simulation); read=False
        starts empty without looking for the file (a partition directory just created)."""
        self.path = path
        self.entries: list[tuple[int, int]] = checkpoints.read_leader_epochs(path) if path and read else []
        self.unwritten = False               # entries newer than the file (assign(write=False))
        self._file_lock = threading.Lock()   # one writer at a time; the last one writes the latest

    @property
    def latest(self) -> int:
        return self.entries[-1][0] if self.entries else -1

    def assign(self, epoch: int, start_offset: int, write: bool = True) -> None:
        """A batch of `epoch` was appended at `start_offset`; only a newer epoch is news.

        write=False keeps the news in memory for `write_unwritten` (off the event loop, many
        partitions at once); the log writes it before it makes any record durable."""
        if self.entries and epoch <= self.entries[-1][0]:
            return
        self.entries.append((epoch, start_offset))
        if write:
            self._write()
        else:
            self.unwritten = True

    def write_unwritten(self, sync: bool = True) -> bool:
        """Write what assign(write=False) kept in memory; True if there was something."""
        if not self.unwritten:
            return False
        self._write(sync)
        return True

    def truncate_from(self, end_offset: int) -> None:
        """The log now ends at end_offset: epochs starting there or later are gone."""
        kept = [(e, s) for e, s in self.entries if s < end_offset]
        if kept != self.entries:
            self.entries = kept
            self._write()

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch, as Kafka's LeaderEpochFileCache.endOffsetFor:

        - the latest epoch ends at the log end;
        - an older epoch ends where the next larger known epoch starts, answered with the
          largest known epoch <= the one asked for (or the asked one when it is older than
          every known epoch: the follower then truncates to where the log's first epoch starts);
        - an epoch newer than the latest, none known, or -1 (undefined) asked: (-1, -1). Another
          negative epoch is merely older than every known one.
        """
        entries = self.entries
        if epoch == -1 or not entries:
            return -1, -1
        if epoch == entries[-1][0]:
            return epoch, log_end_offset
        floor = None
        for i, (e, start) in enumerate(entries):
            if e > epoch:
                return (floor if floor is not None else epoch), start
            floor = e
        return -1, -1

    def copy_from(self, other: "LeaderEpochCache") -> None:
        """Take another copy's entries (a log moved to another dir: same records, same epochs),
        written with the next flush."""
        self.entries = list(other.entries)
        self.unwritten = True

    def clear(self) -> None:
        """The log restarted empty (a follower far behind its leader's log start)."""
        if self.entries:
            self.entries = []
            self._write()

    def start_offset_of(self, epoch: int) -> int | None:
        for e, start in self.entries:
            if e == epoch:
                return start
        return None

    def _write(self, sync: bool = True) -> None:
        if not self.path:
            self.unwritten = False
            return
        with self._file_lock:
            # Cleared before the copy: an entry added meanwhile sets it again, for the next write.
            self.unwritten = False
            try:
                checkpoints.write_leader_epochs(self.path, list(self.entries), sync)
            except BaseException:
                self.unwritten = True
                raise
