"""Transaction coordinator transitions, fencing and timeouts, on a fake clock."""

import pytest

from broker.coordinator.clock import FakeClock, Timers
from broker.coordinator.log_records import MemoryTransactionLog
from broker.coordinator.txn_coordinator import CounterProducerIds, TransactionCoordinator, TxnConfig
from protocol import ErrorCode as E


class Markers:
    """Records marker requests; in `hold` mode completion waits for `release()`."""

    def __init__(self):
        self.calls = []
        self.hold = False
        self.waiting = []
        self.fail_next = 0

    def write_markers(self, transactional_id, producer_id, producer_epoch, commit, partitions, done):
        self.calls.append((producer_id, producer_epoch, commit, partitions))
        if self.fail_next:
            self.fail_next -= 1
            done(False)
        elif self.hold:
            self.waiting.append(done)
        else:
            done(True)

    def release(self):
        waiting, self.waiting = self.waiting, []
        for done in waiting:
            done(True)


class TxnHarness:
    def __init__(self, **config):
        self.clock = FakeClock()
        self.timers = Timers()
        self.log = MemoryTransactionLog()
        self.markers = Markers()
        self.ids = CounterProducerIds(1000)
        self.coord = TransactionCoordinator(self.clock, self.timers, self.log, self.ids, self.markers,
                                            TxnConfig(**config), lambda g: ("__consumer_offsets", 7))

    def advance(self, ms):
        target = self.clock.now_ms() + ms
        while (nxt := self.timers.next_deadline()) is not None and nxt <= target:
            self.clock.advance(max(nxt - self.clock.now_ms(), 0))
            self.timers.run_due(self.clock.now_ms())
        self.clock.advance(target - self.clock.now_ms())

    def state(self, tid="tx"):
        return self.coord.describe(tid).state


@pytest.fixture
def t():
    return TxnHarness()


def init(t, tid="tx", timeout=60_000, **kw):
    r = t.coord.init_producer_id(tid, timeout, **kw)
    assert r.error == E.NONE, r
    return r.producer_id, r.producer_epoch


def test_idempotent_producer_gets_fresh_ids(t):
    a = t.coord.init_producer_id(None, 0)
    b = t.coord.init_producer_id(None, 0, 1000, 0)  # KIP-360 callers get a fresh id too
    assert (a.error, a.producer_id, a.producer_epoch) == (E.NONE, 1000, 0)
    assert (b.producer_id, b.producer_epoch) == (1001, 0)
    assert t.log.records == []


def test_init_validates_timeout_and_id(t):
    assert t.coord.init_producer_id("tx", 0).error == E.INVALID_TRANSACTION_TIMEOUT
    assert t.coord.init_producer_id("tx", 900_001).error == E.INVALID_TRANSACTION_TIMEOUT
    assert t.coord.init_producer_id("", 1000).error == E.INVALID_REQUEST


def test_commit_flow(t):
    pid, epoch = init(t)
    assert (pid, epoch) == (1000, 0) and t.state() == "Empty"
    assert t.coord.add_partitions("tx", pid, epoch, [("a", 0), ("b", 1)]) == E.NONE
    assert t.state() == "Ongoing"
    start = t.coord.describe("tx").start_timestamp
    t.advance(5)
    assert t.coord.add_offsets("tx", pid, epoch, "grp") == E.NONE
    d = t.coord.describe("tx")
    assert d.start_timestamp == start and d.partitions == [("__consumer_offsets", 7), ("a", 0), ("b", 1)]
    assert t.coord.end_txn("tx", pid, epoch, commit=True) == E.NONE
    assert t.markers.calls == [(pid, epoch, True, [("__consumer_offsets", 7), ("a", 0), ("b", 1)])]
    assert t.state() == "CompleteCommit" and t.coord.describe("tx").partitions == []
    states = [r.value.state for r in t.log.records]
    assert states == [0, 1, 1, 2, 4]
    # retried EndTxn of the same outcome succeeds, the other outcome is an invalid state
    assert t.coord.end_txn("tx", pid, epoch, commit=True) == E.NONE
    assert t.coord.end_txn("tx", pid, epoch, commit=False) == E.INVALID_TXN_STATE
    # the next transaction starts from CompleteCommit
    assert t.coord.add_partitions("tx", pid, epoch, [("a", 0)]) == E.NONE
    assert t.coord.describe("tx").start_timestamp > start


