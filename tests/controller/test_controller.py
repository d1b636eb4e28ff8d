"""The controller API the broker calls: validation, error codes, durability across restarts."""

import uuid

import pytest
import trio

from broker.controller import (
    APPEND, DELETE, SET, SUBTRACT, BROKER_RESOURCE, TOPIC_RESOURCE, ApiError, Controller,
    ControllerSettings, CreatePartitionsSpec, CreateTopicSpec, ErrorCode,
)

INCARNATION = uuid.UUID(int=42)


async def _start_broker(controller, broker_id=1, incarnation=INCARNATION):
    epoch = await controller.register_broker(broker_id, incarnation, [("PLAINTEXT", "localhost", 9092, 0)])
    result = await controller.heartbeat(broker_id, epoch, controller.image.offset)
    assert not result.is_fenced
    return epoch


def _validator(resource_type, name, configs):
    if "bogus.config" in configs:
        raise ValueError("Unknown topic config name: bogus.config")


async def test_create_topic_and_restart(tmp_path):
    async with Controller.open(str(tmp_path), config_validator=_validator) as controller:
        await _start_broker(controller)
        [res] = await controller.create_topics([CreateTopicSpec("orders", 3, 1, configs={"retention.ms": "1000"})])
        assert res.error_code == 0 and res.num_partitions == 3 and res.replication_factor == 1
        topic = controller.image.topics["orders"]
        assert controller.image.topics_by_id[res.topic_id] is topic
        assert sorted(topic.partitions) == [0, 1, 2]
        part = topic.partitions[0]
        assert (part.replicas, part.isr, part.leader, part.leader_epoch) == ((1,), (1,), 1, 0)
        assert controller.image.topic_configs["orders"] == {"retention.ms": "1000"}
        block = await controller.allocate_producer_ids(1)
        cluster_id = controller.cluster_id
    async with Controller.open(str(tmp_path)) as controller:
        assert controller.cluster_id == cluster_id
        topic = controller.image.topics["orders"]
        assert topic.topic_id == res.topic_id and len(topic.partitions) == 3
        assert controller.image.topic_configs["orders"] == {"retention.ms": "1000"}
        again = await controller.allocate_producer_ids(1)
        assert again.first_producer_id == block.first_producer_id + 1000


async def test_create_topic_errors(tmp_path):
    async with Controller.open(str(tmp_path), config_validator=_validator) as controller:
        await _start_broker(controller)
        await controller.create_topics([CreateTopicSpec("a.b")])
        specs = [
            CreateTopicSpec(""), CreateTopicSpec("."), CreateTopicSpec("x" * 250), CreateTopicSpec("bad/name"),
            CreateTopicSpec("a_b"), CreateTopicSpec("a.b"), CreateTopicSpec("zero", 0),
            CreateTopicSpec("rf", 1, 0), CreateTopicSpec("toomany", 1, 2),
            CreateTopicSpec("cfg", configs={"bogus.config": "1"}),
            CreateTopicSpec("nullcfg", configs={"retention.ms": None}),
            CreateTopicSpec("dup"), CreateTopicSpec("dup"),
            CreateTopicSpec("manual", 2, assignments={0: [1]}),
            CreateTopicSpec("gap", assignments={0: [1], 2: [1]}),
            CreateTopicSpec("twice", assignments={0: [1, 1]}),
            CreateTopicSpec("nobroker", assignments={0: [7]}),
            CreateTopicSpec("x" * 249), CreateTopicSpec("ok", assignments={0: [1], 1: [1]}),
        ]
        codes = [(r.name, r.error_code) for r in await controller.create_topics(specs)]
        assert [c for _, c in codes] == [
            ErrorCode.INVALID_TOPIC_EXCEPTION, ErrorCode.INVALID_TOPIC_EXCEPTION,
            ErrorCode.INVALID_TOPIC_EXCEPTION, ErrorCode.INVALID_TOPIC_EXCEPTION,
            ErrorCode.INVALID_TOPIC_EXCEPTION, ErrorCode.TOPIC_ALREADY_EXISTS,
            ErrorCode.INVALID_PARTITIONS, ErrorCode.INVALID_REPLICATION_FACTOR,
            ErrorCode.INVALID_REPLICATION_FACTOR, ErrorCode.INVALID_CONFIG, ErrorCode.INVALID_CONFIG,
            ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_REQUEST,
            ErrorCode.INVALID_REPLICA_ASSIGNMENT, ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            ErrorCode.INVALID_REPLICA_ASSIGNMENT, 0, 0,
        ]
        assert set(controller.image.topics) == {"a.b", "x" * 249, "ok"}
        assert len(controller.image.topics["ok"].partitions) == 2


