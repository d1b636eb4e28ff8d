"""The share-partition state machine (broker/share/partition.py) driven with explicit times."""

from hypothesis import given, settings, strategies as st

from protocol import ErrorCode
from broker.share.partition import Acquired, AckType, RecordState, SharePartition, StateBatch

E = ErrorCode
T0 = 1_000_000


def sp(**kw):
    kw.setdefault("lock_duration_ms", 30_000)
    return SharePartition(0, **kw)


def test_acquire_then_accept_moves_the_start_offset():
    p = sp()
    assert p.acquire("a", 0, 9, 500, T0) == [Acquired(0, 9, 1)]
    assert p.end_offset == 10 and p.start_offset == 0
    assert p.acknowledge("a", 0, 9, [AckType.ACCEPT], T0) is E.NONE
    assert p.start_offset == 10 and p.records == {}
    assert p.acquire("a", 0, 9, 500, T0) == []          # nothing below the SPSO is handed out again


def test_two_members_share_one_partition_without_overlap():
    p = sp()
    first = p.acquire("a", 0, 9, 4, T0)
    second = p.acquire("b", 0, 9, 100, T0)
    assert first == [Acquired(0, 3, 1)] and second == [Acquired(4, 9, 1)]
    # b cannot acknowledge a's records
    assert p.acknowledge("b", 0, 3, [AckType.ACCEPT], T0) is E.INVALID_RECORD_STATE
    assert p.acknowledge("b", 4, 9, [AckType.ACCEPT], T0) is E.NONE
    assert p.start_offset == 0                          # a's records still hold it
    assert p.acknowledge("a", 0, 3, [AckType.ACCEPT], T0) is E.NONE
    assert p.start_offset == 10


def test_release_redelivers_with_the_next_delivery_count():
    p = sp()
    p.acquire("a", 0, 2, 10, T0)
    assert p.acknowledge("a", 0, 2, [AckType.ACCEPT, AckType.RELEASE, AckType.ACCEPT], T0) is E.NONE
    assert p.start_offset == 1 and p.next_fetch_offset() == 1
    assert p.acquire("b", 1, 2, 10, T0) == [Acquired(1, 1, 2)]
    assert p.acknowledge("b", 1, 1, [AckType.ACCEPT], T0) is E.NONE
    assert p.start_offset == 3


def test_lock_timeout_makes_records_available_again():
    p = sp(lock_duration_ms=1000)
    p.acquire("a", 0, 4, 10, T0)
    assert p.next_lock_deadline() == T0 + 1000
    assert p.expire_locks(T0 + 999) == 0
    assert p.expire_locks(T0 + 1000) == 5
    assert p.acknowledge("a", 0, 4, [AckType.ACCEPT], T0 + 1001) is E.INVALID_RECORD_STATE
    assert p.acquire("b", 0, 4, 10, T0 + 1001) == [Acquired(0, 4, 2)]


def test_renew_extends_the_lock():
    p = sp(lock_duration_ms=1000)
    p.acquire("a", 0, 0, 10, T0)
    assert p.acknowledge("a", 0, 0, [AckType.RENEW], T0 + 900) is E.NONE
    assert p.expire_locks(T0 + 1500) == 0
    assert p.expire_locks(T0 + 1900) == 1


def test_delivery_count_limit_archives():
    p = sp(delivery_count_limit=3, lock_duration_ms=10)
    now = T0
    for attempt in (1, 2, 3):
        assert p.acquire("a", 0, 1, 10, now) == [Acquired(0, 1, attempt)]
        now += 10
        p.expire_locks(now)
    # the third delivery was the last: archived, and the SPSO moved past both
    assert p.start_offset == 2 and p.acquire("a", 0, 1, 10, now) == []


def test_reject_and_gap_archive():
    p = sp()
    p.acquire("a", 0, 2, 10, T0)
    assert p.acknowledge("a", 0, 2, [AckType.REJECT, AckType.GAP, AckType.REJECT], T0) is E.NONE
    assert p.start_offset == 3


def test_bad_acknowledgements_change_nothing():
    p = sp()
    p.acquire("a", 0, 3, 10, T0)
    assert p.acknowledge("a", 0, 3, [1, 1], T0) is E.INVALID_REQUEST        # neither one type nor one per offset
    assert p.acknowledge("a", 3, 0, [1], T0) is E.INVALID_REQUEST
    assert p.acknowledge("a", 0, 3, [9], T0) is E.INVALID_REQUEST
    assert p.acknowledge("a", 2, 5, [1], T0) is E.INVALID_RECORD_STATE      # 4, 5 never acquired
    assert all(r.state is RecordState.ACQUIRED for r in p.records.values())


def test_max_in_flight_bounds_acquisition():
    p = sp(max_in_flight=3)
    assert p.acquire("a", 0, 9, 100, T0) == [Acquired(0, 2, 1)]
    assert p.acquire("b", 0, 9, 100, T0) == []
    p.acknowledge("a", 0, 0, [AckType.ACCEPT], T0)
    assert p.acquire("b", 0, 9, 100, T0) == [Acquired(3, 3, 1)]


