"""The share group membership core (broker/coordinator/share_group) on a fake clock, records round-tripped."""

import uuid

from protocol import ErrorCode
from broker.coordinator.clock import FakeClock, Timers
from broker.coordinator.serde import decode_group_record, encode_group_record
from broker.coordinator.share_group.coordinator import ShareGroupCoordinator, ShareHeartbeat
from broker.coordinator.share_group.model import ShareGroupConfig, simple_assign

E = ErrorCode
TOPIC = uuid.uuid4()


class Log:
    """Keeps the encoded records, as `__consumer_offsets` would."""

    def __init__(self):
        self.records = []

    def append(self, group_id, records):
        self.records += [encode_group_record(r) for r in records]


def core(partitions=1, **config):
    clock, timers, log = FakeClock(), Timers(), Log()
    removed = []
    c = ShareGroupCoordinator(clock, timers, log, ShareGroupConfig(**config),
                              topics=lambda: {"t": (TOPIC, partitions)},
                              on_member_removed=lambda g, m: removed.append((g, m)))
    return c, clock, timers, log, removed


def hb(c, member, epoch, topics=("t",)):
    return c.heartbeat(ShareHeartbeat("g", member, epoch, subscribed_topic_names=list(topics) if epoch == 0 else None))


def test_two_members_share_a_single_partition():
    c, *_ = core()
    a = hb(c, "a", 0)
    assert a.error is E.NONE and a.member_epoch == 1 and a.assignment == {TOPIC: frozenset({0})}
    b = hb(c, "b", 0)
    assert b.member_epoch == 2 and b.assignment == {TOPIC: frozenset({0})}
    a2 = hb(c, "a", 1)                        # a catches up with the new epoch, keeps the partition
    assert a2.member_epoch == 2 and a2.assignment is None


def test_more_partitions_are_dealt_out():
    assert simple_assign({"a": {TOPIC}, "b": {TOPIC}}, {TOPIC: 4}) == {
        "a": {TOPIC: frozenset({0, 2})}, "b": {TOPIC: frozenset({1, 3})}}
    assert simple_assign({"a": {TOPIC}, "b": {TOPIC}, "c": {TOPIC}}, {TOPIC: 2}) == {
        "a": {TOPIC: frozenset({0})}, "b": {TOPIC: frozenset({1})}, "c": {TOPIC: frozenset({0})}}


def test_epoch_checks_and_leaving():
    c, _, _, _, removed = core()
    hb(c, "a", 0)
    assert hb(c, "a", 7).error is E.FENCED_MEMBER_EPOCH
    assert hb(c, "x", 3).error is E.UNKNOWN_MEMBER_ID
    assert c.heartbeat(ShareHeartbeat("g", "a", 0)).error is E.INVALID_REQUEST     # no subscription
    assert c.heartbeat(ShareHeartbeat("", "a", 0, subscribed_topic_names=["t"])).error is E.INVALID_REQUEST
    left = hb(c, "a", -1)
    assert left.error is E.NONE and left.member_epoch == -1 and removed == [("g", "a")]
    assert c.describe("g").members == {}
    assert c.list_groups() == [("g", "share", "Empty")]


def test_session_timeout_fences():
    c, clock, timers, _, removed = core(session_timeout_ms=1000)
    hb(c, "a", 0)
    clock.advance(999)
    timers.run_due(clock.now_ms())
    assert removed == []
    clock.advance(1)
    timers.run_due(clock.now_ms())
    assert removed == [("g", "a")]


def test_replay_rebuilds_the_group():
    c, _, _, log, _ = core(partitions=3)
    hb(c, "a", 0)
    hb(c, "b", 0)
    fresh, *_ = core(partitions=3)
    for key, value in log.records:
        fresh.replay(decode_group_record(key, value))
    g, h = c.describe("g"), fresh.describe("g")
    assert (h.group_epoch, h.assignment_epoch, h.target) == (g.group_epoch, g.assignment_epoch, g.target)
    assert {m: (x.member_epoch, x.assigned) for m, x in h.members.items()} == \
        {m: (x.member_epoch, x.assigned) for m, x in g.members.items()}


def test_state_topics_recorded_for_assignments_and_offsets_changes():
    c, clock, timers, log, removed = core(partitions=3)
    hb(c, "a", 0)
    assert c.groups["g"].state_topics == {TOPIC: frozenset({0, 1, 2})}
    # an empty group only: its offsets change with a bumped epoch
    assert c.begin_offsets_change("g", create=False) == (E.NON_EMPTY_GROUP, -1)
    assert E(hb(c, "a", -1).error) is E.NONE
    epoch = c.groups["g"].group_epoch
    assert c.begin_offsets_change("g", create=False) == (E.NONE, epoch + 1)
    assert c.begin_offsets_change("new", create=False) == (E.GROUP_ID_NOT_FOUND, -1)
    assert c.begin_offsets_change("new", create=True) == (E.NONE, 1) and "new" in c.groups
    other = uuid.uuid4()
    assert c.change_state_topics("new", {other: [4]}, add=True) is E.NONE
    assert c.change_state_topics("g", {TOPIC: ()}, add=False) is E.NONE
    # replayed from the records alone, as after a coordinator move
    fresh, *_ = core(partitions=3)
    for record in log.records:
        fresh.replay(decode_group_record(*record))
    assert fresh.groups["g"].state_topics == {} and fresh.groups["g"].group_epoch == epoch + 1
    assert fresh.groups["new"].state_topics == {other: frozenset({4})}
    # deleting the group tombstones its state-topics record with it
    assert c.delete("new") is E.NONE
    removal = log.records[-3:]
    assert decode_group_record(*removal[0]).value is None
    for record in removal:
        fresh.replay(decode_group_record(*record))
    assert "new" not in fresh.groups