async def test_validate_only_and_defaults(tmp_path):
    settings = ControllerSettings(num_partitions=4)
    async with Controller.open(str(tmp_path), settings=settings) as controller:
        await _start_broker(controller)
        offset = controller.image.offset
        [res] = await controller.create_topics([CreateTopicSpec("t")], validate_only=True)
        assert res.error_code == 0 and res.num_partitions == 4
        assert "t" not in controller.image.topics and controller.image.offset == offset
        [res] = await controller.create_topics([CreateTopicSpec("t")])
        assert len(controller.image.topics["t"].partitions) == 4


async def test_an_operation_over_10000_records_is_a_policy_violation(tmp_path):
    # Kafka's MAX_RECORDS_PER_USER_OP: refused up front, validate_only too, nothing committed.
    async with Controller.open(str(tmp_path)) as controller:
        await _start_broker(controller)
        offset = controller.image.offset
        for validate_only in (True, False):
            with pytest.raises(ApiError) as raised:
                await controller.create_topics([CreateTopicSpec("huge", 2_000_000, 1)], validate_only)
            assert raised.value.code == ErrorCode.POLICY_VIOLATION
            assert raised.value.message == "Unable to perform excessively large batch operation."
        # 1 topic record + 9,999 partitions is exactly the limit.
        [res] = await controller.create_topics([CreateTopicSpec("edge", 9_999, 1)], validate_only=True)
        assert res.error_code == 0
        # The bound is over the whole request: 6,000 topics are 12,000 records.
        many = [CreateTopicSpec(f"many-{i}", 1, 1) for i in range(6_000)]
        with pytest.raises(ApiError) as raised:
            await controller.create_topics(many)
        assert raised.value.code == ErrorCode.POLICY_VIOLATION
        # Invalid topics add no records and do not count.
        specs = [CreateTopicSpec("zero", 0)] * 3 + [CreateTopicSpec("ok", 9_999, 1)]
        out = await controller.create_topics(specs, validate_only=True)
        assert [r.error_code for r in out] == [ErrorCode.INVALID_REQUEST] * 3 + [0]

        await controller.create_topics([CreateTopicSpec("grow", 1, 1), CreateTopicSpec("other", 1, 1)])
        offset = controller.image.offset
        for validate_only in (True, False):
            with pytest.raises(ApiError) as raised:
                await controller.create_partitions([CreatePartitionsSpec("grow", 2_000_000)],
                                                   validate_only)
            assert raised.value.code == ErrorCode.POLICY_VIOLATION
        with pytest.raises(ApiError):
            await controller.create_partitions([CreatePartitionsSpec("grow", 6_000),
                                                CreatePartitionsSpec("missing", 2),
                                                CreatePartitionsSpec("other", 5_000)])
        assert controller.image.offset == offset and len(controller.image.topics["grow"].partitions) == 1
        [res] = await controller.create_partitions([CreatePartitionsSpec("grow", 10_001)],
                                                   validate_only=True)
        assert res.error_code == 0


async def test_no_brokers_means_invalid_replication_factor(tmp_path):
    async with Controller.open(str(tmp_path)) as controller:
        [res] = await controller.create_topics([CreateTopicSpec("t", 1, 1)])
        assert res.error_code == ErrorCode.INVALID_REPLICATION_FACTOR


