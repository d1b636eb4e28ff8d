"""The KIP-848 consumer group core on a fake clock: every transition of members and groups."""

from __future__ import annotations

import pytest

from broker.coordinator.consumer_group.coordinator import ConsumerGroupCoordinator, HeartbeatRequest
from broker.coordinator.consumer_group.model import ConsumerGroupConfig, GroupState, MemberState
from broker.coordinator.serde import decode_group_record, encode_group_record
from protocol import ErrorCode
from tests.coordinator.consumer_group_harness import GROUP, Client, Harness, assert_clients_disjoint, assert_single_owner

E = ErrorCode


def settle(h, clients, rounds=6):
    for _ in range(rounds):
        for c in clients:
            c.heartbeat()
            assert_single_owner(h)
            assert_clients_disjoint(clients)


def test_first_member_gets_every_partition_at_epoch_one():
    h = Harness({"t": 4})
    a = Client(h, "a", ["t"])
    r = a.heartbeat()
    assert r.error is E.NONE and r.member_epoch == 1 and r.heartbeat_interval_ms == 5000
    assert a.partitions("t") == {0, 1, 2, 3}
    assert h.group().state() is GroupState.STABLE


def test_a_joining_member_waits_for_the_revocation():
    h = Harness({"t": 4})
    a, b = Client(h, "a", ["t"]), Client(h, "b", ["t"])
    a.heartbeat()
    rb = b.heartbeat()
    # b is at the new epoch, but its partitions are still a's: it gets nothing yet
    assert rb.member_epoch == 2 and b.partitions("t") == set()
    assert h.group().members["b"].state is MemberState.UNRELEASED_PARTITIONS
    assert h.group().state() is GroupState.RECONCILING
    # a hears it must give two up; it stays at epoch 1 until it says they are gone
    ra = a.heartbeat(owned={h.topic_ids["t"]: frozenset({0, 1, 2, 3})})
    assert ra.member_epoch == 1 and len(ra.assignment[h.topic_ids["t"]]) == 2
    assert h.group().members["a"].state is MemberState.UNREVOKED_PARTITIONS
    # b asks again: still nothing while a holds them
    b.heartbeat()
    assert b.partitions("t") == set()
    a.heartbeat()   # reports the smaller set: revoked
    assert a.epoch == 2 and h.group().members["a"].state is MemberState.STABLE
    b.heartbeat()
    assert len(b.partitions("t")) == 2 and not (a.partitions("t") & b.partitions("t"))
    assert h.group().state() is GroupState.STABLE


def test_leaving_member_partitions_go_to_the_others():
    h = Harness({"t": 6})
    members = [Client(h, m, ["t"]) for m in "abc"]
    settle(h, members)
    assert sorted(len(c.partitions("t")) for c in members) == [2, 2, 2]
    r = members[2].leave()
    assert r.error is E.NONE and r.member_epoch == -1
    settle(h, members[:2])
    assert members[0].partitions("t") | members[1].partitions("t") == set(range(6))


def test_session_timeout_fences_a_silent_member():
    h = Harness({"t": 2}, session_timeout_ms=10_000)
    a, b = Client(h, "a", ["t"]), Client(h, "b", ["t"])
    settle(h, [a, b])
    epoch = h.group().group_epoch
    h.advance(6_000)
    a.heartbeat()
    h.advance(6_000)          # b silent for 12 s
    assert "b" not in h.group().members and h.group().group_epoch == epoch + 1
    settle(h, [a])
    assert a.partitions("t") == {0, 1}
    assert b.heartbeat().error is E.UNKNOWN_MEMBER_ID


def test_revocation_timeout_fences_a_member_that_keeps_its_partitions():
    h = Harness({"t": 2}, session_timeout_ms=1_000_000)
    a = Client(h, "a", ["t"])
    a.heartbeat()
    b = Client(h, "b", ["t"])
    b.heartbeat()
    stale = dict(a.owned)
    a.heartbeat(owned=stale)           # told to revoke, but keeps reporting everything
    a.owned = stale
    h.advance(29_000)
    a.heartbeat(owned=stale)
    assert "a" in h.group().members
    h.advance(2_000)                    # the 30 s rebalance timeout passed
    assert "a" not in h.group().members
    settle(h, [b])
    assert b.partitions("t") == {0, 1}


