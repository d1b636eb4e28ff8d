"""Replica placement: striping over brokers and racks, Kafka's refusals, manual assignments."""

import random
import uuid
from collections import Counter

import pytest

from broker.controller import Controller, ControllerSettings, CreatePartitionsSpec, CreateTopicSpec, ErrorCode
from broker.controller.errors import ApiError
from broker.controller.placement import Candidate, PlacementError, place_replicas, validate_assignment


def _brokers(n, racks=None, fenced=()):
    return [Candidate(i, None if racks is None else f"rack{(i - 1) % racks}", i in fenced)
            for i in range(1, n + 1)]


@pytest.mark.parametrize("seed", range(20))
def test_leaders_and_replicas_spread_evenly(seed):
    placements = place_replicas(_brokers(6), 60, 3, random.Random(seed))
    assert len(placements) == 60
    assert all(len(set(p)) == 3 for p in placements)
    assert Counter(p[0] for p in placements) == {b: 10 for b in range(1, 7)}
    replicas = Counter(b for p in placements for b in p)
    assert replicas == {b: 30 for b in range(1, 7)}


def test_random_start_differs_between_topics_but_replays_with_the_same_seed():
    a = place_replicas(_brokers(5), 5, 2, random.Random(1))
    assert a == place_replicas(_brokers(5), 5, 2, random.Random(1))
    starts = {tuple(place_replicas(_brokers(5), 5, 2, random.Random(s))[0]) for s in range(30)}
    assert len(starts) > 5


@pytest.mark.parametrize("seed", range(10))
def test_replicas_of_a_partition_go_to_distinct_racks(seed):
    brokers = _brokers(9, racks=3)
    rack = {b.broker_id: b.rack for b in brokers}
    placements = place_replicas(brokers, 30, 3, random.Random(seed))
    assert all(len({rack[b] for b in p}) == 3 for p in placements)
    assert Counter(rack[p[0]] for p in placements) == {"rack0": 10, "rack1": 10, "rack2": 10}
    # more replicas than racks: every rack still used, then the rest spread
    placements = place_replicas(_brokers(4, racks=2), 8, 3, random.Random(seed))
    assert all(len({(b - 1) % 2 for b in p}) == 2 and len(set(p)) == 3 for p in placements)


def test_fenced_brokers_only_follow():
    brokers = _brokers(4, fenced={4})
    placements = place_replicas(brokers, 12, 2, random.Random(3))
    assert 4 not in {p[0] for p in placements}
    placements = place_replicas(brokers, 12, 4, random.Random(3))
    assert all(p[-1] == 4 and p[0] != 4 for p in placements)   # used only once the unfenced are used


def test_refusals_in_kafkas_order_and_words():
    with pytest.raises(PlacementError) as err:
        place_replicas(_brokers(3), 1, 0, random.Random())
    assert err.value.message == "Invalid replication factor 0: the replication factor must be positive."
    with pytest.raises(PlacementError) as err:
        place_replicas(_brokers(2, fenced={1, 2}), 1, 1, random.Random())
    assert err.value.message == "All brokers are currently fenced."
    with pytest.raises(PlacementError) as err:
        place_replicas(_brokers(2), 1, 3, random.Random())
    assert err.value.code == ErrorCode.INVALID_REPLICATION_FACTOR
    assert err.value.message == ("The target replication factor of 3 cannot be reached because only 2 "
                                 "broker(s) are registered.")


