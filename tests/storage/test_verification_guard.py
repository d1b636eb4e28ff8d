"""The verification guard (KIP-890, inside storage as in Kafka): a transactional batch verified with
the coordinator before an abort marker landed must not open a transaction no marker closes."""

import pytest

from protocol import records as r
from storage.errors import InvalidTxnStateError
from storage.validation import AppendOrigin

from .conftest import batch

PID, EPOCH = 7, 0


def _txn(n, seq):
    return batch(n, producer_id=PID, producer_epoch=EPOCH, base_sequence=seq, transactional=True)


def _abort():
    return r.build_control_batch(r.ControlType.ABORT, PID, EPOCH, 0)


def test_a_marker_between_verification_and_append_voids_the_guard(make_log):
    log = make_log()
    guard = log.start_verification(PID, EPOCH)          # the coordinator is asked meanwhile...
    log.append(_abort(), origin=AppendOrigin.COORDINATOR)  # ...and the transaction is aborted
    end = log.log_end_offset
    with pytest.raises(InvalidTxnStateError):
        log.append(_txn(3, 0), verification_guard=guard)
    assert log.log_end_offset == end
    assert log.first_unstable_offset is None              # no transaction left open


def test_a_live_guard_admits_the_first_batch_and_the_transaction_then_needs_none(make_log):
    log = make_log()
    first, shared = log.start_verification(PID, EPOCH), log.start_verification(PID, EPOCH)
    assert first is shared                                  # concurrent first batches share one
    log.append(_txn(2, 0), verification_guard=first)
    assert log.first_unstable_offset == 0
    ongoing = log.start_verification(PID, EPOCH)
    log.append(_txn(1, 2), verification_guard=ongoing)
    log.append(_abort(), origin=AppendOrigin.COORDINATOR)
    with pytest.raises(InvalidTxnStateError):               # verified while ongoing, appended after
        log.append(_txn(1, 3), verification_guard=ongoing)
    log.set_high_watermark(log.log_end_offset)
    assert log.first_unstable_offset is None


def test_appends_without_a_guard_are_not_checked(make_log):
    # Verification off (transaction.partition.verification.enable=false): as before.
    log = make_log()
    log.append(_txn(1, 0))
    assert log.first_unstable_offset == 0