def test_member_epoch_checks():
    h = Harness({"t": 2})
    a, b = Client(h, "a", ["t"]), Client(h, "b", ["t"])
    settle(h, [a, b])
    assert a.heartbeat(epoch=a.epoch + 1).error is E.FENCED_MEMBER_EPOCH
    a.heartbeat()
    # a lost answer: the previous epoch with a subset of the assignment is accepted
    member = h.group().members["b"]
    c = Client(h, "c", ["t"])
    c.heartbeat()
    settle(h, [a, b, c])
    member = h.group().members["a"]
    prev = Client(h, "a", ["t"])
    prev.epoch, prev.owned = member.previous_member_epoch, dict(member.assigned)
    assert prev.heartbeat().error is E.NONE
    stale = Client(h, "a", ["t"])
    stale.epoch, stale.owned = member.previous_member_epoch - 1, {}
    assert stale.heartbeat().error is E.FENCED_MEMBER_EPOCH
    assert Client(h, "nobody", ["t"]).heartbeat(epoch=3).error is E.UNKNOWN_MEMBER_ID


def test_static_member_rejoins_under_a_new_id_without_a_rebalance():
    h = Harness({"t": 4})
    a = Client(h, "a1", ["t"], instance_id="ia")
    b = Client(h, "b", ["t"])
    settle(h, [a, b])
    kept = a.partitions("t")
    epoch = h.group().group_epoch
    r = a.leave(epoch=-2)
    assert r.error is E.NONE and r.member_epoch == -2
    assert h.group().members["a1"].member_epoch == -2   # keeps its partitions meanwhile
    b.heartbeat()
    assert len(b.partitions("t")) == 2
    # the old instance is gone: a new process, a new member id, the same instance id
    a2 = Client(h, "a2", ["t"], instance_id="ia")
    r = a2.heartbeat()
    assert r.error is E.NONE and a2.partitions("t") == kept and "a1" not in h.group().members
    assert h.group().group_epoch == epoch
    # while it is in the group, another process with the same instance id is refused
    assert Client(h, "a3", ["t"], instance_id="ia").heartbeat().error is E.UNRELEASED_INSTANCE_ID
    assert a2.heartbeat(instance_id="ib").error in (E.FENCED_INSTANCE_ID, E.UNKNOWN_MEMBER_ID)


def test_static_member_that_never_returns_expires():
    h = Harness({"t": 2}, session_timeout_ms=10_000)
    a, b = Client(h, "a", ["t"], instance_id="ia"), Client(h, "b", ["t"])
    settle(h, [a, b])
    a.leave(epoch=-2)
    for _ in range(3):
        h.advance(4_000)
        b.heartbeat()
    assert "a" not in h.group().members and "ia" not in h.group().static_members
    settle(h, [b])
    assert b.partitions("t") == {0, 1}


def test_regex_subscription_follows_new_topics():
    h = Harness({"orders-1": 2, "other": 2})
    a = Client(h, "a", regex="orders-.*")
    a.heartbeat()
    assert a.partitions("orders-1") == {0, 1} and h.topic_ids["other"] not in a.owned
    epoch = h.group().group_epoch
    h.add_topic("orders-2", 3)
    a.heartbeat()
    assert h.group().group_epoch == epoch + 1 and a.partitions("orders-2") == {0, 1, 2}
    assert Client(h, "b", regex="(").heartbeat().error is E.INVALID_REGULAR_EXPRESSION


def test_partitions_added_to_a_subscribed_topic_are_assigned():
    h = Harness({"t": 2})
    a = Client(h, "a", ["t"])
    a.heartbeat()
    h.partitions["t"] = 4
    a.heartbeat()
    assert a.partitions("t") == {0, 1, 2, 3}


