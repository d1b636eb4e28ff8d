"""KIP-848 online migration on a fake clock: a classic group upgraded to a consumer group by its first
ConsumerGroupHeartbeat member, classic members driven by the coordinator inside it, and the way back
when the last consumer-protocol member leaves; no partition is ever consumed by two members."""

from __future__ import annotations

import pytest

from broker.coordinator.clock import Timers
from broker.coordinator.consumer_group.coordinator import ConsumerGroupCoordinator
from broker.coordinator.consumer_group.model import ConsumerGroupConfig, MemberState
from broker.coordinator.consumer_group.records import GroupRecord
from broker.coordinator.group import GroupState
from broker.coordinator.group_coordinator import GroupConfig, GroupCoordinator
from broker.coordinator.serde import decode_group_record, encode_group_record
from protocol import ErrorCode
from protocol.consumer_protocol import Subscription, decode_assignment, encode_subscription
from tests.coordinator.consumer_group_harness import GROUP, Client, assert_single_owner
from tests.coordinator.migration_harness import MixedHarness, ClassicClient, owned_by_clients

E = ErrorCode


def run(h, classic, consumers, rounds=40, until=None):
    """Every client takes turns; the invariants hold after every single step."""
    for _ in range(rounds):
        for c in classic:
            if c.phase != "gone":
                c.step()
                owned_by_clients(h, classic, consumers)
                assert_single_owner(h)
        for c in consumers:
            c.heartbeat()
            owned_by_clients(h, classic, consumers)
            assert_single_owner(h)
        h.advance(0)
        if until is not None and until():
            return
    if until is not None:
        raise AssertionError("the group did not settle")


def everything_consumed(h, classic, consumers, total):
    return len(owned_by_clients(h, classic, consumers)) == total and all(
        c.owned for c in classic if c.phase != "gone") and all(c.owned for c in consumers)


def classic_group(h, n, cooperative=False):
    clients = [ClassicClient(h, f"c{i}", cooperative=cooperative) for i in range(n)]
    total = sum(h.partitions.values())
    run(h, clients, [], until=lambda: all(c.phase == "stable" for c in clients)
        and everything_consumed(h, clients, [], total))
    assert h.classic.groups[GROUP].state is GroupState.STABLE
    return clients


@pytest.mark.parametrize("cooperative", [False, True], ids=["eager", "cooperative"])
def test_upgrade_keeps_classic_members_and_hands_partitions_over_after_revocation(cooperative):
    h = MixedHarness({"t": 6})
    classic = classic_group(h, 2, cooperative)
    generation = h.classic.groups[GROUP].generation_id
    before = {c.member_id: set(c.owned) for c in classic}
    new = Client(h, "new", ["t"])
    r = new.heartbeat()
    assert r.error is E.NONE
    group = h.group()
    assert h.is_consumer_group() and not h.classic.groups[GROUP].members
    # the classic members are members of the consumer group now, at the classic generation, with their partitions
    names = {v: k for k, v in h.topic_ids.items()}
    for c in classic:
        member = group.members[c.member_id]
        assert member.classic is not None and member.classic.session_timeout_ms == 10_000
        assert member.member_epoch == generation
        assert {(names[t], p) for t, ps in member.owns().items() for p in ps} == before[c.member_id]
    # the new member waits: everything is still owned by the classic members
    assert new.owned == {} and group.members["new"].state is MemberState.UNRELEASED_PARTITIONS
    # a classic member hears it must rejoin
    assert classic[0].heartbeat() is E.REBALANCE_IN_PROGRESS
    run(h, classic, [new], until=lambda: everything_consumed(h, classic, [new], 6)
        and h.group().state().value == "Stable")
    assert sorted(len(c.owned) for c in classic) + [len(new.partitions("t"))] == [2, 2, 2]
    assert h.is_consumer_group()


