"""Partition reassignment decisions (KIP-455, as KRaft's ReplicationControlManager): pure functions from
a metadata image to PartitionChangeRecords.

- **Start** (``alter``): the replicas become target + the current ones not in it (target first, so the
  preferred leader is the target's), with ``adding_replicas`` = target − current and
  ``removing_replicas`` = current − target. The new replicas follow the leader like any follower.
- **Complete** (``completions``): once every adding replica is in the ISR, the replicas become the
  target, the ISR loses the removed replicas (never emptied: else it waits), and a leader that is
  being removed hands over to the first target replica in the ISR (a leader change bumps the epoch).
  The active controller checks after every change that may allow it (start, AlterPartition).
- **Cancel** (target None): back to the replicas before the reassignment and the ISR without the
  added ones (INVALID_REPLICA_ASSIGNMENT if that would empty it); NO_REASSIGNMENT_IN_PROGRESS when
  none is ongoing.
"""

from __future__ import annotations

from typing import Sequence

from . import records as r
from .election import NO_LEADER_CHANGE, is_active
from .errors import ApiError, ErrorCode


def _change(topic, partition, *, replicas=None, isr=None, adding=None, removing=None,
            leader=NO_LEADER_CHANGE) -> r.PartitionChangeRecord:
    return r.PartitionChangeRecord(
        partition_id=partition.partition_id, topic_id=topic.topic_id, leader=leader,
        replicas=None if replicas is None else list(replicas), isr=None if isr is None else list(isr),
        adding_replicas=None if adding is None else list(adding),
        removing_replicas=None if removing is None else list(removing))


def _lookup(image, topic_name: str, partition_id: int):
    topic = image.topics.get(topic_name)
    partition = topic.partitions.get(partition_id) if topic is not None else None
    if partition is None:
        raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find the specified partition.")
    return topic, partition


def original_replicas(partition) -> list[int]:
    """The replicas before the ongoing reassignment (without the ones it adds)."""
    return [b for b in partition.replicas if b not in partition.adding_replicas]


def alter(image, topic_name: str, partition_id: int,
          target: Sequence[int] | None) -> r.PartitionChangeRecord | None:
    """The record starting (or cancelling, target None) one partition's reassignment; None when
    there is nothing to change. Raises ApiError with Kafka's code."""
    topic, partition = _lookup(image, topic_name, partition_id)
    if target is None:
        if not partition.adding_replicas and not partition.removing_replicas:
            raise ApiError(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                           "No ongoing reassignment for this partition.")
        return _revert(topic, partition)
    target = list(target)
    if not target:
        raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The target replica list is empty.")
    if len(set(target)) != len(target):
        raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                       "The target replica list contains duplicate entries.")
    unknown = [b for b in target if b not in image.brokers]
    if unknown:
        raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                       f"The target replica list includes brokers that are not registered: {unknown}")
    current = original_replicas(partition)
    if target == current and not partition.adding_replicas and not partition.removing_replicas:
        return None
    replicas = target + [b for b in current if b not in target]
    return _change(topic, partition, replicas=replicas,
                   adding=[b for b in target if b not in current],
                   removing=[b for b in current if b not in target])


def _revert(topic, partition) -> r.PartitionChangeRecord:
    original = original_replicas(partition)
    isr = [b for b in partition.isr if b in original]
    if not isr:
        raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                       "Cancelling would leave the partition without an in-sync replica.")
    leader = NO_LEADER_CHANGE if partition.leader in isr else isr[0]
    return _change(topic, partition, replicas=original, isr=isr, adding=[], removing=[], leader=leader)


def completion(image, topic, partition) -> r.PartitionChangeRecord | None:
    """The record completing this partition's reassignment, if it can complete now."""
    adding, removing = partition.adding_replicas, partition.removing_replicas
    if not adding and not removing:
        return None
    if any(b not in partition.isr for b in adding):
        return None
    replicas = [b for b in partition.replicas if b not in removing]
    isr = [b for b in partition.isr if b not in removing]
    if not isr:
        return None
    leader = NO_LEADER_CHANGE
    if partition.leader not in replicas:
        candidates = [b for b in replicas if b in isr and is_active(image, b)]
        if not candidates:
            return None
        leader = candidates[0]
    return _change(topic, partition, replicas=replicas, isr=isr, adding=[], removing=[], leader=leader)


def completions(image, only: set[tuple[str, int]] | None = None) -> list:
    """Records completing every ongoing reassignment that can complete (optionally only these)."""
    out = []
    for topic in image.topics.values():
        for partition in topic.partitions.values():
            if only is not None and (topic.name, partition.partition_id) not in only:
                continue
            record = completion(image, topic, partition)
            if record is not None:
                out.append(record)
    return out


def ongoing(image, wanted: Sequence[tuple[str, Sequence[int]]] | None):
    """ListPartitionReassignments: [(topic, [(partition, replicas, adding, removing)])]."""
    out = []
    if wanted is None:
        wanted = [(name, None) for name in sorted(image.topics)]
    for name, indexes in wanted:
        topic = image.topics.get(name)
        if topic is None:
            continue
        entries = []
        for pid in sorted(topic.partitions) if indexes is None else indexes:
            partition = topic.partitions.get(pid)
            if partition is not None and (partition.adding_replicas or partition.removing_replicas):
                entries.append((pid, list(partition.replicas), list(partition.adding_replicas),
                                list(partition.removing_replicas)))
        if entries:
            out.append((name, entries))
    return out