def test_release_member_returns_its_records():
    p = sp()
    p.acquire("a", 0, 1, 10, T0)
    p.acquire("b", 0, 3, 10, T0)
    assert p.release_member("a") == 2
    assert p.acquire("c", 0, 3, 10, T0) == [Acquired(0, 1, 2)]


def test_snapshot_and_restore_keep_deliveries_not_locks():
    p = sp()
    p.acquire("a", 0, 5, 10, T0)
    p.acknowledge("a", 0, 0, [AckType.ACCEPT], T0)
    p.acknowledge("a", 2, 3, [AckType.ACCEPT, AckType.RELEASE], T0)
    snap = p.snapshot()
    assert snap == [StateBatch(1, 1, 0, 1), StateBatch(2, 2, 2, 1), StateBatch(3, 5, 0, 1)]
    q = sp()
    q.restore(p.start_offset, snap)
    assert q.start_offset == 1 and q.end_offset == 6
    assert q.acquire("b", 0, 9, 100, T0) == [Acquired(1, 1, 2), Acquired(3, 5, 2), Acquired(6, 9, 1)]


# ---- the invariant under arbitrary schedules: every record is delivered until it is acknowledged or
# has had its last delivery; nothing is handed to two members at once ------------------------------
ops = st.lists(st.one_of(
    st.tuples(st.just("acquire"), st.sampled_from("abc"), st.integers(1, 6)),
    st.tuples(st.just("ack"), st.sampled_from("abc"), st.sampled_from([1, 2, 3])),
    st.tuples(st.just("tick"), st.integers(0, 1500)),
    st.tuples(st.just("leave"), st.sampled_from("abc")),
), max_size=60)


@settings(max_examples=150, deadline=None)
@given(ops)
def test_every_record_settles_or_exhausts_its_deliveries(schedule):
    limit, records = 3, 12
    p = SharePartition(0, delivery_count_limit=limit, lock_duration_ms=1000, max_in_flight=8)
    now, held, accepted, deliveries = T0, {}, set(), {}
    for op in schedule:
        if op[0] == "acquire":
            for run in p.acquire(op[1], 0, records - 1, op[2], now):
                for o in range(run.first_offset, run.last_offset + 1):
                    assert o not in held, f"{o} handed out twice"
                    assert o not in accepted
                    held[o] = op[1]
                    deliveries[o] = deliveries.get(o, 0) + 1
                    assert run.delivery_count == deliveries[o] <= limit
        elif op[0] == "ack":
            mine = sorted(o for o, m in held.items() if m == op[1])
            for o in mine[:2]:
                assert p.acknowledge(op[1], o, o, [op[2]], now) is E.NONE
                del held[o]
                if op[2] == 1:
                    accepted.add(o)
        elif op[0] == "tick":
            now += op[1]
            p.expire_locks(now)
            held = {o: m for o, m in held.items() if p.records.get(o) and p.records[o].state is RecordState.ACQUIRED}
        else:
            p.release_member(op[1])
            held = {o: m for o, m in held.items() if m != op[1]}
    # drain: one member keeps fetching and releasing; everything must end accepted or archived
    for _ in range(limit * records + 5):
        now += 2000
        p.expire_locks(now)
        for run in p.acquire("z", 0, records - 1, records, now):
            for o in range(run.first_offset, run.last_offset + 1):
                deliveries[o] = deliveries.get(o, 0) + 1
                assert deliveries[o] <= limit and o not in accepted
            p.acknowledge("z", run.first_offset, run.last_offset, [AckType.RELEASE], now)
    assert p.start_offset == records and p.records == {}
    for o in range(records):
        assert o in accepted or deliveries.get(o, 0) >= 1


def test_undeliverable_offsets_are_archived_not_acquired():
    p = sp()
    # 0-2 data, 3 a transaction marker, 4-6 an aborted transaction's data, 7 its marker, 8-9 data
    got = p.acquire("a", 0, 9, 500, T0, skip=[(3, 3), (4, 6), (7, 7)])
    assert got == [Acquired(0, 2, 1), Acquired(8, 9, 1)]
    assert all(p.records[o].state is RecordState.ARCHIVED and p.records[o].delivery_count == 0 for o in range(3, 8))
    assert p.acknowledge("a", 0, 2, [AckType.ACCEPT], T0) is E.NONE
    assert p.start_offset == 8                          # the archived run does not hold the SPSO back
    # archived offsets count no delivery and use none of the record budget
    q = sp()
    assert q.acquire("a", 0, 9, 1, T0, skip=[(0, 4)]) == [Acquired(5, 5, 1)]
    assert q.start_offset == 5 and q.snapshot()[0] == StateBatch(5, 5, RecordState.AVAILABLE, 1)


def test_only_undeliverable_offsets_move_the_start_offset_and_change_the_version():
    p = sp()
    version = p.version
    assert p.acquire("a", 0, 3, 500, T0, skip=[(0, 3)]) == []
    assert p.version != version and p.start_offset == 4 and p.next_fetch_offset() == 4
    # a released record in a skipped range later is still only archived, never handed out
    q = sp()
    q.acquire("a", 0, 0, 500, T0)
    q.acknowledge("a", 0, 0, [AckType.RELEASE], T0)
    assert q.acquire("b", 0, 0, 500, T0, skip=[(0, 0)]) == [] and q.start_offset == 1