def test_rolling_upgrade_then_downgrade():
    h = MixedHarness({"t": 6})
    classic = classic_group(h, 3)
    consumers = []
    # one by one, each classic consumer restarts on the consumer protocol
    for i, old in enumerate(list(classic)):
        old.leave()
        new = Client(h, f"k{i}", ["t"])
        consumers.append(new)
        run(h, classic, consumers, until=lambda: everything_consumed(h, classic, consumers, 6)
            and h.group().state().value == "Stable")
        assert h.is_consumer_group()
    assert all(m.classic is None for m in h.group().members.values()) and len(h.group().members) == 3
    # and back, one by one
    back = []
    for i, old in enumerate(list(consumers)):
        old.leave()
        consumers.remove(old)
        back.append(ClassicClient(h, f"b{i}"))
        run(h, back, consumers, until=lambda: everything_consumed(h, back, consumers, 6)
            and all(c.phase == "stable" for c in back))
        if consumers:
            assert h.is_consumer_group() and any(m.classic for m in h.group().members.values())
    # the last consumer-protocol member left: a classic group again, every member in it
    assert not h.is_consumer_group()
    group = h.classic.groups[GROUP]
    assert group.state is GroupState.STABLE and set(group.members) == {c.member_id for c in back}
    assert sorted(len(c.owned) for c in back) == [2, 2, 2]


def test_downgrade_starts_a_rebalance_at_the_group_epoch():
    h = MixedHarness({"t": 4})
    classic = classic_group(h, 1)
    new = Client(h, "new", ["t"])
    new.heartbeat()
    run(h, classic, [new], until=lambda: everything_consumed(h, classic, [new], 4))
    epoch = h.group().group_epoch
    assert new.leave().error is E.NONE
    group = h.classic.groups[GROUP]
    assert not h.is_consumer_group() and group.generation_id == epoch
    assert group.state is GroupState.PREPARING_REBALANCE and group.protocol_name == "range"
    run(h, classic, [], until=lambda: everything_consumed(h, classic, [], 4))


def test_policy_disabled_refuses_both_ways():
    h = MixedHarness({"t": 4}, migration_policy="disabled")
    classic_group(h, 1)
    r = Client(h, "new", ["t"]).heartbeat()
    assert r.error is E.GROUP_ID_NOT_FOUND and r.message == "Group g is not a consumer group."
    assert not h.is_consumer_group()


def test_upgrade_only_policy_keeps_the_consumer_group_when_the_last_new_member_leaves():
    h = MixedHarness({"t": 4}, migration_policy="upgrade")
    classic = classic_group(h, 2)
    new = Client(h, "new", ["t"])
    new.heartbeat()
    run(h, classic, [new], until=lambda: everything_consumed(h, classic, [new], 4))
    new.leave()
    assert h.is_consumer_group() and len(h.group().members) == 2
    run(h, classic, [], until=lambda: everything_consumed(h, classic, [], 4))


def test_classic_member_session_expiry_and_rejoin_timeout_fence_it():
    h = MixedHarness({"t": 4})
    classic = classic_group(h, 2)
    new = Client(h, "new", ["t"])
    new.heartbeat()
    silent = classic[1]
    for _ in range(5):
        classic[0].step()
        new.heartbeat()
        h.advance(1_000)
    h.advance(10_000)   # past the classic session timeout of the silent member
    assert silent.member_id not in h.group().members
    run(h, [classic[0]], [new], until=lambda: everything_consumed(h, [classic[0]], [new], 4))


def test_classic_member_errors_and_offset_commits():
    h = MixedHarness({"t": 4})
    classic = classic_group(h, 1)
    Client(h, "new", ["t"]).heartbeat()
    c = classic[0]
    core = h.core
    assert core.classic_heartbeat(GROUP, "nobody", None, 1) is E.UNKNOWN_MEMBER_ID
    assert core.classic_heartbeat(GROUP, c.member_id, None, c.generation + 7) is E.ILLEGAL_GENERATION
    assert core.classic_heartbeat(GROUP, "new", None, 1) is E.UNKNOWN_MEMBER_ID    # not a classic member
    assert core.classic_sync(GROUP, c.member_id, None, c.generation, "consumer", "other").error \
        is E.INCONSISTENT_GROUP_PROTOCOL
    # a classic member commits with its generation (any OffsetCommit version)
    assert core.offset_commit_error(GROUP, c.member_id, None, c.generation, 2) is E.NONE
    assert core.offset_commit_error(GROUP, c.member_id, None, c.generation + 1, 2) is E.ILLEGAL_GENERATION
    # another classic protocol type, or no protocol in common with the classic members
    r = core.classic_join(GROUP, "", None, "x", "/h", 10_000, 30_000, "connect", [("range", b"")], False)
    assert r.error is E.INCONSISTENT_GROUP_PROTOCOL
    r = core.classic_join(GROUP, "", None, "x", "/h", 10_000, 30_000, "consumer", [("roundrobin", b"")], False)
    assert r.error is E.INCONSISTENT_GROUP_PROTOCOL
    r = core.classic_join(GROUP, "", None, "x", "/h", 10_000, 30_000, "consumer", [("range", b"")], True)
    assert r.error is E.MEMBER_ID_REQUIRED and r.member_id and r.member_id not in h.group().members


