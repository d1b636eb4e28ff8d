"""The replica manager's acks=all purgatory, DeleteRecords wait and metrics, over in-process fakes."""

from types import SimpleNamespace

import trio

from protocol import ErrorCode

from broker.metrics import BrokerMetrics
from broker.partitions import Partition
from broker.replication.manager import ReplicaManager
from broker.replication.metrics import ReplicationCollector


class FakeLog:
    def __init__(self, end=0):
        self.log_end_offset, self.high_watermark, self.log_start_offset = end, 0, 0
        self.recovery_point = end
        self.epochs = []

    def set_high_watermark(self, offset):
        self.high_watermark = min(offset, self.log_end_offset)

    def assign_epoch_start(self, epoch, write=True):
        self.epochs.append((epoch, self.log_end_offset))

    def write_epochs(self, sync=True):
        return False

    def flush(self, up_to=None):
        self.recovery_point = self.log_end_offset


class FakePartitions:
    durable_acks = False

    def __init__(self):
        self.by_key = {}

    def get(self, topic, index):
        return self.by_key.get((topic, index))

    def all(self):
        return list(self.by_key.values())


def setup(isr=(1, 2, 3), min_isr=2):
    brokers = {b: SimpleNamespace(fenced=False, in_controlled_shutdown=False, epoch=7) for b in (2, 3)}
    broker = SimpleNamespace(node_id=1, metrics=BrokerMetrics(1, process_metrics=False),
                             image=SimpleNamespace(brokers=brokers))
    partitions = FakePartitions()
    manager = ReplicaManager(broker, partitions)
    partition = Partition(topic="t", index=0, topic_id=None, log=FakeLog(), leader=1, leader_epoch=4,
                          min_insync_replicas=min_isr)
    partitions.by_key[("t", 0)] = partition
    image_partition = SimpleNamespace(leader=1, leader_epoch=4, partition_epoch=9, replicas=(1, 2, 3),
                                      isr=isr)
    manager.on_partition(partition, image_partition)
    return manager, partition


def append(manager, partition, n):
    partition.log.log_end_offset += n
    manager.on_local_append(partition)
    return partition.log.log_end_offset


async def test_becoming_leader_starts_the_epoch_and_counts_the_isr():
    manager, partition = setup()
    assert partition.log.epochs == [(4, 0)] and partition.isr == (1, 2, 3)
    end = append(manager, partition, 5)
    assert partition.log.high_watermark == 0             # the followers have nothing yet
    manager.on_replica_fetch(partition, 2, 7, end)
    manager.on_replica_fetch(partition, 3, 7, end)
    assert partition.log.high_watermark == end


async def test_acks_all_waits_for_the_isr():
    manager, partition = setup()
    end = append(manager, partition, 3)
    outcome = {}

    async def produce():
        outcome["codes"] = await manager.wait_for_replicas([(partition, end)], 10)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(produce)
        await trio.sleep(0.05)
        assert "codes" not in outcome and manager.purgatory_size == 1
        manager.on_replica_fetch(partition, 2, 7, end)
        await trio.sleep(0.05)
        assert "codes" not in outcome                    # 3 is in the ISR too
        manager.on_replica_fetch(partition, 3, 7, end)
    assert outcome["codes"] == [ErrorCode.NONE] and manager.purgatory_size == 0


async def test_acks_all_times_out_or_learns_the_isr_shrank():
    manager, partition = setup()
    end = append(manager, partition, 1)
    assert await manager.wait_for_replicas([(partition, end)], 0.1) == [ErrorCode.REQUEST_TIMED_OUT]
    assert manager.purgatory_size == 0
    outcome = {}

    async def produce():
        outcome["codes"] = await manager.wait_for_replicas([(partition, end)], 10)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(produce)
        await trio.sleep(0.05)
        # the controller committed ISR [1] (3 and 2 lagged): the HW moves, but below min.insync
        manager.on_partition(partition, SimpleNamespace(leader=1, leader_epoch=4, partition_epoch=10,
                                                        replicas=(1, 2, 3), isr=(1,)))
    assert outcome["codes"] == [ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND]


