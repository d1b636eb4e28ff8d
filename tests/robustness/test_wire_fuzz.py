"""Live-socket fuzzing of one broker: hostile bytes get a Kafka answer or a closed connection.

After every case the broker must still be up and answer a fresh connection correctly; no case may
leave a connection hanging (every read has a timeout). Seeds are fixed, counts are bounded.
"""

from __future__ import annotations

import random
import struct

import pytest

import protocol
from protocol import ErrorCode, messages
from protocol.records import iter_batches

from tests.broker.raw_client import RawClient, batch
from tests.robustness.support import (
    FUZZ_ID, assert_healthy, check_answered_or_closed, connect, exchange_then_follow_up,
    random_request_frame, rss_kib, send_and_drain, sized, split_frames, wait_closed,
)

TOPIC = "topic-a"            # the fuzzers may write to it, alter it, even delete it
HEALTH_TOPIC = "robustness-health"   # never named by the fuzzers: checked after each case


@pytest.fixture(scope="module")
def fuzz_broker(shared_broker):
    with RawClient("127.0.0.1", shared_broker.port) as client:
        assert client.create_topic(TOPIC, 2).error_code == 0
        assert client.create_topic(HEALTH_TOPIC, 2).error_code == 0
        assert client.create_topic("t", 1).error_code == 0
        assert client.produce("t", 0, batch([b"x", b"y"])).error_code == 0
    return shared_broker


# CreateTopics and CreatePartitions with a huge partition count freeze the whole broker (see
# test_admin_limits.py, which runs them against a subprocess it can kill); the shared fuzz broker
# must survive the module, so they are fuzzed there with bounded counts instead.
FREEZES_BROKER = {19, 37}
# UnregisterBroker is a valid admin request that takes the broker it names out of the cluster until it
# restarts (as in Kafka): a random body naming the shared broker (id 1) would fence it for the rest of
# the module, so it is left out here too.
LEAVES_NO_BROKER = {64}


def advertised(broker, exclude=FREEZES_BROKER | LEAVES_NO_BROKER) -> list[tuple[int, int]]:
    return [(key, version) for key, (low, high, _) in sorted(broker.broker.handlers.items())
            if key not in exclude for version in range(low, high + 1)]


def mutate(frame: bytes, rng: random.Random) -> bytes:
    """Flip bits, truncate, extend or plant a huge int32 in a frame (the header's first 8 bytes —
    api key, version, correlation id — are kept so answers stay attributable)."""
    out = bytearray(frame)
    kind = rng.randrange(5)
    if kind == 0:
        for _ in range(rng.randrange(1, 4)):
            if len(out) > 8:
                out[rng.randrange(8, len(out))] ^= 1 << rng.randrange(8)
    elif kind == 1:
        out = out[:rng.randrange(8, len(out) + 1)]
    elif kind == 2:
        out += rng.randbytes(rng.randrange(1, 40))
    elif kind == 3 and len(out) > 12:
        at = rng.randrange(8, len(out) - 3)
        out[at:at + 4] = struct.pack(">i", rng.choice([0x7FFFFFFF, -2, 1 << 20, 0x7FFFFFFE]))
    elif len(out) > 8:
        out[rng.randrange(8, len(out))] = rng.choice([0x00, 0xFF, 0x80, 0x7F])
    return bytes(out)


# ------------------------------------------------------------------------------ every api/version

def test_random_valid_requests_of_every_advertised_version(fuzz_broker):
    rng = random.Random(20261121)
    for api_key, version in advertised(fuzz_broker):
        made = random_request_frame(api_key, version, rng, FUZZ_ID)
        if made is None:
            continue
        frame, _body = made
        check_answered_or_closed(fuzz_broker.port, frame, f"api {api_key} v{version}")
    assert_healthy(fuzz_broker.port, HEALTH_TOPIC)


