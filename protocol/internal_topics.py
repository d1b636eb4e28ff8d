"""Keys and values of `__consumer_offsets` and `__transaction_state` records.

Each key and value is an int16 version followed by the body. In `__consumer_offsets` the key's
version selects its type: 0 and 1 are offset commits (`OffsetCommitKey`, value `OffsetCommitValue`),
2 is group metadata (`GroupMetadataKey`, value `GroupMetadataValue`), 3-8 are KIP-848 consumer group
records (`CONSUMER_GROUP_RECORDS`: group epoch, partition metadata, member metadata, target assignment
metadata and members, current member assignments), 9-15 are KIP-932 share group records
(`SHARE_GROUP_RECORDS`, the same shapes for share groups). A null value is a tombstone.

In `__share_group_state` (the share coordinator's topic) key version 0 is a `ShareSnapshotKey` with a
`ShareSnapshotValue` (a share-partition's whole state), 1 a `ShareUpdateKey` with a `ShareUpdateValue`
(a change on top of the last snapshot).
"""

from protocol.errors import DecodeError
from protocol.generated.internal import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupMemberMetadataKey,
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataKey,
    ShareGroupMetadataValue,
    ShareGroupPartitionMetadataKey,
    ShareGroupPartitionMetadataValue,
    ShareGroupStatePartitionMetadataKey,
    ShareGroupStatePartitionMetadataValue,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupTargetAssignmentMemberValue,
    ShareGroupTargetAssignmentMetadataKey,
    ShareGroupTargetAssignmentMetadataValue,
    ShareSnapshotKey,
    ShareSnapshotValue,
    ShareUpdateKey,
    ShareUpdateValue,
    TransactionLogKey,
    TransactionLogValue,
)
from protocol.versioned import decode_versioned, encode_versioned, read_version

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
# key version (the record type) -> (key class, value class) of the consumer group records
CONSUMER_GROUP_RECORDS = {
    3: (ConsumerGroupMetadataKey, ConsumerGroupMetadataValue),
    4: (ConsumerGroupPartitionMetadataKey, ConsumerGroupPartitionMetadataValue),
    5: (ConsumerGroupMemberMetadataKey, ConsumerGroupMemberMetadataValue),
    6: (ConsumerGroupTargetAssignmentMetadataKey, ConsumerGroupTargetAssignmentMetadataValue),
    7: (ConsumerGroupTargetAssignmentMemberKey, ConsumerGroupTargetAssignmentMemberValue),
    8: (ConsumerGroupCurrentMemberAssignmentKey, ConsumerGroupCurrentMemberAssignmentValue),
}
SHARE_GROUP_RECORDS = {
    9: (ShareGroupPartitionMetadataKey, ShareGroupPartitionMetadataValue),
    10: (ShareGroupMemberMetadataKey, ShareGroupMemberMetadataValue),
    11: (ShareGroupMetadataKey, ShareGroupMetadataValue),
    12: (ShareGroupTargetAssignmentMetadataKey, ShareGroupTargetAssignmentMetadataValue),
    13: (ShareGroupTargetAssignmentMemberKey, ShareGroupTargetAssignmentMemberValue),
    14: (ShareGroupCurrentMemberAssignmentKey, ShareGroupCurrentMemberAssignmentValue),
    15: (ShareGroupStatePartitionMetadataKey, ShareGroupStatePartitionMetadataValue),
}
_TYPED_GROUP_RECORDS = {**CONSUMER_GROUP_RECORDS, **SHARE_GROUP_RECORDS}
_VALUE_OF_KEY = {key: value for key, value in _TYPED_GROUP_RECORDS.values()}
SHARE_STATE_RECORDS = {0: (ShareSnapshotKey, ShareSnapshotValue), 1: (ShareUpdateKey, ShareUpdateValue)}


def encode_offset_commit_key(group, topic, partition):
    key = OffsetCommitKey(group=group, topic=topic, partition=partition)
    return encode_versioned(key, OFFSET_COMMIT_KEY_VERSION)


def encode_consumer_group_key(key):
    """A consumer (or share) group record's key: its version is the record type."""
    version = next(v for v, (cls, _) in _TYPED_GROUP_RECORDS.items() if isinstance(key, cls))
    return encode_versioned(key, version)


def encode_group_metadata_key(group):
    return encode_versioned(GroupMetadataKey(group=group), GROUP_METADATA_KEY_VERSION)


def decode_group_key(data):
    """An `OffsetCommitKey`, a `GroupMetadataKey` or a consumer group record key, chosen by the key's version."""
    version = read_version(data)
    if version in (0, 1):
        return decode_versioned(OffsetCommitKey, data)[1]
    if version == GROUP_METADATA_KEY_VERSION:
        return decode_versioned(GroupMetadataKey, data)[1]
    if version in _TYPED_GROUP_RECORDS:
        return decode_versioned(_TYPED_GROUP_RECORDS[version][0], data)[1]
    raise DecodeError(f"unknown __consumer_offsets key version {version}")


def encode_group_value(value, version=None):
    """An `OffsetCommitValue` or `GroupMetadataValue` (default: the spec's highest version)."""
    return encode_versioned(value, version)


def decode_group_value(key, data):
    """The value for a decoded key: None for a tombstone."""
    if data is None:
        return None
    cls = _VALUE_OF_KEY.get(type(key)) or (OffsetCommitValue if isinstance(key, OffsetCommitKey)
                                           else GroupMetadataValue)
    return decode_versioned(cls, data)[1]


def encode_transaction_key(transactional_id):
    return encode_versioned(TransactionLogKey(transactional_id=transactional_id), 0)


def decode_transaction_key(data):
    return decode_versioned(TransactionLogKey, data)[1]


def encode_transaction_value(value, version=None):
    return encode_versioned(value, version)


def decode_transaction_value(data):
    """A `TransactionLogValue`, or None for a tombstone."""
    return None if data is None else decode_versioned(TransactionLogValue, data)[1]


def encode_share_state_record(key, value):
    """A `__share_group_state` record: (key bytes, value bytes or None for a tombstone)."""
    version = next(v for v, (cls, _) in SHARE_STATE_RECORDS.items() if isinstance(key, cls))
    return encode_versioned(key, version), None if value is None else encode_versioned(value, 0)


def decode_share_state_record(key_data, value_data):
    """(key, value or None) of a `__share_group_state` record."""
    version = read_version(key_data)
    if version not in SHARE_STATE_RECORDS:
        raise DecodeError(f"unknown __share_group_state key version {version}")
    key_cls, value_cls = SHARE_STATE_RECORDS[version]
    key = decode_versioned(key_cls, key_data)[1]
    return key, None if value_data is None else decode_versioned(value_cls, value_data)[1]