async def test_losing_leadership_answers_waiting_produces():
    manager, partition = setup()
    end = append(manager, partition, 1)
    outcome = {}

    async def produce():
        outcome["codes"] = await manager.wait_for_replicas([(partition, end)], 10)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(produce)
        await trio.sleep(0.05)
        manager.on_partition(partition, SimpleNamespace(leader=2, leader_epoch=5, partition_epoch=10,
                                                        replicas=(1, 2, 3), isr=(2, 3)))
    assert outcome["codes"] == [ErrorCode.NOT_LEADER_OR_FOLLOWER]


async def test_delete_records_waits_for_follower_log_starts():
    manager, partition = setup()
    partition.log.log_start_offset = 4
    for replica in (2, 3):
        manager.on_replica_fetch(partition, replica, 7, 0, log_start_offset=0)
    assert await manager.wait_for_low_watermarks([(partition, 4)], 0.05) == \
        [(ErrorCode.REQUEST_TIMED_OUT, -1)]
    outcome = {}

    async def delete():
        outcome["result"] = await manager.wait_for_low_watermarks([(partition, 4)], 10)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(delete)
        await trio.sleep(0.05)
        manager.on_replica_fetch(partition, 2, 7, 4, log_start_offset=4)
        manager.broker.image.brokers[3].fenced = True       # a fenced broker is not waited for
        manager.on_replica_fetch(partition, 2, 7, 4, log_start_offset=5)
    assert outcome["result"] == [(ErrorCode.NONE, 4)]


async def test_metrics_show_the_purgatory_and_isr_changes():
    manager, partition = setup()
    manager.broker.metrics.registry.register(ReplicationCollector(manager))
    end = append(manager, partition, 1)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(manager.wait_for_replicas, [(partition, end)], 0.2)
        await trio.sleep(0.05)
        text = manager.broker.metrics.render().decode()
        assert 'kafka_server_delayedoperationpurgatory_purgatorysize{delayedOperation="Produce"} 1.0' in text
    state = partition.replica_state
    state.propose(now_ms=10**15, lag_time_max_ms=1)
    state.proposal_committed(10, (1,))
    manager.on_isr_committed(partition, state, shrank=True)
    text = manager.broker.metrics.render().decode()
    assert "kafka_server_replicamanager_isrshrinks_total 1.0" in text
    assert "kafka_server_replicafetchermanager_maxlag" in text


async def test_becoming_leader_during_a_follower_append_starts_the_epoch_after_it():
    broker = SimpleNamespace(node_id=1, metrics=None, image=SimpleNamespace(brokers={}))
    partitions = FakePartitions()
    manager = ReplicaManager(broker, partitions)
    partition = Partition(topic="t", index=0, topic_id=None, log=FakeLog(end=10), leader=2,
                          leader_epoch=3)
    partitions.by_key[("t", 0)] = partition
    manager.on_partition(partition, SimpleNamespace(leader=2, leader_epoch=3, partition_epoch=5,
                                                    replicas=(1, 2), isr=(1, 2)))
    partition.replica_io = True          # the fetcher's worker thread is appending
    manager.on_partition(partition, SimpleNamespace(leader=1, leader_epoch=4, partition_epoch=6,
                                                    replicas=(1, 2), isr=(1, 2)))
    assert partition.log.epochs == [] and partition.deferred_epoch_start
    partition.log.log_end_offset = 25    # the append landed
    partition.replica_io = False
    manager.epoch_start_after_io(partition)
    assert partition.log.epochs == [(4, 25)] and partition.replica_state.epoch_start_offset == 25


async def test_a_new_leader_with_durable_acks_flushes_what_it_got_as_a_follower():
    """log.flush.before.acknowledge: the high watermark counts only fsynced records. A follower's
    appends are not fsynced, so a new leader flushes them at once: else records the old leader
    acknowledged stay invisible until the next produce (found by the fault suite)."""
    broker = SimpleNamespace(node_id=1, metrics=BrokerMetrics(1, process_metrics=False),
                             image=SimpleNamespace(brokers={}))
    partitions = FakePartitions()
    partitions.durable_acks = True
    manager = ReplicaManager(broker, partitions)
    log = FakeLog(end=10)
    log.recovery_point, log.high_watermark = 4, 4        # appended as a follower, not fsynced
    partition = Partition(topic="t", index=0, topic_id=None, log=log, leader=1, leader_epoch=5,
                          min_insync_replicas=2)
    partitions.by_key[("t", 0)] = partition
    manager.on_partition(partition, SimpleNamespace(leader=1, leader_epoch=5, partition_epoch=3,
                                                    replicas=(1, 2, 3), isr=(1, 2)))
    assert log.recovery_point == 10
    manager.on_replica_fetch(partition, 2, 7, 10)
    assert log.high_watermark == 10


