"""Malformed input: random and mutated frames only ever raise DecodeError, in bounded time and memory."""

import struct
import time
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import protocol
from protocol import messages as m
from protocol import wire

from .bodies import body_strategy

REQUESTS = [(cls, v) for cls in m.REQUESTS.values() for v in sorted(cls.SCHEMAS)]
RESPONSES = [(cls, v) for cls in m.RESPONSES.values() for v in sorted(cls.SCHEMAS)]
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)


def _decode_request_only_decode_error(frame):
    start = time.perf_counter()
    try:
        protocol.decode_request(frame)
    except protocol.DecodeError:
        pass
    assert time.perf_counter() - start < 1.0


def _mutate(data, frame):
    frame = bytearray(frame)
    for _ in range(data.draw(st.integers(1, 4))):
        kind = data.draw(st.sampled_from(["flip", "set", "truncate", "insert", "ff"]))
        if not frame:
            break
        at = data.draw(st.integers(0, len(frame) - 1))
        if kind == "flip":
            frame[at] ^= 1 << data.draw(st.integers(0, 7))
        elif kind == "set":
            frame[at] = data.draw(st.integers(0, 255))
        elif kind == "truncate":
            del frame[at:]
        elif kind == "insert":
            frame[at:at] = data.draw(st.binary(min_size=1, max_size=8))
        else:  # huge lengths and varints
            frame[at:at + 4] = b"\xff\xff\xff\x7f"
    return bytes(frame)


@FUZZ
@given(data=st.data())
def test_mutated_request_frames(data):
    cls, version = data.draw(st.sampled_from(REQUESTS))
    body = data.draw(body_strategy(cls.SCHEMAS[version]))
    frame = protocol.encode_request(cls.API_KEY, version, 1, data.draw(st.none() | st.text(max_size=5)), body)
    _decode_request_only_decode_error(_mutate(data, frame))


@FUZZ
@given(data=st.data())
def test_random_bodies_after_valid_headers(data):
    cls, version = data.draw(st.sampled_from(REQUESTS))
    header = struct.pack(">hhih", cls.API_KEY, version, 1, -1)
    if cls.FLEXIBLE_FROM is not None and version >= cls.FLEXIBLE_FROM:
        header += b"\x00"
    _decode_request_only_decode_error(header + data.draw(st.binary(max_size=64)))


@FUZZ
@given(frame=st.binary(max_size=64))
def test_random_frames(frame):
    _decode_request_only_decode_error(frame)


@FUZZ
@given(data=st.data())
def test_mutated_response_frames(data):
    cls, version = data.draw(st.sampled_from(RESPONSES))
    body = data.draw(body_strategy(cls.SCHEMAS[version]))
    frame = _mutate(data, protocol.encode_response(cls.API_KEY, version, 1, body))
    try:
        protocol.decode_response(cls.API_KEY, version, frame)
    except protocol.DecodeError:
        pass


def test_varints_are_bounded():
    assert wire.read_uvarint(b"\xff\xff\xff\xff\x0f", 0) == (2 ** 32 - 1, 5)
    with pytest.raises(protocol.DecodeError):
        wire.read_uvarint(b"\xff" * 5 + b"\x01", 0)
    assert wire.read_varlong(b"\xff" * 9 + b"\x01", 0) == (-(2 ** 63), 10)
    with pytest.raises(protocol.DecodeError):
        wire.read_uvarlong(b"\xff" * 10 + b"\x01", 0)
    # a compact length as a 6-byte varint inside a frame
    frame = struct.pack(">hhih", 18, 3, 1, -1) + b"\x00" + b"\xff" * 6
    with pytest.raises(protocol.DecodeError):
        protocol.decode_request(frame)


@pytest.mark.parametrize("payload", [
    struct.pack(">i", 0x7FFFFFFF),            # classic array length (Metadata v1 topics)
    struct.pack(">i", 1) + struct.pack(">h", 0x7FFF),  # string length
])
def test_declared_lengths_beyond_the_frame_allocate_nothing(payload):
    frame = struct.pack(">hhih", 3, 1, 1, -1) + payload
    tracemalloc.start()
    try:
        with pytest.raises(protocol.DecodeError):
            protocol.decode_request(frame)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024


def test_compact_lengths_beyond_the_frame():
    # Produce v9: transactional id null, acks, timeout, topics compact array claiming 2**28 entries
    frame = struct.pack(">hhih", 0, 9, 1, -1) + b"\x00" + b"\x00" + struct.pack(">hi", 1, 1000) + b"\x80\x80\x80\x80\x01"
    with pytest.raises(protocol.DecodeError, match="exceeds"):
        protocol.decode_request(frame)


def test_records_length_beyond_the_frame():
    body = m.ProduceRequest(topic_data=[m.ProduceRequest.TopicProduceData(
        name="t", partition_data=[m.ProduceRequest.PartitionProduceData(records=b"abcd")])])
    frame = bytearray(protocol.encode_request(0, 3, 1, "c", body))
    frame[-8:-4] = struct.pack(">i", 5)  # records length one more than present
    with pytest.raises(protocol.DecodeError, match="records length"):
        protocol.decode_request(bytes(frame))


def test_non_nullable_null_is_decode_error():
    frame = struct.pack(">hhih", 3, 1, 1, -1) + struct.pack(">i", 1) + struct.pack(">h", -1)
    with pytest.raises(protocol.DecodeError, match="non-nullable"):
        protocol.decode_request(frame)


def test_invalid_utf8_is_decode_error():
    frame = struct.pack(">hhih", 3, 1, 1, -1) + struct.pack(">ih", 1, 2) + b"\xff\xfe"
    with pytest.raises(protocol.DecodeError):
        protocol.decode_request(frame)
