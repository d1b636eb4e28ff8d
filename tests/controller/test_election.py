"""Leadership decisions: fencing, unfencing, controlled shutdown, unclean election, preferred election,
ElectLeaders' answers, AlterPartition's checks: exact records and results on hand-built images."""

import uuid

import pytest
import trio

from broker.controller import Controller, ControllerSettings, CreateTopicSpec, ErrorCode
from broker.controller import records as r
from broker.controller.alter_partition import IsrProposal, alter_partition
from broker.controller.brokers import BrokerSessions, Policy, heartbeat
from broker.controller.election import (
    PREFERRED_ELECTION, UNCLEAN_ELECTION, UNCLEAN_KEY, elect_leaders, rebalance, remove_broker,
)
from broker.controller.errors import ApiError
from broker.controller.image import TOPIC_RESOURCE, MetadataImage

T = uuid.UUID(int=77)
E = ErrorCode


def _image(partitions, brokers=(1, 2, 3), fenced=(), shutting=(), configs=None):
    """partitions: {id: (replicas, isr, leader)} of topic "t"; broker b has epoch 100 + b."""
    records = [r.RegisterBrokerRecord(broker_id=b, incarnation_id=uuid.UUID(int=b), broker_epoch=100 + b,
                                      fenced=b in fenced, in_controlled_shutdown=b in shutting)
               for b in brokers]
    records.append(r.TopicRecord(name="t", topic_id=T))
    for pid, (replicas, isr, leader) in partitions.items():
        records.append(r.PartitionRecord(partition_id=pid, topic_id=T, replicas=list(replicas),
                                         isr=list(isr), leader=leader, leader_epoch=5, partition_epoch=9))
    for key, value in (configs or {}).items():
        records.append(r.ConfigRecord(resource_type=TOPIC_RESOURCE, resource_name="t", name=key, value=value))
    return MetadataImage(cluster_id="c").apply(records, 0)


def _change(pid, **fields):
    return r.PartitionChangeRecord(partition_id=pid, topic_id=T, **fields)


def test_fencing_moves_leadership_within_the_isr_and_never_empties_it():
    image = _image({0: ([1, 2, 3], [1, 2, 3], 1), 1: ([2, 1, 3], [2, 1], 2), 2: ([1, 3], [1], 1),
                    3: ([3, 2], [3, 2], 3)})
    assert remove_broker(image.apply([], 1), 1) == [
        _change(0, leader=2, isr=[2, 3]),        # the next replica in the ISR leads
        _change(1, isr=[2]),                     # a follower just leaves the ISR
        _change(2, leader=-1),                   # its last ISR member: offline, ISR kept
    ]
    after = image.apply(remove_broker(image, 1))
    p0, p2 = after.partition("t", 0), after.partition("t", 2)
    assert (p0.leader, p0.leader_epoch, p0.partition_epoch) == (2, 6, 10)
    assert (p2.leader, p2.isr, p2.leader_epoch) == (-1, (1,), 6)


def test_unclean_election_only_when_enabled():
    parts = {0: ([1, 2, 3], [1], 1)}
    assert remove_broker(_image(parts), 1) == [_change(0, leader=-1)]
    unclean = _image(parts, configs={"unclean.leader.election.enable": "true"})
    assert remove_broker(unclean, 1) == [_change(0, leader=2, isr=[2], leader_recovery_state=1)]
    # the broker-wide default applies when the topic says nothing, the topic's config wins
    assert remove_broker(_image(parts), 1, unclean_default=True) == [
        _change(0, leader=2, isr=[2], leader_recovery_state=1)]
    off = _image(parts, configs={"unclean.leader.election.enable": "false"})
    assert remove_broker(off, 1, unclean_default=True) == [_change(0, leader=-1)]


def _sessions(image, now=0.0):
    sessions = BrokerSessions(timeout=9.0)
    sessions.start(image, now)
    return sessions


def test_unfencing_brings_back_offline_partitions_it_is_in_sync_for():
    image = _image({0: ([1, 2], [1], -1), 1: ([2, 1], [2], -1), 2: ([1, 2], [2], -1)}, fenced=(1, 2))
    records, result, _ = heartbeat(image, _sessions(image), 1, 101, 150, False, False, 1.0, Policy())
    assert records == [r.BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=101, fenced=-1),
                       _change(0, leader=1)]
    assert (result.is_caught_up, result.is_fenced, result.should_shut_down) == (True, False, False)
    # not caught up with the metadata log yet: stays fenced
    records, result, _ = heartbeat(image, _sessions(image), 1, 101, 100, False, False, 1.0, Policy())
    assert records == [] and result.is_fenced and not result.is_caught_up
    with pytest.raises(ApiError) as err:
        heartbeat(image, _sessions(image), 1, 99, 200, False, False, 1.0, Policy())
    assert err.value.code == E.STALE_BROKER_EPOCH


