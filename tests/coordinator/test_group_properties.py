"""Random schedules of group requests on a fake clock: invariants hold and no request hangs."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.coordinator.clock import Timers
from broker.coordinator.group import GroupState
from broker.coordinator.group_coordinator import GroupCoordinator, OffsetCommitItem as Item
from protocol import ErrorCode as E

OPS = st.lists(st.tuples(
    st.sampled_from(["join", "join_static", "rejoin", "sync", "heartbeat", "leave", "advance", "commit"]),
    st.integers(0, 3),          # which client
    st.integers(0, 12_000)),    # ms to advance
    max_size=60)


def check_invariants(group):
    if group is None:
        return
    members = group.members
    assert group.leader_id is None or group.leader_id in members
    if members:
        assert group.leader_id is not None
    assert group.pending_sync <= set(members)
    for instance_id, member_id in group.static_members.items():
        assert members[member_id].group_instance_id == instance_id
    if group.state is GroupState.EMPTY:
        assert not members
    if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
        assert members and group.protocol_name is not None
        assert all(m.awaiting_join is None for m in members.values())
    if group.state is not GroupState.COMPLETING_REBALANCE:
        assert all(m.awaiting_sync is None for m in members.values())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_random_schedules(make_harness, ops):
    h = make_harness(initial_rebalance_delay_ms=1_000)
    ids: dict[int, str] = {}
    generations: dict[int, int] = {}
    pendings = []
    for op, who, ms in ops:
        member_id = ids.get(who, "")
        if op in ("join", "join_static", "rejoin"):
            instance = f"i{who}" if op == "join_static" else None
            p = h.join(member_id="" if op != "rejoin" else member_id, instance_id=instance,
                       client_id=f"c{who}", session=6_000, rebalance=8_000)
            pendings.append(p)

            def remember(result, who=who):
                if result.error in (E.NONE, E.MEMBER_ID_REQUIRED):
                    ids[who] = result.member_id
                    generations[who] = result.generation_id
            p.add_callback(remember)
        elif op == "sync" and member_id:
            group = h.coord.groups.get("g")
            leader = group is not None and group.leader_id == member_id
            assignments = [(m, b"x") for m in group.members] if leader else []
            pendings.append(h.sync("g", member_id, generations.get(who, -1), assignments))
        elif op == "heartbeat" and member_id:
            h.coord.heartbeat("g", member_id, None, generations.get(who, -1))
        elif op == "leave" and member_id:
            h.coord.leave_group("g", [(member_id, None)])
        elif op == "commit":
            h.coord.commit_offsets("g", member_id, None, generations.get(who, -1), [Item("t", who, ms)])
        elif op == "advance":
            h.advance(ms)
        check_invariants(h.coord.groups.get("g"))
    # the log alone rebuilds the committed offsets and the last stored generation
    fresh = GroupCoordinator(h.clock, Timers(), h.log, h.config)
    fresh.load(h.log.records())
    if "g" in h.coord.groups:  # (a group that never wrote anything is not in the log at all)
        rebuilt = fresh.groups["g"].offsets if "g" in fresh.groups else {}
        assert rebuilt == h.coord.groups["g"].offsets
    h.advance(10 * 60_000)  # everyone goes silent: every member expires, every request is answered
    assert all(p.done for p in pendings)
    group = h.coord.groups.get("g")
    check_invariants(group)
    assert group is None or group.state is GroupState.EMPTY
