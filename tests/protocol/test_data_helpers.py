"""Internal-topic records, KRaft metadata records, consumer-protocol structs and the KIP-511 answer."""

import struct
import uuid

import pytest

import protocol
from protocol import api_versions, consumer_protocol, internal_topics, metadata_records
from protocol.generated import internal, metadata


def test_offset_commit_key_and_value():
    key = internal_topics.encode_offset_commit_key("g", "t", 3)
    assert key == struct.pack(">hh", 1, 1) + b"g" + struct.pack(">h", 1) + b"t" + struct.pack(">i", 3)
    decoded = internal_topics.decode_group_key(key)
    assert isinstance(decoded, internal.OffsetCommitKey) and (decoded.group, decoded.topic, decoded.partition) == ("g", "t", 3)
    value = internal.OffsetCommitValue(offset=42, leader_epoch=5, metadata="m", commit_timestamp=1000)
    for version in range(0, 5):
        data = internal_topics.encode_group_value(value, version)
        back = internal_topics.decode_group_value(decoded, data)
        assert back.offset == 42 and back.metadata == "m"
    assert internal_topics.decode_group_value(decoded, None) is None


def test_group_metadata_key_selects_group_value():
    key = internal_topics.decode_group_key(internal_topics.encode_group_metadata_key("grp"))
    assert isinstance(key, internal.GroupMetadataKey) and key.group == "grp"
    member = internal.GroupMetadataValue.MemberMetadata(member_id="m1", client_id="c", client_host="/h",
                                                        subscription=b"s", assignment=b"a")
    value = internal.GroupMetadataValue(protocol_type="consumer", generation=3, protocol="range",
                                        leader="m1", current_state_timestamp=5, members=[member])
    assert internal_topics.decode_group_value(key, internal_topics.encode_group_value(value)) == value


def test_unknown_key_version_is_decode_error():
    with pytest.raises(protocol.DecodeError):
        internal_topics.decode_group_key(struct.pack(">h", 9) + b"xx")
    with pytest.raises(protocol.DecodeError):
        internal_topics.decode_group_key(b"\x00")


def test_transaction_log():
    key = internal_topics.encode_transaction_key("tx")
    assert key == struct.pack(">hh", 0, 2) + b"tx"
    assert internal_topics.decode_transaction_key(key).transactional_id == "tx"
    value = internal.TransactionLogValue(producer_id=7, producer_epoch=1, transaction_timeout_ms=60000,
                                         transaction_status=2, previous_producer_id=6,
                                         transaction_partitions=[internal.TransactionLogValue.PartitionsSchema(
                                             topic="t", partition_ids=[0, 1])])
    data = internal_topics.encode_transaction_value(value)
    assert data[:2] == b"\x00\x01"
    assert internal_topics.decode_transaction_value(data) == value
    with pytest.raises(protocol.EncodeError):  # v0 has no PreviousProducerId
        internal_topics.encode_transaction_value(value, 0)


def test_metadata_records_frame():
    topic_id = uuid.uuid4()
    record = metadata.TopicRecord(name="t", topic_id=topic_id)
    data = metadata_records.encode_metadata_record(record)
    assert data[:3] == bytes([1, 2, 0])  # frame version, record type (TopicRecord = 2), version
    assert metadata_records.decode_metadata_record(data) == (record, 0)
    partition = metadata.PartitionRecord(partition_id=1, topic_id=topic_id, replicas=[1], isr=[1], leader=1)
    for version in (0, 1, 2):
        data = metadata_records.encode_metadata_record(partition, version)
        assert metadata_records.decode_metadata_record(data) == (partition, version)
    with pytest.raises(protocol.UnsupportedVersionError):
        metadata_records.decode_metadata_record(bytes([1, 99, 0]))
    with pytest.raises(protocol.DecodeError):
        metadata_records.decode_metadata_record(bytes([2, 2, 0]))


def test_consumer_protocol_subscription_and_assignment():
    sub = consumer_protocol.Subscription(topics=["a", "b"], user_data=None, owned_partitions=[
        consumer_protocol.TopicPartition(topic="a", partitions=[0, 2])], generation_id=4, rack_id="r1")
    for version in range(4):
        data = consumer_protocol.encode_subscription(sub, version)
        got_version, got = consumer_protocol.decode_subscription(data)
        assert got_version == version and got.topics == ["a", "b"]
    # a newer version than we know is read with our highest (Kafka's forward compatibility)
    data = struct.pack(">h", 7) + consumer_protocol.encode_subscription(sub, 3)[2:] + b"future"
    assert consumer_protocol.decode_subscription(data) == (3, sub)
    asg = consumer_protocol.Assignment(assigned_partitions=[
        consumer_protocol.Assignment.TopicPartition(topic="a", partitions=[1])], user_data=b"u")
    assert consumer_protocol.decode_assignment(consumer_protocol.encode_assignment(asg, 0)) == (0, asg)
    # v0 subscription bytes as Kafka clients write them
    v0 = consumer_protocol.encode_subscription(consumer_protocol.Subscription(topics=["t"]), 0)
    assert v0 == bytes.fromhex("0000 00000001 0001") + b"t" + bytes.fromhex("ffffffff")


def test_kip511_unsupported_version_response():
    data = api_versions.unsupported_version_response(11, {18: (0, 3), 3: (0, 12)})
    # header v0 (correlation id only), error 35, two entries sorted by key, throttle absent in v0
    assert data == bytes.fromhex("0000000b 0023 00000002 0003 0000 000c 0012 0000 0003")
    corr, body = protocol.decode_response(18, 0, data)
    assert corr == 11 and body.error_code == protocol.ErrorCode.UNSUPPORTED_VERSION


def test_decode_response_falls_back_to_v0_for_api_versions():
    data = api_versions.unsupported_version_response(5, {18: (0, 2)})
    corr, body = protocol.decode_response(18, 3, data)
    assert corr == 5 and body.error_code == protocol.ErrorCode.UNSUPPORTED_VERSION
    assert [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == [(18, 0, 2)]
    with pytest.raises(protocol.DecodeError):
        protocol.decode_response(3, 12, data)  # no such fallback for other apis
