"""Transactions whose coordinator and partitions live on different brokers.

Two in-process brokers, each its own one-node metadata quorum, are given crossed metadata: broker 1
(A) coordinates the transactional id and knows topic `w` and `__consumer_offsets` as led by broker 2
(B); B leads them and knows `__transaction_state` as led by A. So everything crosses the network as
in a cluster: Produce on B is verified with A (AddPartitionsToTxn verify-only), TxnOffsetCommit on
B is verified with A, and A writes the commit/abort markers on B with WriteTxnMarkers.
"""

import socket
import time
import uuid

import confluent_kafka as ck
import pytest
import trio

from broker.controller.controller import CreateTopicSpec
from broker.testing import serving_broker
from protocol import ErrorCode

COMMON = {"offsets.topic.num.partitions": "1", "transaction.state.log.num.partitions": "1",
          "broker.session.timeout.ms": "600000"}   # the stand-in of the other broker never heartbeats


async def know(broker, node_id: int, port: int) -> None:
    """Register another broker (as in a cluster) in this broker's own metadata."""
    controller = broker.controller
    epoch = await controller.register_broker(node_id, uuid.uuid4(), [("PLAINTEXT", "127.0.0.1", port, 0)])
    await controller.heartbeat(node_id, epoch, broker.image.offset)
    return epoch


async def create(broker, name, assignments, configs=None):
    [result] = await broker.controller.create_topics([CreateTopicSpec(name, assignments=assignments,
                                                                      configs=configs or {})])
    assert result.error_code == 0, result.error_message


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def recording(request, log):
    async def wrapper(node_id, api_key, version, body, **kw):
        log.append((node_id, api_key))
        return await request(node_id, api_key, version, body, **kw)
    return wrapper


def consume(bootstrap, isolation, expect, timeout=30.0):
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{time.time()}", "enable.auto.commit": False,
                     "isolation.level": isolation, "auto.offset.reset": "earliest"})
    c.assign([ck.TopicPartition("w", p, ck.OFFSET_BEGINNING) for p in range(2)])
    values, deadline, quiet = [], time.time() + timeout, None
    while time.time() < deadline:
        m = c.poll(0.1)
        if m is None:
            if len(values) >= expect:
                quiet = quiet or time.time()
                if time.time() - quiet > 1.0:
                    break
            continue
        if not m.error():
            values.append(m.value())
            quiet = None
    c.close()
    return values


def run_transactions(bootstrap_a, bootstrap_b):
    p = ck.Producer({"bootstrap.servers": bootstrap_a, "transactional.id": "cross-1", "linger.ms": 5})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(10):
        p.produce("w", value=b"c%d" % i, partition=i % 2)
    p.send_offsets_to_transaction([ck.TopicPartition("w", 0, 5)], ck.Consumer(
        {"bootstrap.servers": bootstrap_a, "group.id": "cross-group"}).consumer_group_metadata(), 30)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(10):
        p.produce("w", value=b"a%d" % i, partition=i % 2)
    p.flush(30)
    p.abort_transaction(30)
    committed = consume(bootstrap_b, "read_committed", 10)
    everything = consume(bootstrap_b, "read_uncommitted", 20)
    c = ck.Consumer({"bootstrap.servers": bootstrap_a, "group.id": "cross-group"})
    [offset] = c.committed([ck.TopicPartition("w", 0)], timeout=30)
    c.close()
    return committed, everything, offset.offset


