"""Coordinators follow the leadership of their internal-topic partitions, one partition at a time.

A fake broker around real storage and a real PartitionManager: the test hands it metadata images
(as the controller would) and checks what the coordinator service answers and writes.
"""

import uuid

import pytest
import trio

from broker.controller import records as r
from broker.controller.image import ImageChange, MetadataImage
from broker.coordinator.group_coordinator import OffsetCommitItem
from broker.coordinator.ownership import OFFSETS_TOPIC, TRANSACTION_TOPIC, LoadState, Owned, plan
from broker.coordinator.serde import partition_for
from broker.coordinator.service import CoordinatorService
from broker.fetch_session import FetchSessionCache
from broker.partitions import PartitionManager
from broker.testing import make_config
from protocol import ErrorCode as E
from storage import LogManager

OFFSETS_ID = uuid.UUID(int=11)
TXN_ID = uuid.UUID(int=12)
DATA_ID = uuid.UUID(int=13)
PARTITIONS = 2


def group_in(partition: int, prefix="group") -> str:
    """A group id whose __consumer_offsets partition (of PARTITIONS) is `partition`."""
    return next(f"{prefix}-{i}" for i in range(1000) if partition_for(f"{prefix}-{i}", PARTITIONS) == partition)


def image(leaders: dict, epochs: dict | None = None, txn_leaders: dict | None = None) -> MetadataImage:
    """Brokers 1-3; __consumer_offsets (and __transaction_state) partitions led as given; topic 'data'."""
    epochs = epochs or {}
    records = [r.RegisterBrokerRecord(broker_id=b, incarnation_id=uuid.UUID(int=b), broker_epoch=b,
                                      end_points=[r.BrokerEndpoint(name="PLAINTEXT", host="127.0.0.1",
                                                                   port=9000 + b, security_protocol=0)],
                                      fenced=False) for b in (1, 2, 3)]
    for name, topic_id, led in ((OFFSETS_TOPIC, OFFSETS_ID, leaders), (TRANSACTION_TOPIC, TXN_ID, txn_leaders)):
        if led is None:
            continue
        records.append(r.TopicRecord(name=name, topic_id=topic_id))
        for index, leader in led.items():
            # the leader alone in the ISR: acks=all needs no follower (none fetches in these tests)
            records.append(r.PartitionRecord(partition_id=index, topic_id=topic_id, replicas=[1, 2, 3],
                                             isr=[leader], leader=leader, leader_epoch=epochs.get(index, 0)))
    records.append(r.TopicRecord(name="data", topic_id=DATA_ID))
    records.append(r.PartitionRecord(partition_id=0, topic_id=DATA_ID, replicas=[1, 2, 3], isr=[1],
                                     leader=1, leader_epoch=0))
    return MetadataImage(cluster_id="c").apply(records, offset=len(records))


class FakeController:
    def __init__(self):
        self.listeners = []

    def add_listener(self, listener):
        self.listeners.append(listener)

    async def create_topics(self, specs):
        raise AssertionError("the internal topics exist in these tests")


class FakeBroker:
    """What the coordinator service uses of a broker, with images set by the test."""

    def __init__(self, tmp_path, node_id=1):
        self.node_id = node_id
        self.config = make_config(tmp_path, {"node.id": str(node_id),
                                             "offsets.topic.num.partitions": str(PARTITIONS),
                                             "transaction.state.log.num.partitions": str(PARTITIONS)})
        self.logs = LogManager([str(tmp_path)], self.config.topic_defaults())
        self.fetch_sessions = FetchSessionCache()
        self.controller = FakeController()
        self.coordinators = {}
        self.draining = False
        self.image = MetadataImage(cluster_id="c")
        self.partitions = PartitionManager(self)
        self.controller.add_listener(self.partitions.on_image_change)
        self.read_gate = None          # a trio.Event: blocking work waits for it (a slow load)
        self.answer_gate = None        # a trio.Event: blocking work is done, its answer waits for it

    async def run_blocking(self, function, *args):
        if self.read_gate is not None:
            await self.read_gate.wait()
        result = await trio.to_thread.run_sync(function, *args)
        if self.answer_gate is not None:
            await self.answer_gate.wait()
        return result

    def set_image(self, new):
        change = ImageChange(self.image, new)
        self.image = new
        for listener in self.controller.listeners:
            listener(change)


async def settled(owned_list):
    for owned in owned_list:
        with trio.fail_after(10):
            await owned.done.wait()


@pytest.fixture
async def cluster(tmp_path):
    broker = FakeBroker(tmp_path)
    broker.set_image(image({0: 1, 1: 2}))
    async with trio.open_nursery() as nursery:
        service = CoordinatorService(broker)
        broker.coordinators.update(service=service, group=service.groups, transaction=service.txns)
        service._nursery = nursery
        service.follow_leadership()
        await settled(list(service.owned.values()))
        yield broker, service
        nursery.cancel_scope.cancel()
    broker.logs.close()


