"""The public surface: headers, dispatch, zero-copy records, parts, tagged-field rules, errors."""

import struct
import uuid

import pytest

import protocol
from protocol import messages as m


def test_request_header_v2_keeps_int16_client_id_and_roundtrips():
    body = m.ApiVersionsRequest(client_software_name="librdkafka", client_software_version="2.0.2")
    frame = protocol.encode_request(18, 3, 7, "rdkafka", body)
    assert frame == bytes.fromhex("0012 0003 00000007 0007") + b"rdkafka" + b"\x00" + \
        b"\x0blibrdkafka" + b"\x062.0.2" + b"\x00"
    header, decoded = protocol.decode_request(frame)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (18, 3, 7, "rdkafka")
    assert decoded == body


def test_request_header_versions():
    assert protocol.request_header_version(7, 0) == 0      # ControlledShutdown v0
    assert protocol.request_header_version(3, 8) == 1      # Metadata v8 is not flexible
    assert protocol.request_header_version(3, 9) == 2
    assert protocol.request_header_version(18, 99) == 2    # unknown future ApiVersions: flexible
    frame = protocol.encode_request(7, 0, 5, "ignored", m.ControlledShutdownRequest(broker_id=3))
    assert frame == struct.pack(">hhii", 7, 0, 5, 3)
    header, offset = protocol.decode_request_header(frame)
    assert header.client_id == "" and offset == 8  # absent in v0: the spec default


def test_null_client_id():
    frame = protocol.encode_request(3, 1, 9, None, m.MetadataRequest(topics=None))
    header, body = protocol.decode_request(frame)
    assert header.client_id is None and body.topics is None


def test_api_versions_response_always_header_v0():
    body = m.ApiVersionsResponse(api_keys=[m.ApiVersionsResponse.ApiVersion(api_key=0, min_version=0, max_version=11)])
    data = protocol.encode_response(18, 3, 1, body)
    # correlation id, then straight into the body (error code 0): no header tag byte
    assert data[:6] == bytes.fromhex("00000001 0000")
    assert protocol.decode_response(18, 3, data) == (1, body)


def test_flexible_response_header_has_tag_byte():
    data = protocol.encode_response(3, 12, 4, m.MetadataResponse())
    assert data[:5] == bytes.fromhex("00000004 00")
    assert protocol.decode_response(3, 12, data)[1] == m.MetadataResponse()


def test_tagged_fields_written_only_when_not_default():
    default = m.ApiVersionsResponse()
    data = protocol.encode_response(18, 3, 1, default)
    # error, empty compact array, throttle, zero tagged fields
    assert data == bytes.fromhex("00000001 0000 01 00000000 00")
    with_tag = m.ApiVersionsResponse(finalized_features_epoch=5)
    data = protocol.encode_response(18, 3, 1, with_tag)
    assert data.endswith(bytes.fromhex("01 01 08 0000000000000005"))
    assert protocol.decode_response(18, 3, data)[1].finalized_features_epoch == 5


def test_tags_in_ascending_order_and_unknown_tags_preserved():
    body = m.ApiVersionsResponse(finalized_features_epoch=1, zk_migration_ready=True,
                                 _unknown_tagged_fields=[(9, b"\x01\x02")])
    data = protocol.encode_response(18, 3, 1, body)
    decoded = protocol.decode_response(18, 3, data)[1]
    assert decoded._unknown_tagged_fields == [(9, b"\x01\x02")]
    assert protocol.encode_response(18, 3, 1, decoded) == data
    # 3 tags after the throttle time: tag 1 (8 bytes), tag 3 (1 byte), unknown tag 9 (2 bytes)
    assert data.endswith(bytes.fromhex("03 01 08 0000000000000001 03 01 01 09 02 0102"))


def test_produce_records_are_zero_copy_slices():
    batch = bytes(range(256)) * 64
    body = m.ProduceRequest(acks=-1, timeout_ms=1000, topic_data=[m.ProduceRequest.TopicProduceData(
        name="t", partition_data=[m.ProduceRequest.PartitionProduceData(index=0, records=batch)])])
    for version in (3, 9, 11):
        frame = bytearray(protocol.encode_request(0, version, 1, "c", body))
        _, decoded = protocol.decode_request(frame)
        records = decoded.topic_data[0].partition_data[0].records
        assert isinstance(records, memoryview) and records.obj is frame
        assert records == batch


