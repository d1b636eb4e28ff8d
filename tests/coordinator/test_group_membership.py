"""JoinGroup / SyncGroup / Heartbeat / LeaveGroup transitions of the classic group, on a fake clock."""

from protocol import ErrorCode as E


def form_group(h, n=1, group="g", **kw):
    """n members through join + sync; returns their member ids (leader first) and the generation."""
    joins = [h.join_new(group, client_id=f"c{i}", **kw) for i in range(n)]
    h.advance(0)
    results = [p.result for _, p in joins]
    assert all(r.error == E.NONE for r in results), results
    gen = results[0].generation_id
    leader = results[0].leader
    ids = [mid for mid, _ in joins]
    syncs = [h.sync(group, mid, gen, [(m, m.encode()) for m in ids] if mid == leader else ())
             for mid in ids]
    assert all(s.done and s.result.error == E.NONE for s in syncs)
    return ids, gen


def test_member_id_required_then_join_completes_as_leader(h, sub):
    first = h.join()
    assert first.result.error == E.MEMBER_ID_REQUIRED
    member_id = first.result.member_id
    assert member_id.startswith("client-")
    assert h.state() == "Empty"
    joined = h.join(member_id=member_id)
    assert h.state() == "PreparingRebalance"
    h.advance(0)  # initial delay 0 in this harness
    r = joined.result
    assert r.error == E.NONE and r.generation_id == 1 and r.leader == member_id
    assert r.protocol_name == "range" and r.protocol_type == "consumer"
    assert r.members == [(member_id, None, sub("t"))]
    assert h.state() == "CompletingRebalance"


def test_old_clients_join_without_handshake(h):
    joined = h.join(require_known=False)
    h.advance(0)
    assert joined.result.error == E.NONE and joined.result.member_id


def test_sync_distributes_leader_assignment_and_empty_for_missing(h):
    (a, pa), (b, pb) = h.join_new(client_id="a"), h.join_new(client_id="b")
    h.advance(0)
    gen = pa.result.generation_id
    assert pa.result.generation_id == pb.result.generation_id == 1
    leader = pa.result.leader
    follower = b if leader == a else a
    assert len((pa if leader == a else pb).result.members) == 2
    assert (pb if leader == a else pa).result.members == []
    follower_sync = h.sync("g", follower, gen)
    assert not follower_sync.done  # waits for the leader
    leader_sync = h.sync("g", leader, gen, [(leader, b"L")])  # follower left out on purpose
    assert leader_sync.result.error == E.NONE and leader_sync.result.assignment == b"L"
    assert follower_sync.result.error == E.NONE and follower_sync.result.assignment == b""
    assert h.state() == "Stable"
    # a Stable group answers SyncGroup with the stored assignment
    assert h.sync("g", leader, gen).result.assignment == b"L"


def test_second_member_joining_never_gets_unknown_member_id(h):
    (a,), gen = form_group(h, 1)
    b, pb = h.join_new(client_id="b")
    assert not pb.done and h.state() == "PreparingRebalance"
    assert h.coord.heartbeat("g", a, None, gen) == E.REBALANCE_IN_PROGRESS
    pa = h.join(member_id=a)
    assert pa.done and pb.done  # everyone is in: the join phase ends at once
    assert pa.result.error == E.NONE and pb.result.error == E.NONE
    assert pa.result.generation_id == pb.result.generation_id == gen + 1
    assert pa.result.leader == a and len(pa.result.members) == 2


def test_heartbeat_errors(h):
    (a,), gen = form_group(h, 1)
    assert h.coord.heartbeat("nope", a, None, gen) == E.UNKNOWN_MEMBER_ID
    assert h.coord.heartbeat("g", "stranger", None, gen) == E.UNKNOWN_MEMBER_ID
    assert h.coord.heartbeat("g", a, None, gen + 5) == E.ILLEGAL_GENERATION
    assert h.coord.heartbeat("g", a, None, gen) == E.NONE
    assert h.coord.heartbeat("", a, None, gen) == E.INVALID_GROUP_ID


def test_heartbeat_in_completing_rebalance_is_fine(h):
    a, pa = h.join_new()
    h.advance(0)
    assert h.state() == "CompletingRebalance"
    assert h.coord.heartbeat("g", a, None, pa.result.generation_id) == E.NONE


def test_session_timeout_removes_silent_member_and_rebalances(h):
    (a, b), gen = form_group(h, 2, session=10_000)
    h.advance(6_000)
    assert h.coord.heartbeat("g", a, None, gen) == E.NONE  # a keeps heartbeating, b is silent
    h.advance(3_999)
    assert b in h.coord.groups["g"].members
    h.advance(1)
    assert b not in h.coord.groups["g"].members
    assert h.coord.heartbeat("g", a, None, gen) == E.REBALANCE_IN_PROGRESS
    pa = h.join(member_id=a)
    assert pa.result.error == E.NONE and pa.result.generation_id == gen + 1 and len(pa.result.members) == 1