def commit(service, group, offset):
    return service.groups.commit_offsets(group, "", None, -1, [OffsetCommitItem("data", 0, offset)])


# ---- plan: the pure diff ------------------------------------------------------------------------------
def test_plan_loads_what_we_lead_and_unloads_what_we_lost():
    img = image({0: 1, 1: 2}, txn_leaders={0: 3, 1: 1})
    first = plan(img, {}, 1)
    assert first.load == ((OFFSETS_TOPIC, 0, 0), (TRANSACTION_TOPIC, 1, 0)) and not first.unload
    owned = {(t, i): Owned(t, i, e, LoadState.ACTIVE) for t, i, e in first.load}
    moved = plan(image({0: 2, 1: 1}, epochs={0: 1, 1: 1}, txn_leaders={0: 3, 1: 1}), owned, 1)
    assert moved.unload == ((OFFSETS_TOPIC, 0),)
    assert moved.load == ((OFFSETS_TOPIC, 1, 1),)
    assert plan(image({}, txn_leaders=None), owned, 1).unload == tuple(sorted(owned))


def test_plan_keeps_an_active_partition_whose_epoch_moves_and_restarts_a_stale_load():
    active = {(OFFSETS_TOPIC, 0): Owned(OFFSETS_TOPIC, 0, 0, LoadState.ACTIVE)}
    change = plan(image({0: 1}, epochs={0: 3}), active, 1)
    assert change.new_epoch == ((OFFSETS_TOPIC, 0, 3),) and not change.load and not change.unload
    loading = {(OFFSETS_TOPIC, 0): Owned(OFFSETS_TOPIC, 0, 0, LoadState.LOADING)}
    change = plan(image({0: 1}, epochs={0: 3}), loading, 1)
    assert change.unload == ((OFFSETS_TOPIC, 0),) and change.load == ((OFFSETS_TOPIC, 0, 3),)


# ---- the service on a fake broker -----------------------------------------------------------------
async def test_leader_loads_and_serves_only_its_own_partitions(cluster):
    broker, service = cluster
    mine, theirs = group_in(0), group_in(1)
    assert service.coordinator_error(OFFSETS_TOPIC, 0) is E.NONE
    assert service.coordinator_error(OFFSETS_TOPIC, 1) is E.NOT_COORDINATOR
    assert service.group_coordinator_error(mine) is E.NONE
    assert service.group_coordinator_error(theirs) is E.NOT_COORDINATOR
    assert commit(service, mine, 7) == (E.NONE, {("data", 0): E.NONE})
    await service.settle()
    # a write for a partition another broker leads is refused, not appended
    top, per = commit(service, theirs, 5)
    assert per == {("data", 0): E.NOT_COORDINATOR} or top is E.NOT_COORDINATOR
    assert broker.partitions.get(OFFSETS_TOPIC, 1).log.log_end_offset == 0


async def test_losing_leadership_unloads_and_answers_not_coordinator(cluster):
    broker, service = cluster
    group = group_in(0)
    assert commit(service, group, 42)[0] is E.NONE
    await service.settle()
    end = broker.partitions.get(OFFSETS_TOPIC, 0).log.log_end_offset
    # a member waiting in a join when leadership moves away is told to look for the new coordinator
    first = service.groups.join_group(group_in(0, "joining"), "", None, "c", "/h", 10_000, 10_000, "consumer",
                                      [("range", b"")], require_known_member_id=False)
    service.groups.config.initial_rebalance_delay_ms = 0
    broker.set_image(image({0: 2, 1: 2}, epochs={0: 1}))
    assert first.done and first.result.error is E.NOT_COORDINATOR
    assert service.coordinator_error(OFFSETS_TOPIC, 0) is E.NOT_COORDINATOR
    assert group not in service.groups.groups
    top, per = commit(service, group, 43)
    assert E.NOT_COORDINATOR in (top, *per.values())
    assert broker.partitions.get(OFFSETS_TOPIC, 0).log.log_end_offset == end   # nothing written


