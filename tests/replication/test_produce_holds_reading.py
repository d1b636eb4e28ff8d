"""Produce requests waiting for their replicas hold their connection's next request back once they
are a full request's worth (1 MiB), much as Kafka mutes a connection until it has answered the
request it read. Observed on three real `odradek serve` processes: the followers are stopped
(SIGSTOP), so two acks=all produces of 600 kB wait, and a third pipelined behind them on the same
socket must not reach the log before the first answer. Kafka holds back the second one already.
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from protocol import ErrorCode, messages as m
from protocol import records as r

from broker.testing_cluster import call, running_cluster
from tests.broker.raw_client import RawClient

TOPIC = "held"


def _produce(acks: int, value: bytes):
    R = m.ProduceRequest
    return R(transactional_id=None, acks=acks, timeout_ms=2500, topic_data=[R.TopicProduceData(
        name=TOPIC, partition_data=[R.PartitionProduceData(index=0, records=r.build_batch(
            [r.SimpleRecord(value=value, timestamp=int(time.time() * 1000))]))])])


def _leader_with_full_isr(cluster):
    partitions = cluster.metadata(cluster.brokers[0], [TOPIC]).topics[0].partitions
    if not partitions or len(partitions[0].isr_nodes) < 3:
        return None
    leader = partitions[0].leader_id   # (once its log is there: Kafka's metadata can be ahead)
    return leader if os.path.isdir(os.path.join(cluster.nodes[leader].data_dir, f"{TOPIC}-0")) else None


def _log(node) -> bytes:
    """The node's log of the partition (what it appended, replicated or not)."""
    directory = os.path.join(node.data_dir, f"{TOPIC}-0")
    out = b""
    for name in sorted(name for name in os.listdir(directory) if name.endswith(".log")):
        with open(os.path.join(directory, name), "rb") as segment:
            out += segment.read()
    return out


SETTINGS = {"min.insync.replicas": "2"}


def test_a_produce_waiting_for_replicas_holds_the_next_request_on_its_connection(tmp_path):
    with running_cluster(tmp_path, overrides=SETTINGS) as cluster:
        _check_the_next_request_waits(cluster)


@pytest.mark.slow
def test_apache_kafka_holds_it_too(tmp_path):
    """The same against three Apache Kafka 3.9 JVMs: proves the test's claim is Kafka's behaviour."""
    from tests.faults.kafka_nodes import KafkaCluster

    cluster = KafkaCluster(tmp_path, 3, SETTINGS, lambda node_id: ("127.0.0.1", []))
    cluster.format()
    with running_cluster(tmp_path, cluster=cluster, timeout=180) as cluster:
        _check_the_next_request_waits(cluster)


def _check_the_next_request_waits(cluster):
    C = m.CreateTopicsRequest
    created = call(cluster.nodes[1].address, 19, 5, C(topics=[C.CreatableTopic(
        name=TOPIC, num_partitions=1, replication_factor=3, assignments=[], configs=[])],
        timeout_ms=30000, validate_only=False), timeout=30)
    assert created.topics[0].error_code == ErrorCode.NONE
    leader = cluster.nodes[cluster.wait_until(lambda: _leader_with_full_isr(cluster), 30,
                                              "a leader with all three replicas in sync")]
    followers = [node for node in cluster.nodes.values() if node is not leader]
    for node in followers:
        node.signal(signal.SIGSTOP)
    big = os.urandom(600_000)
    try:
        with RawClient(*leader.address) as client:
            waiting = [client.send(0, 9, _produce(-1, big))]
            time.sleep(0.5)   # in the log and waiting (2.5 s) when the next one comes
            waiting.append(client.send(0, 9, _produce(-1, big)))
            time.sleep(0.5)
            behind = client.send(0, 9, _produce(1, b"pipelined behind them"))
            time.sleep(0.5)
            log_while_waiting = _log(leader)
            answers = [client.receive(0, 9) for _ in range(3)]
    finally:
        for node in followers:
            node.signal(signal.SIGCONT)
    assert [correlation_id for correlation_id, _ in answers] == waiting + [behind]
    answers = [answer.responses[0].partition_responses[0] for _, answer in answers]
    # in the log, not acknowledged
    assert [answer.error_code for answer in answers[:2]] == [ErrorCode.REQUEST_TIMED_OUT] * 2
    assert (answers[2].error_code, answers[2].base_offset) == (ErrorCode.NONE, 2)
    # the first big batch was in the log while it waited; the small one was read after its answer
    held = (big in log_while_waiting, b"pipelined behind them" in log_while_waiting)
    assert held == (True, False)
    assert b"pipelined behind them" in _log(leader)