def test_rebalance_timeout_drops_members_that_do_not_rejoin(h):
    (a, b), gen = form_group(h, 2, rebalance=20_000, session=30_000)
    pa = h.join(member_id=a, rebalance=20_000, session=30_000)  # the leader forces a rebalance
    assert not pa.done
    h.advance(19_999)
    assert not pa.done
    h.advance(1)
    assert pa.result.error == E.NONE and pa.result.generation_id == gen + 1
    assert list(h.coord.groups["g"].members) == [a]
    assert h.coord.heartbeat("g", b, None, gen) == E.UNKNOWN_MEMBER_ID


def test_initial_rebalance_delay_extends_for_new_members(make_harness):
    h = make_harness(initial_rebalance_delay_ms=3_000)
    a, pa = h.join_new(client_id="a", rebalance=10_000)
    h.advance(2_000)
    b, pb = h.join_new(client_id="b", rebalance=10_000)
    h.advance(1_000)  # first delay over, but a member arrived during it: wait another round
    assert not pa.done
    h.advance(2_999)
    assert not pa.done
    h.advance(1)
    assert pa.result.error == pb.result.error == E.NONE
    assert pa.result.generation_id == 1 and len(pa.result.members) == 2


def test_initial_delay_ends_without_new_members(make_harness):
    h = make_harness(initial_rebalance_delay_ms=3_000)
    a, pa = h.join_new()
    h.advance(2_999)
    assert not pa.done
    h.advance(1)
    assert pa.result.error == E.NONE


def test_group_max_size(make_harness):
    h = make_harness(max_size=1)
    form_group(h, 1)
    r = h.join()
    assert r.result.error == E.GROUP_MAX_SIZE_REACHED


def test_invalid_session_timeout_and_group_id(h):
    assert h.join(session=10).result.error == E.INVALID_SESSION_TIMEOUT
    assert h.join(session=3_600_000).result.error == E.INVALID_SESSION_TIMEOUT
    assert h.join(group="").result.error == E.INVALID_GROUP_ID
    assert "g" not in h.coord.groups


def test_protocol_selection_by_vote(h):
    a, pa = h.join_new(client_id="a", protocols=[("range", b"1"), ("roundrobin", b"2")])
    b, pb = h.join_new(client_id="b", protocols=[("roundrobin", b"3"), ("range", b"4")])
    c, pc = h.join_new(client_id="c", protocols=[("roundrobin", b"5")])
    h.advance(0)
    assert pa.result.protocol_name == "roundrobin"
    assert sorted(m[2] for m in pa.result.members) == [b"2", b"3", b"5"]


def test_inconsistent_protocols_rejected(h):
    form_group(h, 1)
    assert h.join(protocols=[("other", b"")]).result.error == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.join(protocol_type="connect").result.error == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.join(group="x", protocols=[]).result.error == E.INCONSISTENT_GROUP_PROTOCOL


def test_unknown_member_join_errors(h):
    assert h.join(member_id="ghost").result.error == E.UNKNOWN_MEMBER_ID
    form_group(h, 1)
    assert h.join(member_id="ghost").result.error == E.UNKNOWN_MEMBER_ID


def test_follower_rejoin_with_same_metadata_in_stable_keeps_generation(h):
    (a, b), gen = form_group(h, 2)
    r = h.join(member_id=b)
    assert r.result.error == E.NONE and r.result.generation_id == gen and r.result.members == []
    assert h.state() == "Stable"


def test_rejoin_during_completing_rebalance_replays_answer(h):
    _, (b, pb) = h.join_new(client_id="a"), h.join_new(client_id="b")
    h.advance(0)
    again = h.join(member_id=b)
    assert again.result.error == E.NONE and again.result.generation_id == pb.result.generation_id
    assert h.state() == "CompletingRebalance"


def test_join_during_completing_rebalance_with_new_metadata_aborts_syncs(h):
    (a, pa), (b, _) = h.join_new(client_id="a"), h.join_new(client_id="b")
    h.advance(0)
    gen = pa.result.generation_id
    waiting = h.sync("g", b, gen)
    pa2 = h.join(member_id=a, protocols=[("range", b"changed")])
    assert waiting.result.error == E.REBALANCE_IN_PROGRESS
    assert h.state() == "PreparingRebalance" and not pa2.done
    pb2 = h.join(member_id=b)
    assert pa2.result.generation_id == pb2.result.generation_id == gen + 1


