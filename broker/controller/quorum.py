"""The quorum the controller commits through: today a durable single-node log.

Contract used by the controller (kept when the Raft-backed quorum replaces this one):
- `load(apply_snapshot, apply_entry)` replays what is committed on disk, in order, at startup;
- `await propose(data) -> offset` returns once the entry is durable and committed AND has been handed to
  the `on_commit` callback;
- `is_leader`, `leader_id`, `epoch` describe this node's role.
"""

from __future__ import annotations

from typing import Callable

import trio

from .disklog import DiskLog, Entry, QuorumState, Snapshot


class LocalQuorum:
    """A quorum of one voter: an entry is committed as soon as it is fsynced."""

    def __init__(self, log_dir: str, node_id: int):
        self.node_id = node_id
        self.log = DiskLog(log_dir)
        self.on_commit: Callable[[Entry], None] = lambda entry: None
        self._write_lock = trio.Lock()
        state = self.log.quorum_state
        # Each start is a new leader epoch, as a restarted single-voter KRaft quorum elects itself.
        self.log.save_quorum_state(QuorumState(state.epoch + 1, node_id, node_id), voters=[node_id])

    @property
    def epoch(self) -> int:
        return self.log.quorum_state.epoch

    @property
    def is_leader(self) -> bool:
        return True

    @property
    def leader_id(self) -> int:
        return self.node_id

    @property
    def end_offset(self) -> int:
        return self.log.end_offset

    def load(self, apply_snapshot: Callable[[Snapshot], None], apply_entry: Callable[[Entry], None]) -> None:
        if self.log.snapshot is not None:
            apply_snapshot(self.log.snapshot)
        for entry in self.log.entries:
            if not entry.control:
                apply_entry(entry)

    async def propose(self, data: bytes) -> int:
        async with self._write_lock:
            entry = Entry(self.log.end_offset, self.epoch, data)
            await trio.to_thread.run_sync(self.log.append, [entry])
            self.on_commit(entry)
            return entry.offset

    def close(self) -> None:
        self.log.close()
