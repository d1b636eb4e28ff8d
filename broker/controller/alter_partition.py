"""AlterPartition (KIP-497), the controller side: a partition leader proposes a new ISR.

The leader sends its leader epoch and the partition epoch it last saw; the controller checks them in
Kafka's order and commits a PartitionChangeRecord (bumping the partition epoch) or answers why not:

    NOT_CONTROLLER            the request knows a newer leader or partition epoch than this controller
    FENCED_LEADER_EPOCH       the sender's leader epoch is stale
    INVALID_REQUEST           the sender is not the leader; the ISR has members outside the replicas,
                              duplicates, or lacks the leader; RECOVERING with more than one member;
                              RECOVERED -> RECOVERING
    INVALID_UPDATE_VERSION    the partition epoch is stale (someone else changed the partition)
    INELIGIBLE_REPLICA        a proposed member is not registered, fenced, shutting down, or has another
                              broker epoch (OPERATION_NOT_ATTEMPTED before version 2)
    UNKNOWN_TOPIC_ID          (version 2+) / UNKNOWN_TOPIC_OR_PARTITION: no such topic or partition
    NOT_LEADER_OR_FOLLOWER    the change moved leadership away from the sender (unclean topics only)

A stale or unknown broker epoch of the sender fails the whole request with STALE_BROKER_EPOCH.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Sequence

from . import election
from .errors import ApiError, ErrorCode


@dataclass
class IsrProposal:
    """One partition of an AlterPartition request."""
    partition: int
    leader_epoch: int
    partition_epoch: int
    new_isr: Sequence[tuple[int, int]]             # (broker id, broker epoch or -1)
    topic_id: uuid.UUID | None = None              # version 2+
    topic_name: str | None = None                  # versions 0-1
    leader_recovery_state: int = election.RECOVERED


@dataclass
class IsrResult:
    partition: int
    error_code: int = 0
    leader: int = 0                # on an error Kafka leaves these at the wire defaults (0, [])
    leader_epoch: int = 0
    isr: list[int] = field(default_factory=list)
    partition_epoch: int = 0
    leader_recovery_state: int = 0
    topic_id: uuid.UUID | None = None
    topic_name: str | None = None


def check_broker_epoch(image, broker_id: int, broker_epoch: int) -> None:
    broker = image.brokers.get(broker_id)
    if broker is None:
        raise ApiError(ErrorCode.STALE_BROKER_EPOCH, f"No broker registration found for broker id {broker_id}")
    if broker.epoch != broker_epoch:
        raise ApiError(ErrorCode.STALE_BROKER_EPOCH,
                       f"Expected broker epoch {broker.epoch}, but got broker epoch {broker_epoch}")


def _valid_isr(replicas, isr) -> bool:
    return len(set(isr)) == len(isr) and all(b in replicas and b >= 0 for b in isr)


def _ineligible(image, new_isr) -> bool:
    for broker_id, broker_epoch in new_isr:
        broker = image.brokers.get(broker_id)
        if (broker is None or broker.in_controlled_shutdown or broker.fenced
                or (broker_epoch != -1 and broker.epoch != broker_epoch)):
            return True
    return False


def validate(image, broker_id: int, part, proposal: IsrProposal, version: int) -> ErrorCode:
    """Kafka's checks, in Kafka's order."""
    if proposal.leader_epoch > part.leader_epoch or proposal.partition_epoch > part.partition_epoch:
        return ErrorCode.NOT_CONTROLLER
    if proposal.leader_epoch < part.leader_epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    if broker_id != part.leader:
        return ErrorCode.INVALID_REQUEST
    if proposal.partition_epoch < part.partition_epoch:
        return ErrorCode.INVALID_UPDATE_VERSION
    isr = [b for b, _ in proposal.new_isr]
    if not _valid_isr(part.replicas, isr) or part.leader not in isr:
        return ErrorCode.INVALID_REQUEST
    if proposal.leader_recovery_state == election.RECOVERING and len(isr) > 1:
        return ErrorCode.INVALID_REQUEST
    if (part.leader_recovery_state == election.RECOVERED
            and proposal.leader_recovery_state == election.RECOVERING):
        return ErrorCode.INVALID_REQUEST
    if _ineligible(image, proposal.new_isr):
        return ErrorCode.INELIGIBLE_REPLICA if version > 1 else ErrorCode.OPERATION_NOT_ATTEMPTED
    return ErrorCode.NONE


def alter_partition(image, broker_id: int, broker_epoch: int, proposals: Sequence[IsrProposal],
                    version: int = 3, unclean_default: bool = False, node_id: int | None = None,
                    change_class=election.PartitionChange, validator=validate):
    """(records, [IsrResult] in request order); raises ApiError(STALE_BROKER_EPOCH) for the sender."""
    check_broker_epoch(image, broker_id, broker_epoch)
    records, results = [], []
    for proposal in proposals:
        result = IsrResult(partition=proposal.partition, topic_id=proposal.topic_id,
                           topic_name=proposal.topic_name)
        results.append(result)
        if version > 1:
            topic = image.topics_by_id.get(proposal.topic_id)
            unknown = ErrorCode.UNKNOWN_TOPIC_ID
        else:
            topic = image.topics.get(proposal.topic_name)
            unknown = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if topic is None:
            result.error_code = int(unknown)
            continue
        part = topic.partitions.get(proposal.partition)
        if part is None:
            result.error_code = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            continue
        error = validator(image, broker_id, part, proposal, version)
        if error != ErrorCode.NONE:
            result.error_code = int(error)
            continue
        mode = (election.UNCLEAN if election.unclean_enabled(image, topic.name, unclean_default, node_id)
                else election.ANY)
        change = change_class(topic.topic_id, part, election.acceptor(image), mode)
        change.target_isr = [b for b, _ in proposal.new_isr]
        change.target_recovery_state = proposal.leader_recovery_state
        record = change.build()
        if record is not None:
            records.append(record)
            image = image.apply([record])
            part = image.topics_by_id[topic.topic_id].partitions[proposal.partition]
            if record.leader not in (broker_id, election.NO_LEADER_CHANGE):
                result.error_code = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
                continue
        result.leader, result.leader_epoch = part.leader, part.leader_epoch
        result.isr, result.partition_epoch = list(part.isr), part.partition_epoch
        result.leader_recovery_state = part.leader_recovery_state
    return records, results
