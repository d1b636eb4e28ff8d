"""Random transaction schedules on a fake clock: invariants, fencing, and the log replays to memory."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.coordinator.txn_state import TxnState
from protocol import ErrorCode as E
from tests.coordinator.test_txn_coordinator import TxnHarness

OPS = st.lists(st.tuples(
    st.sampled_from(["init", "init_expected", "add", "offsets", "commit", "abort", "advance", "hold", "release"]),
    st.integers(0, 1),        # which transactional id
    st.integers(0, 30_000)),  # ms to advance
    max_size=50)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_random_transaction_schedules(ops):
    t = TxnHarness(abort_check_interval_ms=5_000)
    producers: dict[str, tuple[int, int]] = {}
    highest_epoch: dict[int, int] = {}
    for op, who, ms in ops:
        tid = f"tx{who}"
        pid, epoch = producers.get(tid, (-1, -1))
        if op in ("init", "init_expected"):
            expected = (pid, epoch) if op == "init_expected" else (-1, -1)
            r = t.coord.init_producer_id(tid, 20_000, *expected)
            if r.error == E.NONE:
                producers[tid] = (r.producer_id, r.producer_epoch)
        elif op == "add":
            t.coord.add_partitions(tid, pid, epoch, [("a", who), ("b", 0)])
        elif op == "offsets":
            t.coord.add_offsets(tid, pid, epoch, "group")
        elif op in ("commit", "abort"):
            t.coord.end_txn(tid, pid, epoch, op == "commit")
        elif op == "advance":
            t.advance(ms)
        elif op == "hold":
            t.markers.hold = True
        elif op == "release":
            t.markers.hold = False
            t.markers.release()
        for txn in t.coord.txns.values():
            # epochs only grow for a producer id; markers are in flight exactly in the Prepare states
            assert txn.producer_epoch >= highest_epoch.get(txn.producer_id, -1)
            highest_epoch[txn.producer_id] = txn.producer_epoch
            assert txn.markers_in_flight == (txn.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT))
            if txn.state is not TxnState.ONGOING and txn.state not in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                assert not txn.partitions
    # markers written with an epoch never go back in time for a producer id
    last: dict[int, int] = {}
    for producer_id, epoch, _, _ in t.markers.calls:
        assert epoch >= last.get(producer_id, -1)
        last[producer_id] = epoch
    # the log alone rebuilds what memory holds
    fresh = TxnHarness()
    for record in t.log.records:
        fresh.coord.replay(record)
    for tid, txn in t.coord.txns.items():
        other = fresh.coord.txns[tid]
        assert (other.producer_id, other.producer_epoch, other.state, other.partitions) == \
            (txn.producer_id, txn.producer_epoch, txn.state, txn.partitions)
    # with markers flowing again and time passing, nothing stays open or half-done
    t.markers.hold = False
    t.markers.release()
    t.advance(60_000)
    assert all(txn.state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
               for txn in t.coord.txns.values())