async def test_delete_topics(tmp_path):
    deleted = []
    async with Controller.open(str(tmp_path)) as controller:
        controller.add_listener(lambda change: deleted.extend(t.name for t in change.deleted_topics))
        await _start_broker(controller)
        results = await controller.create_topics([CreateTopicSpec("a"), CreateTopicSpec("b")])
        await controller.incremental_alter_configs([(TOPIC_RESOURCE, "a", [("retention.ms", SET, "5")])])
        out = await controller.delete_topics(names=["a", "nope"], topic_ids=[results[1].topic_id, uuid.uuid4()])
        assert [(r.name, r.error_code) for r in out] == [
            ("a", 0), ("nope", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), ("b", 0), (None, ErrorCode.UNKNOWN_TOPIC_ID)]
        assert out[0].topic_id == results[0].topic_id
        assert not controller.image.topics and not controller.image.topic_configs
        assert deleted == ["a", "b"]
        # a recreated topic gets a fresh id
        [again] = await controller.create_topics([CreateTopicSpec("a")])
        assert again.topic_id != results[0].topic_id
    async with Controller.open(str(tmp_path), settings=ControllerSettings(delete_topic_enable=False)) as c:
        [res] = await c.delete_topics(names=["a"])
        assert res.error_code == ErrorCode.TOPIC_DELETION_DISABLED


