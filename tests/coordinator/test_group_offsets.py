"""Offset commit/fetch, transactional offsets, retention, deletion, admin views and rebuild from the log."""

from broker.coordinator.group_coordinator import GroupCoordinator, OffsetCommitItem as Item
from broker.coordinator.clock import Timers
from broker.coordinator.log_records import GroupMetadataRecord, OffsetCommitRecord
from protocol import ErrorCode as E

DAY = 24 * 3600 * 1000


def stable_group(h, n=1, topics=("t",)):
    from tests.coordinator.test_group_membership import form_group  # noqa: PLC0415
    return form_group(h, n, protocols=[("range", h_sub(*topics))])


def h_sub(*topics):
    from tests.coordinator.conftest import subscription  # noqa: PLC0415
    return subscription(*topics)


def keep_alive(h, member, gen, ms, step=5_000):
    """Advance `ms` while `member` heartbeats every `step` ms."""
    for _ in range(ms // step):
        h.advance(step)
        assert h.coord.heartbeat("g", member, None, gen) == E.NONE


def fetch(h, group="g", partitions=None, stable=False):
    err, rows = h.coord.fetch_offsets(group, partitions, stable)
    assert err == E.NONE
    return {(r.topic, r.partition): (r.offset, r.leader_epoch, r.metadata, r.error) for r in rows}


def test_simple_commit_creates_group_and_keeps_metadata_and_epoch(h):
    err, per = h.coord.commit_offsets("g", "", None, -1, [Item("t", 0, 42, 7, "meta-data"), Item("t", 1, 5)])
    assert err == E.NONE and set(per.values()) == {E.NONE}
    assert fetch(h, partitions=[("t", 0), ("t", 1), ("t", 2)]) == {
        ("t", 0): (42, 7, "meta-data", E.NONE), ("t", 1): (5, -1, "", E.NONE), ("t", 2): (-1, -1, "", E.NONE)}
    assert h.state() == "Empty" and h.coord.groups["g"].protocol_type is None
    records = h.log.records()
    assert records[0] == OffsetCommitRecord("g", "t", 0, h.coord.groups["g"].offsets[("t", 0)])


def test_fetch_all_offsets_with_null_topics(h):
    h.coord.commit_offsets("g", "", None, -1, [Item("b", 1, 3), Item("a", 0, 1), Item("b", 0, 2)])
    assert list(fetch(h)) == [("a", 0), ("b", 0), ("b", 1)]
    assert fetch(h, group="unknown") == {}
    assert fetch(h, group="unknown", partitions=[("a", 0)]) == {("a", 0): (-1, -1, "", E.NONE)}


def test_member_commit_checks_generation_and_member(h):
    (a,), gen = stable_group(h)
    assert h.coord.commit_offsets("g", a, None, gen, [Item("t", 0, 1)])[0] == E.NONE
    assert h.coord.commit_offsets("g", a, None, gen + 1, [Item("t", 0, 1)])[0] == E.ILLEGAL_GENERATION
    assert h.coord.commit_offsets("g", "x", None, gen, [Item("t", 0, 1)])[0] == E.UNKNOWN_MEMBER_ID
    # a non-member commit while the group has members
    assert h.coord.commit_offsets("g", "", None, -1, [Item("t", 0, 1)])[0] == E.UNKNOWN_MEMBER_ID
    assert h.coord.commit_offsets("other", a, None, 3, [Item("t", 0, 1)])[0] == E.ILLEGAL_GENERATION
    # the empty group id is a group like any other for commits (Kafka keeps it for old consumers)...
    assert h.coord.commit_offsets("", "", None, -1, [Item("t", 0, 1)])[0] == E.NONE
    assert h.coord.fetch_offsets("", [("t", 0)])[1][0].offset == 1
    # ...but not for transactional ones
    assert h.coord.commit_offsets("", "", None, -1, [Item("t", 0, 1)], producer_id=1)[0] == E.INVALID_GROUP_ID


def test_commit_during_completing_rebalance(h):
    a, pa = h.join_new()
    h.advance(0)
    err, _ = h.coord.commit_offsets("g", a, None, pa.result.generation_id, [Item("t", 0, 1)])
    assert err == E.REBALANCE_IN_PROGRESS


def test_metadata_too_large_rejects_only_that_partition(make_harness):
    h = make_harness(offset_metadata_max_bytes=10)
    err, per = h.coord.commit_offsets("g", "", None, -1, [Item("t", 0, 1, -1, "x" * 11), Item("t", 1, 2)])
    assert per == {("t", 0): E.OFFSET_METADATA_TOO_LARGE, ("t", 1): E.NONE}
    assert ("t", 0) not in h.coord.groups["g"].offsets


def test_failed_write_commits_nothing(h):
    h.log.fail_with = OSError("disk")
    err, per = h.coord.commit_offsets("g", "", None, -1, [Item("t", 0, 1)])
    assert per == {("t", 0): E.COORDINATOR_NOT_AVAILABLE}
    assert fetch(h, partitions=[("t", 0)])[("t", 0)][0] == -1


def test_transactional_offsets_visible_only_after_commit(h):
    h.coord.commit_offsets("g", "", None, -1, [Item("t", 0, 10)])
    err, per = h.coord.commit_offsets("g", "", None, -1, [Item("t", 0, 20)], producer_id=7, producer_epoch=0)
    assert err == E.NONE
    assert h.log.entries[-1][2:] == (7, 0)
    assert fetch(h, partitions=[("t", 0)])[("t", 0)][0] == 10
    assert fetch(h, partitions=[("t", 0)], stable=True)[("t", 0)][3] == E.UNSTABLE_OFFSET_COMMIT
    assert h.coord.groups_with_pending_offsets(7) == ["g"]
    h.coord.complete_transaction("g", 7, commit=True)
    assert fetch(h, partitions=[("t", 0)], stable=True)[("t", 0)][:1] == (20,)


def test_aborted_transactional_offsets_are_dropped(h):
    h.coord.commit_offsets("g", "", None, -1, [Item("t", 0, 20)], producer_id=7, producer_epoch=0)
    h.coord.complete_transaction("g", 7, commit=False)
    assert fetch(h, partitions=[("t", 0)], stable=True)[("t", 0)] == (-1, -1, "", E.NONE)


def test_empty_consumer_group_offsets_expire_after_retention(h):
    (a,), gen = stable_group(h)
    h.coord.commit_offsets("g", a, None, gen, [Item("t", 0, 1)])
    keep_alive(h, a, gen, 8 * DAY, step=600_000)
    assert ("t", 0) in h.coord.groups["g"].offsets  # a live group keeps offsets of subscribed topics
    h.coord.leave_group("g", [(a, None)])
    h.advance(7 * DAY - 600_000)
    assert ("t", 0) in h.coord.groups["g"].offsets
    h.advance(1_200_000)
    assert "g" not in h.coord.groups  # no offsets and Empty: the group is gone, tombstoned
    tail = h.log.records()[-2:]
    assert tail == [OffsetCommitRecord("g", "t", 0, None), GroupMetadataRecord("g", None)]


def test_stable_group_offsets_of_unsubscribed_topics_expire(h):
    (a,), gen = stable_group(h, topics=("t",))
    h.coord.commit_offsets("g", a, None, gen, [Item("t", 0, 1), Item("old", 0, 1)])
    keep_alive(h, a, gen, 7 * DAY + 600_000, step=600_000)
    assert set(h.coord.groups["g"].offsets) == {("t", 0)}


def test_simple_group_offsets_expire_by_commit_time(h):
    h.coord.commit_offsets("g", "", None, -1, [Item("t", 0, 1)])
    h.advance(3 * DAY)
    h.coord.commit_offsets("g", "", None, -1, [Item("t", 1, 1)])
    h.advance(4 * DAY + 600_000)
    assert set(h.coord.groups["g"].offsets) == {("t", 1)}


def test_explicit_expire_timestamp(h):
    now = h.clock.now_ms()
    h.coord.commit_offsets("g", "", None, -1, [Item("t", 0, 1, expire_timestamp=now + 1000)])
    h.advance(600_000)
    assert "g" not in h.coord.groups


def test_delete_groups(h):
    (a,), gen = stable_group(h)
    h.coord.commit_offsets("s", "", None, -1, [Item("t", 0, 1)])
    assert h.coord.delete_groups(["g", "s", "missing", ""]) == {
        "g": E.NON_EMPTY_GROUP, "s": E.NONE, "missing": E.GROUP_ID_NOT_FOUND, "": E.GROUP_ID_NOT_FOUND}
    assert "s" not in h.coord.groups
    assert h.log.records()[-1] == GroupMetadataRecord("s", None)


def test_offset_delete(h):
    (a,), gen = stable_group(h, topics=("t",))
    h.coord.commit_offsets("g", a, None, gen, [Item("t", 0, 1), Item("u", 0, 1)])
    err, per = h.coord.delete_offsets("g", [("t", 0), ("u", 0)])
    assert err == E.NONE and per == {("t", 0): E.GROUP_SUBSCRIBED_TO_TOPIC, ("u", 0): E.NONE}
    assert set(h.coord.groups["g"].offsets) == {("t", 0)}
    assert h.coord.delete_offsets("missing", [("t", 0)])[0] == E.GROUP_ID_NOT_FOUND


def test_list_and_describe(h):
    (a,), gen = stable_group(h)
    h.coord.commit_offsets("s", "", None, -1, [Item("t", 0, 1)])
    assert sorted(h.coord.list_groups()) == [("g", "consumer", "Stable"), ("s", "", "Empty")]
    assert h.coord.list_groups(states=["stable"]) == [("g", "consumer", "Stable")]
    assert h.coord.list_groups(types=["consumer"]) == []
    d = h.coord.describe_group("g")
    assert d.state == "Stable" and d.protocol_name == "range" and d.members[0].member_id == a
    assert d.members[0].assignment == a.encode()
    assert h.coord.describe_group("nope").error == E.GROUP_ID_NOT_FOUND


def test_rebuild_from_log(h):
    (a, b), gen = stable_group(h, n=2)
    h.coord.commit_offsets("g", a, None, gen, [Item("t", 0, 5, 3, "m")])
    h.coord.commit_offsets("s", "", None, -1, [Item("t", 0, 9)])
    h.coord.commit_offsets("s", "", None, -1, [Item("t", 1, 1)], producer_id=4, producer_epoch=0)
    h.coord.delete_groups(["s"])
    fresh = GroupCoordinator(h.clock, Timers(), h.log, h.config)
    fresh.load(h.log.records())
    fresh.loaded()
    g = fresh.groups["g"]
    assert g.state.value == "Stable" and g.generation_id == gen and set(g.members) == {a, b}
    assert g.offsets[("t", 0)].metadata == "m" and g.offsets[("t", 0)].leader_epoch == 3
    assert g.members[a].assignment == a.encode()
    assert "s" not in fresh.groups
    assert fresh.heartbeat("g", a, None, gen) == E.NONE


def test_serde_round_trip_in_kafka_layouts(h):
    from broker.coordinator.serde import decode_group_record, encode_group_record, partition_for
    (a, b), gen = stable_group(h, n=2)
    h.coord.commit_offsets("g", a, None, gen, [Item("t", 0, 5, 3, "m"), Item("t", 1, 6, expire_timestamp=99)])
    h.coord.delete_groups(["nope"])
    for record in h.log.records():
        key, value = encode_group_record(record)
        assert decode_group_record(key, value) == record
    key, value = encode_group_record(OffsetCommitRecord("g", "t", 0, None))
    assert value is None and key[:2] == b"\x00\x01"
    # Kafka's partitioning: abs(String.hashCode) % 50
    assert partition_for("my-group", 50) == 12 and partition_for("test-consumer-group", 50) == 31


def test_write_errors_map_like_kafka(h):
    from storage.errors import StorageError

    h.log.fail_with = StorageError("too big", E.RECORD_LIST_TOO_LARGE)
    _, per = h.coord.commit_offsets("g", "", None, -1, [Item("t", 0, 1)])
    assert per == {("t", 0): E.INVALID_COMMIT_OFFSET_SIZE}
    h.log.fail_with = StorageError("disk", E.KAFKA_STORAGE_ERROR)
    _, per = h.coord.commit_offsets("g", "", None, -1, [Item("t", 0, 1)])
    assert per == {("t", 0): E.NOT_COORDINATOR}


def test_deleted_topics_take_their_offsets(h):
    h.coord.commit_offsets("only-t", "", None, -1, [Item("t", 0, 1)])
    (a,), gen = stable_group(h)
    h.coord.commit_offsets("g", a, None, gen, [Item("t", 0, 1), Item("u", 0, 2)])
    h.coord.forget_topics({"t"})
    assert set(h.coord.groups["g"].offsets) == {("u", 0)}
    assert "only-t" not in h.coord.groups  # an empty group left with no offsets is gone
    assert OffsetCommitRecord("g", "t", 0, None) in h.log.records()
