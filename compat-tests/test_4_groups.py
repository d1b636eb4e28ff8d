"""Scenario 4: consumer groups. Two members split a 4-partition topic; one leaves → rebalance → the other
owns all; a restarted member resumes from committed offsets without re-reading; a static member rejoins
without a rebalance; the same with the cooperative-sticky assignor where the client has it."""

import time

import pytest

from odradek_compat.checks import Step
from odradek_compat.records import Rec
from odradek_compat.topics import create_topic

SCENARIO = "4 groups"
ALL = [0, 1, 2, 3]
REBALANCE_TIMEOUT = 60


class Members:
    """Polls a set of group members round-robin and keeps what each one read."""

    def __init__(self, client):
        self.client = client
        self.handles = {}
        self.last = {}
        self.read = {}

    def open(self, name, group, topic, **options):
        self.handles[name] = self.client.group_open(group, topic, **options)
        self.read.setdefault(name, [])
        return self.handles[name]

    def close(self, name):
        self.client.group_close(self.handles.pop(name))
        self.last.pop(name, None)

    def poll_round(self, timeout_ms=200):
        for name, handle in self.handles.items():
            result = self.client.group_poll(handle, timeout_ms)
            self.read[name].extend(result.records)
            self.last[name] = result

    def poll_until(self, done, timeout=REBALANCE_TIMEOUT):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.poll_round()
            if len(self.last) == len(self.handles) and done(self.last):
                return True
        return False

    def assignments(self):
        return {name: r.assignment for name, r in self.last.items()}

    def close_all(self):
        for name in list(self.handles):
            try:
                self.close(name)
            except Exception:
                pass


@pytest.fixture
def members(client):
    m = Members(client)
    yield m
    m.close_all()


def split_evenly(last):
    a, b = (r.assignment for r in last.values())
    return len(a) == 2 and len(b) == 2 and sorted(a + b) == ALL


def values(records):
    return sorted(r.value for r in records)


@pytest.mark.parametrize("assignor", ["range", "cooperative-sticky"])
def test_two_members_split_then_one_leaves(client, helper, names, members, assignor):
    step = Step(client)
    topic = create_topic(helper, names("split"), partitions=4)
    group = names("group")
    members.open("a", group, topic, assignor=assignor)
    members.open("b", group, topic, assignor=assignor)
    ok = members.poll_until(split_evenly)
    step("two members split 4 partitions 2+2", {"a": "2 partitions", "b": "the other 2"}, members.assignments(),
         ok=ok)
    owned = {name: set(r.assignment) for name, r in members.last.items()}

    sent = [Rec(None, f"v{i}".encode(), partition=i % 4) for i in range(40)]
    helper.produce(topic, sent)
    members.poll_until(lambda last: len(members.read["a"]) + len(members.read["b"]) >= 40, timeout=30)
    step("every record read exactly once across the members", values(sent),
         values(members.read["a"] + members.read["b"]))
    for name in ("a", "b"):
        step(f"member {name} read only from its partitions", owned[name],
             {r.partition for r in members.read[name]}, ok={r.partition for r in members.read[name]} <= owned[name])

    for handle in members.handles.values():
        client.group_commit(handle)
    members.close("b")
    ok = members.poll_until(lambda last: last["a"].assignment == ALL)
    step("after b leaves, a owns every partition", ALL, members.assignments()["a"], ok=ok)
    more = [Rec(None, f"more{i}".encode(), partition=i % 4) for i in range(8)]
    helper.produce(topic, more)
    members.read["a"].clear()
    members.poll_until(lambda last: len(members.read["a"]) >= 8, timeout=30)
    step("a alone reads new records from all partitions", values(more), values(members.read["a"]))


def test_restarted_member_resumes_from_committed(client, helper, names, members):
    step = Step(client)
    topic = create_topic(helper, names("resume"), partitions=2)
    first = [Rec(None, f"first-{i}".encode(), partition=i % 2) for i in range(20)]
    helper.produce(topic, first)
    group = names("group")
    members.open("a", group, topic)
    members.poll_until(lambda last: len(members.read["a"]) >= 20)
    step("first member read everything", values(first), values(members.read["a"]))
    client.group_commit(members.handles["a"])
    members.close("a")

    second = [Rec(None, f"second-{i}".encode(), partition=i % 2) for i in range(10)]
    helper.produce(topic, second)
    members.open("b", group, topic)
    members.poll_until(lambda last: len(members.read["b"]) >= 10)
    settle = time.monotonic() + 1.5  # anything re-read would arrive right behind the new records
    while time.monotonic() < settle:
        members.poll_round()
    step("restarted member reads only what came after the commit", values(second), values(members.read["b"]))


def test_static_member_rejoins_without_rebalance(client, helper, names, members):
    step = Step(client)
    topic = create_topic(helper, names("static"), partitions=4)
    group = names("group")
    options = {"session_timeout_ms": 45000}
    members.open("a", group, topic, instance_id="static-a", **options)
    members.open("b", group, topic, instance_id="static-b", **options)
    ok = members.poll_until(split_evenly)
    step("two static members split 4 partitions", "2 + 2", members.assignments(), ok=ok)
    # let b settle: its rebalance callbacks must have run before we take the baseline
    members.poll_until(lambda last: False, timeout=2)
    before_a = members.last["a"].assignment
    before_b = members.last["b"]

    members.close("a")  # a static member closes without leaving the group
    members.open("a2", group, topic, instance_id="static-a", **options)
    ok = members.poll_until(lambda last: last["a2"].assignment != [])
    step("the rejoined static member gets its old partitions", before_a, members.assignments().get("a2"),
         ok=ok and members.assignments().get("a2") == before_a)
    members.poll_until(lambda last: False, timeout=2)
    after_b = members.last["b"]
    step("the other member saw no rebalance (assignment, callbacks)",
         (before_b.assignment, before_b.assigned_events, before_b.revoked_events),
         (after_b.assignment, after_b.assigned_events, after_b.revoked_events))