def test_sync_errors(h):
    (a,), gen = form_group(h, 1)
    assert h.sync("nope", a, gen).result.error == E.UNKNOWN_MEMBER_ID
    assert h.sync("g", "x", gen).result.error == E.UNKNOWN_MEMBER_ID
    assert h.sync("g", a, gen + 1).result.error == E.ILLEGAL_GENERATION
    assert h.coord.sync_group("g", a, None, gen, "connect", None, []).result.error == E.INCONSISTENT_GROUP_PROTOCOL
    b, pb = h.join_new(client_id="b")
    assert h.sync("g", a, gen).result.error == E.REBALANCE_IN_PROGRESS


def test_pending_sync_timeout_removes_members_that_never_sync(h):
    (a, pa), (b, _) = (h.join_new(client_id="a", rebalance=20_000, session=30_000),
                       h.join_new(client_id="b", rebalance=20_000, session=30_000))
    h.advance(0)
    gen = pa.result.generation_id
    leader = pa.result.leader
    other = b if leader == a else a
    assert h.sync("g", leader, gen, [(leader, b"x"), (other, b"y")]).result.error == E.NONE
    h.advance(20_000)  # `other` never sent SyncGroup
    group = h.coord.groups["g"]
    assert other not in group.members and h.state() == "PreparingRebalance"


def test_leave_group_batched(h):
    (a, b, c), gen = form_group(h, 3)
    top, results = h.coord.leave_group("g", [(a, None), (b, None), ("ghost", None)])
    assert top == E.NONE
    assert results == [(a, None, E.NONE), (b, None, E.NONE), ("ghost", None, E.UNKNOWN_MEMBER_ID)]
    assert h.state() == "PreparingRebalance"
    pc = h.join(member_id=c)
    assert pc.result.error == E.NONE and pc.result.leader == c and len(pc.result.members) == 1


def test_last_member_leaving_empties_group_and_bumps_generation(h):
    (a,), gen = form_group(h, 1)
    h.coord.leave_group("g", [(a, None)])
    assert h.state() == "Empty" and h.coord.groups["g"].generation_id == gen + 1


def test_leave_unknown_group(h):
    top, results = h.coord.leave_group("nope", [("m", None)])
    assert top == E.NONE and results == [("m", None, E.UNKNOWN_MEMBER_ID)]


def test_leave_pending_member_lets_join_complete(h):
    (a,), gen = form_group(h, 1)
    pending = h.join(client_id="late")  # MEMBER_ID_REQUIRED: now pending
    pending_id = pending.result.member_id
    pa = h.join(member_id=a, protocols=[("range", b"new")])
    assert not pa.done  # waits for the pending member
    h.coord.leave_group("g", [(pending_id, None)])
    assert pa.result.error == E.NONE


def test_pending_member_expires_after_session_timeout(h):
    (a,), gen = form_group(h, 1, session=10_000)
    h.join(client_id="late", session=10_000)
    pa = h.join(member_id=a, protocols=[("range", b"new")], session=10_000)
    h.advance(10_000)
    assert pa.result.error == E.NONE and not h.coord.groups["g"].pending_members


def test_new_member_join_times_out_after_five_minutes(make_harness):
    h = make_harness(initial_rebalance_delay_ms=0)
    (a,), gen = form_group(h, 1, rebalance=600_000, session=30_000)
    b, pb = h.join_new(client_id="b", rebalance=600_000, session=30_000)
    for _ in range(29):
        h.advance(10_000)
        assert h.coord.heartbeat("g", a, None, gen) == E.REBALANCE_IN_PROGRESS  # a stays, never rejoins
    assert not pb.done
    h.advance(10_000)
    assert pb.result.error == E.UNKNOWN_MEMBER_ID  # removed; a live client would simply retry


def test_expired_member_with_pending_join_is_told(h):
    (a, b), gen = form_group(h, 2, rebalance=40_000, session=10_000)
    # b rejoins, a goes silent and never rejoins: the rebalance timeout drops a, b carries on alone
    pb = h.join(member_id=b, session=10_000, rebalance=40_000, protocols=[("range", b"v2")])
    h.advance(40_000)
    assert pb.result.error == E.NONE and pb.result.leader == b


def test_nobody_syncs_so_everyone_is_dropped_and_the_group_empties(h):
    (a, pa), (b, pb) = (h.join_new(client_id="a", rebalance=20_000, session=30_000),
                        h.join_new(client_id="b", rebalance=20_000, session=30_000))
    h.advance(0)
    assert h.state() == "CompletingRebalance"
    h.advance(19_999)
    assert h.state() == "CompletingRebalance"
    h.advance(1)
    group = h.coord.groups["g"]
    assert h.state() == "Empty" and not group.members and group.generation_id == pa.result.generation_id + 1
    assert h.coord.heartbeat("g", a, None, pa.result.generation_id) == E.UNKNOWN_MEMBER_ID
