"""Produce's transaction partition verification (KIP-890 part 1) over the wire."""

import time

import pytest

from broker.testing import running_broker
from protocol import ErrorCode as E
from protocol import messages as m
from tests.broker.raw_client import RawClient, batch

TXN = "txn-verify"


@pytest.fixture
def client(tmp_path):
    with running_broker(tmp_path / "data") as broker:
        with RawClient("127.0.0.1", broker.port) as raw:
            yield raw


@pytest.fixture
def unverified_client(tmp_path):
    with running_broker(tmp_path / "data", {"transaction.partition.verification.enable": "false"}) as broker:
        with RawClient("127.0.0.1", broker.port) as raw:
            yield raw


def init(client, txn=TXN):
    assert client.create_topic("v", 2).error_code == 0
    assert client.request(10, 3, m.FindCoordinatorRequest(key=txn, key_type=1)).error_code == 0
    r = client.request(22, 4, m.InitProducerIdRequest(transactional_id=txn, transaction_timeout_ms=60_000,
                                                      producer_id=-1, producer_epoch=-1))
    assert r.error_code == 0
    return r.producer_id, r.producer_epoch


def add(client, pid, epoch, partitions, txn=TXN):
    A = m.AddPartitionsToTxnRequest
    r = client.request(24, 3, A(v3_and_below_transactional_id=txn, v3_and_below_producer_id=pid,
                                v3_and_below_producer_epoch=epoch,
                                v3_and_below_topics=[A.AddPartitionsToTxnTopic(name="v", partitions=partitions)]))
    assert all(p.partition_error_code == 0 for t in r.results_by_topic_v3_and_below for p in t.results_by_partition)


def end(client, pid, epoch, commit, txn=TXN):
    return client.request(26, 3, m.EndTxnRequest(transactional_id=txn, producer_id=pid, producer_epoch=epoch,
                                                 committed=commit)).error_code


def settled(client, txn=TXN, timeout_s=15.0):
    """Wait until the transaction's markers are in (Complete*): until then Kafka answers
    CONCURRENT_TRANSACTIONS to the producer's next transaction, and so do we."""
    deadline = time.monotonic() + timeout_s
    while True:
        state = client.request(65, 0, m.DescribeTransactionsRequest(
            transactional_ids=[txn])).transaction_states[0].transaction_state
        if state.startswith("Complete") or time.monotonic() > deadline:
            return state
        time.sleep(0.05)


def produce(client, partition, pid, epoch, seq, txn=TXN, version=9):
    P = m.ProduceRequest
    records = batch([b"r%d" % seq], producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=True)
    body = P(transactional_id=txn, acks=-1, timeout_ms=5000, topic_data=[
        P.TopicProduceData(name="v", partition_data=[P.PartitionProduceData(index=partition, records=records)])])
    return client.request(0, version, body).responses[0].partition_responses[0]


def stable(client, partition):
    return client.list_offset("v", partition, -1, isolation_level=1).offset


def test_a_partition_outside_the_transaction_is_refused_and_nothing_is_appended(client):
    pid, epoch = init(client)
    answer = produce(client, 0, pid, epoch, 0)
    assert answer.error_code == E.INVALID_TXN_STATE and answer.base_offset == -1
    assert answer.error_message == "Partition was not added to the transaction"
    assert client.list_offset("v", 0, -1).offset == 0 == stable(client, 0)


def test_an_added_partition_is_accepted_and_the_lso_clears_on_abort(client):
    pid, epoch = init(client)
    add(client, pid, epoch, [0])
    assert produce(client, 0, pid, epoch, 0).error_code == 0
    assert produce(client, 0, pid, epoch, 1).error_code == 0       # the log's open transaction vouches
    assert produce(client, 1, pid, epoch, 0).error_code == E.INVALID_TXN_STATE   # same txn, not added
    assert stable(client, 0) == 0
    assert end(client, pid, epoch, commit=False) == 0
    assert settled(client) == "CompleteAbort"
    assert stable(client, 0) == client.list_offset("v", 0, -1).offset == 3    # two batches + marker


