import os
import struct
import threading

import pytest

from protocol import records as r
from protocol.records import RecordBatch
from storage.errors import InvalidBatchError, InvalidTimestampError, OffsetOutOfRangeError
from storage.log import AppendOrigin

from .conftest import NOW, batch


def offsets_of(batches):
    return [(b.base_offset, b.last_offset) for b in batches]


def test_append_assigns_offsets_and_read_returns_the_batches(make_log):
    log = make_log()
    res = log.append(batch(3), leader_epoch=4)
    assert (res.first_offset, res.last_offset, res.log_append_time, res.log_start_offset) == (0, 2, -1, 0)
    res = log.append(batch(2))
    assert (res.first_offset, res.last_offset) == (3, 4)
    assert log.log_end_offset == 5
    got = log.read_batches(0)
    assert offsets_of(got) == [(0, 2), (3, 4)]
    for b in got:
        b.ensure_valid()
    assert got[0].partition_leader_epoch == 4
    assert [rec.offset for rec in got[1].records()] == [3, 4]


def test_append_does_not_touch_the_callers_buffer(make_log):
    log = make_log()
    data = batch(2)         # a client's batch starts at 0; the second append is at offset 2
    log.append(memoryview(data))
    log.append(memoryview(data))
    assert RecordBatch(data).base_offset == 0
    assert offsets_of(log.read_batches(0)) == [(0, 1), (2, 3)]


def test_read_from_the_middle_of_a_batch_starts_at_that_batch(make_log):
    log = make_log()
    log.append(batch(5))
    log.append(batch(5))
    assert offsets_of(log.read_batches(7)) == [(5, 9)]
    assert offsets_of(log.read_batches(4)) == [(0, 4), (5, 9)]
    assert log.read(10, 1000) == []


def test_read_bounds_max_bytes_whole_batches_and_at_least_one(make_log):
    log = make_log()
    sizes = []
    for _ in range(4):
        data = batch(1, value_size=100)
        sizes.append(len(data))
        log.append(data)
    (piece,) = log.read(0, sizes[0] + sizes[1] + 10)
    assert len(piece) == sizes[0] + sizes[1]
    (piece,) = log.read(0, 5)
    assert len(piece) == sizes[0]  # first batch whole even though it exceeds max_bytes
    assert log.read(0, 5, min_one_batch=False) == []


def test_read_stops_at_max_offset(make_log):
    log = make_log()
    log.append(batch(2))
    log.append(batch(2))
    log.append(batch(2))
    assert offsets_of(log.read_batches(0, max_offset=4)) == [(0, 1), (2, 3)]
    assert offsets_of(log.read_batches(0, max_offset=3)) == [(0, 1)]  # 3 is mid-batch
    assert log.read(4, 100, max_offset=4) == []


def test_out_of_range(make_log):
    log = make_log()
    log.append(batch(2))
    with pytest.raises(OffsetOutOfRangeError) as info:
        log.read(3, 100)
    assert info.value.error_code == 1
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 100)


def test_slices_are_sendfile_ready(make_log, tmp_path):
    log = make_log()
    log.append(batch(3))
    (piece,) = log.read(0, 10_000)
    out = tmp_path / "out"
    with open(out, "wb") as f:
        sent = os.sendfile(f.fileno(), piece.fileno(), piece.position, len(piece))
    assert sent == len(piece)
    assert out.read_bytes() == piece.read()


@pytest.mark.parametrize("mutate,code", [
    (lambda d: d.__setitem__(70, d[70] ^ 1), 2),                       # CRC
    (lambda d: struct.pack_into(">i", d, 23, 5), 87),                  # count vs last offset delta
    (lambda d: struct.pack_into(">i", d, 8, 20), 2),                   # length below minimum
])
def test_bad_batches_are_refused_with_kafka_codes(make_log, mutate, code):
    log = make_log()
    data = bytearray(batch(2))
    mutate(data)
    if code == 87:  # keep the CRC valid so the count check is reached
        struct.pack_into(">I", data, 17, __import__("crc32c").crc32c(bytes(data[21:])))
    with pytest.raises(InvalidBatchError) as info:
        log.append(data)
    assert info.value.error_code == code
    assert log.log_end_offset == 0


