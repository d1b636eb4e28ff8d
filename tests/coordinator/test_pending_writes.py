"""What the group coordinator shows waits for its writes to commit (Kafka's pending offset commits).

The harness's log holds acknowledgements (`hold_acks`) the way a `__consumer_offsets` write waits
for its followers under acks=all; OffsetFetch, the group's later answers and retention must see
only what has committed, and a write that fails must leave no trace.
"""

import pytest

from broker.coordinator.group_coordinator import OffsetCommitItem as Item
from broker.coordinator.group_offsets import append_error
from protocol import ErrorCode as E


def offset(h, partition=("t", 0), group="g", stable=False):
    _, rows = h.coord.fetch_offsets(group, [partition], stable)
    row = rows[0]
    return row.error if row.error is not E.NONE else row.offset


def commit(h, value, partition=("t", 0), group="g", member="", generation=-1):
    top, per = h.coord.commit_offsets(group, member, None, generation, [Item(*partition, value)])
    assert top is E.NONE and set(per.values()) == {E.NONE}


def test_a_commit_shows_only_once_its_write_commits(h):
    commit(h, 205)
    h.log.hold_acks = True
    commit(h, 210)
    assert offset(h) == 205                                   # appended, not yet replicated
    assert offset(h, stable=True) is E.UNSTABLE_OFFSET_COMMIT  # require_stable: a commit is in flight
    h.log.acknowledge()
    assert offset(h) == 210 and offset(h, stable=True) == 210
    assert not h.coord.groups["g"].pending_offsets


@pytest.mark.parametrize("failure", [E.REQUEST_TIMED_OUT, E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, E.NOT_LEADER_OR_FOLLOWER])
def test_a_commit_whose_write_fails_never_shows(h, failure):
    commit(h, 205)
    h.log.hold_acks = True
    commit(h, 210)
    h.log.acknowledge(failure)
    assert offset(h) == 205 and offset(h, stable=True) == 205
    assert not h.coord.groups["g"].pending_offsets


def test_the_first_commit_of_a_group_that_fails_leaves_nothing_visible(h):
    h.log.hold_acks = True
    commit(h, 7)
    assert offset(h) == -1
    assert "g" in h.coord.groups                  # a commit in flight keeps the new group
    h.log.acknowledge(E.REQUEST_TIMED_OUT)
    assert offset(h) == -1


def test_commits_in_flight_apply_in_write_order_whatever_order_they_are_acknowledged(h):
    h.log.hold_acks = True
    commit(h, 1)
    commit(h, 2)
    first, second = h.log.unacknowledged
    second.complete(E.NONE)        # the later write committed: so did everything before it
    assert offset(h) == 2
    first.complete(E.NONE)         # a late acknowledgement of the older write changes nothing
    assert offset(h) == 2
    assert not h.coord.groups["g"].pending_offsets


def test_an_older_commit_committing_leaves_a_newer_one_pending(h):
    h.log.hold_acks = True
    commit(h, 1)
    commit(h, 2)
    h.log.acknowledge(count=1)
    assert offset(h) == 1 and offset(h, stable=True) is E.UNSTABLE_OFFSET_COMMIT
    h.log.acknowledge(E.REQUEST_TIMED_OUT)
    assert offset(h) == 1 and offset(h, stable=True) == 1


def test_offset_delete_voids_a_commit_in_flight(h):
    commit(h, 3)
    h.log.hold_acks = True
    commit(h, 4)
    h.log.hold_acks = False
    assert h.coord.delete_offsets("g", [("t", 0)]) == (E.NONE, {("t", 0): E.NONE})
    h.log.acknowledge()
    assert offset(h) == -1


def test_retention_leaves_offsets_with_a_commit_in_flight(h):
    h.coord.config.offsets_retention_ms = 1_000
    commit(h, 3)
    h.log.hold_acks = True
    commit(h, 4)
    h.coord.clock.advance(5_000)
    h.coord._expire_offsets()
    assert "g" in h.coord.groups and offset(h) == 3
    h.log.acknowledge()
    assert offset(h) == 4