@pytest.mark.parametrize("seed", [1, 2])
def test_mutated_frames_of_every_advertised_version(fuzz_broker, seed):
    rng = random.Random(seed)
    before = rss_kib()
    for index, (api_key, version) in enumerate(advertised(fuzz_broker)):
        made = random_request_frame(api_key, version, rng, FUZZ_ID)
        if made is None:
            continue
        frame = mutate(made[0], rng)
        check_answered_or_closed(fuzz_broker.port, frame, f"mutated api {api_key} v{version}")
        if index % 25 == 0:
            assert_healthy(fuzz_broker.port, HEALTH_TOPIC)
    assert_healthy(fuzz_broker.port, HEALTH_TOPIC)
    grown_mib = (rss_kib() - before) / 1024   # the broker runs in this process
    assert grown_mib < 150, f"memory grew {grown_mib:.0f} MiB over one fuzz pass"


def test_mutated_produce_batches_never_break_the_log(fuzz_broker):
    # Bit flips inside an otherwise valid Produce: the log must stay readable and consistent.
    rng = random.Random(7)
    with RawClient("127.0.0.1", fuzz_broker.port) as client:
        assert client.create_topic("bit-flips", 1).error_code == 0
    P = messages.ProduceRequest
    for _ in range(40):
        records = bytearray(batch([rng.randbytes(rng.randrange(0, 50)) for _ in range(3)]))
        for _ in range(rng.randrange(1, 3)):
            records[rng.randrange(len(records))] ^= 1 << rng.randrange(8)
        body = P(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[P.TopicProduceData(
            name="bit-flips", partition_data=[P.PartitionProduceData(index=0, records=bytes(records))])])
        frame = protocol.encode_request(0, 9, FUZZ_ID, "fuzz", body)
        check_answered_or_closed(fuzz_broker.port, frame, "bit-flipped batch")
    with RawClient("127.0.0.1", fuzz_broker.port) as client:
        data = client.fetch("bit-flips", 0, 0).responses[0].partitions[0]
        assert data.error_code == 0
        offsets = []
        for stored in iter_batches(bytes(data.records)):
            stored.ensure_valid()
            offsets.extend(range(stored.base_offset, stored.last_offset + 1))
        assert offsets == list(range(data.high_watermark))


# ------------------------------------------------------------------------------ raw bytes

def test_random_bytes_with_an_honest_size_prefix(fuzz_broker):
    rng = random.Random(99)
    for index in range(60):
        junk = rng.randbytes(rng.randrange(0, 200))
        data, outcome = send_and_drain(fuzz_broker.port, sized(junk), half_close=False)
        assert outcome == "closed" or split_frames(data), f"case {index}: hung on {junk.hex()}"
        if index % 20 == 0:
            assert_healthy(fuzz_broker.port)
    assert_healthy(fuzz_broker.port, HEALTH_TOPIC)


def test_random_byte_streams(fuzz_broker):
    rng = random.Random(100)
    for _ in range(30):
        junk = rng.randbytes(rng.randrange(1, 300))
        _, outcome = send_and_drain(fuzz_broker.port, junk, half_close=True)
        assert outcome == "closed"
    assert_healthy(fuzz_broker.port, HEALTH_TOPIC)


def test_truncated_frames_then_eof_close_the_connection(fuzz_broker):
    frame = protocol.encode_request(3, 12, 5, "fuzz", messages.MetadataRequest(topics=None))
    for cut in (1, 2, 3, 4, 6, 10, len(frame) - 1):
        data, outcome = send_and_drain(fuzz_broker.port, sized(frame)[:cut], half_close=True)
        assert outcome == "closed" and data == b"", cut
    assert_healthy(fuzz_broker.port, HEALTH_TOPIC)


def test_frames_cut_short_inside_an_honest_size_are_refused(fuzz_broker):
    # The size prefix matches the bytes sent, but the request inside stops early.
    rng = random.Random(3)
    for api_key, version in advertised(fuzz_broker)[::3]:
        made = random_request_frame(api_key, version, rng, FUZZ_ID)
        if made is None or len(made[0]) < 12:
            continue
        frame = made[0][:rng.randrange(8, len(made[0]))]
        check_answered_or_closed(fuzz_broker.port, frame, f"cut api {api_key} v{version}")
    assert_healthy(fuzz_broker.port, HEALTH_TOPIC)


