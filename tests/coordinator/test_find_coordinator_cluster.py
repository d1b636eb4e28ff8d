"""FindCoordinator answers the leader of the key's internal-topic partition, on whichever broker it is,
and the internal topics are created with their configured replication factor (as Kafka does)."""

import trio

from broker.testing import serving_broker
from protocol import ErrorCode as E
from protocol import messages as m
from tests.broker.raw_client import RawClient
from tests.coordinator.test_cross_broker_txn import COMMON, create, know

F = m.FindCoordinatorRequest


def find(port, version, key, key_type=0):
    with RawClient("127.0.0.1", port) as raw:
        if version >= 4:
            response = raw.request(10, version, F(key_type=key_type, coordinator_keys=[key]))
            c = response.coordinators[0]
            return c.error_code, c.node_id, c.host, c.port
        response = raw.request(10, version, F(key=key, key_type=key_type))
        return response.error_code, response.node_id, response.host, response.port


async def test_the_coordinator_may_be_another_broker(tmp_path):
    async with serving_broker(tmp_path / "a", {"node.id": "1", **COMMON}) as a, \
            serving_broker(tmp_path / "b", {"node.id": "2", **COMMON}) as b:
        await know(a.broker, 2, b.port)
        await create(a.broker, "__consumer_offsets", {0: [2]}, {"cleanup.policy": "compact"})
        for version in (1, 3, 4, 6):
            assert await trio.to_thread.run_sync(find, a.port, version, "g") == (E.NONE, 2, "127.0.0.1", b.port)
        # the transaction state topic does not exist yet: created here, placed on some alive broker
        code, node, host, port = await trio.to_thread.run_sync(find, a.port, 4, "tx", 1)
        leader = a.broker.image.partition("__transaction_state", 0).leader
        assert code == E.NONE and node == leader and port == (a.port if leader == 1 else b.port)
        # a coordinator on a fenced broker is not available
        broker_2 = a.broker.image.brokers[2]
        await a.broker.controller.heartbeat(2, broker_2.epoch, a.broker.image.offset, want_fence=True)
        code, node, _, _ = await trio.to_thread.run_sync(find, a.port, 3, "g")
        assert (code, node) == (E.COORDINATOR_NOT_AVAILABLE, -1)


async def test_internal_topics_wait_for_enough_brokers(tmp_path):
    settings = {"offsets.topic.replication.factor": "3", "transaction.state.log.replication.factor": "2",
                "transaction.state.log.min.isr": "2", **COMMON}
    async with serving_broker(tmp_path / "a", settings) as a:
        for key_type in (0, 1):
            code, node, _, _ = await trio.to_thread.run_sync(find, a.port, 3, "k", key_type)
            assert (code, node) == (E.COORDINATOR_NOT_AVAILABLE, -1)
        assert "__consumer_offsets" not in a.broker.image.topics
        assert "__transaction_state" not in a.broker.image.topics
        # a second broker makes RF 2 possible: the transaction state topic is created with it
        await know(a.broker, 2, 1)
        code, node, _, _ = await trio.to_thread.run_sync(find, a.port, 3, "k", 1)
        assert code == E.NONE
        partition = a.broker.image.partition("__transaction_state", 0)
        assert sorted(partition.replicas) == [1, 2]
        assert a.broker.image.topic_configs["__transaction_state"]["min.insync.replicas"] == "2"
        code, _, _, _ = await trio.to_thread.run_sync(find, a.port, 3, "k", 0)
        assert code == E.COORDINATOR_NOT_AVAILABLE