def test_a_converted_group_loads_from_its_records():
    h = MixedHarness({"t": 6})
    classic = classic_group(h, 2)
    new = Client(h, "new", ["t"])
    new.heartbeat()
    run(h, classic, [new], rounds=3)
    # a fresh pair of coordinators replays the partition, every record through the serde
    consumer = ConsumerGroupCoordinator(h.clock, Timers(), h.log, ConsumerGroupConfig(), topics=h.view)
    classic_core = GroupCoordinator(h.clock, Timers(), h.log, GroupConfig())
    for _, records, _, _ in h.log.entries:
        for record in records:
            record = decode_group_record(*encode_group_record(record))
            (consumer.replay if isinstance(record, GroupRecord) else classic_core.replay)(record)
    loaded, live = consumer.groups[GROUP], h.group()
    assert set(loaded.members) == set(live.members)
    for member_id, member in live.members.items():
        other = loaded.members[member_id]
        assert (other.classic, other.member_epoch, other.state, other.assigned, other.pending_revocation) == \
            (member.classic, member.member_epoch, member.state, member.assigned, member.pending_revocation)
    assert GROUP not in classic_core.groups or not classic_core.groups[GROUP].members
    # and back: a downgraded group loads as a classic group
    run(h, classic, [new], until=lambda: everything_consumed(h, classic, [new], 6))
    new.leave()
    classic_core = GroupCoordinator(h.clock, Timers(), h.log, GroupConfig())
    consumer = ConsumerGroupCoordinator(h.clock, Timers(), h.log, ConsumerGroupConfig(), topics=h.view)
    for _, records, _, _ in h.log.entries:
        for record in records:
            record = decode_group_record(*encode_group_record(record))
            (consumer.replay if isinstance(record, GroupRecord) else classic_core.replay)(record)
    assert GROUP not in consumer.groups
    assert set(classic_core.groups[GROUP].members) == {c.member_id for c in classic}


def test_a_classic_static_member_replacing_the_last_consumer_member_downgrades_the_group():
    h = MixedHarness({"t": 4})
    classic = classic_group(h, 1)
    static = Client(h, "s-old", ["t"], instance_id="s")
    static.heartbeat()
    run(h, classic, [static], until=lambda: everything_consumed(h, classic, [static], 4))
    held = h.group().members["s-old"].assigned
    assert static.leave(epoch=-2).error is E.NONE          # a static member closing: it stays, for now
    assert h.is_consumer_group() and h.group().members["s-old"].member_epoch == -2
    sub = encode_subscription(Subscription(topics=["t"]), 1)
    r = h.core.classic_join(GROUP, "", "s", "s", "/h", 10_000, 30_000, "consumer", [("range", sub)], True)
    assert r.error is E.NONE and r.leader == "" and r.member_id.startswith("s-")
    # the last consumer-protocol member is gone: a classic group again, no rebalance, partitions kept
    assert not h.is_consumer_group()
    group = h.classic.groups[GROUP]
    assert group.state is GroupState.STABLE and set(group.members) == {classic[0].member_id, r.member_id}
    synced = h.classic.sync_group(GROUP, r.member_id, "s", group.generation_id, None, None, []).result
    names = {v: k for k, v in h.topic_ids.items()}
    given = {(tp.topic, p) for tp in decode_assignment(synced.assignment)[1].assigned_partitions for p in tp.partitions}
    assert synced.error is E.NONE and given == {(names[t], p) for t, ps in held.items() for p in ps}


