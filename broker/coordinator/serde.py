"""Typed coordinator records <-> Kafka's key/value bytes in `__consumer_offsets` / `__transaction_state`.

The byte layouts are protocol's (`protocol.internal_topics`); this module only maps them to the
cores' records and picks the versions Kafka's coordinators write: offset commit value v3 (v1 when an
explicit expire timestamp is set), group metadata value v3, transaction log value v0.
"""

from __future__ import annotations

from typing import Optional

from protocol import DecodeError
from protocol import internal_topics as it
from protocol.generated.internal import GroupMetadataValue, OffsetCommitKey, OffsetCommitValue, TransactionLogValue

from .consumer_group.records import GroupRecord
from .group import OffsetAndMetadata
from .log_records import (GroupMetadataRecord, GroupSnapshot, MemberSnapshot, OffsetCommitRecord,
                          TransactionRecord, TransactionSnapshot, TxnPartitions)


_CONSUMER_GROUP_KEYS = {key for key, _ in it.CONSUMER_GROUP_RECORDS.values()}
SHARE_GROUP_KEYS = {key for key, _ in it.SHARE_GROUP_RECORDS.values()}


class SerdeError(ValueError):
    """A record in an internal topic that is not in any layout we know."""


# ---- __consumer_offsets ---------------------------------------------------------------------------
def encode_group_record(record) -> tuple[bytes, Optional[bytes]]:
    if isinstance(record, GroupRecord):   # a KIP-848 consumer group's record: value version 0
        key = it.encode_consumer_group_key(record.key)
        return key, None if record.value is None else it.encode_group_value(record.value, 0)
    if isinstance(record, OffsetCommitRecord):
        key = it.encode_offset_commit_key(record.group_id, record.topic, record.partition)
        v = record.value
        if v is None:
            return key, None
        value = OffsetCommitValue(offset=v.offset, leader_epoch=v.leader_epoch, metadata=v.metadata,
                                  commit_timestamp=v.commit_timestamp, expire_timestamp=v.expire_timestamp)
        return key, it.encode_group_value(value, 1 if v.expire_timestamp >= 0 else 3)
    if isinstance(record, GroupMetadataRecord):
        key = it.encode_group_metadata_key(record.group_id)
        g = record.value
        if g is None:
            return key, None
        value = GroupMetadataValue(
            protocol_type=g.protocol_type, generation=g.generation_id, protocol=g.protocol_name,
            leader=g.leader_id, current_state_timestamp=g.state_timestamp, members=[
                GroupMetadataValue.MemberMetadata(
                    member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                    client_host=m.client_host, rebalance_timeout=m.rebalance_timeout_ms,
                    session_timeout=m.session_timeout_ms, subscription=m.subscription, assignment=m.assignment)
                for m in g.members])
        return key, it.encode_group_value(value, 3)
    raise TypeError(f"not a group log record: {record!r}")


def decode_group_record(key, value):
    """An OffsetCommitRecord, GroupMetadataRecord or consumer group `GroupRecord` (value None =
    tombstone); SerdeError if unknown."""
    try:
        k = it.decode_group_key(bytes(key))
        v = it.decode_group_value(k, None if value is None else bytes(value))
    except DecodeError as exc:
        raise SerdeError(str(exc)) from None
    if type(k) in _CONSUMER_GROUP_KEYS or type(k) in SHARE_GROUP_KEYS:   # KIP-848 / KIP-932 groups
        return GroupRecord(k.group_id, k, v)
    if isinstance(k, OffsetCommitKey):
        offset = None if v is None else OffsetAndMetadata(v.offset, v.leader_epoch, v.metadata or "",
                                                          v.commit_timestamp, v.expire_timestamp)
        return OffsetCommitRecord(k.group, k.topic, k.partition, offset)
    if v is None:
        return GroupMetadataRecord(k.group, None)
    members = tuple(MemberSnapshot(
        m.member_id, m.group_instance_id, m.client_id, m.client_host,
        m.rebalance_timeout if m.rebalance_timeout >= 0 else m.session_timeout, m.session_timeout,
        bytes(m.subscription or b""), bytes(m.assignment or b"")) for m in v.members)
    return GroupMetadataRecord(k.group, GroupSnapshot(v.protocol_type or "", v.generation, v.protocol, v.leader,
                                                      v.current_state_timestamp, members))


# ---- __transaction_state --------------------------------------------------------------------------
def encode_txn_record(record: TransactionRecord) -> tuple[bytes, Optional[bytes]]:
    key = it.encode_transaction_key(record.transactional_id)
    t = record.value
    if t is None:
        return key, None
    value = TransactionLogValue(
        producer_id=t.producer_id, previous_producer_id=t.previous_producer_id,
        next_producer_id=t.next_producer_id, producer_epoch=t.producer_epoch, transaction_timeout_ms=t.timeout_ms,
        transaction_status=t.state, transaction_partitions=[
            TransactionLogValue.PartitionsSchema(topic=p.topic, partition_ids=list(p.partitions))
            for p in t.partitions],
        transaction_last_update_timestamp_ms=t.last_update_timestamp,
        transaction_start_timestamp_ms=t.start_timestamp)
    return key, it.encode_transaction_value(value, 0)


def decode_txn_record(key, value) -> TransactionRecord:
    try:
        k = it.decode_transaction_key(bytes(key))
        v = it.decode_transaction_value(None if value is None else bytes(value))
    except DecodeError as exc:
        raise SerdeError(str(exc)) from None
    if v is None:
        return TransactionRecord(k.transactional_id, None)
    partitions = tuple(TxnPartitions(p.topic, tuple(p.partition_ids)) for p in v.transaction_partitions or ())
    return TransactionRecord(k.transactional_id, TransactionSnapshot(
        v.producer_id, v.previous_producer_id, v.next_producer_id, v.producer_epoch, v.transaction_timeout_ms,
        v.transaction_status, partitions, v.transaction_last_update_timestamp_ms,
        v.transaction_start_timestamp_ms))


# ---- partitioning ---------------------------------------------------------------------------------
def java_string_hash(value: str) -> int:
    """Java's String.hashCode (UTF-16 code units, 32-bit overflow)."""
    h = 0
    data = value.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(key: str, partitions: int) -> int:
    """Kafka's Utils.abs(hashCode) % n (where abs(Integer.MIN_VALUE) is 0)."""
    h = java_string_hash(key)
    return (0 if h == -(1 << 31) else abs(h)) % partitions
