"""A transaction coordinator answers only from transaction state that has committed.

Its followers are paused (SIGSTOP), so the `__transaction_state` write of an AddPartitionsToTxn cannot
replicate: the call times out (`request.timeout.ms`) with COORDINATOR_NOT_AVAILABLE, but the write stays
in the coordinator's log. The client's retry finds the partition already in the transaction and writes
nothing; answering NONE then would rest on a write a coordinator elected later may never have seen (the
fault suite's lost transactional offsets under a paused controller had that shape). Once the followers
are back, the same retry is answered NONE.
"""

from __future__ import annotations

import signal
import threading

import pytest

from broker.testing_cluster import call, running_cluster
from protocol import ErrorCode as E
from protocol import messages as m
from tests.cluster.test_offsets_commit_cluster import find_coordinator

OVERRIDES = {"transaction.state.log.num.partitions": "1", "transaction.state.log.replication.factor": "3",
             "transaction.state.log.min.isr": "2", "request.timeout.ms": "3000"}
TXN = "paused-followers"


def init_producer_id(cluster, node: int):
    body = m.InitProducerIdRequest(transactional_id=TXN, transaction_timeout_ms=60_000, producer_id=-1,
                                   producer_epoch=-1)
    answer = call(cluster.nodes[node].address, 22, 4, body, timeout=15)
    return (answer.producer_id, answer.producer_epoch) if answer.error_code == E.NONE else None


def add_partition(cluster, node: int, producer, timeout: float = 15.0) -> int:
    A = m.AddPartitionsToTxnRequest
    body = A(v3_and_below_transactional_id=TXN, v3_and_below_producer_id=producer[0],
             v3_and_below_producer_epoch=producer[1],
             v3_and_below_topics=[A.AddPartitionsToTxnTopic(name="t", partitions=[0])])
    answer = call(cluster.nodes[node].address, 24, 3, body, timeout=timeout)
    return answer.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code


def create_topic(cluster) -> None:
    C = m.CreateTopicsRequest
    body = C(topics=[C.CreatableTopic(name="t", num_partitions=1, replication_factor=3)], timeout_ms=30_000)
    answer = call(cluster.nodes[cluster.brokers[0]].address, 19, 5, body, timeout=35)
    assert answer.topics[0].error_code in (E.NONE, E.TOPIC_ALREADY_EXISTS)


@pytest.mark.timeout(240)
def test_a_retry_is_not_answered_from_an_uncommitted_write(tmp_path):
    with running_cluster(tmp_path, nodes=3, overrides=OVERRIDES) as cluster:
        create_topic(cluster)
        coordinator = find_coordinator(cluster, TXN, key_type=1)
        producer = cluster.wait_until(lambda: init_producer_id(cluster, coordinator), 60, "a producer id")

        followers = [b for b in cluster.brokers if b != coordinator]
        outcome: dict = {}
        for node in followers:
            cluster.nodes[node].signal(signal.SIGSTOP)
        try:
            adding = threading.Thread(target=lambda: outcome.setdefault("code", add_partition(cluster, coordinator,
                                                                                           producer)))
            adding.start()
            adding.join(20)
            assert outcome["code"] == E.COORDINATOR_NOT_AVAILABLE   # the write could not replicate
            # the retry writes nothing (the partition is in the state already) and must not say NONE
            assert add_partition(cluster, coordinator, producer) == E.COORDINATOR_NOT_AVAILABLE
        finally:
            for node in followers:
                cluster.nodes[node].signal(signal.SIGCONT)

        def added():
            try:
                return add_partition(cluster, coordinator, producer) == E.NONE
            except OSError:
                return False
        cluster.wait_until(added, 60, "the retry answered once the followers are back")