# seeds 29 and 505 once caught an upgrade while a cooperative member had not synced its smaller assignment
@pytest.mark.parametrize("seed", [*range(25), 29, 505])
def test_random_schedules_of_both_protocols_never_share_a_partition(seed):
    """Classic (eager or cooperative) and consumer-protocol members join, leave and crash in a seeded
    order, the group upgrading and downgrading as they come and go; after every single request no
    partition is consumed by two members, and once the churn stops everything is consumed again."""
    import random
    rnd = random.Random(seed)
    h = MixedHarness({"t": 6})
    classic: list = []
    consumers: list = []
    names = iter(range(1000))
    for _ in range(60):
        live_classic = [c for c in classic if c.phase != "gone"]
        op = rnd.random()
        if op < 0.15 and len(live_classic) + len(consumers) < 5:
            classic.append(ClassicClient(h, f"c{next(names)}", cooperative=rnd.random() < 0.5))
        elif op < 0.3 and len(live_classic) + len(consumers) < 5:
            consumers.append(Client(h, f"k{next(names)}", ["t"]))
        elif op < 0.38 and live_classic:
            rnd.choice(live_classic).leave()
        elif op < 0.45 and consumers:
            gone = rnd.choice(consumers)
            gone.leave()
            consumers.remove(gone)
        elif op < 0.5 and live_classic + consumers:
            # a crash: the client stops at once; its session runs out later
            crashed = rnd.choice(live_classic + consumers)
            if crashed in consumers:
                consumers.remove(crashed)
                crashed.owned = {}
            else:
                crashed.phase, crashed.owned = "gone", set()
        # every live client takes a step, in a random order, before time moves on (by less than a
        # session: a member fenced while alive would be a zombie, which no protocol can prevent)
        live_now = [c for c in classic if c.phase != "gone"] + consumers
        for c in rnd.sample(live_now, k=len(live_now)):
            (c.step if isinstance(c, ClassicClient) else c.heartbeat)()
            owned_by_clients(h, classic, consumers)
            assert_single_owner(h)
        h.advance(rnd.choice([0, 0, 100, 3_000]))
        owned_by_clients(h, classic, consumers)
        assert_single_owner(h)
    live = [c for c in classic if c.phase != "gone"]
    if not live and not consumers:
        return
    for _ in range(30):   # a minute of live members heartbeating: the crashed ones' sessions expire
        run(h, live, consumers, rounds=1)
        h.advance(2_000)
    run(h, live, consumers, rounds=60,
        until=lambda: len(owned_by_clients(h, live, consumers)) == 6 and all(c.phase == "stable" for c in live))


@pytest.mark.slow
def test_many_random_schedules():
    for seed in range(25, 2025):
        test_random_schedules_of_both_protocols_never_share_a_partition(seed)


def test_a_classic_member_that_joins_but_never_syncs_is_fenced_after_its_rebalance_timeout():
    h = MixedHarness({"t": 4})
    classic = classic_group(h, 2)
    new = Client(h, "new", ["t"])
    new.heartbeat()
    stuck = classic[1]
    assert stuck.heartbeat() is E.REBALANCE_IN_PROGRESS
    stuck._join()
    assert stuck.phase == "sync" and stuck.member_id in h.group().members
    for _ in range(14):          # it heartbeats (its session holds) but never sends its SyncGroup
        h.core.classic_heartbeat(GROUP, stuck.member_id, None, stuck.generation)
        classic[0].step()
        new.heartbeat()
        h.advance(2_000)
    assert stuck.member_id in h.group().members
    for _ in range(2):
        h.core.classic_heartbeat(GROUP, stuck.member_id, None, stuck.generation)
        h.advance(2_000)
    assert stuck.member_id not in h.group().members      # 30 s, its rebalance timeout
    run(h, [classic[0]], [new], until=lambda: everything_consumed(h, [classic[0]], [new], 4))
