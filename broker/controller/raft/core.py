"""The sans-IO Raft core, KRaft flavoured: followers pull (Fetch) from the leader.

A `RaftNode` never reads a clock, touches a socket or a file. Every call takes `now` (seconds, any
monotonic origin) and returns a list of effects (see `messages`) that the driver executes IN ORDER:
persistence effects before the sends and commits that follow them. Because the core acts only on what it
has already asked to persist, a crash loses exactly the non-durable part, and a restarted node is rebuilt
from `DurableState`.

Roles: unattached (no leader known), prospective (pre-vote, KIP-996: asks whether it could win without
bumping the epoch, so a rejoining node cannot disrupt a healthy leader), candidate, leader, follower.
Observers (nodes not in `voters`) only ever follow.

Safety rules kept here:
- a vote is granted once per epoch, only to a candidate whose log is at least as up to date;
- the leader appends a control entry at the start of its epoch and advances the high watermark only to an
  offset a majority of voters hold and that lies inside its own epoch;
- a follower appends only after the leader validated (fetch offset, last fetched epoch) against its log;
  otherwise the leader answers with the diverging epoch and the follower truncates to where logs agree;
- a leader that stops hearing from a majority resigns (check quorum).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from ..disklog import Entry, QuorumState, Snapshot
from .messages import (
    AppendEntries, BeginQuorumEpoch, BeginQuorumEpochResponse, Commit, DurableState, EndQuorumEpoch,
    FetchRequest, FetchResponse, FetchSnapshotRequest, FetchSnapshotResponse, LeaderChange,
    LoadSnapshot, PersistState, SaveSnapshot, Send, VoteRequest, VoteResponse,
)
from .pull import PullReplication
from .roles import ReplicaState, Role

__all__ = ["NotLeaderError", "RaftConfig", "RaftNode", "Role"]


class NotLeaderError(Exception):
    """Proposals and snapshots of uncommitted state are refused; carries the known leader."""

    def __init__(self, epoch: int, leader_id: int):
        super().__init__(f"not the leader (epoch {epoch}, leader {leader_id})")
        self.epoch, self.leader_id = epoch, leader_id


@dataclass
class RaftConfig:
    election_timeout: float = 1.0        # randomized in [t, 2t): candidate / unattached patience
    fetch_timeout: float = 2.0           # randomized in [t, 1.5t): follower patience with a silent leader
    fetch_interval: float = 0.05         # follower poll period when caught up
    request_timeout: float = 0.5         # resend an unanswered request
    max_fetch_entries: int = 256
    snapshot_chunk: int = 64 * 1024


class RaftNode(PullReplication):
    """One quorum member (or observer). Log replication by pull lives in `PullReplication`."""

    def __init__(self, node_id: int, voters, config: RaftConfig | None = None,
                 rng: random.Random | None = None, durable: DurableState | None = None):
        durable = durable or DurableState()
        self.node_id = node_id
        self.voters = frozenset(voters)
        self.config = config or RaftConfig()
        self.rng = rng or random.Random()
        state = durable.quorum_state
        self.epoch, self.voted_id, self.leader_id = state.epoch, state.voted_id, state.leader_id
        self.snapshot: Snapshot | None = durable.snapshot
        self.log_start = durable.snapshot.end_offset if durable.snapshot else 0
        self.entries: list[Entry] = list(durable.entries)
        assert all(e.offset == self.log_start + i for i, e in enumerate(self.entries))
        self.high_watermark = self.log_start      # committed offsets are < high_watermark
        self.applied = self.log_start             # offsets < applied were handed out in Commit
        self.role = Role.UNATTACHED
        self._out: list = []
        # timers
        self._election_deadline = 0.0
        self._fetch_deadline = 0.0
        self._next_fetch = 0.0
        self._fetch_sent: float | None = None
        self._resend_at = 0.0
        # candidate / prospective
        self._granted: set[int] = set()
        self._rejected: set[int] = set()
        # leader
        self._replicas: dict[int, ReplicaState] = {}
        self._epoch_start = 0
        # follower snapshot download
        self._download: tuple[tuple[int, int], bytearray] | None = None

    # -- public API --------------------------------------------------------------------------------

    @property
    def is_voter(self) -> bool:
        return self.node_id in self.voters

    @property
    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    @property
    def end_offset(self) -> int:
        return self.log_start + len(self.entries)

    @property
    def last_epoch(self) -> int:
        if self.entries:
            return self.entries[-1].epoch
        return self.snapshot.epoch if self.snapshot else 0

    def start(self, now: float) -> list:
        """First call after construction: loads the snapshot, then starts the timers."""
        if self.snapshot is not None:
            self._out.append(LoadSnapshot(self.snapshot))
        if self.is_voter and self.voters == {self.node_id}:
            self._become_candidate(now)              # a quorum of one elects itself at once
        elif self.leader_id >= 0 and self.leader_id != self.node_id:
            self._become_follower(self.epoch, self.leader_id, now)
        else:
            self._become_unattached(self.epoch, now, persist=False)
        return self._drain()

    def tick(self, now: float) -> list:
        role = self.role
        if role is Role.LEADER:
            self._leader_tick(now)
        elif role is Role.FOLLOWER:
            if now >= self._fetch_deadline:
                self._leader_lost(now)
            else:
                self._maybe_fetch(now)
        elif role in (Role.PROSPECTIVE, Role.CANDIDATE):
            if now >= self._election_deadline:
                self._become_prospective(now)
            elif now >= self._resend_at:
                self._request_votes(now)
        elif role is Role.UNATTACHED:
            if self.is_voter and now >= self._election_deadline:
                self._become_prospective(now)
            elif not self.is_voter:
                self._maybe_fetch(now)
        return self._drain()

    def next_deadline(self) -> float:
        """The latest time by which `tick` must be called again."""
        role = self.role
        if role is Role.LEADER:
            return self._resend_at
        if role is Role.FOLLOWER:
            return min(self._fetch_deadline, self._next_fetch_time())
        if role is Role.UNATTACHED and not self.is_voter:
            return self._next_fetch_time()
        if role in (Role.PROSPECTIVE, Role.CANDIDATE):
            return min(self._election_deadline, self._resend_at)
        return self._election_deadline

    def _next_fetch_time(self) -> float:
        if self._fetch_sent is not None:
            return self._fetch_sent + self.config.request_timeout
        return self._next_fetch

    def propose(self, data: bytes, now: float) -> tuple[tuple[int, int], list]:
        """Append `data` as a new entry; returns ((offset, epoch), effects). Only the leader may."""
        if self.role is not Role.LEADER:
            raise NotLeaderError(self.epoch, self.leader_id)
        entry = Entry(self.end_offset, self.epoch, data)
        self._append([entry])
        self._leader_update_hw(now)
        return (entry.offset, entry.epoch), self._drain()

    def take_snapshot(self, end_offset: int, data: bytes) -> list:
        """The state machine's state after applying every entry below `end_offset` (<= applied)."""
        if end_offset > self.applied or end_offset <= self.log_start:
            raise ValueError(f"snapshot at {end_offset} outside ({self.log_start}, {self.applied}]")
        epoch = self._epoch_at(end_offset - 1)
        self.snapshot = Snapshot(end_offset, epoch, data)
        del self.entries[:end_offset - self.log_start]
        self.log_start = end_offset
        self._out.append(SaveSnapshot(self.snapshot))
        return self._drain()

    def resign(self, now: float) -> list:
        """Graceful leader shutdown: step down and tell voters to elect someone else now."""
        if self.role is Role.LEADER:
            successors = sorted((v for v in self.voters if v != self.node_id),
                                key=lambda v: -self._replicas[v].end_offset)
            self._become_unattached(self.epoch, now)
            for v in successors:
                self._send(v, EndQuorumEpoch(self.epoch, self.node_id, tuple(successors)))
        return self._drain()

    def describe(self, now: float) -> dict:
        """DescribeQuorum's view: leader, epoch, high watermark, and (on the leader) every replica's
        log end offset and last fetch / caught-up times (core clock; -inf for never)."""
        replicas = {}
        if self.role is Role.LEADER:
            replicas = {rid: {"log_end_offset": st.end_offset, "last_fetch_timestamp": st.last_fetch,
                              "last_caught_up_timestamp": st.last_caught_up}
                        for rid, st in self._replicas.items()}
            replicas[self.node_id] = {"log_end_offset": self.end_offset, "last_fetch_timestamp": now,
                                      "last_caught_up_timestamp": now}
        return {"node_id": self.node_id, "leader_id": self.leader_id, "epoch": self.epoch,
                "high_watermark": self.high_watermark, "voters": sorted(self.voters), "replicas": replicas}

    def handle(self, src: int, message, now: float) -> list:
        name = _HANDLERS.get(type(message))
        if name is not None:
            getattr(self, name)(src, message, now)
        return self._drain()

    # -- log helpers -------------------------------------------------------------------------------

    def _drain(self) -> list:
        out, self._out = self._out, []
        return out

    def _send(self, dest: int, message) -> None:
        self._out.append(Send(dest, message))

    def _persist(self) -> None:
        self._out.append(PersistState(QuorumState(self.epoch, self.voted_id, self.leader_id)))

    def _append(self, entries) -> None:
        self.entries.extend(entries)
        self._out.append(AppendEntries(tuple(entries)))

    def _epoch_at(self, offset: int) -> int:
        if offset < self.log_start:
            assert self.snapshot is not None and offset == self.log_start - 1
            return self.snapshot.epoch
        return self.entries[offset - self.log_start].epoch

    def _end_offset_for_epoch(self, epoch: int) -> tuple[int, int] | None:
        """(largest epoch <= `epoch` in the log, the end offset of that epoch); None if below log start."""
        for entry in reversed(self.entries):
            if entry.epoch <= epoch:
                return entry.epoch, entry.offset + 1
        if self.snapshot is not None:
            return (self.snapshot.epoch, self.log_start) if self.snapshot.epoch <= epoch else None
        return 0, 0

    def _log_up_to_date(self, last_epoch: int, end_offset: int) -> bool:
        return (last_epoch, end_offset) >= (self.last_epoch, self.end_offset)

    def _commit_to(self, hw: int) -> None:
        if hw > self.high_watermark:
            self.high_watermark = hw
        limit = min(self.high_watermark, self.end_offset)
        if limit > self.applied:
            start = self.applied - self.log_start
            self._out.append(Commit(tuple(self.entries[start:limit - self.log_start])))
            self.applied = limit

    # -- role transitions ----------------------------------------------------------------------------

    def _election_timeout(self) -> float:
        t = self.config.election_timeout
        return t + self.rng.random() * t

    def _fetch_timeout(self) -> float:
        t = self.config.fetch_timeout
        return t + self.rng.random() * t / 2

    def _announce(self) -> None:
        self._out.append(LeaderChange(self.epoch, self.leader_id, self.leader_id == self.node_id))

    def _become_unattached(self, epoch: int, now: float, persist: bool = True) -> None:
        was_leader = self.role is Role.LEADER
        if epoch != self.epoch:
            self.voted_id = -1
        changed = epoch != self.epoch or self.leader_id != -1
        self.epoch, self.leader_id = epoch, -1
        self.role = Role.UNATTACHED
        self._election_deadline = now + self._election_timeout()
        self._fetch_sent, self._next_fetch = None, now
        self._download = None
        if persist and changed:
            self._persist()
        if changed or was_leader:
            self._announce()

    def _become_follower(self, epoch: int, leader_id: int, now: float) -> None:
        if epoch != self.epoch:
            self.voted_id = -1
        changed = (epoch, leader_id) != (self.epoch, self.leader_id) or self.role is not Role.FOLLOWER
        persist = (epoch, leader_id) != (self.epoch, self.leader_id)
        self.epoch, self.leader_id = epoch, leader_id
        self.role = Role.FOLLOWER
        self._fetch_deadline = now + self._fetch_timeout()
        if changed:
            self._fetch_sent, self._next_fetch = None, now
            self._download = None
        if persist:
            self._persist()
        if changed:
            self._announce()
        self._maybe_fetch(now)

    def _become_prospective(self, now: float) -> None:
        if not self.is_voter:
            return
        if self.voters == {self.node_id}:
            self._become_candidate(now)
            return
        self.role = Role.PROSPECTIVE
        if self.leader_id != -1:
            self.leader_id = -1
            self._persist()
            self._announce()
        self._granted, self._rejected = {self.node_id}, set()
        self._election_deadline = now + self._election_timeout()
        self._request_votes(now)

    def _become_candidate(self, now: float) -> None:
        self.role = Role.CANDIDATE
        self.epoch += 1
        self.voted_id, self.leader_id = self.node_id, -1
        self._persist()
        self._announce()
        self._granted, self._rejected = {self.node_id}, set()
        self._election_deadline = now + self._election_timeout()
        if not self._check_votes(now):
            self._request_votes(now)

    def _request_votes(self, now: float) -> None:
        pre = self.role is Role.PROSPECTIVE
        request = VoteRequest(self.epoch, self.node_id, self.last_epoch, self.end_offset, pre)
        for voter in sorted(self.voters - self._granted - self._rejected):
            self._send(voter, request)
        self._resend_at = now + self.config.request_timeout

    def _check_votes(self, now: float) -> bool:
        majority = len(self.voters) // 2 + 1
        if len(self._granted) >= majority:
            if self.role is Role.PROSPECTIVE:
                self._become_candidate(now)
            else:
                self._become_leader(now)
            return True
        if len(self._rejected) >= majority and self.role is Role.PROSPECTIVE:
            # Lost the pre-vote: wait out a fresh timeout before asking again.
            self._election_deadline = now + self._election_timeout()
        return False

    def _become_leader(self, now: float) -> None:
        self.role = Role.LEADER
        self.leader_id = self.node_id
        self._persist()
        self._announce()
        self._replicas = {rid: ReplicaState() for rid in self.voters if rid != self.node_id}
        self._epoch_start = self.end_offset
        self._append([Entry(self.end_offset, self.epoch, b"", control=True)])
        for voter in sorted(self.voters - {self.node_id}):
            self._send(voter, BeginQuorumEpoch(self.epoch, self.node_id))
            self._replicas[voter].last_fetch = now      # grace period for check quorum
        self._resend_at = now + self.config.request_timeout
        self._leader_update_hw(now)

    def _leader_lost(self, now: float) -> None:
        if self.is_voter:
            self._become_prospective(now)
        else:
            self._become_unattached(self.epoch, now)

    def _observe_epoch(self, epoch: int, leader_id: int, now: float, from_leader: bool = False) -> bool:
        """React to an epoch/leader seen in a message; returns False if the message is stale.

        A leader named for a higher epoch is followed. Within our own epoch only the leader speaking for
        itself counts (for voters): a peer's stale hint must not pull a node back to a leader that died.
        """
        if epoch < self.epoch:
            return False
        if epoch > self.epoch:
            if leader_id >= 0 and leader_id != self.node_id:
                self._become_follower(epoch, leader_id, now)
            else:
                self._become_unattached(epoch, now)
        elif (leader_id >= 0 and leader_id != self.node_id and self.role is not Role.FOLLOWER
              and (from_leader or not self.is_voter)):
            assert self.role is not Role.LEADER, "two leaders in one epoch"
            self._become_follower(epoch, leader_id, now)
        return True

    # -- leader ----------------------------------------------------------------------------------------

    def _leader_tick(self, now: float) -> None:
        if len(self.voters) > 1:
            horizon = now - 1.5 * self.config.fetch_timeout
            alive = 1 + sum(1 for rid, st in self._replicas.items()
                            if rid in self.voters and st.last_fetch >= horizon)
            if alive < len(self.voters) // 2 + 1:
                self._become_unattached(self.epoch, now)   # check quorum: resign, keep the epoch
                return
        if now >= self._resend_at:
            for rid in sorted(self.voters - {self.node_id}):
                if self._replicas[rid].end_offset < 0:
                    self._send(rid, BeginQuorumEpoch(self.epoch, self.node_id))
            self._resend_at = now + self.config.request_timeout

    def _leader_update_hw(self, now: float) -> None:
        offsets = sorted([self.end_offset] + [self._replicas[v].end_offset
                                              for v in self.voters if v != self.node_id], reverse=True)
        candidate = offsets[len(self.voters) // 2]
        if candidate > self._epoch_start:
            self._commit_to(candidate)

    # -- elections -------------------------------------------------------------------------------------

    def hearing_from_leader(self, now: float) -> bool:
        """Whether this node leads, or follows a leader it heard from within the fetch timeout."""
        return self._hearing_from_leader(now)

    def _hearing_from_leader(self, now: float) -> bool:
        if self.role is Role.LEADER:
            return True
        return self.role is Role.FOLLOWER and now < self._fetch_deadline

    def _on_vote(self, src: int, req: VoteRequest, now: float) -> None:
        if req.pre_vote:
            granted = (self.is_voter and req.epoch >= self.epoch and not self._hearing_from_leader(now)
                       and self._log_up_to_date(req.last_epoch, req.end_offset))
            self._send(src, VoteResponse(self.epoch, self.leader_id, granted, pre_vote=True))
            return
        if req.epoch > self.epoch:
            self._observe_epoch(req.epoch, -1, now)
        granted = (self.is_voter and req.epoch == self.epoch and self.leader_id == -1
                   and self.voted_id in (-1, req.candidate_id)
                   and self._log_up_to_date(req.last_epoch, req.end_offset))
        if granted and self.voted_id != req.candidate_id:
            self.voted_id = req.candidate_id
            self._persist()
        if granted:
            self._election_deadline = now + self._election_timeout()
        self._send(src, VoteResponse(self.epoch, self.leader_id, granted))

    def _on_vote_response(self, src: int, resp: VoteResponse, now: float) -> None:
        if resp.epoch > self.epoch:
            self._observe_epoch(resp.epoch, resp.leader_id, now)
            return
        if resp.leader_id >= 0 and resp.leader_id != self.node_id and src == resp.leader_id:
            self._observe_epoch(resp.epoch, resp.leader_id, now, from_leader=True)
            return
        expected = Role.PROSPECTIVE if resp.pre_vote else Role.CANDIDATE
        if self.role is not expected or resp.epoch != self.epoch or src not in self.voters:
            return
        (self._granted if resp.granted else self._rejected).add(src)
        self._check_votes(now)

    def _on_begin_quorum_epoch(self, src: int, req: BeginQuorumEpoch, now: float) -> None:
        if self._observe_epoch(req.epoch, req.leader_id, now, from_leader=src == req.leader_id) \
                and self.role is Role.FOLLOWER:
            self._fetch_deadline = now + self._fetch_timeout()
        self._send(src, BeginQuorumEpochResponse(self.epoch, self.leader_id))

    def _on_begin_quorum_epoch_response(self, src: int, resp: BeginQuorumEpochResponse, now: float) -> None:
        self._observe_epoch(resp.epoch, resp.leader_id, now, from_leader=src == resp.leader_id)

    def _on_end_quorum_epoch(self, src: int, req: EndQuorumEpoch, now: float) -> None:
        if req.epoch != self.epoch or self.leader_id != req.leader_id or self.role is not Role.FOLLOWER:
            return
        # The leader is going away: stop following (so pre-votes are granted at once) and let the
        # most caught-up successors try first.
        rank = req.preferred_successors.index(self.node_id) if self.node_id in req.preferred_successors else 0
        self._become_unattached(self.epoch, now)
        self._election_deadline = now + rank * self.config.election_timeout * (1 + self.rng.random()) / 2


_HANDLERS = {           # message type -> handler method name (looked up on the instance)
    VoteRequest: "_on_vote",
    VoteResponse: "_on_vote_response",
    BeginQuorumEpoch: "_on_begin_quorum_epoch",
    BeginQuorumEpochResponse: "_on_begin_quorum_epoch_response",
    EndQuorumEpoch: "_on_end_quorum_epoch",
    FetchRequest: "_on_fetch",
    FetchResponse: "_on_fetch_response",
    FetchSnapshotRequest: "_on_fetch_snapshot",
    FetchSnapshotResponse: "_on_fetch_snapshot_response",
}