def test_a_txn_offset_commit_whose_write_fails_leaves_the_transaction(h):
    h.log.hold_acks = True
    top, _ = h.coord.commit_offsets("g", "", None, -1, [Item("t", 0, 9)], producer_id=5, producer_epoch=0)
    assert top is E.NONE and offset(h, stable=True) is E.UNSTABLE_OFFSET_COMMIT
    h.log.acknowledge(E.REQUEST_TIMED_OUT)
    assert h.coord.groups["g"].pending_txn_offsets == {}
    h.coord.complete_transaction("g", 5, commit=True)
    assert offset(h) == -1


def test_a_txn_offset_commit_stays_pending_until_the_marker_even_once_written(h):
    h.log.hold_acks = True
    h.coord.commit_offsets("g", "", None, -1, [Item("t", 0, 9)], producer_id=5, producer_epoch=0)
    h.log.acknowledge()
    assert offset(h) == -1 and offset(h, stable=True) is E.UNSTABLE_OFFSET_COMMIT
    h.coord.complete_transaction("g", 5, commit=True)
    assert offset(h) == 9


def first_generation(h):
    """Two members joined; answers (leader id, the other member's id, generation), before any sync."""
    joins = [h.join_new("g", client_id=f"c{i}") for i in range(2)]
    h.advance(0)
    result = joins[0][1].result
    other = next(member for member, _ in joins if member != result.leader)
    return result.leader, other, result.generation_id


def test_sync_group_answers_assignments_once_the_group_record_commits(h):
    leader_id, other, gen = first_generation(h)
    h.log.hold_acks = True
    follower = h.sync("g", other, gen)
    leader = h.sync("g", leader_id, gen, [(leader_id, b"L"), (other, b"O")])
    assert not leader.done and not follower.done and h.state() == "CompletingRebalance"
    h.log.acknowledge()
    assert leader.result.error is E.NONE and leader.result.assignment == b"L"
    assert follower.result.error is E.NONE and follower.result.assignment == b"O"
    assert h.state() == "Stable"


@pytest.mark.parametrize("failure, answer", [(E.REQUEST_TIMED_OUT, E.REBALANCE_IN_PROGRESS),
                                             (E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, E.COORDINATOR_NOT_AVAILABLE),
                                             (E.NOT_LEADER_OR_FOLLOWER, E.NOT_COORDINATOR)])
def test_sync_group_whose_group_record_fails_answers_the_error_and_rebalances(h, failure, answer):
    leader_id, other, gen = first_generation(h)
    h.log.hold_acks = True
    follower = h.sync("g", other, gen)
    leader = h.sync("g", leader_id, gen, [(leader_id, b"L"), (other, b"O")])
    h.log.acknowledge(failure)
    assert leader.result.error is answer and follower.result.error is answer
    assert leader.result.assignment == b"" and follower.result.assignment == b""
    assert h.state() == "PreparingRebalance"


def test_append_error_mapping_matches_kafka():
    # OffsetCommit (GroupMetadataManager.storeOffsets)
    for code in (E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_ENOUGH_REPLICAS, E.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                 E.REQUEST_TIMED_OUT):
        assert append_error(code, offsets=True) is E.COORDINATOR_NOT_AVAILABLE
    for code in (E.NOT_LEADER_OR_FOLLOWER, E.KAFKA_STORAGE_ERROR):
        assert append_error(code, offsets=True) is E.NOT_COORDINATOR
    for code in (E.MESSAGE_TOO_LARGE, E.RECORD_LIST_TOO_LARGE, E.INVALID_FETCH_SIZE):
        assert append_error(code, offsets=True) is E.INVALID_COMMIT_OFFSET_SIZE
    assert append_error(E.CORRUPT_MESSAGE, offsets=True) is E.CORRUPT_MESSAGE
    # SyncGroup's group record (storeGroup)
    assert append_error(E.REQUEST_TIMED_OUT, group_metadata=True) is E.REBALANCE_IN_PROGRESS
    assert append_error(E.MESSAGE_TOO_LARGE, group_metadata=True) is E.UNKNOWN_SERVER_ERROR


def test_a_static_member_rejoin_is_answered_once_its_new_id_commits(h):
    from tests.coordinator.test_group_static import form_static  # noqa: PLC0415
    ids, gen, leader_iid = form_static(h, ["i1", "i2"])
    follower = "i2" if leader_iid == "i1" else "i1"
    h.log.hold_acks = True
    again = h.join(instance_id=follower, client_id=follower)
    assert not again.done
    h.log.acknowledge()
    assert again.result.error is E.NONE and again.result.member_id != ids[follower]


