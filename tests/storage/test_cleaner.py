import os

import pytest

from protocol import records as r
from protocol.records import SimpleRecord
from storage.log import AppendOrigin

from .conftest import NOW

COMPACT = {"cleanup.policy": "compact", "segment.bytes": 1200, "min.cleanable.dirty.ratio": 0.01,
           "delete.retention.ms": 1000, "file.delete.delay.ms": 0}


def kv(key, value, ts=NOW, **kw):
    rec = SimpleRecord(value=value, key=key, timestamp=ts)
    return r.build_batch([rec], **kw)


def all_records(log):
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        batches = log.read_batches(offset)
        if not batches:
            break
        for b in batches:
            b.ensure_valid()
            out.extend(b.records())
        offset = batches[-1].last_offset + 1
    return out


def fill(log, rounds=6, keys=5, value=b"x" * 40):
    for n in range(rounds):
        for k in range(keys):
            log.append(kv(b"k%d" % k, value + b"%d" % n))
    log.roll()
    log.set_high_watermark(log.log_end_offset)


def test_keeps_the_last_record_per_key_and_offsets(make_log):
    log = make_log(COMPACT)
    fill(log)
    before = {rec.key: (rec.offset, rec.value) for rec in all_records(log)}
    stats = log.clean()
    assert stats is not None and stats.records_removed == 25
    after = all_records(log)
    assert {rec.key: (rec.offset, rec.value) for rec in after} == before
    assert len(after) == 5
    assert [rec.offset for rec in after] == sorted(rec.offset for rec in after)
    # fetch from an offset that was compacted away starts at the next surviving batch
    assert log.read_batches(0)[0].base_offset >= 0
    assert log.log_end_offset == 30


def test_clean_is_not_due_below_the_dirty_ratio_or_within_the_lag(make_log, clock):
    log = make_log(dict(COMPACT, **{"min.cleanable.dirty.ratio": 0.99}))
    fill(log)
    assert log.clean() is not None  # all dirty: ratio 1.0
    fill(log, rounds=1)
    assert log.clean() is None  # small dirty part against the cleaned head
    lagged = make_log(dict(COMPACT, **{"min.compaction.lag.ms": 60_000}))
    fill(lagged)
    assert lagged.clean() is None
    clock.now += 120_000
    assert lagged.clean() is not None


def test_tombstones_stay_until_delete_retention_then_go(make_log, clock):
    log = make_log(COMPACT)
    fill(log, rounds=2)
    log.append(kv(b"k1", None, ts=clock.now))
    log.roll()
    log.set_high_watermark(log.log_end_offset)
    log.clean()
    recs = {rec.key: rec.value for rec in all_records(log)}
    assert b"k1" in recs and recs[b"k1"] is None
    tomb_batch = [b for b in log.read_batches(0, max_offset=None) if b.last_offset == 10] or \
        [b for seg in log.segments for b in _segment_batches(log, seg) if b.last_offset == 10]
    assert tomb_batch and tomb_batch[0].has_delete_horizon
    clock.now += 2000
    log.append(kv(b"k2", b"new", ts=clock.now))
    log.roll()
    log.set_high_watermark(log.log_end_offset)
    log.clean(force=True)
    assert b"k1" not in {rec.key for rec in all_records(log)}


def _segment_batches(log, seg):
    return [seg.read_batch(pos, h.size) for pos, h in seg.iter_headers(0, seg.size)]


def test_aborted_transactions_and_old_markers_are_removed(make_log, clock):
    log = make_log(COMPACT)
    log.append(kv(b"a", b"1"))
    log.append(kv(b"t", b"aborted", producer_id=5, producer_epoch=0, base_sequence=0, transactional=True))
    log.append(r.build_control_batch(r.ControlType.ABORT, 5, 0, 0, timestamp=clock.now),
               origin=AppendOrigin.COORDINATOR)
    # the producer writes on, so its aborted batch is not the one holding its last sequence
    log.append(kv(b"b", b"2", producer_id=5, producer_epoch=0, base_sequence=1))
    log.roll()
    log.set_high_watermark(log.log_end_offset)
    log.clean()
    keys = [rec.key for rec in all_records(log)]
    assert b"t" not in keys and b"a" in keys and b"b" in keys
    assert any(len(rec.key or b"") == 4 for rec in all_records(log))  # marker kept for now
    clock.now += 5000
    log.append(kv(b"c", b"3", ts=clock.now))
    log.roll()
    log.set_high_watermark(log.log_end_offset)
    log.clean(force=True)
    recs = all_records(log)
    assert [rec.key for rec in recs] == [b"a", b"b", b"c"]


