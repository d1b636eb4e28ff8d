"""What the coordinators write to their internal topics, as typed records.

The cores emit these and rebuild themselves from them; `serde.py` turns them into Kafka's exact
key/value bytes for `__consumer_offsets` and `__transaction_state`. A `value` of None is a tombstone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Protocol, Sequence, Union

from protocol import ErrorCode

from .group import OffsetAndMetadata
from .pending import Pending


@dataclass(frozen=True)
class MemberSnapshot:
    member_id: str
    group_instance_id: Optional[str]
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupSnapshot:
    protocol_type: str
    generation_id: int
    protocol_name: Optional[str]
    leader_id: Optional[str]
    state_timestamp: int
    members: tuple[MemberSnapshot, ...]


@dataclass(frozen=True)
class GroupMetadataRecord:
    group_id: str
    value: Optional[GroupSnapshot]


@dataclass(frozen=True)
class OffsetCommitRecord:
    group_id: str
    topic: str
    partition: int
    value: Optional[OffsetAndMetadata]


@dataclass(frozen=True)
class TxnPartitions:
    topic: str
    partitions: tuple[int, ...]


@dataclass(frozen=True)
class TransactionSnapshot:
    producer_id: int
    previous_producer_id: int
    next_producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: int  # TxnState value, as Kafka stores it
    partitions: tuple[TxnPartitions, ...]
    last_update_timestamp: int
    start_timestamp: int


@dataclass(frozen=True)
class TransactionRecord:
    transactional_id: str
    value: Optional[TransactionSnapshot]


GroupLogRecord = Union[GroupMetadataRecord, OffsetCommitRecord]


class GroupLog(Protocol):
    """Where the group coordinator writes; raises if the append itself fails (the request then gets
    an error)."""

    def append(self, group_id: str, records: Sequence[GroupLogRecord], *,
               producer_id: int = -1, producer_epoch: int = -1) -> Pending[ErrorCode]:
        """Append to the group's `__consumer_offsets` partition; a producer id marks a transactional
        write (TxnOffsetCommit) whose records only count once the commit marker arrives.

        Answers the write's acknowledgement: NONE once it is committed (acks=all: the partition's
        high watermark covers it), else the error that kept it from committing. What a write makes
        visible to other requests waits for it (Kafka's pending offset commits)."""


class TransactionLog(Protocol):
    def append(self, record: TransactionRecord) -> Pending[ErrorCode]:
        """Append to the transactional id's `__transaction_state` partition; the answer completes
        once the write commits (NONE) or fails to."""


class MemoryGroupLog:
    """An in-memory GroupLog for tests and for running without storage. Writes are acknowledged at
    once, unless `hold_acks` is set: then they wait for `acknowledge()` (a write replicating slowly)."""

    def __init__(self) -> None:
        self.entries: list[tuple[str, tuple[GroupLogRecord, ...], int, int]] = []
        self.fail_with: Optional[Exception] = None
        self.hold_acks = False
        self.unacknowledged: list[Pending[ErrorCode]] = []

    def append(self, group_id, records, *, producer_id=-1, producer_epoch=-1) -> Pending[ErrorCode]:
        if self.fail_with is not None:
            raise self.fail_with
        self.entries.append((group_id, tuple(records), producer_id, producer_epoch))
        if not self.hold_acks:
            return Pending.completed(ErrorCode.NONE)
        written: Pending[ErrorCode] = Pending()
        self.unacknowledged.append(written)
        return written

    def acknowledge(self, code: ErrorCode = ErrorCode.NONE, count: Optional[int] = None) -> None:
        """Acknowledge the oldest `count` held writes (all by default) with `code`."""
        count = len(self.unacknowledged) if count is None else count
        done, self.unacknowledged = self.unacknowledged[:count], self.unacknowledged[count:]
        for written in done:
            written.complete(code)

    def records(self) -> list[GroupLogRecord]:
        return [r for _, recs, _, _ in self.entries for r in recs]


class MemoryTransactionLog:
    """An in-memory TransactionLog; `hold_acks` makes writes wait for `acknowledge()`, as MemoryGroupLog."""

    def __init__(self) -> None:
        self.records: list[TransactionRecord] = []
        self.fail_with: Optional[Exception] = None
        self.hold_acks = False
        self.unacknowledged: list[Pending[ErrorCode]] = []

    def append(self, record: TransactionRecord) -> Pending[ErrorCode]:
        if self.fail_with is not None:
            raise self.fail_with
        self.records.append(record)
        if not self.hold_acks:
            return Pending.completed(ErrorCode.NONE)
        written: Pending[ErrorCode] = Pending()
        self.unacknowledged.append(written)
        return written

    def acknowledge(self, code: ErrorCode = ErrorCode.NONE) -> None:
        """Acknowledge every held write with `code`."""
        done, self.unacknowledged = self.unacknowledged, []
        for written in done:
            written.complete(code)