@pytest.mark.parametrize("assignment, message", [
    ({0: [1, 2], 2: [2, 1]}, "partitions should be a consecutive 0-based integer sequence"),
    ({0: []}, "The manual partition assignment includes an empty replica list."),
    ({0: [1, 2, 1]}, "The manual partition assignment includes the broker 1 more than once."),
    ({0: [9, 2, 2]}, "The manual partition assignment includes the broker 2 more than once."),   # ids in order
    ({0: [1, 7]}, "The manual partition assignment includes broker 7, but no such broker is registered."),
    ({0: [1, 2], 1: [3]}, "The manual partition assignment includes a partition with 1 replica(s), but "
                          "this is not consistent with previous partitions, which have 2 replica(s)."),
])
def test_manual_assignment_errors(assignment, message):     # words checked against Kafka 3.9
    with pytest.raises(ApiError) as err:
        validate_assignment(assignment, [1, 2, 3])
    assert (err.value.code, err.value.message) == (ErrorCode.INVALID_REPLICA_ASSIGNMENT, message)
    assert validate_assignment({0: [3, 1], 1: [2, 3]}, [1, 2, 3]) == [[3, 1], [2, 3]]


async def _register(controller, broker_id, rack=None, unfence=True):
    epoch = await controller.register_broker(broker_id, uuid.UUID(int=broker_id),
                                             [("PLAINTEXT", "localhost", 9000 + broker_id, 0)], rack=rack)
    if unfence:
        await controller.heartbeat(broker_id, epoch, controller.image.offset)
    return epoch


async def test_controller_places_with_racks_and_refuses_too_few_brokers(tmp_path):
    settings = ControllerSettings(placement_seed=7, default_replication_factor=3)
    async with Controller.open(str(tmp_path), settings=settings) as controller:
        for b in range(1, 7):
            await _register(controller, b, rack=f"r{b % 3}")
        [res] = await controller.create_topics([CreateTopicSpec("t", 12)])
        assert (res.error_code, res.replication_factor) == (0, 3)
        parts = controller.image.topics["t"].partitions.values()
        assert all(len({b % 3 for b in p.replicas}) == 3 for p in parts)
        assert all(p.isr == p.replicas and p.leader == p.replicas[0] for p in parts)
        assert Counter(p.leader for p in parts) == {b: 2 for b in range(1, 7)}
        [res] = await controller.create_topics([CreateTopicSpec("big", 1, 7)])
        assert (res.error_code, res.error_message) == (
            ErrorCode.INVALID_REPLICATION_FACTOR,
            "Unable to replicate the partition 7 time(s): The target replication factor of 7 cannot be "
            "reached because only 6 broker(s) are registered.")
        [res] = await controller.create_partitions([CreatePartitionsSpec("t", 14, [[1, 2, 3], [4, 5, 4]])])
        assert res.error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
        assert res.error_message == "The manual partition assignment includes the broker 4 more than once."
        [res] = await controller.create_partitions([CreatePartitionsSpec("t", 14, [[1, 2, 3], [9, 5, 4]])])
        assert "includes broker 9, but no such broker is registered" in res.error_message
        [res] = await controller.create_partitions([CreatePartitionsSpec("t", 14)])
        assert res.error_code == 0 and len(controller.image.partition("t", 13).replicas) == 3
        [res] = await controller.create_topics([CreateTopicSpec("m", assignments={0: [6, 5], 1: [5, 6]})])
        assert res.error_code == 0
        assert controller.image.partition("m", 0).replicas == (6, 5)
        assert controller.image.partition("m", 0).leader == 6


async def test_internal_topics_wait_for_enough_brokers(tmp_path):
    async with Controller.open(str(tmp_path)) as controller:
        await _register(controller, 1)
        await _register(controller, 2, unfence=False)        # registered but fenced: counts, never leads
        spec = CreateTopicSpec("__consumer_offsets", 3, 3)
        [res] = await controller.create_topics([spec])
        assert res.error_code == ErrorCode.INVALID_REPLICATION_FACTOR
        assert "only 2 broker(s) are registered" in res.error_message
        await _register(controller, 3)
        [res] = await controller.create_topics([spec])
        assert res.error_code == 0
        parts = controller.image.topics["__consumer_offsets"].partitions.values()
        assert all(2 not in p.isr and p.leader != 2 and 2 in p.replicas for p in parts)