@pytest.mark.parametrize("codec", [r.Compression.GZIP, r.Compression.ZSTD, r.Compression.SNAPPY])
def test_compressed_batches_are_recompressed_with_their_codec(make_log, codec):
    log = make_log(COMPACT)
    for n in range(4):
        recs = [SimpleRecord(value=b"v%d" % n, key=b"k%d" % k, timestamp=NOW) for k in range(3)]
        recs.append(SimpleRecord(value=b"only-%d" % n, key=b"u%d" % n, timestamp=NOW))
        log.append(r.build_batch(recs, compression_type=codec))
    log.roll()
    log.set_high_watermark(log.log_end_offset)
    log.clean()
    for seg in log.segments:
        for b in _segment_batches(log, seg):
            b.ensure_valid()
            assert b.compression == codec
    recs = all_records(log)
    assert {rec.key: rec.value for rec in recs if rec.key.startswith(b"k")} == {
        b"k0": b"v3", b"k1": b"v3", b"k2": b"v3"}
    assert len([rec for rec in recs if rec.key.startswith(b"u")]) == 4


def test_idempotent_producer_keeps_its_sequence_through_compaction(make_log):
    log = make_log(COMPACT)
    log.append(kv(b"k", b"1", producer_id=9, producer_epoch=0, base_sequence=0))
    log.append(kv(b"k", b"2"))
    log.roll()
    log.set_high_watermark(log.log_end_offset)
    log.clean()
    assert [rec.value for rec in all_records(log)] == [b"2"]
    assert log.append(kv(b"k", b"1", producer_id=9, producer_epoch=0, base_sequence=0)).duplicate


def test_interrupted_swap_is_completed_at_start_up(make_log, tmp_path):
    log = make_log(COMPACT, name="c-0")
    fill(log)
    first = log.segments[0]
    # Clean, but stop right after the .cleaned -> .swap renames (as if killed there).
    from storage import cleaner
    original_finish = cleaner.finish_swap
    def killed(*_args):
        raise RuntimeError("killed")

    cleaner.finish_swap = killed
    try:
        with pytest.raises(RuntimeError):
            log.clean()
    finally:
        cleaner.finish_swap = original_finish
    names = os.listdir(tmp_path / "c-0")
    assert any(n.endswith(".log.swap") for n in names)
    again = make_log(COMPACT, name="c-0", clean_shutdown=False)
    recs = all_records(again)
    assert len({rec.key for rec in recs}) == 5
    assert not [n for n in os.listdir(tmp_path / "c-0") if n.endswith((".swap", ".cleaned"))]
    assert first.base_offset == again.segments[0].base_offset


def test_manager_cleans_due_logs_in_tick(tmp_path, clock):
    from storage.manager import LogManager
    mgr = LogManager(str(tmp_path), clock=clock)
    log = mgr.get_or_create_log("compacted", 0, COMPACT)
    fill(log)
    mgr.tick()
    assert len(all_records(log)) == 5
    mgr.close()
    again = LogManager(str(tmp_path), clock=clock)
    assert again.get_log("compacted", 0).cleaner_checkpoint == 30


def test_a_bounded_offset_map_cleans_a_prefix_per_pass(make_log):
    log = make_log(COMPACT)
    for n in range(4):
        for k in range(40):
            log.append(kv(b"k%d" % k, b"v%d" % n))
    log.roll()
    log.set_high_watermark(log.log_end_offset)
    first = log.clean(max_keys=10)
    assert first is not None and first.end_offset < log.log_end_offset
    passes = 1
    while log.clean(force=True, max_keys=10) is not None and passes < 50:
        passes += 1
    assert passes > 1
    latest = {rec.key: rec.value for rec in all_records(log)}
    assert latest == {b"k%d" % k: b"v3" for k in range(40)}


def test_background_cleaner_thread(tmp_path, clock):
    import time as _time
    from storage.manager import LogManager
    mgr = LogManager(str(tmp_path), clock=clock)
    log = mgr.get_or_create_log("bg", 0, COMPACT)
    fill(log)
    mgr.start_cleaner(interval_s=0.05)
    deadline = _time.monotonic() + 10
    while len(all_records(log)) != 5 and _time.monotonic() < deadline:
        _time.sleep(0.05)
    mgr.close()
    again = LogManager(str(tmp_path), clock=clock)
    assert len(all_records(again.get_log("bg", 0))) == 5