def test_a_client_batch_not_at_offset_zero_or_with_an_unknown_codec_is_refused_as_kafka(make_log):
    """Kafka 3.9: a producer's batch must start at base offset 0 (INVALID_RECORD); an unknown
    codec fails inside its lookup (UNKNOWN_SERVER_ERROR, not the retriable CORRUPT_MESSAGE)."""
    log = make_log()
    moved = bytearray(batch(1))
    struct.pack_into(">q", moved, 0, 100)           # outside the CRC
    with pytest.raises(InvalidBatchError) as info:
        log.append(moved)
    assert info.value.error_code == 87
    codec = bytearray(batch(1))
    struct.pack_into(">h", codec, 21, 7)
    struct.pack_into(">I", codec, 17, __import__("crc32c").crc32c(bytes(codec[21:])))
    with pytest.raises(InvalidBatchError) as info:
        log.append(codec)
    assert info.value.error_code == -1
    assert log.log_end_offset == 0
    log.append(batch(1))
    assert log.log_end_offset == 1


def test_old_magic_and_control_batches_from_clients_are_invalid_record(make_log):
    log = make_log()
    legacy = struct.pack(">qi", 0, 20) + struct.pack(">Ibb", 0, 1, 0) + bytes(14)
    with pytest.raises(InvalidBatchError) as info:
        log.append(legacy)
    assert info.value.error_code == 87
    marker = r.build_control_batch(r.ControlType.COMMIT, 1, 0, 0)
    with pytest.raises(InvalidBatchError) as info:
        log.append(marker)
    assert info.value.error_code == 87
    log.append(marker, origin=AppendOrigin.COORDINATOR)


def test_max_message_bytes_and_timestamps(make_log, clock):
    log = make_log({"max.message.bytes": 200, "message.timestamp.after.max.ms": 1000,
                    "message.timestamp.before.max.ms": 5000})
    with pytest.raises(InvalidBatchError) as info:
        log.append(batch(1, value_size=300))
    assert info.value.error_code == 10
    with pytest.raises(InvalidTimestampError) as info:
        log.append(batch(1, ts=clock.now + 2000))
    assert info.value.error_code == 32
    with pytest.raises(InvalidTimestampError):
        log.append(batch(1, ts=clock.now - 6000))
    log.append(batch(1, ts=clock.now - 4000))


def test_log_append_time_is_stamped(make_log, clock):
    log = make_log({"message.timestamp.type": "LogAppendTime"})
    res = log.append(batch(2, ts=5, compression_type=r.Compression.LZ4))
    assert res.log_append_time == clock.now
    (b,) = log.read_batches(0)
    b.ensure_valid()
    assert b.timestamp_type == r.TimestampType.LOG_APPEND_TIME
    assert [rec.timestamp for rec in b.records()] == [clock.now, clock.now]


def test_roll_by_size_layout_and_reads_across_segments(make_log, tmp_path):
    log = make_log({"segment.bytes": 2000, "index.interval.bytes": 100}, name="t-0")
    for _ in range(30):
        log.append(batch(2, value_size=100))
    names = sorted(os.listdir(tmp_path / "t-0"))
    logs = [n for n in names if n.endswith(".log")]
    assert len(logs) > 3
    assert all(len(n) == len("00000000000000000000.log") for n in logs)
    assert logs[0] == "00000000000000000000.log"
    for seg in log.segments:
        # .index entries point at batch starts and name their last offsets
        for i in range(seg.offset_index.entries):
            rel, pos = seg.offset_index.entry(i)
            b = seg.batch_at(pos)
            assert b.last_offset == seg.base_offset + rel
    for offset in range(60):
        first = log.read_batches(offset, max_bytes=1)[0]
        assert first.base_offset <= offset <= first.last_offset


def test_roll_by_time(make_log, clock):
    log = make_log({"segment.ms": 1000})
    log.append(batch(1, ts=clock.now))
    clock.now += 2000
    log.append(batch(1, ts=clock.now))
    assert len(log.segments) == 2


