"""Message format v0/v1 over the wire, as Kafka 3.9 serves it: Produce v0-v2 message sets stored as
v2 batches, Fetch v0-v3 answered in magic 0 (v0-v1) or magic 1 (v2-v3), ListOffsets v0's offset lists.

Old but packaged clients speak nothing else: kafka-go 0.2.1 (Debian) produces with v2 and fetches
with v2, sarama 1.22 set to a Kafka version below 0.11 (its default is 0.8.2) uses Produce v0/v2,
Fetch v0/v3 and ListOffsets v0. The messages here are built byte by byte (not with the broker's codec).
"""

import gzip
import struct
import time
import zlib

import pytest

from protocol import ErrorCode, messages
from protocol.records import Compression, SimpleRecord, build_batch, iter_batches

from tests.broker.test_admin_apis import create

NOW = int(time.time() * 1000) - 60_000


def message(magic, key, value, timestamp=None, attributes=0, offset=0):
    body = struct.pack(">bB", magic, attributes)
    if magic == 1:
        body += struct.pack(">q", timestamp)
    for field in (key, value):
        body += struct.pack(">i", -1) if field is None else struct.pack(">i", len(field)) + field
    crc = zlib.crc32(body)
    return struct.pack(">qiI", offset, len(body) + 4, crc) + body


def parse(data):
    """(offset, magic, attributes, timestamp, key, value) of each message, wrappers opened."""
    out, pos = [], 0
    while pos + 12 <= len(data):
        offset, size = struct.unpack_from(">qi", data, pos)
        if pos + 12 + size > len(data):
            break   # a partial message ends a fetch answer
        start = pos + 12
        crc, magic, attributes = struct.unpack_from(">IbB", data, start)
        assert zlib.crc32(data[start + 4:start + size]) == crc
        field = start + 6
        timestamp = None
        if magic == 1:
            (timestamp,) = struct.unpack_from(">q", data, field)
            field += 8
        fields = []
        for _ in range(2):
            (length,) = struct.unpack_from(">i", data, field)
            field += 4
            fields.append(None if length < 0 else bytes(data[field:field + length]))
            field += max(length, 0)
        if attributes & 7 == Compression.GZIP:
            inner = parse(gzip.decompress(fields[1]))
            if magic == 1:   # relative inner offsets, the wrapper has the last one
                inner = [(offset - inner[-1][0] + o,) + tuple(rest) for o, *rest in inner]
            out += [tuple(x) for x in inner]
        else:
            out.append((offset, magic, attributes, timestamp, fields[0], fields[1]))
        pos = start + size
    return out


def produce(client, topic, records, version):
    P = messages.ProduceRequest
    response = client.request(0, version, P(acks=-1, timeout_ms=5000, topic_data=[P.TopicProduceData(
        name=topic, partition_data=[P.PartitionProduceData(index=0, records=records)])]))
    answer = response.responses[0].partition_responses[0]
    return answer.error_code, answer.base_offset


def fetch(client, topic, offset, version, limit=1 << 20):
    F = messages.FetchRequest
    response = client.request(1, version, F(replica_id=-1, max_wait_ms=0, min_bytes=1,
                                            max_bytes=1 << 20, topics=[F.FetchTopic(
                                                topic=topic, partitions=[F.FetchPartition(
                                                    partition=0, fetch_offset=offset,
                                                    partition_max_bytes=limit)])]))
    partition = response.responses[0].partitions[0]
    return partition.error_code, partition.high_watermark, bytes(partition.records or b"")


def test_old_message_sets_are_stored_as_v2_batches(client):
    create(client, ("legacy-in", 1, 1, {}))
    plain_v1 = message(1, b"k0", b"v0", NOW) + message(1, None, b"v1", NOW + 5)
    assert produce(client, "legacy-in", plain_v1, 2) == (0, 0)
    inner = message(1, b"k2", b"v2", NOW + 10, offset=0) + message(1, b"k3", None, NOW + 7, offset=1)
    wrapped = message(1, None, gzip.compress(inner), NOW + 10, attributes=Compression.GZIP, offset=1)
    assert produce(client, "legacy-in", wrapped, 1) == (0, 2)
    assert produce(client, "legacy-in", message(0, b"k4", b"v4"), 0) == (0, 4)
    broken = bytearray(message(1, b"k", b"v", NOW))
    broken[-1] ^= 1
    assert produce(client, "legacy-in", bytes(broken), 2)[0] == ErrorCode.CORRUPT_MESSAGE
    # a v3+ request still needs a v2 batch
    assert produce(client, "legacy-in", plain_v1, 3)[0] == ErrorCode.INVALID_RECORD

    error, high_watermark, data = fetch(client, "legacy-in", 0, 11)
    assert (error, high_watermark) == (0, 5)
    batches = list(iter_batches(data))
    assert [(b.base_offset, b.record_count, b.compression, b.max_timestamp) for b in batches] == [
        (0, 2, Compression.NONE, NOW + 5), (2, 2, Compression.GZIP, NOW + 10), (4, 1, Compression.NONE, -1)]
    records = [r for b in batches for r in b.records()]
    assert [(r.offset, r.key, r.value, r.timestamp) for r in records] == [
        (0, b"k0", b"v0", NOW), (1, None, b"v1", NOW + 5), (2, b"k2", b"v2", NOW + 10),
        (3, b"k3", None, NOW + 7), (4, b"k4", b"v4", -1)]