@pytest.mark.timeout(120)
async def test_markers_verification_and_offsets_cross_brokers(tmp_path):
    async with serving_broker(tmp_path / "a", {"node.id": "1", **COMMON}) as a, \
            serving_broker(tmp_path / "b", {"node.id": "2", **COMMON}) as b:
        A, B = a.broker, b.broker
        await know(A, 2, b.port)
        await know(B, 1, a.port)
        await create(B, "w", {0: [2], 1: [2]})
        await create(A, "w", {0: [2], 1: [2]})
        await create(B, "__transaction_state", {0: [1]}, {"cleanup.policy": "compact"})
        await create(A, "__transaction_state", {0: [1]}, {"cleanup.policy": "compact"})
        await create(A, "__consumer_offsets", {0: [2]}, {"cleanup.policy": "compact"})
        await create(B, "__consumer_offsets", {0: [2]}, {"cleanup.policy": "compact"})
        sent = {1: [], 2: []}
        for node, broker in ((1, A), (2, B)):
            client = broker.coordinators["service"].peer_client()
            client.request = recording(client.request, sent[node])
        committed, everything, offset = await trio.to_thread.run_sync(run_transactions, a.bootstrap, b.bootstrap)
        assert sorted(committed) == sorted(b"c%d" % i for i in range(10))
        assert len(everything) == 20
        assert offset == 5                                     # TxnOffsetCommit on B, committed by A's marker
        txns = A.coordinators["transaction"]
        assert txns.describe("cross-1").state == "CompleteAbort"
        # the markers are on B, carrying A's coordinator epoch; A wrote none itself
        assert A.partitions.get("w", 0) is None
        for index in (0, 1):
            log = B.partitions.get("w", index).log
            assert log.last_stable_offset == log.log_end_offset
        # A sent markers (27) to B only; B verified produce and TxnOffsetCommit with A (24)
        assert {(dest, key) for dest, key in sent[1]} == {(2, 27)}
        assert sent[1].count((2, 27)) >= 2                     # commit and abort
        assert {(dest, key) for dest, key in sent[2]} == {(1, 24)}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("broker_2", ["refuses", "unreachable"])
async def test_markers_retry_until_leadership_moves_and_complete_only_when_all_are_written(tmp_path, broker_2):
    async with serving_broker(tmp_path / "a", {"node.id": "1", **COMMON}) as a, \
            serving_broker(tmp_path / "b", {"node.id": "2", **COMMON}) as b:
        A, B = a.broker, b.broker
        # broker 2 answers NOT_LEADER_OR_FOLLOWER, or (a port nobody listens on) cannot be reached
        epoch_of_2 = await know(A, 2, b.port if broker_2 == "refuses" else closed_port())
        await know(B, 1, a.port)
        await create(A, "w", {0: [2, 1]})             # A: w-0 led by B (A follows)
        await create(A, "v", {0: [1]})                # and v-0 led by A
        await create(B, "w", {0: [1, 2]})             # B: follows w-0, so it answers NOT_LEADER_OR_FOLLOWER
        await create(A, "__transaction_state", {0: [1]}, {"cleanup.policy": "compact"})
        service = A.coordinators["service"]
        with trio.fail_after(10):
            while service.txn_coordinator_error("r-1") is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                await trio.sleep(0.01)
        assert service.txn_coordinator_error("r-1") is ErrorCode.NONE
        await service.producer_ids.ensure()
        txns = A.coordinators["transaction"]
        init = txns.init_producer_id("r-1", 60_000)
        await service.settle()                         # as the handlers: each write commits before the next call
        assert txns.add_partitions("r-1", init.producer_id, init.producer_epoch, [("w", 0), ("v", 0)]) is ErrorCode.NONE
        await service.settle()
        assert txns.end_txn("r-1", init.producer_id, init.producer_epoch, commit=True) is ErrorCode.NONE
        await service.settle()
        local = A.partitions.get("v", 0).log
        with trio.fail_after(10):
            while local.log_end_offset < 1:
                await trio.sleep(0.02)
        await trio.sleep(0.5)                          # several rounds of refusals from B
        assert txns.describe("r-1").state == "PrepareCommit"
        assert local.log_end_offset == 1               # the local marker went in once, not per round
        assert A.partitions.get("w", 0).log.log_end_offset == 0
        # B is fenced in A's metadata: w-0's leadership moves to A, and the next round writes there
        await A.controller.heartbeat(2, epoch_of_2, A.image.offset, want_fence=True)
        assert A.image.partition("w", 0).leader == 1
        with trio.fail_after(10):
            while txns.describe("r-1").state != "CompleteCommit":
                await trio.sleep(0.02)
        moved = A.partitions.get("w", 0).log
        assert moved.log_end_offset == 1 and local.log_end_offset == 1
        assert B.partitions.get("w", 0).log.log_end_offset == 0


