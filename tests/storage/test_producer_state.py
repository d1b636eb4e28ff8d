import os

import pytest

from protocol import records as r
from storage.errors import (
    InvalidProducerEpochError, InvalidTxnStateError, OutOfOrderSequenceError, StorageError,
)
from storage.log import AppendOrigin
from storage.txn_index import AbortedTxn

from .conftest import batch


def idem(seq, n=1, pid=7, epoch=0, txn=False):
    return batch(n, producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=txn)


def marker(kind, pid=7, epoch=0, coordinator_epoch=0):
    return r.build_control_batch(kind, pid, epoch, coordinator_epoch)


def coord(log, data):
    return log.append(data, origin=AppendOrigin.COORDINATOR)


def test_duplicate_retry_returns_the_original_offsets(make_log):
    log = make_log()
    first = log.append(idem(0, 2))
    log.append(batch(3))  # someone else's data in between
    second = log.append(idem(2, 2))
    retry = log.append(idem(0, 2))
    assert retry.duplicate and (retry.first_offset, retry.last_offset) == (first.first_offset, first.last_offset)
    retry = log.append(idem(2, 2))
    assert (retry.first_offset, retry.last_offset) == (second.first_offset, second.last_offset)
    assert log.log_end_offset == 7


def test_sequence_gap_is_out_of_order(make_log):
    log = make_log()
    log.append(idem(0, 2))
    with pytest.raises(OutOfOrderSequenceError) as info:
        log.append(idem(5))
    assert info.value.error_code == 45
    log.append(idem(2))


def test_unknown_producer_accepts_any_sequence(make_log):
    log = make_log()
    log.append(idem(42))  # e.g. its earlier data was deleted by retention
    log.append(idem(43))


def test_fenced_epoch_and_new_epoch_rules(make_log):
    log = make_log()
    log.append(idem(0, epoch=3))
    with pytest.raises(InvalidProducerEpochError) as info:
        log.append(idem(1, epoch=2))
    assert info.value.error_code == 47
    with pytest.raises(OutOfOrderSequenceError):
        log.append(idem(5, epoch=4))  # a new epoch must start at sequence 0
    log.append(idem(0, epoch=4))


def test_batches_without_a_sequence_are_never_duplicates(make_log):
    # the group coordinator writes each TxnOffsetCommit as a transactional batch of the producer id
    # and epoch with no sequence; a second transaction's commit must reach the log, or a coordinator
    # that loads the partition later sees only the first transaction's offsets
    log = make_log()
    first = coord(log, idem(r.NO_SEQUENCE, txn=True))
    coord(log, marker(r.ControlType.COMMIT))
    second = coord(log, idem(r.NO_SEQUENCE, txn=True))
    assert not second.duplicate and second.first_offset == first.first_offset + 2
    assert log.log_end_offset == 3


def test_older_than_five_batches_is_not_a_duplicate(make_log):
    log = make_log()
    for seq in range(7):
        log.append(idem(seq))
    with pytest.raises(OutOfOrderSequenceError):
        log.append(idem(0))
    assert log.append(idem(3)).duplicate


def test_producer_state_survives_clean_and_unclean_restarts(make_log):
    log = make_log(name="p-0")
    log.append(idem(0, 3))
    log.close_clean()
    log.close()
    again = make_log(name="p-0")
    assert again.append(idem(0, 3)).duplicate  # retry of the last batch after a restart
    with pytest.raises(OutOfOrderSequenceError):
        again.append(idem(9))
    again.append(idem(3))
    # unclean: no snapshot at the end, state is replayed from the log
    crashed = make_log(name="p-0", clean_shutdown=False)
    assert crashed.append(idem(3)).duplicate
    crashed.append(idem(4))


def test_transactions_lso_and_aborted_index(make_log):
    log = make_log()
    log.append(batch(2))                          # 0-1
    log.append(idem(0, 2, pid=1, txn=True))        # 2-3 txn of 1
    log.append(idem(0, 1, pid=2, txn=True))        # 4   txn of 2
    log.set_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 2
    with pytest.raises(InvalidTxnStateError):
        log.append(idem(2, pid=1))                 # non-transactional inside its transaction
    coord(log, marker(r.ControlType.ABORT, pid=1))  # 5
    log.set_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 4
    coord(log, marker(r.ControlType.COMMIT, pid=2))  # 6
    log.set_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 7
    assert log.aborted_transactions(0, 7) == [AbortedTxn(1, 2, 5, 4)]
    assert log.aborted_transactions(6, 7) == []
    # read_committed reads stop at the LSO
    log.append(idem(1, 1, pid=2, txn=True))        # 7, open again
    log.set_high_watermark(log.log_end_offset)
    assert [b.base_offset for b in log.read_batches(0, max_offset=log.last_stable_offset)][-1] == 6


