"""A consumer group's records in `__consumer_offsets`, in Kafka's layouts (key versions 3 and 5-8).

`GroupRecord` carries a generated key body and value body (None = tombstone); `serde.py` writes it as
an int16-versioned key and value. The builders here are the only way the coordinator describes a
change, and `apply` (replay) is the only way its state changes: what is in memory is always what
the log says.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Optional

from protocol.generated.internal import (
    ConsumerGroupCurrentMemberAssignmentKey as CurrentKey,
    ConsumerGroupCurrentMemberAssignmentValue as CurrentValue,
    ConsumerGroupMemberMetadataKey as MemberKey,
    ConsumerGroupMemberMetadataValue as MemberValue,
    ConsumerGroupMetadataKey as GroupKey,
    ConsumerGroupMetadataValue as GroupValue,
    ConsumerGroupPartitionMetadataKey as PartitionMetadataKey,
    ConsumerGroupTargetAssignmentMemberKey as TargetMemberKey,
    ConsumerGroupTargetAssignmentMemberValue as TargetMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey as TargetKey,
    ConsumerGroupTargetAssignmentMetadataValue as TargetValue,
)

from .model import Assignment, ClassicMetadata, ConsumerGroup, ConsumerMember, MemberState

@dataclass(frozen=True)
class GroupRecord:
    group_id: str
    key: object
    value: Optional[object]


def group_epoch(group_id: str, epoch: int) -> GroupRecord:
    return GroupRecord(group_id, GroupKey(group_id=group_id), GroupValue(epoch=epoch))


def group_tombstone(group_id: str) -> GroupRecord:
    return GroupRecord(group_id, GroupKey(group_id=group_id), None)


def member_metadata(group_id: str, m: ConsumerMember) -> GroupRecord:
    value = MemberValue(
        instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id, client_host=m.client_host,
        subscribed_topic_names=list(m.subscribed_topic_names),
        subscribed_topic_regex=m.subscribed_topic_regex or "",   # "" for none, as Kafka writes it
        rebalance_timeout_ms=m.rebalance_timeout_ms, server_assignor=m.server_assignor,
        # an explicit null tag for a consumer-protocol member, as Kafka 3.9 writes it: its reader takes
        # a missing tag for an empty (non-null) struct, that is for a classic-protocol member
        classic_member_metadata=None)
    if m.classic is not None:
        value.classic_member_metadata = MemberValue.ClassicMemberMetadata(
            session_timeout_ms=m.classic.session_timeout_ms,
            supported_protocols=[MemberValue.ClassicProtocol(name=n, metadata=bytes(meta))
                                 for n, meta in m.classic.protocols])
    return GroupRecord(group_id, MemberKey(group_id=group_id, member_id=m.member_id), value)


def member_tombstone(group_id: str, member_id: str) -> GroupRecord:
    return GroupRecord(group_id, MemberKey(group_id=group_id, member_id=member_id), None)


def target_member(group_id: str, member_id: str, assignment: Assignment) -> GroupRecord:
    return GroupRecord(group_id, TargetMemberKey(group_id=group_id, member_id=member_id), TargetMemberValue(
        topic_partitions=[TargetMemberValue.TopicPartition(topic_id=t, partitions=sorted(p))
                          for t, p in sorted(assignment.items(), key=lambda kv: str(kv[0]))]))


def target_member_tombstone(group_id: str, member_id: str) -> GroupRecord:
    return GroupRecord(group_id, TargetMemberKey(group_id=group_id, member_id=member_id), None)


def target_epoch(group_id: str, epoch: int) -> GroupRecord:
    return GroupRecord(group_id, TargetKey(group_id=group_id), TargetValue(assignment_epoch=epoch))


def target_tombstone(group_id: str) -> GroupRecord:
    return GroupRecord(group_id, TargetKey(group_id=group_id), None)


def current_assignment(group_id: str, m: ConsumerMember) -> GroupRecord:
    return GroupRecord(group_id, CurrentKey(group_id=group_id, member_id=m.member_id), CurrentValue(
        member_epoch=m.member_epoch, previous_member_epoch=m.previous_member_epoch, state=int(m.state),
        assigned_partitions=_partitions(m.assigned), partitions_pending_revocation=_partitions(m.pending_revocation)))


def current_tombstone(group_id: str, member_id: str) -> GroupRecord:
    return GroupRecord(group_id, CurrentKey(group_id=group_id, member_id=member_id), None)


def _partitions(assignment: Assignment) -> list:
    return [CurrentValue.TopicPartitions(topic_id=t, partitions=sorted(p))
            for t, p in sorted(assignment.items(), key=lambda kv: str(kv[0]))]


def _assignment(rows) -> dict[uuid.UUID, frozenset]:
    return {r.topic_id: frozenset(r.partitions) for r in rows or () if r.partitions}


# ---- replay -----------------------------------------------------------------------------------------
def apply(groups: dict[str, ConsumerGroup], record: GroupRecord) -> None:
    """Replay one record into `groups` (the coordinator's state changes only through here)."""
    key, value, group_id = record.key, record.value, record.group_id
    group = groups.get(group_id)
    if isinstance(key, GroupKey):
        if value is None:
            if group is not None:
                group.deleted = True
                groups.pop(group_id, None)
            return
        group = group or groups.setdefault(group_id, ConsumerGroup(group_id))
        group.group_epoch = value.epoch
        return
    if isinstance(key, PartitionMetadataKey):
        return  # Kafka 4 keeps a metadata hash instead; we recompute subscriptions on load
    if group is None:
        if value is None:
            return   # a tombstone never brings a group back
        group = groups.setdefault(group_id, ConsumerGroup(group_id))
    if isinstance(key, MemberKey):
        if value is None:
            group.drop_member(key.member_id)
            return
        member = group.members.get(key.member_id) or ConsumerMember(key.member_id)
        member.instance_id, member.rack_id = value.instance_id, value.rack_id
        member.client_id, member.client_host = value.client_id, value.client_host
        member.subscribed_topic_names = tuple(value.subscribed_topic_names or ())
        member.subscribed_topic_regex = value.subscribed_topic_regex or None
        member.rebalance_timeout_ms, member.server_assignor = value.rebalance_timeout_ms, value.server_assignor
        classic = value.classic_member_metadata
        member.classic = ClassicMetadata(classic.session_timeout_ms, tuple(
            (p.name, bytes(p.metadata)) for p in classic.supported_protocols)) \
            if classic is not None and classic.supported_protocols else None
        group.put_member(member)
    elif isinstance(key, TargetKey):
        if value is not None:
            group.assignment_epoch = value.assignment_epoch
    elif isinstance(key, TargetMemberKey):
        if value is None:
            group.target.pop(key.member_id, None)
        else:
            group.target[key.member_id] = _assignment(value.topic_partitions)
    elif isinstance(key, CurrentKey):
        member = group.members.get(key.member_id)
        if member is None:
            return
        group.release(member)
        if value is None:
            member.assigned, member.pending_revocation = {}, {}
            member.member_epoch, member.previous_member_epoch, member.state = 0, -1, MemberState.STABLE
        else:
            member.member_epoch, member.previous_member_epoch = value.member_epoch, value.previous_member_epoch
            member.state = MemberState(value.state) if value.state in MemberState._value2member_map_ \
                else MemberState.UNKNOWN
            member.assigned = _assignment(value.assigned_partitions)
            member.pending_revocation = _assignment(value.partitions_pending_revocation)
        group.claim(member)
