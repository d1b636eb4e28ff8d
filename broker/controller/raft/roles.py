"""The roles a Raft node moves between, and what a leader knows of each replica."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Role(enum.Enum):
    UNATTACHED = "unattached"
    PROSPECTIVE = "prospective"
    CANDIDATE = "candidate"
    LEADER = "leader"
    FOLLOWER = "follower"


@dataclass
class ReplicaState:
    end_offset: int = -1                 # last fetch offset seen this epoch (entries below it match)
    last_fetch: float = float("-inf")
    last_caught_up: float = float("-inf")
    last_fetch_leader_end: int = -1      # the leader's log end offset at that replica's last fetch

    def record_fetch(self, offset: int, leader_end: int, now: float) -> None:
        """A valid fetch from `offset`: caught up now if it reaches the leader's end, or as of the
        previous fetch if it reaches where the leader's end was then (Kafka's rule)."""
        if offset >= leader_end:
            self.last_caught_up = max(self.last_caught_up, now)
        elif offset >= self.last_fetch_leader_end >= 0:
            self.last_caught_up = max(self.last_caught_up, self.last_fetch)
        self.last_fetch_leader_end = leader_end
        self.last_fetch = now