def test_a_new_epoch_keeps_the_last_transactions_start_time(t):
    # Kafka 3.9: InitProducerId (a restarted producer, Admin.fenceProducers) bumps the epoch of a
    # completed transaction and DescribeTransactions still shows when that transaction began.
    pid, epoch = init(t)
    assert t.coord.describe("tx").start_timestamp == -1
    t.coord.add_partitions("tx", pid, epoch, [("a", 0)])
    start = t.coord.describe("tx").start_timestamp
    t.advance(5)
    assert t.coord.end_txn("tx", pid, epoch, commit=True) == E.NONE
    t.advance(5)
    assert init(t) == (pid, epoch + 1)
    d = t.coord.describe("tx")
    assert (d.state, d.start_timestamp) == ("Empty", start)


def test_abort_flow(t):
    pid, epoch = init(t)
    t.coord.add_partitions("tx", pid, epoch, [("a", 0)])
    assert t.coord.end_txn("tx", pid, epoch, commit=False) == E.NONE
    assert t.markers.calls[-1][2] is False and t.state() == "CompleteAbort"
    assert t.coord.end_txn("tx", pid, epoch, commit=True) == E.INVALID_TXN_STATE


def test_end_txn_without_transaction(t):
    pid, epoch = init(t)
    assert t.coord.end_txn("tx", pid, epoch, True) == E.INVALID_TXN_STATE
    assert t.coord.end_txn("nope", pid, epoch, True) == E.INVALID_PRODUCER_ID_MAPPING
    assert t.coord.end_txn("tx", pid + 1, epoch, True) == E.INVALID_PRODUCER_ID_MAPPING
    assert t.coord.end_txn("tx", pid, epoch + 1, True) == E.PRODUCER_FENCED


def test_concurrent_transactions_while_markers_in_flight(t):
    pid, epoch = init(t)
    t.coord.add_partitions("tx", pid, epoch, [("a", 0)])
    t.markers.hold = True
    assert t.coord.end_txn("tx", pid, epoch, True) == E.NONE
    assert t.state() == "PrepareCommit"
    assert t.coord.add_partitions("tx", pid, epoch, [("a", 0)]) == E.CONCURRENT_TRANSACTIONS
    assert t.coord.end_txn("tx", pid, epoch, True) == E.CONCURRENT_TRANSACTIONS
    assert t.coord.init_producer_id("tx", 60_000).error == E.CONCURRENT_TRANSACTIONS
    t.markers.release()
    assert t.state() == "CompleteCommit"
    assert t.coord.add_partitions("tx", pid, epoch, [("a", 0)]) == E.NONE


def test_prepare_states_answer_end_txn_like_kafka(t):
    pid, epoch = init(t)
    t.coord.add_partitions("tx", pid, epoch, [("a", 0)])
    t.markers.hold = True
    t.coord.end_txn("tx", pid, epoch, False)
    txn = t.coord.txns["tx"]
    txn.markers_in_flight = False  # look at the state table alone
    assert t.coord.end_txn("tx", pid, epoch, False) == E.CONCURRENT_TRANSACTIONS
    assert t.coord.end_txn("tx", pid, epoch, True) == E.INVALID_TXN_STATE


def test_marker_failure_is_retried(t):
    pid, epoch = init(t)
    t.coord.add_partitions("tx", pid, epoch, [("a", 0)])
    t.markers.fail_next = 1
    assert t.coord.end_txn("tx", pid, epoch, True) == E.NONE
    assert t.state() == "PrepareCommit"
    t.advance(1_000)
    assert t.state() == "CompleteCommit" and len(t.markers.calls) == 2


def test_reinit_bumps_epoch_and_fences_old_producer(t):
    pid, e0 = init(t)
    pid2, e1 = init(t)
    assert pid2 == pid and e1 == e0 + 1
    assert t.coord.add_partitions("tx", pid, e0, [("a", 0)]) == E.PRODUCER_FENCED
    assert t.coord.add_partitions("tx", pid, e1, [("a", 0)]) == E.NONE


def test_init_during_ongoing_aborts_with_bumped_epoch(t):
    pid, e0 = init(t)
    t.coord.add_partitions("tx", pid, e0, [("a", 0)])
    r = t.coord.init_producer_id("tx", 60_000)
    assert r.error == E.CONCURRENT_TRANSACTIONS
    assert t.markers.calls[-1] == (pid, e0 + 1, False, [("a", 0)])
    assert t.state() == "CompleteAbort"
    pid2, e2 = init(t)  # the retry
    assert (pid2, e2) == (pid, e0 + 2)
    assert t.coord.end_txn("tx", pid, e0, False) == E.PRODUCER_FENCED


def test_kip360_init_with_expected_epoch(t):
    pid, e0 = init(t)
    pid1, e1 = init(t, expected_producer_id=pid, expected_epoch=e0)  # recover after an abortable error
    assert (pid1, e1) == (pid, e0 + 1)
    # retrying that same request (response lost) returns the current epoch without another bump
    assert init(t, expected_producer_id=pid, expected_epoch=e0) == (pid, e1)
    assert t.coord.init_producer_id("tx", 60_000, pid, 77).error == E.PRODUCER_FENCED
    assert t.coord.init_producer_id("tx", 60_000, 999, 0).error == E.PRODUCER_FENCED


