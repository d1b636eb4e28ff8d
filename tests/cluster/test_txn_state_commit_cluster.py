"""A transaction coordinator answers only from transaction state that has committed, and writes markers
only for a decision that has.

Its followers are paused (SIGSTOP), so the `__transaction_state` write of an AddPartitionsToTxn cannot
replicate: the call times out with COORDINATOR_NOT_AVAILABLE after the transaction's own timeout (as Kafka
3.9 does: a 7 s transaction heard so after 7.0 s, a 12 s one after 12.0 s, with request.timeout.ms at
30 s), but the write stays
in the coordinator's log. The client's retry finds the partition already in the transaction and writes
nothing; answering NONE then would rest on a write a coordinator elected later may never have seen (the
fault suite's lost transactional offsets under a paused controller had that shape). Once the followers
are back, the same retry is answered NONE. Likewise an EndTxn's COMMIT markers wait for its PrepareCommit
record to replicate: a coordinator elected without that record would see the transaction ongoing and
abort it, after some partitions had already committed it.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time

import pytest

from broker.testing_cluster import call, running_cluster
from protocol import ErrorCode as E
from protocol import messages as m
from tests.broker.raw_client import batch
from tests.cluster.test_offsets_commit_cluster import find_coordinator

OVERRIDES = {"transaction.state.log.num.partitions": "1", "transaction.state.log.replication.factor": "3",
             "transaction.state.log.min.isr": "2", "request.timeout.ms": "30000"}
TXN = "paused-followers"
TXN_TIMEOUT_MS = 3000    # how long its transaction state writes may take to commit


def init_producer_id(cluster, node: int, timeout_ms: int = TXN_TIMEOUT_MS):
    body = m.InitProducerIdRequest(transactional_id=TXN, transaction_timeout_ms=timeout_ms, producer_id=-1,
                                   producer_epoch=-1)
    answer = call(cluster.nodes[node].address, 22, 4, body, timeout=15)
    return (answer.producer_id, answer.producer_epoch) if answer.error_code == E.NONE else None


def add_partition(cluster, node: int, producer, timeout: float = 15.0, topic: str = "t") -> int:
    A = m.AddPartitionsToTxnRequest
    body = A(v3_and_below_transactional_id=TXN, v3_and_below_producer_id=producer[0],
             v3_and_below_producer_epoch=producer[1],
             v3_and_below_topics=[A.AddPartitionsToTxnTopic(name=topic, partitions=[0])])
    answer = call(cluster.nodes[node].address, 24, 3, body, timeout=timeout)
    return answer.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code


def create_topic(cluster, name: str = "t", replicas: list[int] | None = None) -> None:
    C = m.CreateTopicsRequest
    topic = C.CreatableTopic(name=name, num_partitions=1, replication_factor=3) if replicas is None else \
        C.CreatableTopic(name=name, num_partitions=-1, replication_factor=-1,
                         assignments=[C.CreatableReplicaAssignment(partition_index=0, broker_ids=replicas)])
    answer = call(cluster.nodes[cluster.brokers[0]].address, 19, 5, C(topics=[topic], timeout_ms=30_000), timeout=35)
    assert answer.topics[0].error_code in (E.NONE, E.TOPIC_ALREADY_EXISTS)


def end_txn(cluster, node: int, producer, timeout: float = 15.0) -> int:
    body = m.EndTxnRequest(transactional_id=TXN, producer_id=producer[0], producer_epoch=producer[1], committed=True)
    return call(cluster.nodes[node].address, 26, 3, body, timeout=timeout).error_code


def log_end(cluster, node: int, topic: str):
    """The partition's latest offset on `node` (None until it leads it)."""
    R = m.ListOffsetsRequest
    body = R(replica_id=-1, isolation_level=0, topics=[R.ListOffsetsTopic(
        name=topic, partitions=[R.ListOffsetsPartition(partition_index=0, timestamp=-1)])])
    try:
        answer = call(cluster.nodes[node].address, 2, 7, body).topics[0].partitions[0]
    except OSError:
        return None
    return answer.offset if answer.error_code == E.NONE else None


@contextlib.contextmanager
def paused(cluster, nodes):
    for node in nodes:
        cluster.nodes[node].signal(signal.SIGSTOP)
    try:
        yield
    finally:
        for node in nodes:
            cluster.nodes[node].signal(signal.SIGCONT)


def in_thread(function, timeout: float = 20.0):
    """`function()`'s result, run in a thread so that a call blocked by a paused node is bounded."""
    outcome: dict = {}
    calling = threading.Thread(target=lambda: outcome.setdefault("result", function()))
    calling.start()
    calling.join(timeout)
    return outcome.get("result")