def test_range_and_uniform_assignors():
    h = Harness({"x": 3, "y": 3})
    a, b = Client(h, "a", ["x", "y"], assignor="range"), Client(h, "b", ["x", "y"], assignor="range")
    settle(h, [a, b])
    # range: co-partitioned, the first member takes the extra partition of each topic
    assert a.partitions("x") == a.partitions("y") == {0, 1} and b.partitions("x") == {2}
    h2 = Harness({"x": 3, "y": 3})
    c, d = Client(h2, "c", ["x", "y"]), Client(h2, "d", ["x", "y"])
    settle(h2, [c, d])
    assert len(c.partitions("x") | c.partitions("y")) == 3 == len(d.partitions("x") | d.partitions("y"))
    assert Client(h2, "e", ["x"], assignor="sticky").heartbeat().error is E.UNSUPPORTED_ASSIGNOR


def test_heterogeneous_subscriptions_only_get_their_topics():
    h = Harness({"x": 4, "y": 2})
    a, b = Client(h, "a", ["x"]), Client(h, "b", ["x", "y"])
    settle(h, [a, b])
    assert h.topic_ids["y"] not in a.owned and b.partitions("y") == {0, 1}
    assert a.partitions("x") | b.partitions("x") == {0, 1, 2, 3}


def test_uniform_is_rack_aware():
    h = Harness({"t": 6})
    h.racks = {("t", p): {"east" if p % 2 else "west"} for p in range(6)}
    west, east = Client(h, "a", ["t"], rack="west"), Client(h, "b", ["t"], rack="east")
    settle(h, [west, east])
    assert west.partitions("t") == {0, 2, 4} and east.partitions("t") == {1, 3, 5}
    # balance comes first: a third member without a rack still gets its share
    c = Client(h, "c", ["t"])
    settle(h, [west, east, c])
    assert sorted(len(x.partitions("t")) for x in (west, east, c)) == [2, 2, 2]
    assert west.partitions("t") <= {0, 2, 4} and east.partitions("t") <= {1, 3, 5}


@pytest.mark.parametrize("overrides, message", [
    ({"group_id": ""}, "GroupId"),
    ({"member_id": ""}, "MemberId"),
    ({"rebalance_timeout_ms": -1}, "RebalanceTimeoutMs"),
    ({"subscribed_topic_names": None}, "SubscribedTopic"),
    ({"instance_id": ""}, "InstanceId"),
])
def test_invalid_join_requests(overrides, message):
    h = Harness({"t": 1})
    r = Client(h, "a", ["t"]).heartbeat(**overrides)
    assert r.error is E.INVALID_REQUEST and message in r.message
    h = Harness({"t": 1})
    assert Client(h, "a", ["t"]).heartbeat(owned={h.topic_ids["t"]: frozenset({0})}).error is E.INVALID_REQUEST
    assert Client(h, "a", ["t"]).heartbeat(epoch=-3).error is E.INVALID_REQUEST


def test_v0_joins_get_a_member_id_from_the_coordinator():
    h = Harness({"t": 1})
    r = h.core.heartbeat(HeartbeatRequest(GROUP, "", 0, rebalance_timeout_ms=1000, subscribed_topic_names=["t"],
                                          owned={}, version=0))
    assert r.error is E.NONE and len(r.member_id) == 22


def test_max_size():
    h = Harness({"t": 1}, max_size=2)
    assert Client(h, "a", ["t"]).heartbeat().error is E.NONE
    assert Client(h, "b", ["t"]).heartbeat().error is E.NONE
    assert Client(h, "c", ["t"]).heartbeat().error is E.GROUP_MAX_SIZE_REACHED


