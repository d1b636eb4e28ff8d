"""The controller's request and result types, its settings, and the per-operation record bound."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from . import records as r
from .delegation_tokens import TokenSettings
from .errors import ApiError, ErrorCode

PRODUCER_ID_BLOCK_SIZE = 1000

# Kafka's controller refuses any single user operation that would write more metadata records than
# this (ReplicationControlManager.MAX_RECORDS_PER_USER_OP): one request must not freeze the broker.
MAX_RECORDS_PER_USER_OP = 10_000


# -- request and result types -----------------------------------------------------------------------

@dataclass
class CreateTopicSpec:
    name: str
    num_partitions: int = -1                 # -1: the `num.partitions` default
    replication_factor: int = -1             # -1: the `default.replication.factor` default
    assignments: Mapping[int, Sequence[int]] = field(default_factory=dict)   # manual placement
    configs: Mapping[str, str | None] = field(default_factory=dict)


@dataclass
class CreateTopicResult:
    name: str
    error_code: int = 0
    error_message: str | None = None
    topic_id: uuid.UUID = r.ZERO_UUID
    num_partitions: int = -1
    replication_factor: int = -1
    configs: Mapping[str, str] = field(default_factory=dict)   # the topic's dynamic (non-default) configs


@dataclass
class DeleteTopicResult:
    name: str | None
    topic_id: uuid.UUID
    error_code: int = 0
    error_message: str | None = None


@dataclass
class CreatePartitionsSpec:
    name: str
    count: int
    assignments: Sequence[Sequence[int]] | None = None   # replicas of each NEW partition


@dataclass
class CreatePartitionsResult:
    name: str
    error_code: int = 0
    error_message: str | None = None


@dataclass
class ConfigResult:
    resource_type: int
    resource_name: str
    error_code: int = 0
    error_message: str | None = None


@dataclass
class ProducerIdBlock:
    first_producer_id: int
    size: int = PRODUCER_ID_BLOCK_SIZE


@dataclass
class ControllerSettings:
    num_partitions: int = 1                    # num.partitions
    default_replication_factor: int = 1        # default.replication.factor
    delete_topic_enable: bool = True           # delete.topic.enable
    broker_session_timeout_ms: int = 9000      # broker.session.timeout.ms
    unclean_leader_election_enable: bool = False   # unclean.leader.election.enable (static)
    auto_leader_rebalance_enable: bool = True      # auto.leader.rebalance.enable
    leader_imbalance_check_interval_s: float = 300.0   # leader.imbalance.check.interval.seconds
    leader_imbalance_per_broker_percentage: int = 10   # leader.imbalance.per.broker.percentage
    placement_seed: int | None = None          # seeds the replica placer's random start (tests)
    tokens: TokenSettings = field(default_factory=TokenSettings)   # delegation.token.*


def error_of(exc: ApiError) -> tuple[int, str | None]:
    return int(exc.code), exc.message


class BatchTooLarge(ApiError):
    """The whole operation would exceed MAX_RECORDS_PER_USER_OP; fails every item, like Kafka."""

    def __init__(self):
        super().__init__(ErrorCode.POLICY_VIOLATION, "Unable to perform excessively large batch operation.")


def check_room(needed: int, used: int) -> None:
    """Raise BatchTooLarge before any work if `needed` more records would overflow the operation."""
    if used + needed > MAX_RECORDS_PER_USER_OP:
        raise BatchTooLarge()