def test_a_static_member_rejoin_whose_record_fails_keeps_the_old_id(h):
    from tests.coordinator.test_group_static import form_static  # noqa: PLC0415
    ids, gen, leader_iid = form_static(h, ["i1", "i2"])
    follower = "i2" if leader_iid == "i1" else "i1"
    h.log.hold_acks = True
    again = h.join(instance_id=follower, client_id=follower)
    h.log.acknowledge(E.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
    assert again.result.error is E.COORDINATOR_NOT_AVAILABLE and again.result.member_id == ""
    assert h.coord.heartbeat("g", ids[follower], follower, gen) is E.NONE   # the old id still holds


# ---- over the wire, one broker whose __consumer_offsets writes can be made to fail ---------------
class FailingOffsetsWrites:
    """Wraps the broker's acks=all wait: while `failing`, writes to __consumer_offsets time out."""

    def __init__(self, replication):
        self.failing = False
        self._wait = replication.wait_for_replicas
        replication.wait_for_replicas = self.wait_for_replicas

    async def wait_for_replicas(self, waits, timeout_s):
        codes = await self._wait(waits, timeout_s)
        if self.failing:
            return [E.REQUEST_TIMED_OUT if p.topic == "__consumer_offsets" else c for (p, _), c in zip(waits, codes)]
        return codes


def wire_commit(raw, offset):
    from protocol import messages as m  # noqa: PLC0415
    C = m.OffsetCommitRequest
    body = C(group_id="wire", generation_id_or_member_epoch=-1, member_id="", topics=[C.OffsetCommitRequestTopic(
        name="t", partitions=[C.OffsetCommitRequestPartition(partition_index=0, committed_offset=offset)])])
    return raw.request(8, 8, body).topics[0].partitions[0].error_code


def wire_fetch(raw, group="wire", require_stable=False):
    from protocol import messages as m  # noqa: PLC0415
    F = m.OffsetFetchRequest
    row = raw.request(9, 7, F(group_id=group, require_stable=require_stable, topics=[
        F.OffsetFetchRequestTopic(name="t", partition_indexes=[0])])).topics[0].partitions[0]
    return row.committed_offset, row.error_code


def test_over_the_wire_a_commit_or_assignment_whose_write_fails_is_not_shown(tmp_path):
    from broker.testing import running_broker  # noqa: PLC0415
    from protocol import messages as m  # noqa: PLC0415
    from tests.broker.raw_client import RawClient  # noqa: PLC0415
    from tests.coordinator.test_raw_protocol import SUB, find_group_coordinator, join  # noqa: PLC0415

    with running_broker(tmp_path / "data", {"group.initial.rebalance.delay.ms": "0"}) as running, \
            RawClient("127.0.0.1", running.port) as raw:
        raw.create_topic("t", 1)
        find_group_coordinator(raw)
        assert wire_commit(raw, 205) == E.NONE
        writes = FailingOffsetsWrites(running.broker.partitions.replication)
        writes.failing = True
        assert wire_commit(raw, 210) == E.COORDINATOR_NOT_AVAILABLE     # REQUEST_TIMED_OUT, mapped
        assert wire_fetch(raw) == (205, E.NONE) and wire_fetch(raw, require_stable=True) == (205, E.NONE)

        member_id = join(raw, group="sg").member_id
        joined = join(raw, member_id, group="sg")
        assert joined.error_code == E.NONE and joined.leader == member_id
        S = m.SyncGroupRequest
        sync = S(group_id="sg", generation_id=joined.generation_id, member_id=member_id,
                 assignments=[S.SyncGroupRequestAssignment(member_id=member_id, assignment=SUB)])
        assert raw.request(14, 3, sync).error_code == E.REBALANCE_IN_PROGRESS   # as Kafka's storeGroup maps it

        writes.failing = False
        assert wire_commit(raw, 215) == E.NONE and wire_fetch(raw) == (215, E.NONE)
        joined = join(raw, member_id, group="sg")
        assert joined.error_code == E.NONE
        sync.generation_id = joined.generation_id
        answer = raw.request(14, 3, sync)
        assert answer.error_code == E.NONE and bytes(answer.assignment) == SUB
