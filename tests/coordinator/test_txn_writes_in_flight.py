"""Requests for a transactional id whose `__transaction_state` write is still in flight.

The harness's log holds acknowledgements (`hold_acks`), as a write waits for its followers under
acks=all. Kafka 3.9 (three brokers, a follower of `__transaction_state` paused) answers such requests
from the transaction as it was before the write, with CONCURRENT_TRANSACTIONS wherever they would
change it (its "pending state"); the answers below are the ones it gave.
"""

import pytest

from protocol import ErrorCode as E

from .test_txn_coordinator import TxnHarness, init

C = E.CONCURRENT_TRANSACTIONS


@pytest.fixture
def t():
    return TxnHarness(abort_check_interval_ms=1_000)


def describe(t, tid="tx"):
    d = t.coord.describe(tid)
    return d.state, d.producer_epoch, d.partitions


def test_requests_during_an_add_partitions_write(t):
    pid, epoch = init(t)
    t.log.hold_acks = True
    assert t.coord.add_partitions("tx", pid, epoch, [("t", 0)]) == E.NONE
    assert t.coord.add_partitions("tx", pid, epoch, [("t", 1)]) == C
    assert t.coord.add_partitions("tx", pid, epoch, [("t", 0)]) == C     # even a retry of the same
    assert t.coord.add_offsets("tx", pid, epoch, "g") == C
    assert t.coord.end_txn("tx", pid, epoch, True) == C
    assert t.coord.end_txn("tx", pid, epoch, False) == C
    assert t.coord.init_producer_id("tx", 60_000).error == C
    assert t.coord.init_producer_id("tx", 60_000, pid, epoch).error == C
    assert t.coord.add_partitions("tx", pid, epoch + 1, [("t", 2)]) == E.PRODUCER_FENCED
    # the partition is not in the transaction until the write commits: a produce to it is refused
    assert t.coord.verify_partitions("tx", pid, epoch, [("t", 0)]) == {("t", 0): E.TRANSACTION_ABORTABLE}
    assert describe(t) == ("Empty", epoch, [])
    assert len(t.log.records) == 2                      # nothing but the InitProducerId and the add
    t.log.acknowledge()
    assert describe(t) == ("Ongoing", epoch, [("t", 0)])
    assert t.coord.verify_partitions("tx", pid, epoch, [("t", 0)]) == {("t", 0): E.NONE}
    assert t.coord.add_partitions("tx", pid, epoch, [("t", 1)]) == E.NONE


def test_a_commit_racing_an_add_partitions_waits_for_it(t):
    pid, epoch = init(t)
    assert t.coord.add_partitions("tx", pid, epoch, [("t", 0)]) == E.NONE
    t.log.hold_acks = True
    assert t.coord.add_partitions("tx", pid, epoch, [("t", 1)]) == E.NONE
    assert t.coord.end_txn("tx", pid, epoch, True) == C
    assert t.markers.calls == []
    t.log.acknowledge()
    t.log.hold_acks = False
    assert t.coord.end_txn("tx", pid, epoch, True) == E.NONE
    assert t.markers.calls == [(pid, epoch, True, [("t", 0), ("t", 1)])]   # the late partition too


def test_requests_during_an_end_txn_write(t):
    pid, epoch = init(t)
    assert t.coord.add_partitions("tx", pid, epoch, [("t", 0)]) == E.NONE
    t.log.hold_acks = True
    t.markers.hold = True
    assert t.coord.end_txn("tx", pid, epoch, True) == E.NONE
    for commit in (True, False):
        assert t.coord.end_txn("tx", pid, epoch, commit) == C
    assert t.coord.add_partitions("tx", pid, epoch, [("t", 1)]) == C
    assert t.coord.add_offsets("tx", pid, epoch, "g") == C
    assert t.coord.init_producer_id("tx", 60_000).error == C
    assert t.coord.init_producer_id("tx", 60_000, pid, epoch).error == C
    assert describe(t) == ("Ongoing", epoch, [("t", 0)])
    t.log.acknowledge()
    assert describe(t) == ("PrepareCommit", epoch, [("t", 0)])
    t.markers.release()
    assert describe(t)[0] == "PrepareCommit"            # CompleteCommit is in flight now
    assert t.coord.end_txn("tx", pid, epoch, True) == C
    t.log.acknowledge()
    assert describe(t) == ("CompleteCommit", epoch, [])
    assert t.coord.end_txn("tx", pid, epoch, True) == E.NONE


