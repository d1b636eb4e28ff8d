import struct

import crc32c
import pytest
from hypothesis import given, settings, strategies as st

from protocol import records as r
from protocol.records import (
    Compression, ControlType, CorruptRecordError, InvalidRecordError, RecordBatch,
    RecordBatchError, SimpleRecord, TimestampType, UnsupportedCompressionError,
)


def simple(n, ts=1_700_000_000_000, headers=()):
    return [SimpleRecord(value=b"value-%d" % i, key=b"k%d" % i, headers=headers, timestamp=ts + i)
            for i in range(n)]


def test_header_fields_roundtrip():
    data = r.build_batch(simple(3), base_offset=100, producer_id=42, producer_epoch=7,
                         base_sequence=9, transactional=True, partition_leader_epoch=5)
    b = RecordBatch(data)
    assert (b.base_offset, b.last_offset, b.next_offset, b.record_count) == (100, 102, 103, 3)
    assert b.size == len(data) and b.batch_length == len(data) - 12
    assert b.magic == 2 and b.partition_leader_epoch == 5
    assert (b.producer_id, b.producer_epoch, b.base_sequence, b.last_sequence) == (42, 7, 9, 11)
    assert b.is_transactional and not b.is_control
    assert b.timestamp_type == TimestampType.CREATE_TIME
    assert b.base_timestamp == 1_700_000_000_000 and b.max_timestamp == 1_700_000_000_002
    assert b.crc == crc32c.crc32c(data[21:])
    b.ensure_valid()


def test_header_layout_matches_kafka_offsets():
    data = r.build_batch(simple(1), base_offset=0x0102030405060708)
    assert data[:8] == bytes.fromhex("0102030405060708")
    assert data[16] == 2  # magic
    assert struct.unpack_from(">i", data, 57)[0] == 1  # record count


@pytest.mark.parametrize("codec", list(Compression))
def test_records_roundtrip_all_codecs(codec):
    recs = simple(50, headers=[("h1", b"x"), ("h2", None)])
    recs.append(SimpleRecord(value=None, key=b"tombstone", timestamp=1_700_000_000_100))
    data = r.build_batch(recs, base_offset=10, compression_type=codec)
    b = RecordBatch(data)
    assert b.compression == codec
    out = list(b.records())
    assert [x.offset for x in out] == list(range(10, 61))
    assert out[0].key == b"k0" and out[0].value == b"value-0"
    assert out[0].headers == (r.Header("h1", b"x"), r.Header("h2", None))
    assert out[-1].value is None and out[-1].timestamp == 1_700_000_000_100


def test_crc_detects_corruption_anywhere_in_crc_range():
    data = bytearray(r.build_batch(simple(5)))
    for pos in (21, 30, 60, len(data) - 1):
        bad = bytearray(data)
        bad[pos] ^= 0x01
        with pytest.raises(CorruptRecordError):
            RecordBatch(bad).ensure_valid()


def test_patches_outside_crc_keep_it_valid():
    data = bytearray(r.build_batch(simple(2)))
    r.set_base_offset(data, 0, 12345)
    r.set_partition_leader_epoch(data, 0, 77)
    b = RecordBatch(data)
    assert b.base_offset == 12345 and b.partition_leader_epoch == 77
    b.ensure_valid()
    assert [x.offset for x in b.records()] == [12345, 12346]


def test_log_append_time_in_place_and_as_new_header():
    data = bytes(r.build_batch(simple(2), compression_type=Compression.GZIP))
    header = r.patched_header(RecordBatch(data), base_offset=5, log_append_time=1234)
    new = bytes(header) + data[61:]
    b = RecordBatch(new)
    b.ensure_valid()
    assert b.timestamp_type == TimestampType.LOG_APPEND_TIME and b.max_timestamp == 1234
    assert [x.timestamp for x in b.records()] == [1234, 1234]
    buf = bytearray(data)
    r.set_log_append_time(buf, 0, 999)
    RecordBatch(buf).ensure_valid()
    assert RecordBatch(buf).max_timestamp == 999
    # The original buffer was never touched.
    assert RecordBatch(data).timestamp_type == TimestampType.CREATE_TIME


def test_iter_batches_and_length_checks():
    a = r.build_batch(simple(2), base_offset=0)
    b = r.build_batch(simple(3), base_offset=2)
    buf = a + b
    assert [x.base_offset for x in r.iter_batches(buf)] == [0, 2]
    assert [x.base_offset for x in r.iter_batches(buf[:-1], allow_partial=True)] == [0]
    with pytest.raises(CorruptRecordError):
        list(r.iter_batches(buf[:-1]))
    bad = bytearray(a)
    struct.pack_into(">i", bad, 8, 10)  # below the 49-byte minimum
    with pytest.raises(CorruptRecordError):
        list(r.iter_batches(bad))


def legacy_message_set(magic):
    # offset, size, crc, magic, attributes, [timestamp], key(-1), value
    body = struct.pack(">bb", magic, 0) + (struct.pack(">q", 0) if magic == 1 else b"")
    body += struct.pack(">ii", -1, 3) + b"abc"
    msg = struct.pack(">I", 0) + body
    return struct.pack(">qi", 0, len(msg)) + msg


