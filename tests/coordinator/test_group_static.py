"""Static membership (KIP-345): group.instance.id joins, fencing, rejoin without rebalance."""

from protocol import ErrorCode as E


def form_static(h, instances, **kw):
    joins = [(iid, h.join(instance_id=iid, client_id=iid, **kw)) for iid in instances]
    h.advance(0)
    results = {iid: p.result for iid, p in joins}
    assert all(r.error == E.NONE for r in results.values())
    leader_iid = next(iid for iid, r in results.items() if r.members)
    gen = results[leader_iid].generation_id
    ids = {iid: r.member_id for iid, r in results.items()}
    leader = ids[leader_iid]
    syncs = [h.sync("g", mid, gen, [(m, iid.encode()) for iid, m in ids.items()] if mid == leader else (),
                    instance_id=iid) for iid, mid in ids.items()]
    assert all(s.result.error == E.NONE for s in syncs)
    return ids, gen, leader_iid


def test_static_member_skips_member_id_handshake(h):
    p = h.join(instance_id="i1")
    h.advance(0)
    assert p.result.error == E.NONE and p.result.member_id.startswith("i1-")


def test_static_follower_rejoins_without_rebalance_and_old_id_is_fenced(h):
    ids, gen, leader_iid = form_static(h, ["i1", "i2"])
    follower_iid = "i2" if leader_iid == "i1" else "i1"
    old_id = ids[follower_iid]
    again = h.join(instance_id=follower_iid, client_id=follower_iid)  # restarted: no member id
    r = again.result
    assert r.error == E.NONE and r.generation_id == gen and r.member_id != old_id
    assert r.leader == ids[leader_iid] and r.members == [] and not r.skip_assignment
    assert h.state() == "Stable"
    # its assignment survived: SyncGroup with the new id returns it
    assert h.sync("g", r.member_id, gen, instance_id=follower_iid).result.assignment == follower_iid.encode()
    assert h.coord.heartbeat("g", old_id, follower_iid, gen) == E.FENCED_INSTANCE_ID
    assert h.coord.heartbeat("g", r.member_id, follower_iid, gen) == E.NONE
    assert h.join(member_id=old_id, instance_id=follower_iid).result.error == E.FENCED_INSTANCE_ID
    # the replacement was persisted
    snap = h.log.records()[-1].value
    assert r.member_id in [m.member_id for m in snap.members]


def test_static_leader_rejoin_gets_skip_assignment(h):
    ids, gen, leader_iid = form_static(h, ["i1", "i2"])
    r = h.join(instance_id=leader_iid, client_id=leader_iid).result
    assert r.error == E.NONE and r.generation_id == gen and r.skip_assignment
    assert r.leader == r.member_id and len(r.members) == 2
    assert h.state() == "Stable"


def test_static_leader_rejoin_before_v9_is_told_the_old_leader(h):
    ids, gen, leader_iid = form_static(h, ["i1", "i2"])
    r = h.join(instance_id=leader_iid, client_id=leader_iid, skip_assignment=False).result
    assert r.error == E.NONE and r.generation_id == gen and not r.skip_assignment
    assert r.leader == ids[leader_iid] != r.member_id and r.members == []
    assert h.state() == "Stable"


def test_static_rejoin_with_changed_protocol_rebalances(h):
    ids, gen, leader_iid = form_static(h, ["i1"], protocols=[("range", b""), ("roundrobin", b"")])
    p = h.join(instance_id="i1", protocols=[("roundrobin", b""), ("range", b"")])
    # a new generation at once: the only member has already rejoined
    assert p.result.error == E.NONE and p.result.generation_id == gen + 1
    assert h.state() == "CompletingRebalance" and p.result.protocol_name == "roundrobin"
    assert h.join(instance_id="i1", protocols=[("other", b"")]).result.error == E.INCONSISTENT_GROUP_PROTOCOL


def test_static_rejoin_while_completing_rebalance_restarts_rebalance(h):
    p1, p2 = h.join(instance_id="i1", client_id="a"), h.join(instance_id="i2", client_id="b")
    h.advance(0)
    assert h.state() == "CompletingRebalance" and p2.result.error == E.NONE
    p2b = h.join(instance_id="i2", client_id="b")
    assert h.state() == "PreparingRebalance"
    p1b = h.join(member_id=p1.result.member_id, instance_id="i1")
    assert p1b.result.error == E.NONE and p2b.result.error == E.NONE
    assert p2b.result.generation_id == p1.result.generation_id + 1