async def test_create_partitions(tmp_path):
    async with Controller.open(str(tmp_path)) as controller:
        await _start_broker(controller)
        await controller.create_topics([CreateTopicSpec("t", 2, 1)])
        out = await controller.create_partitions([
            CreatePartitionsSpec("t", 5), CreatePartitionsSpec("missing", 3)])
        assert [r.error_code for r in out] == [0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
        assert sorted(controller.image.topics["t"].partitions) == [0, 1, 2, 3, 4]
        out = await controller.create_partitions([CreatePartitionsSpec("t", 5)])
        assert out[0].error_code == ErrorCode.INVALID_PARTITIONS
        out = await controller.create_partitions([CreatePartitionsSpec("t", 3)])
        assert out[0].error_code == ErrorCode.INVALID_PARTITIONS
        out = await controller.create_partitions([CreatePartitionsSpec("t", 7, [[1]])])
        assert out[0].error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
        await _start_broker(controller, 2, uuid.UUID(int=2))
        out = await controller.create_partitions([CreatePartitionsSpec("t", 6, [[1, 2]])])
        assert out[0].error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
        assert out[0].error_message == (
            "The manual partition assignment includes a partition with 2 replica(s), but this is not "
            "consistent with previous partitions, which have 1 replica(s).")
        out = await controller.create_partitions([CreatePartitionsSpec("t", 6, [[1]])])
        assert out[0].error_code == 0 and controller.image.partition("t", 5).replicas == (1,)


async def test_configs(tmp_path):
    async with Controller.open(str(tmp_path), config_validator=_validator) as controller:
        await _start_broker(controller)
        await controller.create_topics([CreateTopicSpec("t", configs={"cleanup.policy": "delete"})])
        out = await controller.incremental_alter_configs([
            (TOPIC_RESOURCE, "t", [("cleanup.policy", APPEND, "compact"), ("retention.ms", SET, "9")]),
            (TOPIC_RESOURCE, "missing", [("retention.ms", SET, "9")]),
            (TOPIC_RESOURCE, "t", []),
            (BROKER_RESOURCE, "", [("log.retention.ms", SET, "1")]),
            (BROKER_RESOURCE, "abc", [("log.retention.ms", SET, "1")]),
        ])
        assert [r.error_code for r in out] == [
            ErrorCode.INVALID_REQUEST, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.INVALID_REQUEST,
            0, ErrorCode.INVALID_REQUEST]
        out = await controller.incremental_alter_configs([
            (TOPIC_RESOURCE, "t", [("cleanup.policy", APPEND, "compact"), ("retention.ms", SET, "9")])])
        assert out[0].error_code == 0
        assert controller.image.topic_configs["t"] == {"cleanup.policy": "delete,compact", "retention.ms": "9"}
        assert controller.image.broker_configs[""] == {"log.retention.ms": "1"}
        out = await controller.incremental_alter_configs([
            (TOPIC_RESOURCE, "t", [("cleanup.policy", SUBTRACT, "delete"), ("retention.ms", DELETE, None)])])
        assert controller.image.topic_configs["t"] == {"cleanup.policy": "compact"}
        out = await controller.incremental_alter_configs([(TOPIC_RESOURCE, "t", [("retention.ms", APPEND, "1")])])
        assert out[0].error_code == ErrorCode.INVALID_CONFIG
        out = await controller.incremental_alter_configs([(TOPIC_RESOURCE, "t", [("bogus.config", SET, "1")])])
        assert out[0].error_code == ErrorCode.INVALID_CONFIG
        out = await controller.alter_configs([(TOPIC_RESOURCE, "t", {"segment.ms": "100"})], validate_only=True)
        assert out[0].error_code == 0 and controller.image.topic_configs["t"] == {"cleanup.policy": "compact"}
        out = await controller.alter_configs([(TOPIC_RESOURCE, "t", {"segment.ms": "100"})])
        assert controller.image.topic_configs["t"] == {"segment.ms": "100"}


async def test_broker_lifecycle_and_fencing(tmp_path):
    settings = ControllerSettings(broker_session_timeout_ms=400)
    async with Controller.open(str(tmp_path), settings=settings) as controller:
        e1 = await _start_broker(controller, 1)
        e2 = await _start_broker(controller, 2, uuid.UUID(int=2))
        [res] = await controller.create_topics([CreateTopicSpec("t", 4, 2)])
        assert res.error_code == 0
        parts = controller.image.topics["t"].partitions.values()
        assert {p.leader for p in parts} == {1, 2}
        assert all(set(p.replicas) == {1, 2} for p in parts)
        with pytest.raises(ApiError) as err:
            await controller.heartbeat(2, e2 + 1000, 0)
        assert err.value.code == ErrorCode.STALE_BROKER_EPOCH
        with pytest.raises(ApiError) as err:
            await controller.register_broker(2, uuid.UUID(int=3), [])
        assert err.value.code == ErrorCode.DUPLICATE_BROKER_REGISTRATION
        # broker 2 stops heartbeating: fenced, its leaderships move to broker 1
        with trio.fail_after(5):
            while not controller.image.brokers[2].fenced:
                await controller.heartbeat(1, e1, controller.image.offset)
                await trio.sleep(0.05)
        parts = controller.image.topics["t"].partitions.values()
        assert all(p.leader == 1 and p.isr == (1,) for p in parts)
        assert all(p.leader_epoch >= 0 for p in parts)
        with pytest.raises(ApiError) as err:
            await controller.allocate_producer_ids(9, 5)
        assert err.value.code == ErrorCode.BROKER_ID_NOT_REGISTERED


async def test_single_node_restart_keeps_leadership(tmp_path):
    async with Controller.open(str(tmp_path)) as controller:
        await _start_broker(controller)
        await controller.create_topics([CreateTopicSpec("t", 1, 1)])
    async with Controller.open(str(tmp_path)) as controller:
        epoch = await controller.register_broker(1, uuid.UUID(int=7), [("PLAINTEXT", "h", 1, 0)])
        assert controller.image.partition("t", 0).leader == -1
        await controller.heartbeat(1, epoch, controller.image.offset)
        part = controller.image.partition("t", 0)
        assert part.leader == 1 and part.leader_epoch == 2 and part.isr == (1,)
        assert controller.image.brokers[1].endpoints[0].host == "h"


async def test_listeners_see_changes_before_return(tmp_path):
    seen = []
    async with Controller.open(str(tmp_path)) as controller:
        await _start_broker(controller)

        def listener(change):
            seen.extend((t.name, p.partition_id) for t, p in change.changed_partitions)
        controller.add_listener(listener)
        await controller.create_topics([CreateTopicSpec("t", 2, 1)])
        assert sorted(seen) == [("t", 0), ("t", 1)]


async def test_snapshots_compact_the_log_and_restore(tmp_path):
    async with Controller.open(str(tmp_path), snapshot_every=5) as controller:
        await _start_broker(controller)
        for k in range(12):
            [res] = await controller.create_topics([CreateTopicSpec(f"t{k}", 1, 1, configs={"retention.ms": str(k)})])
            assert res.error_code == 0
        await controller.delete_topics(names=["t3"])
        image = controller.image
    log_dir = tmp_path / "__cluster_metadata-0"
    assert list(log_dir.glob("*.checkpoint"))
    [segment] = list(log_dir.glob("*.log"))
    assert int(segment.name[:-4]) > 0            # the log starts after the snapshot
    async with Controller.open(str(tmp_path), snapshot_every=5) as controller:
        assert controller.image.topics.keys() == image.topics.keys()
        assert controller.image.topic_configs == image.topic_configs
        assert controller.image.partition("t7", 0) == image.partition("t7", 0)
        quorum = controller.describe_quorum()
        assert quorum["leader_id"] == 1 and quorum["epoch"] == 2 and controller.is_active


async def test_admin_handlers_on_a_single_node(tmp_path):
    from protocol import messages as m

    from broker.controller import admin
    from broker.controller.wire import METADATA_TOPIC

    async with Controller.open(str(tmp_path), cluster_id="cid") as controller:
        req = m.DescribeQuorumRequest
        body = req(topics=[req.TopicData(topic_name=METADATA_TOPIC, partitions=[req.PartitionData(partition_index=0)])])
        resp = await admin.describe_quorum(controller, body)
        part = resp.topics[0].partitions[0]
        assert resp.error_code == 0 and part.error_code == 0 and part.leader_id == 1
        assert [r.replica_id for r in part.current_voters] == [1] and part.high_watermark > 0
        bad = req(topics=[req.TopicData(topic_name="other", partitions=[req.PartitionData(partition_index=0)])])
        refused = await admin.describe_quorum(controller, bad)   # as Kafka 3.9: on the partition
        assert refused.error_code == 0
        assert refused.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        R = m.BrokerRegistrationRequest
        reg = await admin.broker_registration(controller, R(
            broker_id=1, cluster_id="cid", incarnation_id=INCARNATION, features=[R.Feature(
                name="metadata.version", min_supported_version=7, max_supported_version=22)]))
        beat = await admin.broker_heartbeat(controller, m.BrokerHeartbeatRequest(
            broker_id=1, broker_epoch=reg.broker_epoch, current_metadata_offset=reg.broker_epoch))
        assert beat.error_code == 0 and not beat.is_fenced
        stale = await admin.broker_heartbeat(controller, m.BrokerHeartbeatRequest(broker_id=1, broker_epoch=999))
        assert stale.error_code == ErrorCode.STALE_BROKER_EPOCH
        ids = await admin.allocate_producer_ids(controller, m.AllocateProducerIdsRequest(broker_id=1, broker_epoch=-1))
        assert ids.error_code == 0 and ids.producer_id_len == 1000


async def test_idle_controller_does_not_spin(tmp_path):
    async with Controller.open(str(tmp_path)) as controller:
        node = controller._quorum.node
        calls = []
        original = node.tick

        def counting_tick(now):
            calls.append(now)
            return original(now)
        node.tick = counting_tick
        await trio.sleep(1.0)
        assert len(calls) <= 5          # one tick per timer deadline (every 0.5 s), not a busy loop


async def test_heartbeat_waiting_behind_other_writes_keeps_the_session(tmp_path):
    """A heartbeat that arrives while the controller is busy with other writes counts from its
    arrival: a long queue of ISR changes must not fence a broker that is heartbeating."""
    settings = ControllerSettings(broker_session_timeout_ms=600)
    async with Controller.open(str(tmp_path), settings=settings) as controller:
        e1 = await _start_broker(controller, 1)
        e2 = await _start_broker(controller, 2, uuid.UUID(int=2))
        await controller.create_topics([CreateTopicSpec("t", 4, 2)])
        before = {i: (p.leader, p.leader_epoch) for i, p in controller.image.topics["t"].partitions.items()}
        async with trio.open_nursery() as nursery:
            async with controller._lock:             # a write that holds the controller for 2 s
                await trio.sleep(0.5)                 # the session expiry check queues up first
                for _ in range(15):
                    nursery.start_soon(controller.heartbeat, 1, e1, controller.image.offset)
                    nursery.start_soon(controller.heartbeat, 2, e2, controller.image.offset)
                    await trio.sleep(0.1)
        assert not controller.image.brokers[1].fenced and not controller.image.brokers[2].fenced
        # a broker fenced and unfenced again meanwhile would have moved leaders and bumped epochs
        after = {i: (p.leader, p.leader_epoch) for i, p in controller.image.topics["t"].partitions.items()}
        assert after == before