def test_requests_during_an_epoch_bump(t):
    pid, epoch = init(t)
    t.log.hold_acks = True
    bumped = t.coord.init_producer_id("tx", 60_000)
    assert (bumped.error, bumped.producer_epoch) == (E.NONE, epoch + 1)
    assert t.coord.init_producer_id("tx", 60_000).error == C
    assert t.coord.init_producer_id("tx", 60_000, pid, epoch).error == C
    assert t.coord.add_partitions("tx", pid, epoch, [("t", 0)]) == C         # not fenced yet
    assert t.coord.add_partitions("tx", pid, epoch + 1, [("t", 0)]) == E.PRODUCER_FENCED   # not yet its epoch
    assert t.coord.end_txn("tx", pid, epoch + 1, True) == E.PRODUCER_FENCED
    assert describe(t) == ("Empty", epoch, [])
    t.log.acknowledge()
    assert describe(t) == ("Empty", epoch + 1, [])
    assert t.coord.add_partitions("tx", pid, epoch, [("t", 0)]) == E.PRODUCER_FENCED


def test_two_first_init_producer_ids(t):
    t.log.hold_acks = True
    first = t.coord.init_producer_id("new", 60_000)
    assert (first.error, first.producer_epoch) == (E.NONE, 0)
    assert t.coord.init_producer_id("new", 60_000).error == C
    assert describe(t, "new") == ("Empty", -1, [])
    t.log.acknowledge()
    assert describe(t, "new") == ("Empty", 0, [])
    assert len(t.log.records) == 1


def test_no_timeout_abort_while_a_write_is_in_flight(t):
    pid, epoch = init(t, timeout=2_000)
    assert t.coord.add_partitions("tx", pid, epoch, [("t", 0)]) == E.NONE
    t.advance(1_500)
    t.log.hold_acks = True
    assert t.coord.add_partitions("tx", pid, epoch, [("t", 1)]) == E.NONE
    t.advance(3_000)                                    # expired, but its add is in flight
    assert describe(t) == ("Ongoing", epoch, [("t", 0)])
    assert t.markers.calls == []
    t.log.acknowledge()
    t.log.hold_acks = False
    t.advance(1_000)
    assert t.markers.calls == [(pid, epoch + 1, False, [("t", 0), ("t", 1)])]
    assert describe(t) == ("CompleteAbort", epoch + 1, [])


def test_a_timeout_abort_fences_the_producer_before_it_commits(t):
    pid, epoch = init(t, timeout=2_000)
    assert t.coord.add_partitions("tx", pid, epoch, [("t", 0)]) == E.NONE
    t.log.hold_acks = True
    t.advance(3_000)
    assert describe(t) == ("Ongoing", epoch + 1, [("t", 0)])   # as Kafka: the bumped epoch shows at once
    assert t.coord.end_txn("tx", pid, epoch, True) == E.PRODUCER_FENCED
    assert t.coord.add_partitions("tx", pid, epoch, [("t", 1)]) == E.PRODUCER_FENCED
    assert t.coord.verify_partitions("tx", pid, epoch, [("t", 0)]) == {("t", 0): E.PRODUCER_FENCED}
    assert t.coord.init_producer_id("tx", 60_000).error == C
    assert t.coord.end_txn("tx", pid, epoch + 1, False) == C
    t.log.acknowledge()
    t.log.hold_acks = False
    assert t.coord.end_txn("tx", pid, epoch, True) == E.PRODUCER_FENCED
    assert describe(t) == ("CompleteAbort", epoch + 1, [])
    assert t.coord.init_producer_id("tx", 60_000, pid, epoch).error == E.PRODUCER_FENCED


@pytest.mark.parametrize("failure", [E.REQUEST_TIMED_OUT, E.NOT_ENOUGH_REPLICAS_AFTER_APPEND])
def test_a_failed_write_is_no_longer_in_flight(t, failure):
    pid, epoch = init(t)
    t.log.hold_acks = True
    assert t.coord.add_partitions("tx", pid, epoch, [("t", 0)]) == E.NONE
    t.log.acknowledge(failure)
    # the record stays in the coordinator's log and may yet commit: the state follows the log
    assert t.coord.add_partitions("tx", pid, epoch, [("t", 1)]) == E.NONE
    assert describe(t) == ("Ongoing", epoch, [("t", 0)])


def test_requests_while_markers_are_in_flight(t):
    """Kafka 3.9 with the data partition's leader paused after PrepareCommit committed: everything is
    told to retry, an abort and an InitProducerId naming another producer id included."""
    pid, epoch = init(t)
    assert t.coord.add_partitions("tx", pid, epoch, [("t", 0)]) == E.NONE
    t.markers.hold = True
    assert t.coord.end_txn("tx", pid, epoch, True) == E.NONE
    for commit in (True, False):
        assert t.coord.end_txn("tx", pid, epoch, commit) == C
    assert t.coord.add_partitions("tx", pid, epoch, [("t", 1)]) == C
    assert t.coord.add_offsets("tx", pid, epoch, "g") == C
    assert t.coord.init_producer_id("tx", 60_000).error == C
    assert t.coord.init_producer_id("tx", 60_000, pid + 100, 0).error == C
    assert t.coord.verify_partitions("tx", pid, epoch, [("t", 0)]) == {("t", 0): C}
    assert describe(t) == ("PrepareCommit", epoch, [("t", 0)])