@pytest.mark.parametrize("size", [0x7FFFFFFF, -1, -(2 ** 31), 104857601, 0, 1, 3, 7])
def test_bad_size_prefixes_close_the_connection(fuzz_broker, size):
    with connect(fuzz_broker.port) as sock:
        sock.sendall(struct.pack(">i", size) + b"\x00" * min(max(size, 0), 8))
        assert wait_closed(sock) == "closed"
    assert_healthy(fuzz_broker.port)


def _metadata_v1_with_topic_count(count: int) -> bytes:
    head = struct.pack(">hhih", 3, 1, FUZZ_ID, 4) + b"fuzz"
    return head + struct.pack(">i", count) + struct.pack(">h", 1) + b"a"


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


@pytest.mark.parametrize("frame", [
    _metadata_v1_with_topic_count(0x7FFFFFFF),
    _metadata_v1_with_topic_count(-7),
    # Metadata v12 (flexible): compact array of 2^32-2 topics
    struct.pack(">hhih", 3, 12, FUZZ_ID, 4) + b"fuzz" + b"\x00" + _uvarint(0xFFFFFFFF),
    # a compact array length varint that never ends
    struct.pack(">hhih", 3, 12, FUZZ_ID, 4) + b"fuzz" + b"\x00" + b"\xff" * 12,
    # Produce v9: one topic, one partition, records claiming 2 GiB
    struct.pack(">hhih", 0, 9, FUZZ_ID, 4) + b"fuzz" + b"\x00" + b"\x01" + struct.pack(">hi", -1, 5000)
    + _uvarint(2) + _uvarint(2) + b"t" + _uvarint(2) + struct.pack(">i", 0) + _uvarint(0x7FFFFFFF),
    # Produce v3: int32 array count huge
    struct.pack(">hhih", 0, 3, FUZZ_ID, 4) + b"fuzz" + struct.pack(">hhii", -1, -1, 5000, 0x7FFFFFF0),
], ids=["md-v1-2g-topics", "md-v1-negative", "md-v12-4g-topics", "md-v12-endless-varint",
        "produce-v9-2g-records", "produce-v3-2g-topics"])
def test_huge_declared_lengths_are_refused_without_allocating(fuzz_broker, frame):
    check_answered_or_closed(fuzz_broker.port, frame, "huge length")
    assert_healthy(fuzz_broker.port, HEALTH_TOPIC)


@pytest.mark.parametrize("api_key,version", [(999, 0), (-1, 0), (67, 0), (3, 99), (0, -1), (1, 3)])
def test_unknown_api_keys_and_versions_close_the_connection(fuzz_broker, api_key, version):
    # Kafka closes the connection on an api key/version it does not serve (ApiVersions excepted).
    frame = struct.pack(">hhih", api_key, version, FUZZ_ID, 4) + b"fuzz" + b"\x00" * 8
    ids, outcome = exchange_then_follow_up(fuzz_broker.port, frame)
    assert outcome == "closed" and ids == []
    assert_healthy(fuzz_broker.port)


def test_requests_before_api_versions_are_served(fuzz_broker):
    # Kafka does not require ApiVersions first: a connection may start with any request.
    with RawClient("127.0.0.1", fuzz_broker.port) as client:
        response = client.request(3, 12, messages.MetadataRequest(
            topics=[messages.MetadataRequest.MetadataRequestTopic(name=HEALTH_TOPIC)],
            allow_auto_topic_creation=False))
        assert response.topics[0].error_code == 0 and len(response.topics[0].partitions) == 2
    with RawClient("127.0.0.1", fuzz_broker.port) as client:
        assert client.produce(HEALTH_TOPIC, 0, batch([b"early"])).error_code == ErrorCode.NONE