def test_offset_commit_and_fetch_member_checks():
    h = Harness({"t": 2})
    a = Client(h, "a", ["t"])
    a.heartbeat()
    core = h.core
    assert core.offset_commit_error("other", "a", None, 1, 9) is None   # not a consumer group
    assert core.offset_commit_error(GROUP, "a", None, a.epoch, 9) is E.NONE
    assert core.offset_commit_error(GROUP, "a", None, a.epoch - 1, 9) is E.STALE_MEMBER_EPOCH
    assert core.offset_commit_error(GROUP, "zz", None, 1, 9) is E.UNKNOWN_MEMBER_ID
    assert core.offset_commit_error(GROUP, "a", None, a.epoch, 8) is E.UNSUPPORTED_VERSION
    assert core.offset_commit_error(GROUP, "", None, -1, 9) is E.UNKNOWN_MEMBER_ID   # members are consuming
    assert core.offset_commit_error(GROUP, "a", None, a.epoch + 5, 9, transactional=True) is E.ILLEGAL_GENERATION
    assert core.offset_fetch_error(GROUP, None, -1) is E.NONE
    assert core.offset_fetch_error(GROUP, "a", a.epoch) is E.NONE
    assert core.offset_fetch_error(GROUP, "a", a.epoch + 1) is E.STALE_MEMBER_EPOCH
    a.leave()
    assert core.offset_commit_error(GROUP, "", None, -1, 9) is E.NONE     # empty: admin commits allowed


def test_list_describe_delete():
    h = Harness({"t": 2})
    a = Client(h, "a", ["t"])
    a.heartbeat()
    assert h.core.list_groups() == [(GROUP, "consumer", "Stable")]
    assert h.core.list_groups(types=["classic"]) == []
    assert h.core.list_groups(states=["empty"]) == []
    assert h.core.delete(GROUP) is E.NON_EMPTY_GROUP
    a.leave()
    assert h.core.list_groups(states=["Empty"]) == [(GROUP, "consumer", "Empty")]
    assert h.core.delete(GROUP) is E.NONE and h.core.groups == {}


def test_empty_groups_without_offsets_are_cleaned_up():
    h = Harness({"t": 2})
    a = Client(h, "a", ["t"])
    a.heartbeat()
    h.core.delete_forgotten(has_offsets=lambda g: False)
    assert GROUP in h.core.groups                      # it has a member
    a.leave()
    h.core.delete_forgotten(has_offsets=lambda g: True)
    assert GROUP in h.core.groups                      # its offsets are still there
    h.core.delete_forgotten(has_offsets=lambda g: False)
    assert h.core.groups == {}
    assert [type(r.key).__name__ for r in h.log.entries[-1][1]] == [
        "ConsumerGroupTargetAssignmentMetadataKey", "ConsumerGroupMetadataKey"]
    assert all(r.value is None for r in h.log.entries[-1][1])   # tombstones


def test_a_failed_write_changes_nothing():
    h = Harness({"t": 2})
    a = Client(h, "a", ["t"])
    h.log.fail_with = type("Err", (Exception,), {"code": E.NOT_LEADER_OR_FOLLOWER})()
    assert a.heartbeat().error is E.NOT_COORDINATOR
    assert h.core.groups == {}
    h.log.fail_with = None
    assert a.heartbeat().error is E.NONE


def test_state_rebuilds_from_its_records_through_kafkas_bytes():
    h = Harness({"t": 5, "u": 3})
    clients = [Client(h, m, ["t", "u"], instance_id="i" + m if m == "b" else None) for m in "abc"]
    settle(h, clients, rounds=2)
    clients[1].leave(epoch=-2)
    clients[0].heartbeat()
    fresh = ConsumerGroupCoordinator(h.clock, h.timers, h.log, ConsumerGroupConfig(), topics=h.view)
    for record in h.log.records():
        key, value = encode_group_record(record)
        fresh.replay(decode_group_record(key, value))
    fresh.loaded()
    old, new = h.group(), fresh.groups[GROUP]
    assert (new.group_epoch, new.assignment_epoch, new.target, new.owners, new.static_members) == \
        (old.group_epoch, old.assignment_epoch, old.target, old.owners, old.static_members)
    assert {m: (x.member_epoch, x.state, x.assigned, x.pending_revocation, x.subscribed_topic_names)
            for m, x in new.members.items()} == \
        {m: (x.member_epoch, x.state, x.assigned, x.pending_revocation, x.subscribed_topic_names)
         for m, x in old.members.items()}
    assert new.subscription_fingerprint == old.subscription_fingerprint   # loading does not rebalance
    fresh.unload([GROUP])
    assert fresh.groups == {}
