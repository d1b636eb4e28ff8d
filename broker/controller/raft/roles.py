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
