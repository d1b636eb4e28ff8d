"""The classic consumer group's data: members, generation, selected protocol, committed offsets.

Pure data plus the small queries Kafka's ClassicGroup answers (protocol support and selection,
who has joined, which offsets have expired). The rules for moving between states live in
`group_coordinator.py`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Optional

from protocol import DecodeError
from protocol.consumer_protocol import decode_subscription

from .pending import Pending

CONSUMER_PROTOCOL_TYPE = "consumer"


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1  # only set by OffsetCommit v1 (explicit per-partition retention)


@dataclass
class Member:
    member_id: str
    group_instance_id: Optional[str]
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]  # (name, metadata) in the member's order of preference
    assignment: bytes = b""
    awaiting_join: Optional[Pending] = None
    awaiting_sync: Optional[Pending] = None
    is_new: bool = False

    def metadata_for(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return [(n, bytes(m)) for n, m in protocols] == [(n, bytes(m)) for n, m in self.protocols]

    def vote(self, candidates: set[str]) -> str:
        return next(name for name, _ in self.protocols if name in candidates)


@dataclass
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    previous_state: GroupState = GroupState.EMPTY
    state_timestamp: int = -1
    generation_id: int = 0
    protocol_type: Optional[str] = None
    protocol_name: Optional[str] = None
    leader_id: Optional[str] = None
    members: dict[str, Member] = field(default_factory=dict)  # insertion order = join order
    pending_members: set[str] = field(default_factory=set)  # got MEMBER_ID_REQUIRED, not joined yet
    pending_sync: set[str] = field(default_factory=set)  # joined this generation, no SyncGroup yet
    static_members: dict[str, str] = field(default_factory=dict)  # group.instance.id -> member id
    new_member_added: bool = False  # extends the initial rebalance delay
    offsets: dict[tuple[str, int], OffsetAndMetadata] = field(default_factory=dict)  # committed: visible
    # plain commits appended but not yet acknowledged (acks=all): partition -> {write number: offset}
    pending_offsets: dict[tuple[str, int], dict[int, OffsetAndMetadata]] = field(default_factory=dict)
    # transactional offsets not yet committed, by producer id
    pending_txn_offsets: dict[int, dict[tuple[str, int], OffsetAndMetadata]] = field(default_factory=dict)

    # ---- state -------------------------------------------------------------------------------------
    def transition(self, state: GroupState, now_ms: int) -> None:
        self.previous_state = self.state
        self.state = state
        self.state_timestamp = now_ms

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def can_rebalance(self) -> bool:
        return self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY)

    # ---- members -----------------------------------------------------------------------------------
    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> Optional[Member]:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        self.pending_sync.discard(member_id)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def replace_static_member(self, instance_id: str, old_member_id: str, new_member_id: str) -> Member:
        member = self.members.pop(old_member_id)
        member.member_id = new_member_id
        self.members[new_member_id] = member
        self.static_members[instance_id] = new_member_id
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        if old_member_id in self.pending_sync:
            self.pending_sync.discard(old_member_id)
            self.pending_sync.add(new_member_id)
        return member

    def static_member_id(self, instance_id: Optional[str]) -> Optional[str]:
        return None if instance_id is None else self.static_members.get(instance_id)

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def awaiting_join_count(self) -> int:
        return sum(1 for m in self.members.values() if m.awaiting_join is not None)

    def has_all_members_joined(self) -> bool:
        return self.awaiting_join_count() == len(self.members) and not self.pending_members

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # ---- protocols ---------------------------------------------------------------------------------
    def _protocol_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for member in self.members.values():
            for name, _ in member.protocols:
                counts[name] = counts.get(name, 0) + 1
        return counts

    def supports_protocols(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        if self.state is GroupState.EMPTY or not self.members:
            return bool(protocol_type) and bool(protocols)
        counts = self._protocol_counts()
        return protocol_type == self.protocol_type and any(
            counts.get(name, 0) == len(self.members) for name, _ in protocols)

    def select_protocol(self) -> str:
        """Kafka's vote: among protocols every member supports, each member votes for its favourite."""
        counts = self._protocol_counts()
        candidates = {name for name, n in counts.items() if n == len(self.members)}
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = member.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        # ties go to the protocol the longest-standing member prefers most
        order = [name for name, _ in next(iter(self.members.values())).protocols]
        return max(votes, key=lambda name: (votes[name], -order.index(name)))

    def member_summaries(self) -> list[tuple[str, Optional[str], bytes]]:
        """(member id, instance id, metadata of the selected protocol) for the leader's JoinGroup."""
        protocol = self.protocol_name or ""
        return [(m.member_id, m.group_instance_id, m.metadata_for(protocol)) for m in self.members.values()]

    def subscribed_topics(self) -> Optional[set[str]]:
        """Topics the members subscribe to, when every subscription parses as a consumer protocol."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or not self.protocol_name:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            parsed = parse_subscription_topics(member.metadata_for(self.protocol_name))
            if parsed is None:
                return None
            topics |= parsed
        return topics

    # ---- offsets -----------------------------------------------------------------------------------
    def has_pending_offsets(self, topic: str, partition: int) -> bool:
        """A commit of this partition is in flight: written but not acknowledged, or in an open
        transaction (OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT meanwhile)."""
        key = (topic, partition)
        return key in self.pending_offsets or any(key in offsets for offsets in self.pending_txn_offsets.values())

    def has_offsets(self) -> bool:
        """Committed offsets or commits still in flight: either keeps an otherwise empty group alive."""
        return bool(self.offsets or self.pending_offsets or self.pending_txn_offsets)

    def offset_keys(self) -> list[tuple[str, int]]:
        """Every partition with a committed or in-flight plain commit (what a group's tombstones cover)."""
        return list(dict.fromkeys([*self.offsets, *self.pending_offsets]))

    def expired_offsets(self, now_ms: int, retention_ms: int) -> list[tuple[str, int]]:
        """Offsets past retention, by Kafka's rules (KIP-211): the clock starts when the group empties,
        at commit time for groups without group management or for topics no member subscribes to."""
        def expired(key, om: OffsetAndMetadata, base: int) -> bool:
            if self.has_pending_offsets(*key):
                return False
            if om.expire_timestamp >= 0:
                return now_ms >= om.expire_timestamp
            return now_ms - base >= retention_ms

        if self.protocol_type is None or self.state is GroupState.EMPTY:
            use_state_time = self.protocol_type is not None and self.state_timestamp >= 0
            return [key for key, om in self.offsets.items()
                    if expired(key, om, self.state_timestamp if use_state_time else om.commit_timestamp)]
        if self.state is GroupState.STABLE and self.protocol_type == CONSUMER_PROTOCOL_TYPE:
            subscribed = self.subscribed_topics()
            if subscribed is not None:
                return [key for key, om in self.offsets.items()
                        if key[0] not in subscribed and expired(key, om, om.commit_timestamp)]
        return []


def parse_subscription_topics(metadata: bytes) -> Optional[set[str]]:
    """Topics of a consumer-protocol subscription, or None if it does not parse as one."""
    try:
        _, subscription = decode_subscription(bytes(metadata))
    except DecodeError:
        return None
    return set(subscription.topics)