def test_offset_for_timestamp_and_max_timestamp(make_log):
    log = make_log({"segment.bytes": 1500, "index.interval.bytes": 50})
    for i in range(20):
        log.append(batch(3, ts=NOW + 10 * i))  # records at NOW+10i, +1, +2
    assert log.offset_for_timestamp(0).offset == 0
    hit = log.offset_for_timestamp(NOW + 51)
    assert (hit.offset, hit.timestamp) == (16, NOW + 51)
    hit = log.offset_for_timestamp(NOW + 53)
    assert (hit.offset, hit.timestamp) == (18, NOW + 60)
    assert log.offset_for_timestamp(NOW + 10_000) is None
    top = log.max_timestamp_offset()
    assert (top.offset, top.timestamp) == (59, NOW + 192)


def test_reopen_after_clean_close(make_log, tmp_path):
    log = make_log({"segment.bytes": 1500, "index.interval.bytes": 50}, name="t-1")
    for i in range(20):
        log.append(batch(2, ts=NOW + i))
    before = [b.view().tobytes() for b in log.read_batches(0)]
    log.close()
    again = make_log({"segment.bytes": 1500, "index.interval.bytes": 50}, name="t-1")
    assert again.log_end_offset == 40
    assert [b.view().tobytes() for b in again.read_batches(0)] == before
    assert again.offset_for_timestamp(NOW + 7).offset == 13  # batch 6: NOW+6, NOW+7
    assert again.append(batch(1)).first_offset == 40


def index_files(directory):
    return sorted(n for n in os.listdir(directory) if n.endswith((".index", ".timeindex")))


def test_index_files_come_with_the_first_entry_and_with_sealing(make_log, tmp_path):
    log = make_log({"segment.bytes": 1500, "index.interval.bytes": 300}, name="t-9")
    log.append(batch(1))
    assert index_files(tmp_path / "t-9") == []   # nothing to index yet: no files
    while not log.active_segment.offset_index.entries:
        log.append(batch(2, value_size=100))
    assert index_files(tmp_path / "t-9") == ["00000000000000000000.index", "00000000000000000000.timeindex"]
    log.roll()
    log.roll()   # an empty sealed segment still gets both files, as Kafka's do
    sealed = [s for s in log.segments if not s.active]
    assert all(os.path.exists(p) for s in sealed for p in (s.offset_index.path, s.time_index.path))


def test_a_small_log_without_index_files_reopens_without_recovery(make_log, monkeypatch):
    log = make_log({"index.interval.bytes": 4096}, name="t-10")
    log.append(batch(3, ts=NOW + 5))
    log.close()
    assert index_files(log.directory) == []   # neither index ever had an entry
    from storage.segment import LogSegment

    def no_recovery(*args, **kwargs):
        raise AssertionError("a segment below index.interval.bytes was recovered")
    monkeypatch.setattr(LogSegment, "recover", no_recovery)
    again = make_log({"index.interval.bytes": 4096}, name="t-10")
    assert again.log_end_offset == 3
    assert again.offset_for_timestamp(NOW + 6).offset == 1
    assert again.append(batch(1)).first_offset == 3


def test_a_new_partition_costs_a_directory_and_a_file(make_log, tmp_path, monkeypatch):
    """Creating a log in a directory it makes lists, stats and reads nothing (10,000 partitions
    from one CreateTopics); an existing directory is still loaded."""
    looked = []
    for name in ("listdir", "stat", "scandir"):
        real = getattr(os, name)
        monkeypatch.setattr(os, name, lambda *a, real=real, name=name, **k: looked.append(name) or real(*a, **k))
    log = make_log(name="t-12", log_start_offset=7)
    assert looked == []
    monkeypatch.undo()
    assert os.listdir(tmp_path / "t-12") == ["00000000000000000007.log"]
    assert (log.log_start_offset, log.log_end_offset, log.recovery_point) == (7, 7, 7)
    assert log.append(batch(3, ts=NOW + 1), leader_epoch=2).first_offset == 7
    log.close()
    again = make_log(name="t-12")
    assert again.log_end_offset == 10
    assert again.offset_for_timestamp(NOW + 1).offset == 7
    assert offsets_of(again.read_batches(7)) == [(7, 9)]


def test_unclean_recovery_restores_a_leader_epoch_the_checkpoint_missed(make_log):
    log = make_log(name="t-13")
    log.append(batch(2), leader_epoch=0)
    log.assign_epoch_start(3, write=False)   # became leader: the checkpoint is written later
    log.append(batch(2), leader_epoch=3)
    log.append(batch(1), leader_epoch=3)
    # killed before that write: the records are in the file, the epoch is not
    again = make_log(name="t-13", clean_shutdown=False)
    assert again.epochs.entries == [(0, 0), (3, 2)]
    assert again.end_offset_for_epoch(0) == (0, 2)
    assert again.end_offset_for_epoch(3) == (3, 5)
    again.close()
    assert make_log(name="t-13").epochs.entries == [(0, 0), (3, 2)]   # and it is on disk now


