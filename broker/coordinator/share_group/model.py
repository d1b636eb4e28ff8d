"""A share group's data and its `simple` assignor."""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field
from typing import Mapping, Optional

Assignment = Mapping[uuid.UUID, frozenset]   # topic id -> partitions
StateTopics = dict[uuid.UUID, frozenset]     # topic id -> partitions whose share state may exist

JOIN_EPOCH = 0
LEAVE_EPOCH = -1


class ShareGroupState(enum.Enum):
    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass
class ShareGroupConfig:
    """Kafka's group.share.* broker settings (their defaults)."""
    session_timeout_ms: int = 45_000          # group.share.session.timeout.ms
    heartbeat_interval_ms: int = 5_000        # group.share.heartbeat.interval.ms
    max_size: int = 200                       # group.share.max.size
    record_lock_duration_ms: int = 30_000     # group.share.record.lock.duration.ms
    delivery_count_limit: int = 5             # group.share.delivery.count.limit
    partition_max_record_locks: int = 2000    # group.share.partition.max.record.locks


@dataclass
class ShareMember:
    member_id: str
    rack_id: Optional[str] = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    member_epoch: int = 0
    previous_member_epoch: int = 0
    assigned: Assignment = field(default_factory=dict)


@dataclass
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    subscription_fingerprint: tuple = ()
    # share-partitions that may have state at their share coordinators: assigned at some point, or
    # set by AlterShareGroupOffsets (Kafka's ShareGroupStatePartitionMetadata initialized topics)
    state_topics: StateTopics = field(default_factory=dict)

    def state(self) -> ShareGroupState:
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY


def simple_assign(members: Mapping[str, frozenset], topics: Mapping[uuid.UUID, int]) -> dict:
    """Kafka's `simple` share assignor, homogeneous or not, topic by topic: with at least as many
    partitions as subscribers the partitions are dealt out round-robin; with fewer, each subscriber
    gets one, so a partition is shared by several members."""
    out: dict[str, dict] = {m: {} for m in members}
    for topic_id in sorted(topics, key=str):
        subscribers = sorted(m for m, subs in members.items() if topic_id in subs)
        count = topics[topic_id]
        if not subscribers or count == 0:
            continue
        if count >= len(subscribers):
            pairs = [(subscribers[p % len(subscribers)], p) for p in range(count)]
        else:
            pairs = [(m, i % count) for i, m in enumerate(subscribers)]
        for member_id, partition in pairs:
            out[member_id][topic_id] = out[member_id].get(topic_id, frozenset()) | {partition}
    return out
