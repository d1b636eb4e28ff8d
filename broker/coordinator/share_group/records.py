"""A share group's records in `__consumer_offsets` (Kafka's key versions 10-14), and their replay.

As for consumer groups (`consumer_group/records.py`, whose `GroupRecord` carries them), the builders
describe every change and `apply` is the only way the in-memory state changes.
"""

from __future__ import annotations

import uuid
from typing import Mapping

from protocol.generated.internal import (
    ShareGroupCurrentMemberAssignmentKey as CurrentKey,
    ShareGroupCurrentMemberAssignmentValue as CurrentValue,
    ShareGroupMemberMetadataKey as MemberKey,
    ShareGroupMemberMetadataValue as MemberValue,
    ShareGroupMetadataKey as GroupKey,
    ShareGroupMetadataValue as GroupValue,
    ShareGroupStatePartitionMetadataKey as StateKey,
    ShareGroupStatePartitionMetadataValue as StateValue,
    ShareGroupTargetAssignmentMemberKey as TargetMemberKey,
    ShareGroupTargetAssignmentMemberValue as TargetMemberValue,
    ShareGroupTargetAssignmentMetadataKey as TargetKey,
    ShareGroupTargetAssignmentMetadataValue as TargetValue,
)

from ..consumer_group.records import GroupRecord
from ..group_replay import assignment_of, replay_target
from .model import Assignment, ShareGroup, ShareMember, StateTopics


def group_epoch(group_id: str, epoch: int) -> GroupRecord:
    return GroupRecord(group_id, GroupKey(group_id=group_id), GroupValue(epoch=epoch))


def group_tombstone(group_id: str) -> GroupRecord:
    return GroupRecord(group_id, GroupKey(group_id=group_id), None)


def member_metadata(group_id: str, m: ShareMember) -> GroupRecord:
    return GroupRecord(group_id, MemberKey(group_id=group_id, member_id=m.member_id), MemberValue(
        rack_id=m.rack_id, client_id=m.client_id, client_host=m.client_host,
        subscribed_topic_names=list(m.subscribed_topic_names)))


def target_member(group_id: str, member_id: str, assignment: Assignment) -> GroupRecord:
    return GroupRecord(group_id, TargetMemberKey(group_id=group_id, member_id=member_id), TargetMemberValue(
        topic_partitions=[TargetMemberValue.TopicPartition(topic_id=t, partitions=sorted(p))
                          for t, p in sorted(assignment.items(), key=lambda kv: str(kv[0]))]))


def target_epoch(group_id: str, epoch: int) -> GroupRecord:
    return GroupRecord(group_id, TargetKey(group_id=group_id), TargetValue(assignment_epoch=epoch))


def current_assignment(group_id: str, m: ShareMember) -> GroupRecord:
    return GroupRecord(group_id, CurrentKey(group_id=group_id, member_id=m.member_id), CurrentValue(
        member_epoch=m.member_epoch, previous_member_epoch=m.previous_member_epoch, state=0,
        assigned_partitions=[CurrentValue.TopicPartitions(topic_id=t, partitions=sorted(p))
                             for t, p in sorted(m.assigned.items(), key=lambda kv: str(kv[0]))]))


def member_removal(group_id: str, member_id: str) -> list[GroupRecord]:
    return [GroupRecord(group_id, CurrentKey(group_id=group_id, member_id=member_id), None),
            GroupRecord(group_id, TargetMemberKey(group_id=group_id, member_id=member_id), None),
            GroupRecord(group_id, MemberKey(group_id=group_id, member_id=member_id), None)]


def state_partitions(group_id: str, topics: StateTopics, names: Mapping[uuid.UUID, str]) -> GroupRecord:
    """The share-partitions that may have state at their share coordinators (Kafka's initialized topics)."""
    return GroupRecord(group_id, StateKey(group_id=group_id), StateValue(initialized_topics=[
        StateValue.TopicPartitionsInfo(topic_id=t, topic_name=names.get(t, ""), partitions=sorted(p))
        for t, p in sorted(topics.items(), key=lambda kv: str(kv[0]))], deleting_topics=[]))


def group_removal(group_id: str) -> list[GroupRecord]:
    return [GroupRecord(group_id, StateKey(group_id=group_id), None),
            GroupRecord(group_id, TargetKey(group_id=group_id), None), group_tombstone(group_id)]


def apply(groups: dict[str, ShareGroup], record: GroupRecord) -> None:
    key, value, group_id = record.key, record.value, record.group_id
    group = groups.get(group_id)
    if isinstance(key, GroupKey):
        if value is None:
            groups.pop(group_id, None)
            return
        group = group or groups.setdefault(group_id, ShareGroup(group_id))
        group.group_epoch = value.epoch
        return
    if group is None:
        if value is None:
            return
        group = groups.setdefault(group_id, ShareGroup(group_id))
    if isinstance(key, MemberKey):
        if value is None:
            group.members.pop(key.member_id, None)
            return
        member = group.members.setdefault(key.member_id, ShareMember(key.member_id))
        member.rack_id, member.client_id, member.client_host = value.rack_id, value.client_id, value.client_host
        member.subscribed_topic_names = tuple(value.subscribed_topic_names or ())
    elif isinstance(key, TargetKey):
        replay_target(group, None, value)
    elif isinstance(key, TargetMemberKey):
        replay_target(group, key.member_id, value)
    elif isinstance(key, CurrentKey):
        member = group.members.get(key.member_id)
        if member is None:
            return
        if value is None:
            member.member_epoch, member.previous_member_epoch, member.assigned = 0, 0, {}
        else:
            member.member_epoch, member.previous_member_epoch = value.member_epoch, value.previous_member_epoch
            member.assigned = assignment_of(value.assigned_partitions)
    elif isinstance(key, StateKey):
        group.state_topics = {} if value is None else {
            t.topic_id: frozenset(t.partitions) for t in value.initialized_topics or ()}
    # ShareGroupPartitionMetadata: recomputed, not needed on replay
