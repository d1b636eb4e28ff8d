"""Messages between Raft nodes and the effects the core asks its driver to carry out.

They mirror KRaft's RPCs (Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch, FetchSnapshot) closely enough
that a transport maps them one-to-one onto the wire messages; `fetch_offset` echoed in responses stands
for the request/response correlation a real transport keeps.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..disklog import Entry, QuorumState, Snapshot

# Error values carried in responses (names of the Kafka error codes they map to).
NONE = None
FENCED_LEADER_EPOCH = "FENCED_LEADER_EPOCH"
NOT_LEADER = "NOT_LEADER_OR_FOLLOWER"
SNAPSHOT_NOT_FOUND = "SNAPSHOT_NOT_FOUND"


@dataclass(frozen=True, slots=True)
class VoteRequest:
    epoch: int              # real vote: the candidate's (bumped) epoch; pre-vote: its current epoch
    candidate_id: int
    last_epoch: int
    end_offset: int
    pre_vote: bool = False


@dataclass(frozen=True, slots=True)
class VoteResponse:
    epoch: int
    leader_id: int
    granted: bool
    pre_vote: bool = False


@dataclass(frozen=True, slots=True)
class BeginQuorumEpoch:
    epoch: int
    leader_id: int


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochResponse:
    epoch: int
    leader_id: int


@dataclass(frozen=True, slots=True)
class EndQuorumEpoch:
    epoch: int
    leader_id: int
    preferred_successors: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class FetchRequest:
    epoch: int
    replica_id: int
    fetch_offset: int
    last_fetched_epoch: int


@dataclass(frozen=True, slots=True)
class FetchResponse:
    epoch: int
    leader_id: int
    fetch_offset: int
    last_fetched_epoch: int
    error: str | None = None
    entries: tuple[Entry, ...] = ()
    high_watermark: int = -1
    diverging: tuple[int, int] | None = None     # (epoch, end offset) where the logs part ways
    snapshot_id: tuple[int, int] | None = None   # (end offset, epoch): fetch this snapshot instead
    log_start_offset: int = 0


@dataclass(frozen=True, slots=True)
class FetchSnapshotRequest:
    epoch: int
    replica_id: int
    snapshot_id: tuple[int, int]
    position: int


@dataclass(frozen=True, slots=True)
class FetchSnapshotResponse:
    epoch: int
    leader_id: int
    snapshot_id: tuple[int, int]
    position: int
    size: int = 0
    chunk: bytes = b""
    error: str | None = None


# -- effects, executed by the driver in order ------------------------------------------------------

@dataclass(frozen=True, slots=True)
class PersistState:
    """Durably record epoch, vote and known leader before any later effect."""
    state: QuorumState


@dataclass(frozen=True, slots=True)
class AppendEntries:
    """Durably append entries (offsets continue the durable log)."""
    entries: tuple[Entry, ...]


@dataclass(frozen=True, slots=True)
class TruncateFrom:
    """Durably drop entries at and after `offset`."""
    offset: int


@dataclass(frozen=True, slots=True)
class SaveSnapshot:
    """Durably store the snapshot; entries it covers may go; a log not matching it is reset."""
    snapshot: Snapshot


@dataclass(frozen=True, slots=True)
class Send:
    dest: int
    message: object


@dataclass(frozen=True, slots=True)
class Commit:
    """Entries now committed, in order, to apply to the state machine (control entries included)."""
    entries: tuple[Entry, ...]


@dataclass(frozen=True, slots=True)
class LoadSnapshot:
    """Replace the state machine with this snapshot's state (it covers offsets < end_offset)."""
    snapshot: Snapshot


@dataclass(frozen=True, slots=True)
class LeaderChange:
    """The node's view of the leader changed (epoch, leader id or -1); informational."""
    epoch: int
    leader_id: int
    is_self: bool = False


@dataclass
class DurableState:
    """What a node finds on disk when it (re)starts."""
    quorum_state: QuorumState = QuorumState()
    snapshot: Snapshot | None = None
    entries: list = field(default_factory=list)   # from the log start (snapshot end, or 0) on