def test_a_lost_index_of_a_large_segment_is_rebuilt(make_log):
    log = make_log({"index.interval.bytes": 200}, name="t-11")
    for _ in range(10):
        log.append(batch(2, value_size=100))
    entries = log.active_segment.offset_index.entries
    assert entries > 2
    log.close()
    os.remove(log.active_segment.offset_index.path)
    again = make_log({"index.interval.bytes": 200}, name="t-11")
    assert again.active_segment.offset_index.entries == entries
    assert offsets_of(again.read_batches(13, max_bytes=1)) == [(12, 13)]


def test_unclean_reopen_truncates_a_torn_tail(make_log, tmp_path):
    log = make_log(name="t-2")
    for _ in range(5):
        log.append(batch(2))
    path = log.active_segment.log_path
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.truncate(size - 7)
    again = make_log(name="t-2", clean_shutdown=False)
    assert again.log_end_offset == 8
    assert again.recovered_bytes_truncated > 0
    assert offsets_of(again.read_batches(0))[-1] == (6, 7)


def test_unclean_reopen_cuts_at_a_corrupt_batch_and_drops_later_segments(make_log):
    log = make_log({"segment.bytes": 1000}, name="t-3")
    for _ in range(20):
        log.append(batch(1, value_size=100))
    segs = log.segments
    victim = segs[1]
    with open(victim.log_path, "r+b") as f:
        f.seek(70)
        byte = f.read(1)
        f.seek(70)
        f.write(bytes([byte[0] ^ 0xFF]))
    again = make_log({"segment.bytes": 1000}, name="t-3", clean_shutdown=False)
    assert again.log_end_offset == victim.base_offset
    assert len(again.segments) == 2


def test_retention_by_size_and_time(make_log, clock):
    log = make_log({"segment.bytes": 1000, "retention.bytes": 2500, "file.delete.delay.ms": 0})
    for i in range(30):
        log.append(batch(1, value_size=100, ts=clock.now))
    log.set_high_watermark(log.log_end_offset)
    before = log.size_bytes
    assert log.apply_retention() > 0
    # Kafka's rule: delete a segment only while what remains stays >= retention.bytes.
    assert log.size_bytes - log.segments[0].size < 2500 < before
    assert log.log_start_offset == log.segments[0].base_offset > 0
    log.delete_due_files()
    assert not [n for n in os.listdir(log.directory) if n.endswith(".deleted")]
    log.update_config(log.config.__class__.from_mapping({"retention.ms": 1000, "segment.bytes": 1000}))
    clock.now += 5000
    log.apply_retention()
    assert log.log_start_offset == log.log_end_offset == 30
    assert log.append(batch(1)).first_offset == 30


def test_retention_never_passes_the_high_watermark(make_log):
    log = make_log({"segment.bytes": 1000, "retention.bytes": 0})
    for i in range(30):
        log.append(batch(1, value_size=100))
    log.set_high_watermark(0)
    assert log.apply_retention() == 0


def test_delete_records_moves_log_start(make_log):
    log = make_log({"segment.bytes": 1000})
    for i in range(30):
        log.append(batch(1, value_size=100))
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records(10)  # above the high watermark
    log.set_high_watermark(30)
    assert log.delete_records(12) == 12
    assert log.segments[0].base_offset <= 12
    with pytest.raises(OffsetOutOfRangeError):
        log.read(11, 100)
    assert log.read_batches(12)[0].base_offset == 12