def test_controlled_shutdown_moves_leaders_then_lets_the_broker_go():
    image = _image({0: ([1, 2], [1, 2], 1), 1: ([2, 1], [2, 1], 2), 2: ([1], [1], 1)}, brokers=(1, 2))
    sessions = _sessions(image)
    records, result, entering = heartbeat(image, sessions, 1, 101, 200, False, True, 1.0, Policy())
    assert records == [
        r.BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=101, in_controlled_shutdown=1),
        _change(0, leader=2, isr=[2]), _change(1, isr=[2]), _change(2, leader=-1)]
    assert entering and not result.should_shut_down and not result.is_fenced
    image = image.apply(records, 300)
    sessions.shutdown_offset[1] = 300
    # broker 2 has not seen offset 300 yet: broker 1 must wait
    heartbeat(image, sessions, 2, 102, 299, False, False, 1.1, Policy())
    records, result, _ = heartbeat(image, sessions, 1, 101, 300, False, True, 1.2, Policy())
    assert records == [] and not result.should_shut_down
    heartbeat(image, sessions, 2, 102, 300, False, False, 1.3, Policy())
    records, result, _ = heartbeat(image, sessions, 1, 101, 300, False, True, 1.4, Policy())
    assert records == [r.BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=101, fenced=1)]
    assert result.should_shut_down and result.is_fenced
    # a broker in controlled shutdown is never elected, nor let back into an ISR
    assert elect_leaders(image, UNCLEAN_ELECTION, [("t", [2])])[1] == [
        ("t", [(2, E.ELIGIBLE_LEADERS_NOT_AVAILABLE, "Eligible topic partition leaders are not available.")])]


