"""The record walk (protocol.recordscan): the C walk and the Python walk give the same answers,
and every way a record area can disagree with its batch is caught."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from protocol import recordscan
from protocol.compression import CompressionError
from protocol.records import Compression, RecordBatch, SimpleRecord, build_batch, encode_record

ALL_CHECKS = recordscan.CHECK_KEYS | recordscan.CHECK_TIMESTAMPS | recordscan.CHECK_OFFSETS


def _records(n, key=b"k", ts=1000):
    return [SimpleRecord(value=b"v" * i, key=key if i % 2 else None, timestamp=ts + i,
                         headers=[("h", b"x")] * (i % 3)) for i in range(n)]


def _walks():
    yield recordscan.scan_python
    if recordscan.ACCELERATED:
        yield recordscan.scan


@pytest.mark.parametrize("walk", list(_walks()))
def test_a_well_formed_batch_walks_to_its_end(walk):
    body = RecordBatch(build_batch(_records(50)), 0).body()
    pos, index, errors, max_timestamp = walk(body, 0, 0, 50, 1000, 1000, 1020, ALL_CHECKS)
    assert (pos, index, max_timestamp) == (len(body), 50, 1049)
    no_key = [i for i, kind, _, _ in errors if kind == recordscan.NO_KEY]
    late = [(i, ts) for i, kind, ts, _ in errors if kind == recordscan.BAD_TIMESTAMP]
    assert no_key == list(range(0, 50, 2))
    assert late == [(i, 1000 + i) for i in range(21, 50, 2)]


@pytest.mark.parametrize("walk", list(_walks()))
def test_a_walk_stops_before_a_record_that_is_not_whole(walk):
    body = bytes(RecordBatch(build_batch(_records(5)), 0).body())
    whole, index, _, _ = walk(body, 0, 0, 5, 1000, 0, 1 << 62, 0)
    pos, index, _, _ = walk(body[:-1], 0, 0, 5, 1000, 0, 1 << 62, 0)
    assert index == 4 and pos < whole
    assert walk(body, pos, 4, 5, 1000, 0, 1 << 62, 0)[:2] == (whole, 5)


@pytest.mark.parametrize("walk", list(_walks()))
@pytest.mark.parametrize("record", [
    b"\x02\x00",                                    # length 1, then nothing but attributes
    encode_record(0, 0, b"k", b"v")[:1] + b"\x00" * 12,   # fields shorter than the length
    b"\x0c\x00\x00\x00\x0b",                         # key longer than the record
    b"\x08\x00\x00\x00\x01\x01\x03",                 # header count -2
    b"\x01",                                        # negative record length
])
def test_malformed_records_are_refused(walk, record):
    with pytest.raises(recordscan.ScanError):
        walk(record + b"\x00" * 20, 0, 0, 1, 0, 0, 1 << 62, 0)


def test_inner_offsets_must_count_from_zero_when_asked():
    body = RecordBatch(build_batch([SimpleRecord(value=b"v", offset_delta=0)] * 3,
                                   last_offset_delta=2), 0).body()
    assert recordscan.scan(body, 0, 0, 3, 0, 0, 1 << 62, 0)[1] == 3
    with pytest.raises(recordscan.ScanError):
        recordscan.scan(body, 0, 0, 3, 0, 0, 1 << 62, recordscan.CHECK_OFFSETS)


@pytest.mark.parametrize("codec", list(Compression))
def test_walk_batch_reads_every_codec_and_catches_counts(codec):
    records = _records(40)
    batch = RecordBatch(build_batch(records, compression_type=codec), 0)
    errors, max_timestamp = recordscan.walk_batch(batch, recordscan.CHECK_KEYS)
    assert (len(errors), max_timestamp) == (20, 1039)
    for count, problem in ((41, "premature EOF"), (39, "remaining")):
        batch.record_count = count
        with pytest.raises(recordscan.ScanError, match=problem):
            recordscan.walk_batch(batch, 0)


def test_walk_batch_streams_records_that_span_chunks(monkeypatch):
    import protocol.compression as compression

    monkeypatch.setattr(compression, "STREAM_CHUNK", 1000)
    records = [SimpleRecord(value=bytes([i]) * 3000, key=b"k", timestamp=5) for i in range(7)]
    for codec in (Compression.GZIP, Compression.LZ4, Compression.ZSTD):
        batch = RecordBatch(build_batch(records, compression_type=codec), 0)
        assert recordscan.walk_batch(batch, ALL_CHECKS, 0, 10) == ([], 5)


@pytest.mark.parametrize("walk", list(_walks()))
def test_the_walk_finds_the_largest_timestamp_wherever_it_is(walk):
    records = [SimpleRecord(value=b"v", timestamp=t, offset_delta=i)
               for i, t in enumerate((500, 900, 700))]
    body = RecordBatch(build_batch(records), 0).body()
    assert walk(body, 0, 0, 3, 500, 0, 1 << 62, 0)[3] == 900
    assert walk(body, 0, 0, 0, 500, 0, 1 << 62, 0)[3] == -1   # no record walked: NO_TIMESTAMP


def test_an_undecodable_payload_is_a_compression_error():
    data = bytearray(build_batch(_records(3), compression_type=Compression.ZSTD))
    data[61:] = b"\x00" * (len(data) - 61)
    with pytest.raises(CompressionError):
        recordscan.walk_batch(RecordBatch(bytes(data), 0), 0)


@pytest.mark.skipif(not recordscan.ACCELERATED, reason="the C walk is not built")
@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), st.integers(0, 6), st.integers(0, 7))
def test_the_c_walk_answers_as_the_python_walk(data, count, flags):
    def outcome(walk):
        try:
            return walk(data, 0, 0, count, 100, 50, 150, flags)
        except recordscan.ScanError:
            return "error"

    assert outcome(recordscan.scan) == outcome(recordscan.scan_python)