def test_a_late_retry_after_the_abort_is_refused(client):
    pid, epoch = init(client)
    add(client, pid, epoch, [0])
    assert produce(client, 0, pid, epoch, 0).error_code == 0
    assert end(client, pid, epoch, commit=False) == 0
    # once the abort marker is in (before it, the partition's transaction is still open, as in Kafka)
    assert settled(client) == "CompleteAbort"
    late = produce(client, 0, pid, epoch, 1)
    assert late.error_code == E.INVALID_TXN_STATE
    assert stable(client, 0) == client.list_offset("v", 0, -1).offset == 2


def test_coordinator_errors_are_translated_for_old_produce_versions(client):
    pid, epoch = init(client)
    add(client, pid, epoch, [0])
    # a newer epoch than the coordinator's: the coordinator fences it (PRODUCER_FENCED), which a
    # Produce client hears as INVALID_PRODUCER_EPOCH
    assert produce(client, 1, pid, epoch + 1, 0).error_code == E.INVALID_PRODUCER_EPOCH
    assert produce(client, 1, pid + 1000, 0, 0).error_code == E.INVALID_PRODUCER_ID_MAPPING
    unknown = produce(client, 1, pid, epoch, 0, txn="never-initialised")
    assert unknown.error_code == E.INVALID_PRODUCER_ID_MAPPING


def test_verification_can_be_turned_off(unverified_client):
    pid, epoch = init(unverified_client)
    assert produce(unverified_client, 0, pid, epoch, 0).error_code == 0
    assert stable(unverified_client, 0) == 0


def test_only_a_transactions_first_batch_per_partition_asks_the_coordinator(tmp_path):
    with running_broker(tmp_path / "data") as running:
        with RawClient("127.0.0.1", running.port) as client:
            pid, epoch = init(client)
            txns = running.broker.coordinators["transaction"]
            asked = []
            verify = txns.verify_partitions

            def counting(*args):
                asked.append(args[3])
                return verify(*args)

            txns.verify_partitions = counting   # an instance attribute: the broker calls this one
            add(client, pid, epoch, [0, 1])
            for seq in range(4):
                assert produce(client, 0, pid, epoch, seq).error_code == 0
            assert produce(client, 1, pid, epoch, 0).error_code == 0
            assert asked == [[("v", 0)], [("v", 1)]]
            assert end(client, pid, epoch, commit=True) == 0
            assert settled(client) == "CompleteCommit"
            # the marker closed the log's transaction: the next one is verified afresh
            assert produce(client, 0, pid, epoch, 4).error_code == E.INVALID_TXN_STATE
            assert len(asked) == 3


def test_a_zombie_epoch_inside_an_open_transaction_is_refused_by_the_log_not_verified(tmp_path):
    """As Kafka 3.9: the partition's open transaction of the producer (at a later epoch) vouches, so the
    coordinator is not asked; the append refuses the older epoch (INVALID_PRODUCER_EPOCH, with the log
    start offset, as a log's answer carries)."""
    with running_broker(tmp_path / "data") as running:
        with RawClient("127.0.0.1", running.port) as client:
            init(client)
            again = client.request(22, 4, m.InitProducerIdRequest(transactional_id=TXN, transaction_timeout_ms=60_000))
            pid, epoch = again.producer_id, again.producer_epoch      # epoch 1: epoch 0 is a zombie's
            txns = running.broker.coordinators["transaction"]
            asked = []
            verify = txns.verify_partitions
            txns.verify_partitions = lambda *args: asked.append(args[3]) or verify(*args)
            add(client, pid, epoch, [0])
            assert produce(client, 0, pid, epoch, 0).error_code == 0
            zombie = produce(client, 0, pid, epoch - 1, 1)
            assert (zombie.error_code, zombie.log_start_offset) == (E.INVALID_PRODUCER_EPOCH, 0)
            assert asked == [[("v", 0)]]
            assert client.list_offset("v", 0, -1).offset == 1