class _FakeVerifyingService:
    """Just what remote verification uses of the service: a coordinator on broker 2 that says yes."""

    def __init__(self, marker_arrives: bool):
        from types import SimpleNamespace

        from protocol import messages as m

        self.verification_guards = {}
        self.broker = SimpleNamespace(image=SimpleNamespace(partition=lambda t, p: SimpleNamespace(leader=2)),
                                      config={"request.timeout.ms": 1000})
        R = m.AddPartitionsToTxnResponse
        service = self

        class Client:
            async def request(self, node_id, api_key, version, body, timeout):
                assert (node_id, api_key, version) == (2, 24, 5) and body.transactions[0].verify_only
                if marker_arrives:      # the transaction ends while the question is out
                    service.verification_guards.pop(("w", 0, 77), None)
                return R(error_code=0, results_by_transaction=[R.AddPartitionsToTxnResult(
                    transactional_id="t", topic_results=[R.AddPartitionsToTxnTopicResult(name="w", results_by_partition=[
                        R.AddPartitionsToTxnPartitionResult(partition_index=0, partition_error_code=0)])])])

        self.client = Client()

    def coordinator_error(self, topic, partition):
        return ErrorCode.NOT_COORDINATOR

    def txn_partition(self, transactional_id):
        return 0

    def peer_client(self):
        return self.client


@pytest.mark.parametrize("marker_arrives", [False, True])
async def test_a_marker_landing_during_remote_verification_spends_it(marker_arrives):
    from types import SimpleNamespace

    from broker.coordinator.verification import _verify_remotely

    service = _FakeVerifyingService(marker_arrives)
    partition = SimpleNamespace(topic="w", index=0)
    batch = SimpleNamespace(producer_id=77, producer_epoch=0)
    refused = await _verify_remotely(service, "t", [("key", partition, batch)])
    if marker_arrives:
        assert refused == {"key": (ErrorCode.INVALID_TXN_STATE, "The transaction ended while the partition was verified")}
    else:
        assert refused == {}
    assert service.verification_guards == {}


@pytest.mark.timeout(60)
async def test_markers_of_several_transactions_share_a_request_per_broker(tmp_path):
    async with serving_broker(tmp_path / "a", {"node.id": "1", **COMMON}) as a, \
            serving_broker(tmp_path / "b", {"node.id": "2", **COMMON}) as b:
        A, B = a.broker, b.broker
        await know(A, 2, b.port)
        await create(A, "w", {0: [2], 1: [2]})
        await create(B, "w", {0: [2], 1: [2]})
        await create(A, "__transaction_state", {0: [1]}, {"cleanup.policy": "compact"})
        service = A.coordinators["service"]
        with trio.fail_after(10):
            while service.txn_coordinator_error("t-1") is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                await trio.sleep(0.01)
        await service.producer_ids.ensure(4)
        txns = A.coordinators["transaction"]
        bodies = []
        client = service.peer_client()
        request = client.request

        async def recording_bodies(node_id, api_key, version, body, **kw):
            bodies.append((node_id, api_key, body))
            return await request(node_id, api_key, version, body, **kw)

        client.request = recording_bodies
        ids = {}
        for txn_id, partition in (("t-1", 0), ("t-2", 1)):
            init = txns.init_producer_id(txn_id, 60_000)
            await service.settle()
            ids[txn_id] = init
            assert txns.add_partitions(txn_id, init.producer_id, init.producer_epoch, [("w", partition)]) \
                is ErrorCode.NONE
        await service.settle()
        for txn_id, init in ids.items():                    # both decided in the same tick
            assert txns.end_txn(txn_id, init.producer_id, init.producer_epoch, commit=True) is ErrorCode.NONE
        with trio.fail_after(10):
            while any(txns.describe(t).state != "CompleteCommit" for t in ids):
                await trio.sleep(0.02)
        [(node, key, body)] = bodies                       # one WriteTxnMarkers carried both
        assert (node, key) == (2, 27)
        assert sorted(mk.producer_id for mk in body.markers) == sorted(i.producer_id for i in ids.values())
        for index in (0, 1):
            assert B.partitions.get("w", index).log.log_end_offset == 1