@pytest.mark.parametrize("magic", [0, 1])
def test_old_magic_is_refused_with_invalid_record(magic):
    data = legacy_message_set(magic)
    with pytest.raises(InvalidRecordError) as info:
        r.validate_produce_records(data, 9)
    assert info.value.error_code == 87
    assert "magic version 2" in str(info.value)
    with pytest.raises(RecordBatchError):
        list(r.iter_batches(data))


@pytest.mark.parametrize("magic", [3, 127, -1, -128])
def test_a_magic_no_format_has_is_corrupt_even_in_a_truncated_batch(magic):
    """As Kafka 3.9's batch iterator: CORRUPT_MESSAGE (a negative magic too), read before the
    batch's length is checked against the bytes there."""
    data = bytearray(r.build_batch(simple(1)))
    struct.pack_into(">b", data, 16, magic)
    for cut in (len(data), len(data) - 3):
        with pytest.raises(CorruptRecordError) as info:
            r.validate_produce_records(bytes(data[:cut]), 9)
        assert info.value.error_code == 2


def test_validate_produce_records_rules():
    one = r.build_batch(simple(1))
    assert r.validate_produce_records(one, 9).record_count == 1
    with pytest.raises(InvalidRecordError, match="exactly one"):
        r.validate_produce_records(one + one, 9)
    with pytest.raises(InvalidRecordError, match="at least one"):
        r.validate_produce_records(b"", 9)
    zstd = r.build_batch(simple(1), compression_type=Compression.ZSTD)
    with pytest.raises(UnsupportedCompressionError) as info:
        r.validate_produce_records(zstd, 6)
    assert info.value.error_code == 76
    r.validate_produce_records(zstd, 7)


def test_control_batches():
    data = r.build_control_batch(ControlType.COMMIT, producer_id=5, producer_epoch=2,
                                 coordinator_epoch=11, base_offset=40, timestamp=1000)
    b = RecordBatch(data)
    b.ensure_valid()
    assert b.is_control and b.is_transactional and b.record_count == 1
    assert b.control_record() == r.ControlRecord(ControlType.COMMIT, 11, 0)
    (rec,) = b.records()
    assert rec.key == b"\x00\x00\x00\x01" and rec.offset == 40
    abort = RecordBatch(r.build_control_batch(ControlType.ABORT, 5, 2, 0))
    assert abort.control_record().type == ControlType.ABORT


def test_varints_are_bounded_and_bad_records_raise_typed_errors():
    data = bytearray(r.build_batch(simple(1)))
    data[61:] = b"\xff" * (len(data) - 61)  # endless varint
    with pytest.raises(CorruptRecordError):
        list(RecordBatch(data).records())


def test_delete_horizon_flag():
    data = r.build_batch(simple(2), delete_horizon_ms=99_999)
    b = RecordBatch(data)
    assert b.has_delete_horizon and b.delete_horizon_ms == 99_999
    # Record timestamps survive: their deltas are taken against the horizon.
    assert [x.timestamp for x in b.records()] == [1_700_000_000_000, 1_700_000_000_001]


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=0, max_size=300), st.integers(0, 4))
def test_fuzz_only_typed_errors(blob, codec):
    base = bytearray(r.build_batch(simple(3), compression_type=codec))
    for buf in (bytes(blob), bytes(base[:61]) + blob, bytes(base[:17]) + blob):
        try:
            for batch in r.iter_batches(buf, allow_partial=True):
                batch.is_valid()
                list(batch.records())
        except RecordBatchError:
            pass
        try:
            r.validate_produce_records(buf, 9)
        except RecordBatchError:
            pass


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.none() | st.binary(max_size=20), st.none() | st.binary(max_size=50),
                          st.integers(0, 2**40)), min_size=1, max_size=20),
       st.sampled_from(list(Compression)))
def test_property_roundtrip(items, codec):
    recs = [SimpleRecord(value=v, key=k, timestamp=t) for k, v, t in items]
    b = RecordBatch(r.build_batch(recs, base_offset=7, compression_type=codec))
    b.ensure_valid()
    got = list(b.records())
    assert [(x.key, x.value, x.timestamp) for x in got] == [(k, v, t) for k, v, t in items]
    assert b.max_timestamp == max(t for _, _, t in items)


def test_validate_produce_records_follows_kafkas_iterator():
    one = r.build_batch(simple(2))
    with pytest.raises(InvalidRecordError, match="at least one"):
        r.validate_produce_records(one[:-1], 9)  # a first batch cut short is "no batch"
    with pytest.raises(InvalidRecordError, match="at least one"):
        r.validate_produce_records(one[:16], 9)
    tiny = bytearray(one[:40])
    struct.pack_into(">i", tiny, 8, 10)
    with pytest.raises(CorruptRecordError):
        r.validate_produce_records(bytes(tiny), 9)
    short_v2 = bytearray(one[:50])
    struct.pack_into(">i", short_v2, 8, 38)  # whole, but shorter than a v2 header
    with pytest.raises(CorruptRecordError):
        r.validate_produce_records(bytes(short_v2), 9)
