"""protocol.legacy_records: message sets of magic 0/1, to and from v2 batches (the refusals and the
conversions the wire tests in tests/broker/test_legacy_message_format.py do not reach)."""

import struct
import zlib

import pytest

from protocol import compression, legacy_records
from protocol.records import (Compression, CorruptRecordError, InvalidRecordError, RecordBatch,
                              SimpleRecord, TimestampType, UnsupportedCompressionError, build_batch,
                              build_control_batch, ControlType, iter_batches)


def message(magic, key, value, timestamp=0, attributes=0, offset=0):
    body = struct.pack(">bB", magic, attributes)
    if magic == 1:
        body += struct.pack(">q", timestamp)
    for field in (key, value):
        body += struct.pack(">i", -1) if field is None else struct.pack(">i", len(field)) + field
    return struct.pack(">qiI", offset, len(body) + 4, zlib.crc32(body)) + body


def test_refusals():
    nested = message(1, None, compression.compress(Compression.GZIP, message(
        1, None, compression.compress(Compression.GZIP, message(1, b"k", b"v", 5)), 5,
        attributes=Compression.GZIP)), 5, attributes=Compression.GZIP)
    with pytest.raises(InvalidRecordError, match="nested"):
        legacy_records.to_batch(nested)
    with pytest.raises(UnsupportedCompressionError):
        legacy_records.to_batch(message(1, None, b"x", 5, attributes=Compression.ZSTD))
    with pytest.raises(CorruptRecordError):
        legacy_records.to_batch(message(1, None, b"not gzip", 5, attributes=Compression.GZIP))
    with pytest.raises(CorruptRecordError):
        legacy_records.to_batch(message(0, b"k", b"v")[:-1])
    with pytest.raises(InvalidRecordError, match="magic 2"):
        legacy_records.read_messages(message(0, b"k", b"v")[:16] + b"\x02" + message(0, b"k", b"v")[17:])


def test_to_batch_keeps_keys_values_timestamps_and_codec():
    inner = message(1, b"a", None, 7, offset=0) + message(1, None, b"b", 9, offset=1)
    batch = RecordBatch(legacy_records.to_batch(
        message(1, None, compression.compress(Compression.SNAPPY, inner), 9,
                attributes=Compression.SNAPPY)), 0)
    batch.ensure_valid()
    assert (batch.compression, batch.record_count, batch.max_timestamp) == (Compression.SNAPPY, 2, 9)
    assert [(r.offset, r.key, r.value, r.timestamp) for r in batch.records()] == [
        (0, b"a", None, 7), (1, None, b"b", 9)]


def test_from_batches_drops_control_batches_and_stamps_log_append_time():
    data = (build_batch([SimpleRecord(value=b"v", key=b"k", timestamp=3)], base_offset=0,
                        timestamp_type=TimestampType.LOG_APPEND_TIME, max_timestamp=1000)
            + build_control_batch(ControlType.COMMIT, 7, 0, 0, base_offset=1, timestamp=4)
            + build_batch([SimpleRecord(value=b"w", timestamp=5)], base_offset=2,
                          compression_type=Compression.LZ4))
    out = legacy_records.from_batches(iter_batches(data), 1, 0)
    got = legacy_records.read_messages(out)
    assert [(m.offset, m.attributes, m.timestamp, m.key, m.value) for m in got[:1]] == [
        (0, 0x08, 1000, b"k", b"v")]   # LogAppendTime: the flag and the append time
    [wrapper] = got[1:]
    assert (wrapper.offset, wrapper.attributes & 7, wrapper.timestamp) == (2, Compression.LZ4, 5)
    [inner] = legacy_records.read_messages(compression.decompress(Compression.LZ4, wrapper.value))
    assert (inner.offset, inner.value, inner.timestamp) == (0, b"w", 5)
    # magic 0: no timestamps, inner offsets absolute
    [plain, wrapper] = legacy_records.read_messages(legacy_records.from_batches(iter_batches(data), 0, 0))
    assert (plain.magic, plain.timestamp, wrapper.magic) == (0, -1, 0)
    [inner] = legacy_records.read_messages(compression.decompress(Compression.LZ4, wrapper.value))
    assert inner.offset == 2