def test_fetch_response_parts_pass_slots_untouched():
    class FileSlice:
        def __len__(self):
            return 1000

    slot = FileSlice()
    body = m.FetchResponse(responses=[m.FetchResponse.FetchableTopicResponse(
        topic_id=uuid.uuid4(), partitions=[
            m.FetchResponse.PartitionData(partition_index=0, records=slot),
            m.FetchResponse.PartitionData(partition_index=1, records=b"abc"),
        ])])
    parts = protocol.encode_response_parts(1, 13, 3, body)
    assert parts[1] is slot and len(parts) == 3
    assert all(isinstance(p, bytes) for p in (parts[0], parts[2]))
    filled = parts[0] + b"r" * 1000 + parts[2]
    decoded = protocol.decode_response(1, 13, filled)[1]
    assert decoded.responses[0].partitions[0].records == b"r" * 1000
    assert decoded.responses[0].partitions[1].records == b"abc"
    with pytest.raises(protocol.EncodeError):
        protocol.encode_response(1, 13, 3, body)


def test_absent_fields_raise_unless_ignorable():
    # Produce v0-2 have no TransactionalId (not ignorable)
    with pytest.raises(protocol.EncodeError):
        protocol.encode_request(0, 2, 1, "c", m.ProduceRequest(transactional_id="tx"))
    with pytest.raises(protocol.EncodeError):  # AllowAutoTopicCreation (v4+) is not ignorable
        protocol.encode_request(3, 1, 1, "c", m.MetadataRequest(allow_auto_topic_creation=False))
    # MetadataRequestTopic.TopicId (v10+) is ignorable: dropped in v9
    topic = m.MetadataRequest.MetadataRequestTopic(topic_id=uuid.uuid4(), name="t")
    data = protocol.encode_request(3, 9, 1, "c", m.MetadataRequest(topics=[topic]))
    assert protocol.decode_request(data)[1].topics[0].topic_id == uuid.UUID(int=0)


def test_null_in_non_nullable_field_raises():
    with pytest.raises(protocol.EncodeError):
        protocol.encode_response(3, 1, 1, m.MetadataResponse(brokers=None))


def test_unknown_api_and_version_are_decode_errors():
    frame = struct.pack(">hhih", 999, 0, 1, -1)
    header, offset = protocol.decode_request_header(frame)
    assert header.api_key == 999
    with pytest.raises(protocol.UnsupportedVersionError):
        protocol.decode_request_body(header, frame, offset)
    frame = struct.pack(">hhih", 0, 99, 1, -1)
    with pytest.raises(protocol.DecodeError):
        protocol.decode_request(frame)


@pytest.mark.parametrize("frame", [b"", b"\x00", b"\x00\x03\x00\x01\x00", b"\x00\x03\x00\x01\x00\x00\x00\x01\x00\x05ab"])
def test_truncated_frames_are_decode_errors(frame):
    with pytest.raises(protocol.DecodeError):
        protocol.decode_request(frame)


def test_declared_length_beyond_frame_rejected():
    frame = struct.pack(">hhih", 3, 1, 1, -1) + struct.pack(">i", 2_000_000_000)
    with pytest.raises(protocol.DecodeError, match="exceeds"):
        protocol.decode_request(frame)


def test_api_specs_and_error_codes():
    produce = protocol.API_SPECS[0]
    assert (produce.name, produce.min_version, produce.max_version, produce.flexible_from) == ("Produce", 0, 11, 9)
    assert protocol.API_SPECS[18].name == "ApiVersions"
    assert protocol.ErrorCode.UNKNOWN_TOPIC_OR_PARTITION == 3
    assert protocol.ErrorCode(3).retriable and not protocol.ErrorCode.TOPIC_ALREADY_EXISTS.retriable
    assert protocol.ErrorCode(-1).name == "UNKNOWN_SERVER_ERROR"


def test_nested_struct_classes_hang_off_message():
    assert m.MetadataResponse.MetadataResponseTopic.__qualname__ == "MetadataResponse.MetadataResponseTopic"
    topic = m.MetadataResponse.MetadataResponseTopic(name="t")
    assert topic.partitions == [] and topic.topic_id == uuid.UUID(int=0) and topic.is_internal is False
    assert m.MetadataResponse.MetadataResponseTopic() is not m.MetadataResponse.MetadataResponseTopic()


def test_strings_are_capped_at_32767_bytes_like_kafka():
    long_name = "x" * 32768
    for version in (1, 12):  # classic and compact strings
        with pytest.raises(protocol.EncodeError):
            protocol.encode_request(3, version, 1, "c", m.MetadataRequest(
                topics=[m.MetadataRequest.MetadataRequestTopic(name=long_name)]))
        ok = protocol.encode_request(3, version, 1, "c", m.MetadataRequest(
            topics=[m.MetadataRequest.MetadataRequestTopic(name=long_name[:-1])]))
        assert protocol.decode_request(ok)[1].topics[0].name == long_name[:-1]
    # a compact string declaring 32768 bytes (all present) is refused
    frame = struct.pack(">hhih", 3, 12, 1, -1) + b"\x00" + b"\x02" + bytes(16) + b"\x81\x80\x02" + b"x" * 32768
    with pytest.raises(protocol.DecodeError, match="32767"):
        protocol.decode_request(frame)
