"""A follower's log: the leader's batches appended unchanged, truncation, epoch lookups."""

import os

import pytest

from protocol import records as r
from storage.errors import InvalidBatchError
from storage.log import AppendOrigin

from tests.storage.conftest import batch

REPLICATION = AppendOrigin.REPLICATION


def _copy_log(leader, follower, start=0):
    """What a follower fetch does: the leader's bytes, appended as they are."""
    offset = start
    while offset < leader.log_end_offset:   # one read stops at a segment's end
        for piece in leader.read(offset, 1 << 30):
            follower.append(piece.read(), origin=REPLICATION)
        offset = follower.log_end_offset


def _bytes_of(log):
    return b"".join(batch.view().tobytes() for batch in _all_batches(log))


def _all_batches(log):
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        found = log.read_batches(offset)
        out.extend(found)
        offset = found[-1].next_offset
    return out


def test_follower_appends_leader_bytes_unchanged(make_log):
    leader, follower = make_log(name="t-0"), make_log(name="t-1")
    for epoch in (0, 0, 2, 5):
        leader.append(batch(3), leader_epoch=epoch)
    leader.append(batch(2, producer_id=7, producer_epoch=1, base_sequence=0), leader_epoch=5)
    _copy_log(leader, follower)
    assert _bytes_of(follower) == _bytes_of(leader)
    assert follower.log_end_offset == leader.log_end_offset == 14
    assert follower.epochs.entries == leader.epochs.entries == [(0, 0), (2, 6), (5, 9)]
    assert follower.producer_last_offsets() == leader.producer_last_offsets() == {7: 13}


def test_follower_keeps_transactions_and_aborted_index(make_log):
    leader, follower = make_log(name="t-0"), make_log(name="t-1")
    leader.append(batch(2, producer_id=9, producer_epoch=0, base_sequence=0, transactional=True),
                  leader_epoch=1)
    leader.append(r.build_control_batch(r.ControlType.ABORT, 9, 0, 3), leader_epoch=1,
                  origin=AppendOrigin.COORDINATOR)
    leader.append(batch(1, producer_id=10, producer_epoch=0, base_sequence=0, transactional=True),
                  leader_epoch=1)
    _copy_log(leader, follower)
    follower.set_high_watermark(follower.log_end_offset)
    leader.set_high_watermark(leader.log_end_offset)
    assert [(t.producer_id, t.first_offset) for t in follower.aborted_transactions(0, 10)] == [(9, 0)]
    # the open transaction of producer 10 holds the last stable offset on both
    assert follower.last_stable_offset == leader.last_stable_offset == 3


def test_follower_refuses_corrupt_or_backwards_batches(make_log):
    follower = make_log()
    data = bytearray(batch(2, base_offset=0, partition_leader_epoch=1))
    data[-1] ^= 0xFF  # a flipped bit in the records: the CRC no longer matches
    with pytest.raises(InvalidBatchError):
        follower.append(bytes(data), origin=REPLICATION)
    follower.append(batch(2, base_offset=0, partition_leader_epoch=1), origin=REPLICATION)
    with pytest.raises(InvalidBatchError):
        follower.append(batch(2, base_offset=1, partition_leader_epoch=1), origin=REPLICATION)
    assert follower.log_end_offset == 2


def test_truncate_divergent_suffix_then_continue(make_log):
    leader, follower = make_log(name="t-0", config={"segment.bytes": 400}), \
        make_log(name="t-1", config={"segment.bytes": 400})
    for _ in range(6):
        leader.append(batch(2), leader_epoch=1)
    _copy_log(leader, follower)
    # the follower then got a suffix of epoch 2 that the new leader (epoch 3) never saw
    follower.append(batch(2, base_offset=12, partition_leader_epoch=2,
                          producer_id=4, producer_epoch=0, base_sequence=0), origin=REPLICATION)
    leader.assign_epoch_start(3)
    leader.append(batch(3), leader_epoch=3)
    epoch, end = leader.end_offset_for_epoch(follower.latest_epoch)
    assert (epoch, end) == (1, 12)   # epoch 2 unknown to the leader: its floor, epoch 1, ends at 12
    follower.truncate_to(end)
    assert follower.log_end_offset == 12 and follower.epochs.entries == [(1, 0)]
    assert follower.producer_last_offsets() == {}
    _copy_log(leader, follower, 12)
    assert _bytes_of(follower) == _bytes_of(leader)
    assert follower.epochs.entries == [(1, 0), (3, 12)]


def test_epoch_end_offsets_as_kafka(make_log):
    log = make_log()
    log.append(batch(2, base_offset=5, partition_leader_epoch=2), origin=REPLICATION)
    log.append(batch(2, base_offset=7, partition_leader_epoch=4), origin=REPLICATION)
    assert log.end_offset_for_epoch(4) == (4, 9)      # latest: the log end
    assert log.end_offset_for_epoch(3) == (2, 7)      # floor epoch, ends where 4 starts
    assert log.end_offset_for_epoch(1) == (1, 5)      # older than all: where the first starts
    assert log.end_offset_for_epoch(6) == (-1, -1)    # newer than the latest
    assert log.end_offset_for_epoch(-1) == (-1, -1)    # undefined
    assert log.end_offset_for_epoch(-5) == (-5, 5)     # any other negative one is merely older than all


def test_epoch_checkpoint_survives_restart(make_log, tmp_path):
    log = make_log(name="t-0")
    log.append(batch(1, base_offset=0, partition_leader_epoch=3), origin=REPLICATION)
    log.assign_epoch_start(5)
    log.append(batch(1), leader_epoch=5)
    log.close_clean()
    log.close()
    again = make_log(name="t-0")
    assert again.epochs.entries == [(3, 0), (5, 1)]
    assert os.path.exists(os.path.join(again.directory, "leader-epoch-checkpoint"))


def test_follower_follows_leader_log_start(make_log):
    follower = make_log(config={"segment.bytes": 300, "cleanup.policy": "compact"})
    for i in range(10):
        follower.append(batch(1, base_offset=i, partition_leader_epoch=0, key=b"k"),
                        origin=REPLICATION)
    follower.set_high_watermark(10)
    assert follower.advance_log_start_offset(6) == 6
    assert follower.log_start_offset == 6 and follower.segments[0].base_offset <= 6
    assert follower.advance_log_start_offset(50) == 10   # never past its own log end
    assert follower.advance_log_start_offset(3) == 10    # never back


def test_truncate_fully_when_behind_leader_log_start(make_log):
    follower = make_log()
    follower.append(batch(3, base_offset=0, partition_leader_epoch=0), origin=REPLICATION)
    follower.truncate_fully_and_start_at(100)
    assert follower.log_start_offset == follower.log_end_offset == 100
    assert follower.epochs.entries == []
    follower.append(batch(1, base_offset=100, partition_leader_epoch=2), origin=REPLICATION)
    assert follower.log_end_offset == 101


def test_truncating_at_the_end_drops_an_empty_epoch(make_log):
    """A leader that started an epoch and appended nothing, now a follower of a newer leader."""
    log = make_log()
    log.append(batch(2, base_offset=0, partition_leader_epoch=0), origin=REPLICATION)
    log.assign_epoch_start(1)
    log.truncate_to(2)
    assert log.epochs.entries == [(0, 0)] and log.log_end_offset == 2