async def test_becoming_leader_again_answers_load_in_progress_until_loaded(cluster):
    broker, service = cluster
    group = group_in(0)
    assert commit(service, group, 42)[0] is E.NONE
    await service.settle()
    broker.set_image(image({0: 2, 1: 2}, epochs={0: 1}))
    broker.read_gate = trio.Event()              # the next load's log read waits
    broker.set_image(image({0: 1, 1: 2}, epochs={0: 2}))
    owned = service.owned[(OFFSETS_TOPIC, 0)]
    await trio.sleep(0.05)
    assert owned.state is LoadState.LOADING
    assert service.group_coordinator_error(group) is E.COORDINATOR_LOAD_IN_PROGRESS
    assert service.loading(OFFSETS_TOPIC) and not service.loading(TRANSACTION_TOPIC)   # ListGroups' flag
    assert E.NOT_COORDINATOR in (commit(service, group, 1)[0], *commit(service, group, 1)[1].values())
    broker.read_gate.set()
    await settled([owned])
    assert service.group_coordinator_error(group) is E.NONE
    assert not service.loading(OFFSETS_TOPIC)
    assert service.groups.fetch_offsets(group, [("data", 0)])[1][0].offset == 42
    assert owned.epoch == 2


async def test_a_load_overtaken_by_another_leader_change_is_dropped(cluster):
    broker, service = cluster
    group = group_in(0)
    assert commit(service, group, 9)[0] is E.NONE
    await service.settle()
    broker.set_image(image({0: 2, 1: 2}, epochs={0: 1}))
    broker.read_gate = trio.Event()
    broker.set_image(image({0: 1, 1: 2}, epochs={0: 2}))
    stale = service.owned[(OFFSETS_TOPIC, 0)]
    broker.set_image(image({0: 3, 1: 2}, epochs={0: 3}))       # gone again before the read finished
    broker.read_gate.set()
    await settled([stale])
    await trio.sleep(0.05)
    assert (OFFSETS_TOPIC, 0) not in service.owned
    assert group not in service.groups.groups
    assert service.coordinator_error(OFFSETS_TOPIC, 0) is E.NOT_COORDINATOR


async def test_transaction_coordinator_follows_its_partition_and_fences_writes(tmp_path):
    broker = FakeBroker(tmp_path)
    broker.set_image(image({0: 1, 1: 1}, txn_leaders={0: 1, 1: 1}))
    async with trio.open_nursery() as nursery:
        service = CoordinatorService(broker)
        broker.coordinators.update(service=service, group=service.groups, transaction=service.txns)
        service._nursery = nursery
        service.follow_leadership()
        await settled(list(service.owned.values()))
        service.producer_ids._next, service.producer_ids._end = 100, 200
        txn_id = next(f"t-{i}" for i in range(100) if partition_for(f"t-{i}", PARTITIONS) == 1)
        assert service.txns.init_producer_id(txn_id, 60_000).error is E.NONE
        await service.settle()
        assert service.txn_owner(txn_id).epoch == 0
        broker.set_image(image({0: 1, 1: 1}, txn_leaders={0: 1, 1: 2}, epochs={1: 1}))
        assert service.txn_owner(txn_id) is None
        assert txn_id not in service.txns.txns
        assert service.coordinator_error(TRANSACTION_TOPIC, 1) is E.NOT_COORDINATOR
        broker.set_image(image({0: 1, 1: 1}, txn_leaders={0: 1, 1: 1}, epochs={1: 4}))
        await settled(list(service.owned.values()))
        assert service.txns.txns[txn_id].producer_id == 100       # reloaded from the log
        assert service.txn_owner(txn_id).epoch == 4               # the new coordinator epoch
        nursery.cancel_scope.cancel()
    broker.logs.close()


async def test_a_marker_written_while_loading_completes_transactional_offsets(cluster):
    """The load read the log before a commit marker landed: the marker is not lost on the new leader."""
    from broker.coordinator.markers import Marker, append_markers

    broker, service = cluster
    group = group_in(0)
    top, per = service.groups.commit_offsets(group, "", None, -1, [OffsetCommitItem("data", 0, 33)],
                                             producer_id=5, producer_epoch=0)
    assert top is E.NONE and per == {("data", 0): E.NONE}
    await service.settle()
    broker.set_image(image({0: 2, 1: 2}, epochs={0: 1}))
    stalled = broker.answer_gate = trio.Event()   # the next load reads the log, then stalls
    broker.set_image(image({0: 1, 1: 2}, epochs={0: 2}))
    owned = service.owned[(OFFSETS_TOPIC, 0)]
    await trio.sleep(0.2)
    broker.answer_gate = None
    [result] = await append_markers(broker, [Marker(5, 0, True, 0, ((OFFSETS_TOPIC, 0),))], now_ms=1)
    assert result == {(OFFSETS_TOPIC, 0): E.NONE}
    assert owned.state is LoadState.LOADING and owned.markers_while_loading == [(5, True)]
    stalled.set()
    await settled([owned])
    assert service.groups.fetch_offsets(group, [("data", 0)], require_stable=True)[1][0].offset == 33
    assert not service.groups.groups_with_pending_offsets(5)