def test_elect_leaders_answers_as_kafka():
    image = _image({0: ([1, 2], [1, 2], 2), 1: ([1, 2], [1, 2], 1), 2: ([3, 2], [2], 2),
                    3: ([3, 2], [3], -1), 4: ([1, 2], [1], -1)}, fenced=(3,))
    records, results = elect_leaders(image, PREFERRED_ELECTION, [("t", [0, 1, 2, 3, 9]), ("nope", [0])])
    assert records == [_change(0, leader=1)]
    assert results == [("t", [
        (0, 0, None),
        (1, E.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition."),
        (2, E.PREFERRED_LEADER_NOT_AVAILABLE, "The preferred leader was not available."),
        (3, E.PREFERRED_LEADER_NOT_AVAILABLE, "The preferred leader was not available."),
        (9, E.UNKNOWN_TOPIC_OR_PARTITION, "No such partition as t-9")]),
        ("nope", [(0, E.UNKNOWN_TOPIC_OR_PARTITION, "No such topic as nope")])]
    records, results = elect_leaders(image, UNCLEAN_ELECTION, [("t", [0, 3, 4])])
    assert records == [_change(3, leader=2, isr=[2], leader_recovery_state=1), _change(4, leader=1)]
    assert results == [("t", [(0, E.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition."),
                              (3, 0, None), (4, 0, None)])]
    # every partition: those needing no election are left out
    records, results = elect_leaders(image, PREFERRED_ELECTION, None)
    assert [p for p, *_ in results[0][1]] == [0, 2, 3, 4]


def test_auto_rebalance_moves_leadership_back_to_preferred_replicas():
    parts = {p: ([1, 2], [1, 2], 2 if p < 2 else 1) for p in range(10)}
    image = _image(parts)
    assert rebalance(image, 10) == [_change(0, leader=1), _change(1, leader=1)]   # 20% > 10%
    assert rebalance(image, 20) == []                                               # 20% is not above 20%
    parts[0] = ([1, 2], [2], 2)                                                     # 1 out of sync: stays
    assert rebalance(_image(parts), 10) == [_change(1, leader=1)]


def _propose(partition=0, leader_epoch=5, partition_epoch=9, isr=((1, 101), (2, 102)), **kw):
    return IsrProposal(partition=partition, leader_epoch=leader_epoch, partition_epoch=partition_epoch,
                       new_isr=list(isr), topic_id=T, **kw)


def test_alter_partition_checks_in_kafkas_order():
    image = _image({0: ([1, 2, 3, 4], [1], 1), 1: ([1, 2, 3], [1, 2], 1)}, brokers=(1, 2, 3, 4),
                   fenced=(3,), shutting=(4,))
    cases = [
        (_propose(leader_epoch=6), E.NOT_CONTROLLER),
        (_propose(partition_epoch=10), E.NOT_CONTROLLER),
        (_propose(leader_epoch=4), E.FENCED_LEADER_EPOCH),
        (_propose(partition_epoch=8), E.INVALID_UPDATE_VERSION),
        (_propose(isr=[(1, 101), (5, -1)]), E.INVALID_REQUEST),              # not a replica
        (_propose(isr=[(1, 101), (1, 101)]), E.INVALID_REQUEST),             # duplicate
        (_propose(isr=[(2, 102)]), E.INVALID_REQUEST),                        # without the leader
        (_propose(isr=[(1, 101), (3, 103)]), E.INELIGIBLE_REPLICA),          # fenced
        (_propose(isr=[(1, 101), (4, 104)]), E.INELIGIBLE_REPLICA),          # shutting down
        (_propose(isr=[(1, 101), (2, 999)]), E.INELIGIBLE_REPLICA),          # another incarnation
        (_propose(partition=7), E.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    records, results = alter_partition(image, 1, 101, [c for c, _ in cases])
    assert records == [] and [res.error_code for res in results] == [e for _, e in cases]
    _, [res] = alter_partition(image, 1, 101, [IsrProposal(0, 5, 9, [(1, -1), (4, -1)], topic_name="t")],
                               version=1)
    assert res.error_code == E.OPERATION_NOT_ATTEMPTED
    _, [res] = alter_partition(image, 2, 102, [_propose(partition=1)])
    assert res.error_code == E.INVALID_REQUEST                               # 2 does not lead
    _, [res] = alter_partition(image, 1, 101, [IsrProposal(0, 5, 9, [(1, 101)], topic_id=uuid.uuid4())])
    assert res.error_code == E.UNKNOWN_TOPIC_ID
    with pytest.raises(ApiError) as err:
        alter_partition(image, 1, 100, [_propose()])
    assert err.value.code == E.STALE_BROKER_EPOCH


def test_alter_partition_commits_the_new_isr_and_bumps_the_partition_epoch():
    image = _image({0: ([1, 2, 3], [1], 1)})
    records, [res] = alter_partition(image, 1, 101, [_propose(isr=[(1, 101), (2, 102), (3, -1)])])
    assert records == [_change(0, isr=[1, 2, 3])]
    assert (res.error_code, res.leader, res.leader_epoch, res.isr, res.partition_epoch) == (
        0, 1, 5, [1, 2, 3], 10)
    # the same proposal again is stale; a no-op proposal answers the current state without a record
    image = image.apply(records)
    _, [res] = alter_partition(image, 1, 101, [_propose(isr=[(1, 101), (2, 102), (3, -1)])])
    assert res.error_code == E.INVALID_UPDATE_VERSION
    records, [res] = alter_partition(image, 1, 101, [_propose(partition_epoch=10, isr=[(1, 101), (2, 102),
                                                                                       (3, 103)])])
    assert records == [] and (res.error_code, res.partition_epoch) == (0, 10)


async def test_controller_fences_a_silent_broker_and_answers_elect_leaders(tmp_path):
    settings = ControllerSettings(broker_session_timeout_ms=600, placement_seed=1)
    async with Controller.open(str(tmp_path), settings=settings) as controller:
        epochs = {}
        for b in (1, 2):
            epochs[b] = await controller.register_broker(b, uuid.UUID(int=b), [("PLAINTEXT", "h", 1, 0)])
            await controller.heartbeat(b, epochs[b], controller.image.offset)
        [res] = await controller.create_topics([CreateTopicSpec("t", 2, 2)])
        assert res.error_code == 0
        with trio.fail_after(10):
            while not controller.image.brokers[2].fenced:
                await controller.heartbeat(1, epochs[1], controller.image.offset)
                await trio.sleep(0.05)
        parts = controller.image.topics["t"].partitions.values()
        assert all(p.leader == 1 and p.isr == (1,) for p in parts)
        # broker 2 comes back and catches up; a preferred election gives it its partition back
        await controller.heartbeat(2, epochs[2], controller.image.offset)
        other = next(p.partition_id for p in parts if p.replicas[0] == 2)
        [(_, [(_, code, _)])] = await controller.elect_leaders(PREFERRED_ELECTION, [("t", [other])])
        assert code == E.PREFERRED_LEADER_NOT_AVAILABLE              # 2 is not back in the ISR yet
        results = await controller.alter_partition(1, epochs[1], [IsrProposal(
            other, controller.image.partition("t", other).leader_epoch,
            controller.image.partition("t", other).partition_epoch, [(1, epochs[1]), (2, epochs[2])],
            topic_id=res.topic_id)])
        assert results[0].error_code == 0 and results[0].isr == [1, 2]
        [(_, [(_, code, _)])] = await controller.elect_leaders(PREFERRED_ELECTION, [("t", [other])])
        assert code == 0 and controller.image.partition("t", other).leader == 2
        # controlled shutdown of broker 2: leadership moves to 1, then ShouldShutDown
        result = await controller.heartbeat(2, epochs[2], controller.image.offset, want_shutdown=True)
        assert not result.should_shut_down and controller.image.partition("t", other).leader == 1
        await controller.heartbeat(1, epochs[1], controller.image.offset)
        result = await controller.heartbeat(2, epochs[2], controller.image.offset, want_shutdown=True)
        assert result.should_shut_down and controller.image.brokers[2].fenced
        await controller.unregister_broker(2)
        assert 2 not in controller.image.brokers
        with pytest.raises(ApiError) as err:
            await controller.unregister_broker(2)
        assert err.value.code == E.BROKER_ID_NOT_REGISTERED


async def test_enabling_unclean_election_revives_offline_partitions_at_once(tmp_path):
    settings = ControllerSettings(broker_session_timeout_ms=600, placement_seed=3)
    async with Controller.open(str(tmp_path), settings=settings) as controller:
        epochs = {}
        for b in (1, 2):
            epochs[b] = await controller.register_broker(b, uuid.UUID(int=b), [("PLAINTEXT", "h", 1, 0)])
            await controller.heartbeat(b, epochs[b], controller.image.offset)
        await controller.create_topics([CreateTopicSpec("u", assignments={0: [1, 2]})])
        topic_id = controller.image.topics["u"].topic_id
        part = controller.image.partition("u", 0)
        # the leader drops 2 from the ISR, then dies: the partition goes offline
        await controller.alter_partition(1, epochs[1], [IsrProposal(0, part.leader_epoch, part.partition_epoch,
                                                                    [(1, epochs[1])], topic_id=topic_id)])
        with trio.fail_after(10):
            while not controller.image.brokers[1].fenced:
                await controller.heartbeat(2, epochs[2], controller.image.offset)
                await trio.sleep(0.05)
        assert controller.image.partition("u", 0).leader == -1
        await controller.incremental_alter_configs([(TOPIC_RESOURCE, "u", [(UNCLEAN_KEY, 0, "true")])])
        part = controller.image.partition("u", 0)
        assert (part.leader, part.isr, part.leader_recovery_state) == (2, (2,), 1)


async def test_leader_balance_pass_moves_leadership_home(tmp_path):
    settings = ControllerSettings(broker_session_timeout_ms=600, placement_seed=5)
    async with Controller.open(str(tmp_path), settings=settings) as controller:
        epochs = {}
        for b in (1, 2):
            epochs[b] = await controller.register_broker(b, uuid.UUID(int=b), [("PLAINTEXT", "h", 1, 0)])
            await controller.heartbeat(b, epochs[b], controller.image.offset)
        await controller.create_topics([CreateTopicSpec("b", assignments={0: [2, 1], 1: [1, 2]})])
        with trio.fail_after(10):                      # 2 goes quiet: 1 leads both
            while not controller.image.brokers[2].fenced:
                await controller.heartbeat(1, epochs[1], controller.image.offset)
                await trio.sleep(0.05)
        await controller.heartbeat(2, epochs[2], controller.image.offset)      # back, but not in sync
        assert await controller.balance_leaders_once() == 0
        part = controller.image.partition("b", 0)
        await controller.alter_partition(1, epochs[1], [IsrProposal(
            0, part.leader_epoch, part.partition_epoch, [(1, epochs[1]), (2, epochs[2])],
            topic_id=controller.image.topics["b"].topic_id)])
        assert controller.leader_imbalance() == {1: 0.0, 2: 1.0}
        assert await controller.balance_leaders_once() == 1
        assert controller.image.partition("b", 0).leader == 2
        assert controller.image.partition("b", 0).leader_epoch == part.leader_epoch + 1


async def test_alter_partition_on_the_wire(tmp_path):
    """The controller-side handler the replication helpers call; answers as Kafka 3.9's controller
    (errors leave the partition fields at 0 / [])."""
    from protocol import messages
    from broker.controller import admin

    A = messages.AlterPartitionRequest
    async with Controller.open(str(tmp_path), settings=ControllerSettings(placement_seed=1)) as controller:
        epochs = {}
        for b in (1, 2):
            epochs[b] = await controller.register_broker(b, uuid.UUID(int=b), [("PLAINTEXT", "h", 1, 0)])
            await controller.heartbeat(b, epochs[b], controller.image.offset)
        [res] = await controller.create_topics([CreateTopicSpec("w", assignments={0: [1, 2]})])

        def request(broker_epoch, leader_epoch, partition_epoch, isr):
            return A(broker_id=1, broker_epoch=broker_epoch, topics=[A.TopicData(
                topic_id=res.topic_id, partitions=[A.PartitionData(
                    partition_index=0, leader_epoch=leader_epoch, partition_epoch=partition_epoch,
                    new_isr_with_epochs=[A.BrokerState(broker_id=b, broker_epoch=e) for b, e in isr])])])

        out = await admin.alter_partition(controller, request(epochs[1] + 1, 0, 0, [(1, -1)]), 3)
        assert (out.error_code, out.topics) == (E.STALE_BROKER_EPOCH, [])
        out = await admin.alter_partition(controller, request(epochs[1], 0, 0, [(1, epochs[1])]), 3)
        [topic] = out.topics
        [part] = topic.partitions
        assert topic.topic_id == res.topic_id
        assert (part.error_code, part.leader_id, part.leader_epoch, part.isr, part.partition_epoch) == (
            0, 1, 0, [1], 1)
        out = await admin.alter_partition(controller, request(epochs[1], 0, 0, [(1, -1), (2, -1)]), 3)
        [part] = out.topics[0].partitions
        assert (part.error_code, part.leader_id, part.isr, part.partition_epoch) == (
            E.INVALID_UPDATE_VERSION, 0, [], 0)
        old = A(broker_id=1, broker_epoch=epochs[1], topics=[A.TopicData(topic_name="w", partitions=[
            A.PartitionData(partition_index=0, leader_epoch=0, partition_epoch=1, new_isr=[1, 2])])])
        out = await admin.alter_partition(controller, old, 1)
        [part] = out.topics[0].partitions
        assert (out.topics[0].topic_name, part.error_code, part.isr, part.partition_epoch) == ("w", 0, [1, 2], 2)
        assert controller.image.partition("w", 0).isr == (1, 2)


def test_a_broker_released_from_controlled_shutdown_stays_fenced_until_it_registers_again():
    image = _image({0: ([1, 2], [1], -1)}, brokers=(1, 2), fenced=(1,), shutting=(1,))
    records, result, _ = heartbeat(image, _sessions(image), 1, 101, 500, False, False, 1.0, Policy())
    assert records == [] and result.is_fenced and not result.should_shut_down
    records, result, _ = heartbeat(image, _sessions(image), 1, 101, 500, False, True, 1.0, Policy())
    assert records == [] and result.is_fenced and result.should_shut_down


def test_a_new_controller_finishes_a_controlled_shutdown_its_predecessor_began():
    """It does not know where the shutdown began: the last record batch (the image's offset) it is."""
    image = _image({0: ([1, 2], [2], 2)}, brokers=(1, 2), shutting=(1,)).apply([], 40)
    sessions = _sessions(image)                      # fresh: no shutdown offsets, no metadata offsets
    records, result, _ = heartbeat(image, sessions, 1, 101, 40, False, True, 1.0, Policy())
    assert records == [] and not result.should_shut_down          # 2 has not reported yet
    heartbeat(image, sessions, 2, 102, 40, False, False, 1.1, Policy())
    records, result, _ = heartbeat(image, sessions, 1, 101, 40, False, True, 1.2, Policy())
    assert records == [r.BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=101, fenced=1)]
    assert result.should_shut_down