@pytest.mark.timeout(240)
def test_a_retry_is_not_answered_from_an_uncommitted_write(tmp_path):
    with running_cluster(tmp_path, nodes=3, overrides=OVERRIDES) as cluster:
        create_topic(cluster)
        coordinator = find_coordinator(cluster, TXN, key_type=1)
        producer = cluster.wait_until(lambda: init_producer_id(cluster, coordinator), 60, "a producer id")

        followers = [b for b in cluster.brokers if b != coordinator]
        with paused(cluster, followers):
            # the write cannot replicate: the client hears so once the transaction's timeout has passed
            started = time.monotonic()
            assert in_thread(lambda: add_partition(cluster, coordinator, producer)) == E.COORDINATOR_NOT_AVAILABLE
            assert TXN_TIMEOUT_MS / 1000 - 0.5 < time.monotonic() - started < 15    # request.timeout.ms is 30 s
            # the retry writes nothing (the partition is in the state already) and must not say NONE
            assert add_partition(cluster, coordinator, producer) == E.COORDINATOR_NOT_AVAILABLE

        def added():
            try:
                return add_partition(cluster, coordinator, producer) == E.NONE
            except OSError:
                return False
        cluster.wait_until(added, 60, "the retry answered once the followers are back")


@pytest.mark.timeout(240)
def test_commit_markers_wait_for_the_decision_to_replicate(tmp_path):
    with running_cluster(tmp_path, nodes=3, overrides=OVERRIDES) as cluster:
        coordinator = find_coordinator(cluster, TXN, key_type=1)
        create_topic(cluster, "local", replicas=[coordinator])   # its markers are written on the coordinator
        cluster.wait_until(lambda: log_end(cluster, coordinator, "local") == 0, 60, "the partition led")
        producer = cluster.wait_until(lambda: init_producer_id(cluster, coordinator), 60, "a producer id")
        assert add_partition(cluster, coordinator, producer, topic="local") == E.NONE

        followers = [b for b in cluster.brokers if b != coordinator]
        with paused(cluster, followers):
            # PrepareCommit cannot replicate: the client hears so, and no partition is committed yet
            assert in_thread(lambda: end_txn(cluster, coordinator, producer)) == E.COORDINATOR_NOT_AVAILABLE
            assert log_end(cluster, coordinator, "local") == 0
        cluster.wait_until(lambda: log_end(cluster, coordinator, "local") == 1, 60,
                           "the COMMIT marker once the decision replicated")


def init_error(cluster, node: int) -> int:
    body = m.InitProducerIdRequest(transactional_id=TXN, transaction_timeout_ms=15_000, producer_id=-1,
                                   producer_epoch=-1)
    return call(cluster.nodes[node].address, 22, 4, body, timeout=15).error_code


def produce(cluster, node: int, producer, topic: str) -> int:
    P = m.ProduceRequest
    records = batch([b"v"], producer_id=producer[0], producer_epoch=producer[1], base_sequence=0, transactional=True)
    body = P(transactional_id=TXN, acks=-1, timeout_ms=5000, topic_data=[P.TopicProduceData(
        name=topic, partition_data=[P.PartitionProduceData(index=0, records=records)])])
    return call(cluster.nodes[node].address, 0, 9, body, timeout=15).responses[0].partition_responses[0].error_code


@pytest.mark.timeout(240)
def test_requests_racing_a_transaction_state_write_are_told_to_retry(tmp_path):
    """As Kafka 3.9 answers with a `__transaction_state` follower paused: while AddPartitionsToTxn's
    write is in flight, EndTxn, another AddPartitionsToTxn and InitProducerId get
    CONCURRENT_TRANSACTIONS at once, and a produce to the partition being added is refused (it is not
    in the transaction until the write commits). The commit then marks every partition it holds."""
    with running_cluster(tmp_path, nodes=3, overrides=OVERRIDES) as cluster:
        coordinator = find_coordinator(cluster, TXN, key_type=1)
        for topic in ("first", "late"):
            create_topic(cluster, topic, replicas=[coordinator])
            cluster.wait_until(lambda: log_end(cluster, coordinator, topic) == 0, 60, f"{topic} led")
        # a transaction whose writes may wait for the followers longer than they are paused
        producer = cluster.wait_until(lambda: init_producer_id(cluster, coordinator, 15_000), 60, "a producer id")
        assert add_partition(cluster, coordinator, producer, topic="first") == E.NONE

        followers = [b for b in cluster.brokers if b != coordinator]
        with paused(cluster, followers):
            answers: dict = {}
            adding = threading.Thread(target=lambda: answers.setdefault(
                "add", add_partition(cluster, coordinator, producer, timeout=30, topic="late")))
            adding.start()
            time.sleep(1.0)
            started = time.monotonic()
            assert end_txn(cluster, coordinator, producer, timeout=5) == E.CONCURRENT_TRANSACTIONS
            assert add_partition(cluster, coordinator, producer, timeout=5, topic="late") == E.CONCURRENT_TRANSACTIONS
            assert init_error(cluster, coordinator) == E.CONCURRENT_TRANSACTIONS
            assert produce(cluster, coordinator, producer, "late") == E.INVALID_TXN_STATE
            assert time.monotonic() - started < 5           # answered at once, not after the write
        adding.join(30)
        assert answers.get("add") == E.NONE

        assert end_txn(cluster, coordinator, producer) == E.NONE
        for topic in ("first", "late"):      # a COMMIT marker and nothing else in each
            cluster.wait_until(lambda: log_end(cluster, coordinator, topic) == 1, 60, f"the marker in {topic}")