async def test_the_leader_flusher_flushes_off_the_loop_then_advances():
    from broker.replication.leader_flush import LeaderFlusher

    flushed = []

    async def run_blocking(function, *args):
        return await trio.to_thread.run_sync(function, *args)
    flusher = LeaderFlusher(SimpleNamespace(run_blocking=run_blocking), flushed.append)
    partition = SimpleNamespace(log=FakeLog(end=8))
    partition.log.recovery_point = 2
    async with trio.open_nursery() as nursery:
        nursery.start_soon(flusher.run)
        await trio.sleep(0)
        flusher.flush_later(partition)
        with trio.fail_after(10):
            while not flushed:
                await trio.sleep(0.01)
        nursery.cancel_scope.cancel()
    assert flushed == [partition] and partition.log.recovery_point == 8


async def test_a_leader_back_from_a_pause_does_not_blame_its_followers(monkeypatch, autojump_clock):
    """Stopped longer than replica.lag.time.max.ms, the leader wakes before reading its followers'
    queued fetches: the pause is not their lag. A follower silent while the leader runs still goes."""
    import broker.replication.manager as manager_module

    paused_ms = [0]    # time the process spent stopped: the clock ran, trio's deadlines did not fire
    monkeypatch.setattr(manager_module, "_now_ms",
                        lambda: int(trio.current_time() * 1000) + paused_ms[0])
    manager, partition = setup()
    manager.broker.config = {"replica.lag.time.max.ms": 6000}
    proposals = []
    manager.isr_updates = SimpleNamespace(
        send=lambda partition, state, proposal: proposals.append(proposal.new_isr))
    end = append(manager, partition, 3)

    def both_fetch():
        for follower in (2, 3):
            manager.on_replica_fetch(partition, follower, end, end)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(manager._isr_loop)   # checks every 3 s
        for _ in range(4):
            both_fetch()
            await trio.sleep(1)
        both_fetch()
        paused_ms[0] += 9000           # at 4 s: SIGSTOP for 9 s, then SIGCONT
        await trio.sleep(2.5)          # the check at 6 s runs before any queued fetch is read
        assert proposals == []         # [1, 2, 3] kept: 2 s of running time since their fetches
        both_fetch()
        for _ in range(10):            # 10 s running: 2 keeps fetching, 3 is gone
            await trio.sleep(1)
            manager.on_replica_fetch(partition, 2, end, end)
        nursery.cancel_scope.cancel()
    assert proposals == [(1, 2)]


async def test_only_replicas_the_controller_would_accept_are_proposed_into_the_isr(autojump_clock):
    """As Kafka's leader: a caught-up follower on a broker that is shutting down, fenced, or that
    fetches in an old broker epoch stays out of an ISR expansion. A rolling restart found it: the
    leaders kept asking to add back the broker in controlled shutdown (still fetching while it
    drained), and a pending expansion counts in the high watermark, so once it exited every acks=all
    append waited for an answer that did not come while the quorum elected a new controller."""
    manager, partition = setup(isr=(1, 2))
    manager.broker.config = {"replica.lag.time.max.ms": 6000}
    proposals = []
    manager.isr_updates = SimpleNamespace(
        send=lambda partition, state, proposal: proposals.append(proposal.new_isr))
    third = manager.broker.image.brokers[3]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(manager._isr_loop)
        for refused, epoch in (({"in_controlled_shutdown": True}, 7), ({"fenced": True}, 7),
                               ({}, 6), ({}, 7)):
            vars(third).update({"fenced": False, "in_controlled_shutdown": False, **refused})
            end = append(manager, partition, 3)
            manager.on_replica_fetch(partition, 2, 7, end)
            manager.on_replica_fetch(partition, 3, epoch, end)
            await trio.sleep(1)
            assert partition.log.high_watermark == end      # counted on the committed ISR only
            assert proposals == ([] if refused or epoch != 7 else [(1, 2, 3)])
        nursery.cancel_scope.cancel()
