"""Produce with hostile but CRC-valid record batches: what Kafka's LogValidator refuses must not
reach the log, because consumers would then fail on the partition (or see phantom offsets).

Each batch below carries a correct CRC32C, so only validation beyond the CRC can catch it.
"""

from __future__ import annotations

import os
import random
import struct

import pytest

from protocol import ErrorCode
from protocol.records import (
    HEADER, Compression, SimpleRecord, build_batch, encode_record, iter_batches,
)

from tests.broker.raw_client import batch
from tests.robustness.support import with_fixed_crc

_FIELDS = ["base_offset", "batch_length", "partition_leader_epoch", "magic", "crc", "attributes",
           "last_offset_delta", "base_timestamp", "max_timestamp", "producer_id", "producer_epoch",
           "base_sequence", "record_count"]


def _patched(data: bytes, **fields) -> bytes:
    values = list(HEADER.unpack_from(data, 0))
    for name, value in fields.items():
        values[_FIELDS.index(name)] = value
    out = bytearray(data)
    HEADER.pack_into(out, 0, *values)
    return with_fixed_crc(out)


THREE = batch([b"a", b"b", b"c"])


@pytest.mark.parametrize("fields,code", [
    ({"last_offset_delta": 10}, ErrorCode.INVALID_RECORD),
    ({"last_offset_delta": -1}, ErrorCode.INVALID_RECORD),
    ({"record_count": 0}, ErrorCode.INVALID_RECORD),
    ({"record_count": -3}, ErrorCode.INVALID_RECORD),
    ({"attributes": 0x20}, ErrorCode.INVALID_RECORD),       # clients may not write control batches
    # transactional records in a request without a transactional id: refused as Kafka refuses them
    ({"attributes": 0x10}, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    ({"attributes": 5}, None),         # unknown compression codecs: refused (Kafka's code for it
    ({"attributes": 7}, None),         # comes from an IllegalArgumentException, not pinned here)
])
def test_inconsistent_batch_headers_are_refused(client, fields, code):
    assert client.create_topic("headers", 1).error_code == 0
    error = client.produce("headers", 0, _patched(THREE, **fields)).error_code
    assert error == code if code is not None else error != ErrorCode.NONE
    assert client.fetch("headers", 0, 0).responses[0].partitions[0].high_watermark == 0
    assert client.produce("headers", 0, THREE).base_offset == 0


def test_a_client_batch_not_at_base_offset_zero_is_refused(client):
    # Kafka 3.9 answers INVALID_RECORD (checked against it: Produce v3 and v9, plain and gzip)
    assert client.create_topic("based", 1).error_code == 0
    assert client.produce("based", 0, _patched(THREE, base_offset=100)).error_code == ErrorCode.INVALID_RECORD
    assert client.produce("based", 0, THREE).base_offset == 0
    data = client.fetch("based", 0, 0).responses[0].partitions[0]
    assert [(b.base_offset, b.record_count) for b in iter_batches(bytes(data.records))] == [(0, 3)]


def test_a_record_count_that_disagrees_with_the_records_is_refused(client):
    # DefaultRecordBatch's iterator (run by LogValidator on every client batch) throws
    # InvalidRecordException: "Incorrect declared batch size, records still remaining in file" /
    # "premature EOF": Kafka 3.9 answers INVALID_RECORD and appends nothing (checked against it).
    assert client.create_topic("count", 1).error_code == 0
    for fields in ({"record_count": 5, "last_offset_delta": 4},
                   {"record_count": 1, "last_offset_delta": 0}):
        answer = client.produce("count", 0, _patched(THREE, **fields))
        assert answer.error_code == ErrorCode.INVALID_RECORD, fields
    assert client.fetch("count", 0, 0).responses[0].partitions[0].high_watermark == 0


def test_a_truncated_records_area_is_refused(client):
    assert client.create_topic("cut", 1).error_code == 0
    cut = bytearray(THREE[:-5])
    struct.pack_into(">i", cut, 8, len(cut) - 12)
    answer = client.produce("cut", 0, with_fixed_crc(cut))
    assert answer.error_code == ErrorCode.INVALID_RECORD
    assert client.fetch("cut", 0, 0).responses[0].partitions[0].high_watermark == 0


def test_an_undecodable_compressed_batch_is_refused(client):
    # LogValidator decompresses every compressed client batch to validate its records; a stream
    # that does not decompress fails the append (Kafka never stores it). Kafka 3.9's codecs throw
    # a generic exception there, answered UNKNOWN_SERVER_ERROR, for every codec; so do we.
    assert client.create_topic("gz", 1).error_code == 0
    rng = random.Random(5)
    compressed = bytearray(build_batch([SimpleRecord(value=b"x" * 100, key=None, timestamp=1000)] * 3,
                                       compression_type=Compression.GZIP))
    compressed[61:] = rng.randbytes(len(compressed) - 61)
    answer = client.produce("gz", 0, with_fixed_crc(compressed))
    assert answer.error_code == ErrorCode.UNKNOWN_SERVER_ERROR
    assert client.fetch("gz", 0, 0).responses[0].partitions[0].high_watermark == 0


def test_every_supported_codec_round_trips(client):
    assert client.create_topic("codecs", 1).error_code == 0
    offset = 0
    for codec in (Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4,
                  Compression.ZSTD):
        records = [SimpleRecord(value=os.urandom(50), key=b"k", timestamp=1000 + i) for i in range(4)]
        answer = client.produce("codecs", 0, build_batch(records, compression_type=codec))
        assert (answer.error_code, answer.base_offset) == (0, offset), codec
        offset += 4
        data = client.fetch("codecs", 0, answer.base_offset).responses[0].partitions[0]
        [stored] = list(iter_batches(bytes(data.records)))[:1]
        assert [r.value for r in stored.records()] == [r.value for r in records]


def _zstd_bomb(records: int, value_size: int, base_timestamp: int = 1000) -> bytes:
    """A zstd batch of `records` zero-filled values, compressed as a stream (never held whole)."""
    import zstandard

    value = bytes(value_size)
    compressor = zstandard.ZstdCompressor().compressobj()
    body = bytearray()
    for delta in range(records):
        body += compressor.compress(encode_record(delta, delta, None, value))
    body += compressor.flush()
    template = bytearray(build_batch([SimpleRecord(value=b"", key=None, timestamp=base_timestamp)],
                                     compression_type=Compression.ZSTD))
    data = template[:61] + body
    values = list(HEADER.unpack_from(data, 0))
    values[_FIELDS.index("batch_length")] = len(data) - 12
    values[_FIELDS.index("last_offset_delta")] = records - 1
    values[_FIELDS.index("max_timestamp")] = base_timestamp + records - 1
    values[_FIELDS.index("record_count")] = records
    HEADER.pack_into(data, 0, *values)
    return with_fixed_crc(data)


def test_list_offsets_by_timestamp_inside_a_highly_compressed_batch(client):
    # 300 records of 1 MiB zeros compress to ~14 KB: under max.message.bytes, so the append is
    # accepted (as by Kafka). Kafka's LogSegment.findOffsetByTimestamp then streams the records;
    # here the lookup must still answer with the offset, not drop the connection.
    assert client.create_topic("bomb", 1).error_code == 0
    data = _zstd_bomb(300, 1 << 20)
    assert len(data) < 1_000_000
    assert client.produce("bomb", 0, data).error_code == ErrorCode.NONE
    answer = client.list_offset("bomb", 0, 1000 + 299)
    assert (answer.error_code, answer.offset) == (ErrorCode.NONE, 299)