def test_txn_index_file_format_and_rebuild_after_crash(make_log):
    log = make_log(name="x-0")
    log.append(idem(0, 2, pid=9, txn=True))
    coord(log, marker(r.ControlType.ABORT, pid=9))
    seg = log.active_segment
    data = open(seg.txn_index.path, "rb").read()
    assert len(data) == 34 and data[:2] == b"\x00\x00"
    os.remove(seg.txn_index.path)
    crashed = make_log(name="x-0", clean_shutdown=False)
    assert crashed.aborted_transactions(0, 10) == [AbortedTxn(9, 0, 2, 3)]


def test_open_transaction_survives_restart(make_log):
    log = make_log(name="o-0")
    log.append(idem(0, 2, pid=5, txn=True))
    log.set_high_watermark(2)
    log.close_clean()
    log.close()
    again = make_log(name="o-0", high_watermark=2)
    assert again.last_stable_offset == 0
    coord(again, marker(r.ControlType.COMMIT, pid=5))
    again.set_high_watermark(3)
    assert again.last_stable_offset == 3


def test_coordinator_epoch_fencing(make_log):
    log = make_log()
    log.append(idem(0, pid=3, txn=True))
    coord(log, marker(r.ControlType.COMMIT, pid=3, coordinator_epoch=5))
    with pytest.raises(StorageError) as info:
        coord(log, marker(r.ControlType.COMMIT, pid=3, coordinator_epoch=4))
    assert info.value.error_code == 52


def test_truncation_rebuilds_producer_state(make_log):
    log = make_log({"segment.bytes": 1000})
    for seq in range(10):
        log.append(idem(seq, 1))
        log.append(batch(1, value_size=100))
    log.truncate_to(9)  # keeps idem seqs 0..4 (offsets 0,2,4,6,8)
    log.append(idem(5))
    with pytest.raises(OutOfOrderSequenceError):
        log.append(idem(9))


def test_retention_evicts_producers_below_log_start(make_log, clock):
    log = make_log({"segment.bytes": 1000, "retention.ms": 10, "file.delete.delay.ms": 0})
    log.append(idem(0))
    for _ in range(20):
        log.append(batch(1, value_size=100, ts=clock.now))
    log.set_high_watermark(log.log_end_offset)
    clock.now += 1000
    log.apply_retention()
    assert 7 not in log.producer_state.producers
    log.append(idem(77))  # unknown again: any sequence goes


def test_after_a_marker_bumps_the_epoch_sequences_restart_at_zero(make_log):
    log = make_log()
    log.append(idem(0, 3, pid=4, epoch=1, txn=True))
    coord(log, marker(r.ControlType.COMMIT, pid=4, epoch=2))  # transaction protocol v2 bumps the epoch
    with pytest.raises(OutOfOrderSequenceError):
        log.append(idem(3, pid=4, epoch=2, txn=True))
    with pytest.raises(InvalidProducerEpochError):
        log.append(idem(0, pid=4, epoch=1, txn=True))
    log.append(idem(0, pid=4, epoch=2, txn=True))


def test_a_decided_transaction_stays_unstable_until_its_marker_is_below_the_high_watermark(make_log):
    log = make_log()
    log.append(idem(0, 2, pid=8, txn=True))          # 0-1
    log.set_high_watermark(2)
    coord(log, marker(r.ControlType.COMMIT, pid=8))  # 2, not yet replicated
    assert log.last_stable_offset == 0
    log.set_high_watermark(3)
    assert log.last_stable_offset == 3


def test_truncate_fully_forgets_producers(make_log):
    log = make_log({"segment.bytes": 1000})
    for seq in range(5):
        log.append(idem(seq))
        log.append(batch(1, value_size=300))
    log.truncate_fully_and_start_at(100)
    assert log.log_start_offset == log.log_end_offset == 100
    assert not log.producer_state.producers
    log.append(idem(77))  # unknown producer again
    assert not [n for n in os.listdir(log.directory) if n.endswith(".snapshot") and int(n[:20]) < 100]