def test_static_rejoin_during_preparing_rebalance_fences_old_request(h):
    ids, gen, _ = form_static(h, ["i1", "i2"])
    old = h.join(member_id=ids["i1"], instance_id="i1", protocols=[("range", b"x")])
    assert h.state() == "PreparingRebalance" and not old.done
    new = h.join(instance_id="i1")
    assert old.result.error == E.FENCED_INSTANCE_ID and not new.done
    h.join(member_id=ids["i2"], instance_id="i2")
    assert new.result.error == E.NONE and new.result.generation_id == gen + 1


def test_static_rejoin_that_completes_the_join_phase_answers_at_once(h):
    """The replacing join may be the last one the rebalance waits for (Kafka completes the phase then)."""
    ids, gen, _ = form_static(h, ["i1", "i2"])
    lead = h.join(member_id=ids["i1"], instance_id="i1", protocols=[("range", b"x")])
    assert h.state() == "PreparingRebalance"
    new = h.join(instance_id="i2")      # i2 restarted: no member id, nothing else pending
    assert new.done and new.result.error == E.NONE and new.result.generation_id == gen + 1
    assert lead.result.generation_id == gen + 1 and len(lead.result.members) == 2
    assert h.state() == "CompletingRebalance"


def test_leave_group_by_instance_id(h):
    ids, gen, _ = form_static(h, ["i1", "i2", "i3"])
    top, results = h.coord.leave_group("g", [("", "i1"), ("wrong-id", "i2"), (ids["i3"], "i3"), ("", "nope")])
    assert top == E.NONE
    assert [e for _, _, e in results] == [E.NONE, E.FENCED_INSTANCE_ID, E.NONE, E.UNKNOWN_MEMBER_ID]
    assert list(h.coord.groups["g"].static_members) == ["i2"]


def test_static_member_missing_the_join_keeps_its_place(h):
    """KIP-345: at the rebalance timeout only dynamic members that did not rejoin are dropped."""
    ids, gen, _ = form_static(h, ["i1", "i2"], rebalance=20_000, session=60_000)
    p = h.join(member_id=ids["i1"], instance_id="i1", protocols=[("range", b"x")], rebalance=20_000, session=60_000)
    h.advance(20_000)
    assert p.result.error == E.NONE and p.result.generation_id == gen + 1
    assert sorted(m for m, _, _ in p.result.members) == sorted(ids.values())
    assert h.coord.heartbeat("g", ids["i2"], "i2", gen) == E.ILLEGAL_GENERATION
    late = h.join(member_id=ids["i2"], instance_id="i2", rebalance=20_000, session=60_000)
    assert late.result.error == E.NONE and late.result.generation_id == gen + 1 and late.result.members == []
    assert h.sync("g", ids["i2"], gen + 1, instance_id="i2").done is False   # waits for the leader


def test_absent_static_member_that_never_syncs_is_removed(h):
    ids, gen, _ = form_static(h, ["i1", "i2"], rebalance=20_000, session=60_000)
    h.join(member_id=ids["i1"], instance_id="i1", protocols=[("range", b"x")], rebalance=20_000, session=60_000)
    h.advance(20_000)
    assert h.sync("g", ids["i1"], gen + 1, [(ids["i1"], b"1"), (ids["i2"], b"2")], instance_id="i1").result.error \
        == E.NONE
    h.advance(20_000)    # the pending-sync timeout of generation gen + 1
    assert list(h.coord.groups["g"].static_members) == ["i1"] and h.state() == "PreparingRebalance"


def test_join_phase_nobody_rejoined_waits_for_another_timeout(h):
    ids, gen, _ = form_static(h, ["i1", "i2"], rebalance=20_000, session=60_000)
    member_id, _ = h.join_new(rebalance=20_000, session=60_000)
    assert h.state() == "PreparingRebalance"
    h.coord.leave_group("g", [(member_id, None)])         # the only member that joined leaves
    h.advance(20_000)
    assert h.state() == "PreparingRebalance" and h.coord.groups["g"].generation_id == gen
    p = h.join(member_id=ids["i2"], instance_id="i2", rebalance=20_000, session=60_000)
    h.advance(20_000)
    assert p.result.error == E.NONE and p.result.generation_id == gen + 1
    assert p.result.leader == ids["i2"] and len(p.result.members) == 2