def test_epoch_exhaustion_rotates_producer_id(t):
    pid, _ = init(t)
    t.coord.txns["tx"].producer_epoch = 32766
    pid2, e2 = init(t)
    assert pid2 != pid and e2 == 0
    assert t.coord.txns["tx"].previous_producer_id == pid


def test_timed_out_transaction_is_aborted_and_producer_fenced(make_txn=None):
    t = TxnHarness(abort_check_interval_ms=10_000)
    pid, e0 = init(t, timeout=15_000)
    t.coord.add_partitions("tx", pid, e0, [("a", 0)])
    t.advance(10_000)
    assert t.state() == "Ongoing"
    t.advance(10_000)
    assert t.state() == "CompleteAbort"
    assert t.markers.calls == [(pid, e0 + 1, False, [("a", 0)])]
    assert t.coord.end_txn("tx", pid, e0, True) == E.PRODUCER_FENCED
    assert t.coord.add_partitions("tx", pid, e0, [("a", 0)]) == E.PRODUCER_FENCED


def test_idle_transactional_id_expires(t):
    init(t)
    t.advance(7 * 24 * 3600 * 1000 + 3_600_000)
    assert t.coord.describe("tx").error == E.TRANSACTIONAL_ID_NOT_FOUND
    assert t.log.records[-1].value is None


def test_verify_only(t):
    pid, e0 = init(t)
    t.coord.add_partitions("tx", pid, e0, [("a", 0)])
    assert t.coord.verify_partitions("tx", pid, e0, [("a", 0), ("a", 1)]) == {
        ("a", 0): E.NONE, ("a", 1): E.TRANSACTION_ABORTABLE}
    assert t.coord.verify_partitions("tx", pid, e0 + 1, [("a", 0)]) == {("a", 0): E.PRODUCER_FENCED}
    assert t.coord.describe("tx").partitions == [("a", 0)]  # verifying adds nothing


def test_log_failure_leaves_state_unchanged(t):
    pid, e0 = init(t)
    t.log.fail_with = OSError("disk")
    assert t.coord.add_partitions("tx", pid, e0, [("a", 0)]) == E.COORDINATOR_NOT_AVAILABLE
    assert t.state() == "Empty"
    assert t.coord.init_producer_id("new", 1000).error == E.COORDINATOR_NOT_AVAILABLE
    assert "new" not in t.coord.txns


def test_list_and_describe(t):
    pid, e0 = init(t, "a")
    init(t, "b")
    t.coord.add_partitions("a", pid, e0, [("x", 0)])
    t.advance(100)
    rows, unknown = t.coord.list(states=["Ongoing", "Bogus"])
    assert rows == [("a", pid, "Ongoing")] and unknown == ["Bogus"]
    assert len(t.coord.list()[0]) == 2
    assert t.coord.list(producer_ids=[pid])[0] == [("a", pid, "Ongoing")]
    assert t.coord.list(states=["Ongoing"], min_duration_ms=99)[0] == [("a", pid, "Ongoing")]
    assert t.coord.list(states=["Ongoing"], min_duration_ms=100)[0] == []
    assert t.coord.describe("zzz").error == E.TRANSACTIONAL_ID_NOT_FOUND


def test_recovery_completes_decided_transactions(t):
    pid, e0 = init(t)
    t.coord.add_partitions("tx", pid, e0, [("a", 0)])
    t.markers.hold = True
    t.coord.end_txn("tx", pid, e0, True)
    # crash before the markers were written: a new coordinator replays the log and finishes the commit
    fresh = TxnHarness()
    for record in t.log.records:
        fresh.coord.replay(record)
    fresh.coord.loaded()
    assert fresh.markers.calls == [(pid, e0, True, [("a", 0)])]
    assert fresh.state() == "CompleteCommit"
    assert fresh.coord.end_txn("tx", pid, e0, True) == E.NONE


def test_serde_round_trip(t):
    from broker.coordinator.serde import decode_txn_record, encode_txn_record
    pid, e0 = init(t)
    t.coord.add_partitions("tx", pid, e0, [("a", 0), ("a", 3), ("b", 1)])
    t.coord.end_txn("tx", pid, e0, False)
    t.log.records.append(type(t.log.records[0])("tx", None))
    for record in t.log.records:
        decoded = decode_txn_record(*encode_txn_record(record))
        if record.value is not None:  # v0 does not carry the previous/next producer ids
            record = type(record)(record.transactional_id, record.value.__class__(
                **{**record.value.__dict__, "previous_producer_id": -1, "next_producer_id": -1}))
        assert decoded == record
