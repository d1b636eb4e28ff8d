"""A KIP-848 consumer group's data: members with their epochs and assignments, the target assignment.

Partitions are `{topic id: frozenset(partition)}` maps (Kafka keys assignments by topic id). The
rules that move members between states live in `reconcile.py` and `coordinator.py`.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field
from typing import Mapping, Optional

Assignment = Mapping[uuid.UUID, frozenset]   # topic id -> partitions
EMPTY: Assignment = {}

# The member epochs a heartbeat may carry besides a real epoch.
JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


class GroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"       # the group epoch moved past the target assignment's
    RECONCILING = "Reconciling"   # some member has not reached the target assignment yet
    STABLE = "Stable"
    DEAD = "Dead"


class MemberState(enum.IntEnum):
    """Kafka's MemberState (its byte values are what ConsumerGroupCurrentMemberAssignmentValue stores)."""
    STABLE = 0
    UNREVOKED_PARTITIONS = 1   # must give partitions up before it may move to the next epoch
    UNRELEASED_PARTITIONS = 2  # at the target epoch, waiting for others to release its new partitions
    UNKNOWN = 127


@dataclass
class ConsumerGroupConfig:
    """Kafka's group.consumer.* broker settings, with Kafka's defaults."""
    session_timeout_ms: int = 45_000        # group.consumer.session.timeout.ms
    heartbeat_interval_ms: int = 5_000      # group.consumer.heartbeat.interval.ms
    max_size: int = 2**31 - 1               # group.consumer.max.size
    assignors: tuple[str, ...] = ("uniform", "range")  # group.consumer.assignors; the first is the default
    migration_policy: str = "bidirectional"  # group.consumer.migration.policy
    classic_max_size: int = 2**31 - 1       # group.max.size (a downgraded group must fit)

    def upgrade_enabled(self) -> bool:
        return self.migration_policy in ("upgrade", "bidirectional")

    def downgrade_enabled(self) -> bool:
        return self.migration_policy in ("downgrade", "bidirectional")


class Refused(Exception):
    """A request the group answers with an error code (and Kafka's message)."""

    def __init__(self, code, message: Optional[str]):
        super().__init__(message)
        self.code, self.message = code, message


@dataclass(frozen=True)
class ClassicMetadata:
    """A member that speaks the classic protocol (JoinGroup/SyncGroup/Heartbeat) inside a consumer
    group during an online migration: Kafka's ClassicMemberMetadata."""
    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]   # (name, metadata) in the member's order of preference

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]


@dataclass
class ConsumerMember:
    member_id: str
    instance_id: Optional[str] = None
    rack_id: Optional[str] = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: Optional[str] = None
    server_assignor: Optional[str] = None
    rebalance_timeout_ms: int = 300_000
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    classic: Optional[ClassicMetadata] = None    # set while the member uses the classic protocol

    def owns(self) -> Assignment:
        """Everything this member may still be consuming: assigned plus not yet revoked."""
        return union(self.assigned, self.pending_revocation)


@dataclass
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)    # member id -> target assignment
    static_members: dict[str, str] = field(default_factory=dict)   # instance id -> member id
    # (topic id, partition) -> (member id, member epoch): who owns each partition right now
    owners: dict[tuple[uuid.UUID, int], tuple[str, int]] = field(default_factory=dict)
    subscription_fingerprint: tuple = ()   # subscribed topics' (name, id, partitions) at the last epoch bump
    state_timestamp: int = -1
    deleted: bool = False

    def state(self) -> GroupState:
        if self.deleted:
            return GroupState.DEAD
        if not self.members:
            return GroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return GroupState.ASSIGNING
        if any(m.member_epoch != self.assignment_epoch or m.state is not MemberState.STABLE
               for m in self.members.values()):
            return GroupState.RECONCILING
        return GroupState.STABLE

    # ---- ownership: the invariant that no partition has two owners --------------------------------
    def owner(self, topic_id: uuid.UUID, partition: int) -> Optional[str]:
        entry = self.owners.get((topic_id, partition))
        return None if entry is None else entry[0]

    def release(self, member: ConsumerMember) -> None:
        for topic_id, partitions in member.owns().items():
            for p in partitions:
                if self.owners.get((topic_id, p), (None,))[0] == member.member_id:
                    del self.owners[(topic_id, p)]

    def claim(self, member: ConsumerMember) -> None:
        for topic_id, partitions in member.owns().items():
            for p in partitions:
                self.owners[(topic_id, p)] = (member.member_id, member.member_epoch)

    def put_member(self, member: ConsumerMember) -> None:
        """Add or replace a member, keeping `owners` and `static_members` consistent."""
        old = self.members.get(member.member_id)
        if old is not None:
            self.release(old)
        self.members[member.member_id] = member
        self.claim(member)
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id

    def drop_member(self, member_id: str) -> Optional[ConsumerMember]:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        self.release(member)
        self.target.pop(member_id, None)
        if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
            del self.static_members[member.instance_id]
        return member

    def static_member(self, instance_id: Optional[str]) -> Optional[ConsumerMember]:
        member_id = None if instance_id is None else self.static_members.get(instance_id)
        return None if member_id is None else self.members.get(member_id)


# ---- assignment arithmetic --------------------------------------------------------------------------
def union(a: Assignment, b: Assignment) -> dict:
    out = {t: frozenset(p) for t, p in a.items() if p}
    for t, p in b.items():
        if p:
            out[t] = out.get(t, frozenset()) | p
    return out


def minus(a: Assignment, b: Assignment) -> dict:
    out = {}
    for t, p in a.items():
        rest = frozenset(p) - b.get(t, frozenset())
        if rest:
            out[t] = rest
    return out


def intersect(a: Assignment, b: Assignment) -> dict:
    out = {}
    for t, p in a.items():
        both = frozenset(p) & b.get(t, frozenset())
        if both:
            out[t] = both
    return out


def normalize(a: Assignment) -> dict:
    return {t: frozenset(p) for t, p in a.items() if p}


def is_subset(a: Assignment, b: Assignment) -> bool:
    return all(frozenset(p) <= b.get(t, frozenset()) for t, p in a.items())