def test_old_fetches_get_old_message_formats(client):
    create(client, ("legacy-out", 1, 1, {}))
    client.produce("legacy-out", 0, build_batch([SimpleRecord(value=b"a", key=b"x", timestamp=NOW),
                                                 SimpleRecord(value=None, key=None, timestamp=NOW + 1)]))
    client.produce("legacy-out", 0, build_batch(
        [SimpleRecord(value=b"c%d" % i, key=b"y", timestamp=NOW + 10 + i, headers=[("h", b"1")])
         for i in range(3)], compression_type=Compression.GZIP))
    expected = [(0, b"x", b"a", NOW), (1, None, None, NOW + 1), (2, b"y", b"c0", NOW + 10),
                (3, b"y", b"c1", NOW + 11), (4, b"y", b"c2", NOW + 12)]
    for version, magic in ((0, 0), (1, 0), (2, 1), (3, 1)):
        error, high_watermark, data = fetch(client, "legacy-out", 0, version)
        assert (error, high_watermark) == (0, 5)
        got = parse(data)
        assert [m[1] for m in got] == [magic] * 5
        assert [(o, k, v) for o, _, _, _, k, v in got] == [(o, k, v) for o, k, v, _ in expected]
        if magic == 1:
            assert [m[3] for m in got] == [t for *_, t in expected]
    # from the middle of a batch: an uncompressed one from the fetch offset, a compressed one whole
    assert [m[0] for m in parse(fetch(client, "legacy-out", 1, 2)[2])] == [1, 2, 3, 4]
    assert [m[0] for m in parse(fetch(client, "legacy-out", 3, 2)[2])] == [2, 3, 4]


def test_partition_max_bytes_is_a_hard_limit_before_fetch_v3(client):
    """Fetch v0-v2 predate KIP-74: a stored batch larger than partition_max_bytes is not sent, not
    even the first (kafka-node and no-kafka then see no messages); v3 gets it whole."""
    create(client, ("legacy-limit", 1, 1, {}))
    client.produce("legacy-limit", 0, build_batch(
        [SimpleRecord(value=b"%d" % i * 100, timestamp=NOW) for i in range(3)]))
    client.produce("legacy-limit", 0, build_batch([SimpleRecord(value=b"last", timestamp=NOW)]))
    first, second = iter_batches(fetch(client, "legacy-limit", 0, 11)[2])
    for limit in (first.size - 1, 20):
        for version in (0, 1, 2):
            assert fetch(client, "legacy-limit", 0, version, limit) == (0, 4, b"")
        assert [m[0] for m in parse(fetch(client, "legacy-limit", 0, 3, limit)[2])] == [0, 1, 2]
    # whole batches within the limit only
    for version in (0, 1, 2, 3):
        answer = parse(fetch(client, "legacy-limit", 0, version, first.size + second.size - 1)[2])
        assert [m[0] for m in answer] == [0, 1, 2]
    assert fetch(client, "legacy-limit", 3, 0, second.size - 1) == (0, 4, b"")
    assert [m[-1] for m in parse(fetch(client, "legacy-limit", 3, 0, second.size)[2])] == [b"last"]


def test_zstd_data_cannot_be_fetched_in_old_formats(client):
    create(client, ("legacy-zstd", 1, 1, {}))
    client.produce("legacy-zstd", 0, build_batch([SimpleRecord(value=b"z", timestamp=NOW)],
                                                 compression_type=Compression.ZSTD))
    assert fetch(client, "legacy-zstd", 0, 3)[0] == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    assert fetch(client, "legacy-zstd", 0, 11)[0] == ErrorCode.NONE


@pytest.mark.parametrize("empty", [True, False])
def test_list_offsets_v0_answers_old_style_offset_lists(client, empty):
    topic = f"legacy-offsets-{empty}"
    create(client, (topic, 1, 1, {}))
    if not empty:
        client.produce(topic, 0, build_batch([SimpleRecord(value=b"v", timestamp=NOW)] * 3))
    L = messages.ListOffsetsRequest

    def offsets(timestamp, count=5, partition=0):
        response = client.request(2, 0, L(replica_id=-1, topics=[L.ListOffsetsTopic(
            name=topic, partitions=[L.ListOffsetsPartition(
                partition_index=partition, timestamp=timestamp, max_num_offsets=count)])]))
        answer = response.topics[0].partitions[0]
        return answer.error_code, list(answer.old_style_offsets)

    end = 0 if empty else 3
    assert offsets(-1) == (0, [0] if empty else [3, 0])
    assert offsets(-1, count=1) == (0, [end])
    assert offsets(-2) == (0, [0])
    assert offsets(1000) == (0, [])     # older than every segment file
    assert offsets(int(time.time() * 1000) + 60_000) == (0, [0] if empty else [3, 0])
    assert offsets(-1, partition=4) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, [])


def test_old_message_sets_are_never_taken_for_transactional_batches(client):
    # Where a v2 batch keeps its attributes (byte 22) a magic 0 message has its key's first byte
    # and a magic 1 message a timestamp byte: pykafka's key b"x" (0x78) has the bit a transactional
    # batch sets there. Only a v2 batch can be transactional; Kafka appends these.
    create(client, ("legacy-not-txn", 1, 1, {}))
    timestamp = 0x10 << 24   # byte 22 of a magic 1 message: 0x10
    assert produce(client, "legacy-not-txn", message(0, b"x", b"v0"), 0) == (0, 0)
    assert produce(client, "legacy-not-txn", message(1, b"k", b"v1", timestamp), 2) == (0, 1)
    assert [(k, v) for _, _, _, _, k, v in parse(fetch(client, "legacy-not-txn", 0, 1)[2])] == [
        (b"x", b"v0"), (b"k", b"v1")]