def test_truncate_to(make_log):
    log = make_log({"segment.bytes": 1000})
    for i in range(30):
        log.append(batch(1, value_size=100), leader_epoch=i // 10)
    log.set_high_watermark(30)
    log.truncate_to(15)
    assert log.log_end_offset == 15 and log.high_watermark == 15
    assert offsets_of(log.read_batches(14)) == [(14, 14)]
    assert log.append(batch(1)).first_offset == 15
    assert log.end_offset_for_epoch(0) == (0, 10)
    assert log.end_offset_for_epoch(1) == (1, 16)


def test_replication_append_keeps_offsets(make_log):
    log = make_log()
    log.append(batch(2, base_offset=10, partition_leader_epoch=3), origin=AppendOrigin.REPLICATION)
    assert log.log_end_offset == 12
    assert log.log_start_offset == 10
    with pytest.raises(InvalidBatchError):
        log.append(batch(2, base_offset=5), origin=AppendOrigin.REPLICATION)
    assert log.end_offset_for_epoch(3) == (3, 12)


def test_group_commit_one_fsync_serves_many_waiters(make_log, monkeypatch):
    log = make_log()
    calls = []
    real = os.fsync

    def counting(fd):
        calls.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", counting)
    results = []

    def producer():
        res = log.append(batch(1))
        log.wait_flushed(res.last_offset + 1)
        results.append(log.recovery_point > res.last_offset)

    threads = [threading.Thread(target=producer) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert results == [True] * 16
    # Each flush costs 3 fsyncs (log, .index, .timeindex); far fewer flushes than appends.
    assert len(calls) < 16 * 3


def test_flush_messages_policy(make_log):
    log = make_log({"flush.messages": 3})
    log.append(batch(2))
    assert log.recovery_point == 0
    log.append(batch(2))
    assert log.recovery_point == 4


def test_delete_records_is_refused_on_compact_only_topics(make_log):
    from storage.errors import StorageError
    log = make_log({"cleanup.policy": "compact"})
    log.append(batch(1, key=b"k"))
    log.set_high_watermark(1)
    with pytest.raises(StorageError) as info:
        log.delete_records(1)
    assert info.value.error_code == 44
    assert make_log({"cleanup.policy": "compact,delete"}).delete_records(0) == 0


def test_a_torn_tail_is_cut_even_after_a_clean_stop(make_log):
    log = make_log(name="torn-0")
    log.append(batch(2))
    log.close()
    with open(log.active_segment.log_path, "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x01\x00")  # a header promising more
    again = make_log(name="torn-0")
    assert again.append(batch(1)).first_offset == 2
    assert offsets_of(again.read_batches(0)) == [(0, 1), (2, 2)]


def test_retention_never_deletes_the_empty_active_segment(make_log):
    # found by the model test: deleting it rolled a new segment onto the same file name
    log = make_log({"retention.bytes": 0, "file.delete.delay.ms": 0}, name="empty-0")
    assert log.apply_retention() == 0
    log.append(batch(1))
    log.close()
    again = make_log(name="empty-0", clean_shutdown=False)
    assert again.log_end_offset == 1


def test_recovery_below_the_log_start_restarts_empty_at_the_log_start(make_log):
    # found by the model test: an unflushed tail lost below a DeleteRecords log start
    log = make_log(name="below-0")
    log.append(batch(1))
    log.set_high_watermark(1)
    log.delete_records(1)
    path = log.active_segment.log_path
    log.close()
    with open(path, "r+b") as f:
        f.truncate(0)
    again = make_log(name="below-0", clean_shutdown=False, log_start_offset=1, high_watermark=1)
    assert again.log_start_offset == again.log_end_offset == 1
    assert again.append(batch(1)).first_offset == 1


@pytest.mark.parametrize("topic_codec,expected", [("gzip", 1), ("zstd", 4), ("uncompressed", 0)])
def test_topic_compression_type_recompresses_client_batches(make_log, topic_codec, expected):
    log = make_log({"compression.type": topic_codec})
    data = r.build_batch([r.SimpleRecord(value=b"v%d" % i, key=b"k", timestamp=NOW + i) for i in range(4)],
                         compression_type=r.Compression.LZ4, producer_id=3, producer_epoch=1, base_sequence=0)
    res = log.append(data)
    assert (res.first_offset, res.last_offset) == (0, 3)
    (b,) = log.read_batches(0)
    b.ensure_valid()
    assert b.compression == expected
    assert (b.producer_id, b.producer_epoch, b.base_sequence) == (3, 1, 0)
    assert [(x.offset, x.value, x.timestamp) for x in b.records()] == \
        [(i, b"v%d" % i, NOW + i) for i in range(4)]
    assert log.append(data).duplicate  # the retry is still recognised
