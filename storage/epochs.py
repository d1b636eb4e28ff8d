"""The leader epoch cache: (leader epoch, first offset) pairs, kept in Kafka's
`leader-epoch-checkpoint` beside the segments; it answers OffsetForLeaderEpoch."""

from __future__ import annotations

from storage import checkpoints

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"


class LeaderEpochCache:
    def __init__(self, path: str):
        self.path = path
        self.entries: list[tuple[int, int]] = checkpoints.read_leader_epochs(path)

    @property
    def latest(self) -> int:
        return self.entries[-1][0] if self.entries else -1

    def assign(self, epoch: int, start_offset: int) -> None:
        """A batch of `epoch` was appended at `start_offset`; only a newer epoch is news."""
        if self.entries and epoch <= self.entries[-1][0]:
            return
        self.entries.append((epoch, start_offset))
        self._write()

    def truncate_from(self, end_offset: int) -> None:
        """The log now ends at end_offset: epochs starting there or later are gone."""
        kept = [(e, s) for e, s in self.entries if s < end_offset]
        if kept != self.entries:
            self.entries = kept
            self._write()

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(largest known epoch <= epoch, the offset where it ended), or (-1, -1)."""
        entries = self.entries
        if not entries or epoch < entries[0][0]:
            return -1, -1
        for i in range(len(entries) - 1, -1, -1):
            e, _start = entries[i]
            if e <= epoch:
                end = entries[i + 1][1] if i + 1 < len(entries) else log_end_offset
                return e, end
        return -1, -1

    def _write(self) -> None:
        checkpoints.write_leader_epochs(self.path, self.entries)
