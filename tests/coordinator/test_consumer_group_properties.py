"""Hypothesis schedules against the KIP-848 core: whatever members do (join, heartbeat, hold on to
partitions they were told to revoke, leave, leave statically and come back, go silent) and whatever
the topics do, no partition is ever owned by two members at once, and once everyone behaves the
group converges: stable, every subscribed partition assigned exactly once."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.coordinator.consumer_group.model import GroupState
from tests.coordinator.consumer_group_harness import Client, Harness, assert_clients_disjoint, assert_single_owner

ACTIONS = st.lists(st.tuples(
    st.sampled_from(["heartbeat", "heartbeat", "heartbeat", "stubborn", "leave", "static_leave", "rejoin",
                     "advance", "resubscribe", "grow"]),
    st.integers(0, 4), st.integers(0, 40_000)), min_size=1, max_size=60)


def run_schedule(actions, assignor):
    h = Harness({"a": 3, "b": 4, "c": 2}, session_timeout_ms=20_000)
    h.racks = {(t, p): {f"r{p % 2}"} for t in "ab" for p in range(12)}   # rack-aware paths too
    clients = {}
    generation = {}
    for action, who, amount in actions:
        name = f"m{who}"
        client = clients.get(name)
        if action in ("heartbeat", "rejoin") or client is None:
            if client is None or action == "rejoin" and client.epoch == 0:
                generation[name] = generation.get(name, 0) + 1
                topics = [["a", "b"], ["b", "c"], ["a", "b", "c"]][who % 3]
                client = Client(h, f"{name}.{generation[name]}", topics,
                                instance_id=name if who % 2 == 0 else None, assignor=assignor,
                                rack=f"r{who % 2}" if who < 3 else None)
                clients[name] = client
            client.heartbeat()
        elif action == "stubborn":
            held = dict(client.owned)
            client.heartbeat(owned=held if client.epoch else "auto")
            client.owned = held if client.epoch else client.owned   # keeps consuming what it was told to give up
        elif action == "leave":
            client.leave()
            clients.pop(name)
        elif action == "static_leave":
            if client.instance_id is not None and client.epoch > 0:
                client.leave(epoch=-2)
                clients.pop(name)
        elif action == "advance":
            h.advance(amount)
        elif action == "resubscribe":
            if client.epoch > 0:
                client.heartbeat(subscribed_topic_names=[["a"], ["c"], ["b", "c"]][amount % 3])
        elif action == "grow":
            h.partitions["abc"[who % 3]] += 1
        assert_single_owner(h)
        # what the members still in the group actually consume (a stubborn one included) never overlaps
        members = h.group().members if h.group() else {}
        assert_clients_disjoint([c for c in clients.values() if c.member_id in members])
    # everyone behaves from now on (and the silent are fenced): the group converges
    h.advance(60_000)
    live = list(clients.values())
    for _ in range(8):
        for c in live:
            if c.heartbeat().error.name != "NONE":
                c.heartbeat()
            assert_single_owner(h)
        assert_clients_disjoint(live)
    group = h.group()
    if group is None or not group.members:
        return
    assert group.state() is GroupState.STABLE
    subscribed = set()
    for m in group.members.values():
        subscribed |= {h.topic_ids[t] for t in m.subscribed_topic_names}
    owned = {(t, p) for c in live for t, ps in c.owned.items() for p in ps}
    expected = {(h.topic_ids[n], p) for n in h.partitions for p in range(h.partitions[n])
                if h.topic_ids[n] in subscribed}
    assert owned == expected


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ACTIONS, st.sampled_from([None, "uniform", "range"]))
def test_no_partition_has_two_owners(actions, assignor):
    run_schedule(actions, assignor)


@pytest.mark.slow
@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ACTIONS, st.sampled_from([None, "uniform", "range"]))
def test_no_partition_has_two_owners_long(actions, assignor):
    run_schedule(actions, assignor)