def test_commit_markers_stay_while_their_transaction_has_data(make_log, clock):
    log = make_log(COMPACT, name="m-0")
    log.append(kv(b"t", b"committed", producer_id=6, producer_epoch=0, base_sequence=0, transactional=True))
    log.append(r.build_control_batch(r.ControlType.COMMIT, 6, 0, 0, timestamp=clock.now),
               origin=AppendOrigin.COORDINATOR)
    log.append(kv(b"x", b"1"))
    log.roll()
    log.set_high_watermark(log.log_end_offset)
    log.clean(force=True)
    clock.now += 5000
    log.append(kv(b"y", b"2", ts=clock.now))
    log.roll()
    log.set_high_watermark(log.log_end_offset)
    log.clean(force=True)
    markers = [b for seg in log.segments for b in _segment_batches(log, seg) if b.is_control]
    assert len(markers) == 1  # the transaction still has its record
    # a replay of the compacted log from scratch sees the transaction closed
    log.close()
    for name in os.listdir(log.directory):
        if name.endswith(".snapshot"):
            os.remove(os.path.join(log.directory, name))
    again = make_log(COMPACT, name="m-0", clean_shutdown=False, high_watermark=10**6)
    assert again.last_stable_offset == again.log_end_offset
    # once the key is superseded (and the producer wrote on, so the batch does not hold
    # its last sequence), the data and then, after the horizon, the marker go
    again.append(kv(b"t", b"newer", ts=clock.now, producer_id=6, producer_epoch=0, base_sequence=1))
    again.roll()
    again.set_high_watermark(again.log_end_offset)
    again.clean(force=True)
    clock.now += 5000
    again.append(kv(b"z", b"3", ts=clock.now))
    again.roll()
    again.set_high_watermark(again.log_end_offset)
    again.clean(force=True)
    assert not [b for seg in again.segments for b in _segment_batches(again, seg) if b.is_control]


def _one_key_log(make_log, name, other_key_at=None):
    """Kafka 3.9's own run (segment.bytes 1024, a 100-byte value per batch: five batches per
    segment): 30 values of one key (but at `other_key_at`), cleaned; 12 more, to be cleaned again."""
    log = make_log(dict(COMPACT, **{"segment.bytes": 1024}), name=name)

    def append(count):
        for _ in range(count):
            key = b"b" if log.log_end_offset == other_key_at else b"a"
            log.append(kv(key, b"x" * 100))
        log.set_high_watermark(log.log_end_offset)

    append(30)
    log.clean(force=True)
    # the first pass cleans each segment alone (their sizes before cleaning fill one): four empty
    assert [(s.base_offset, s.size == 0) for s in log.segments] == [
        (0, True), (5, True), (10, True), (15, True), (20, False), (25, False)]
    append(12)
    return log


def _layout(log):
    return [(s.base_offset, s.size == 0) for s in log.segments]


def test_segments_a_pass_emptied_merge_on_the_next(make_log):
    """As Kafka groups segments to clean: 0-20 (four empty, one record) fit one segment and are
    rewritten as one, here emptied too; Kafka 3.9 left exactly these segments."""
    log = _one_key_log(make_log, "c-0")
    log.clean(force=True)
    assert _layout(log) == [(0, True), (25, True), (30, True), (35, False), (40, False)]
    assert [rec.offset for rec in all_records(log)] == [39, 40, 41]
    assert log.log_start_offset == 0 and log.log_end_offset == 42
    assert log.read_batches(0)[0].base_offset == 39      # a fetch from the start finds the next record
    again = make_log(COMPACT, name="c-0")
    assert _layout(again) == _layout(log) and [rec.offset for rec in all_records(again)] == [39, 40, 41]


def test_a_group_swap_interrupted_before_its_segments_went_is_finished_at_start_up(make_log, tmp_path):
    log = _one_key_log(make_log, "c-0", other_key_at=20)   # 0-20 are cleaned into one holding offset 20
    from storage import cleaner
    original_fsync = cleaner.fsync_dir

    def killed(*_args):   # right after the .cleaned -> .swap renames, before the group's others go
        raise RuntimeError("killed")

    cleaner.fsync_dir = killed
    try:
        with pytest.raises(RuntimeError):
            log.clean(force=True)
    finally:
        cleaner.fsync_dir = original_fsync
    assert "00000000000000000005.log" in os.listdir(tmp_path / "c-0")
    again = make_log(COMPACT, name="c-0", clean_shutdown=False)
    # segment 20 went (offset 20 is in the swapped segment 0 now); the pass stopped before 25-35
    assert [rec.offset for rec in all_records(again)] == [20, *range(25, 42)]
    assert [s.base_offset for s in again.segments] == [0, 25, 30, 35, 40]
    assert not [n for n in os.listdir(tmp_path / "c-0") if n.endswith((".swap", ".cleaned"))]
