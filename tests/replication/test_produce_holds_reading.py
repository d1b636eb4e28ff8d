"""A produce waiting for its replicas holds its connection's next request back, as Kafka does: a
Kafka broker mutes a connection until it has answered the request it read. Observed on three real
`odradek serve` processes: the followers are stopped (SIGSTOP), so an acks=all produce waits, and a
second produce pipelined behind it on the same socket must not reach the log before that answer.
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


def _log_size(node) -> int:
    """Bytes in the node's log of the partition (what it appended, replicated or not)."""
    directory = os.path.join(node.data_dir, f"{TOPIC}-0")
    return sum(os.path.getsize(os.path.join(directory, name))
               for name in os.listdir(directory) if name.endswith(".log"))


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
    try:
        with RawClient(*leader.address) as client:
            waiting = client.send(0, 9, _produce(-1, b"waits for the replicas"))
            time.sleep(0.5)   # it is in the log and waits (2.5 s) when the next one comes
            behind = client.send(0, 9, _produce(1, b"pipelined behind it"))
            time.sleep(0.5)
            size_while_waiting = _log_size(leader)
            first = client.receive(0, 9)
            second = client.receive(0, 9)
    finally:
        for node in followers:
            node.signal(signal.SIGCONT)
    assert (first[0], second[0]) == (waiting, behind)
    first, second = (answer[1].responses[0].partition_responses[0] for answer in (first, second))
    assert first.error_code == ErrorCode.REQUEST_TIMED_OUT   # in the log, not acknowledged
    assert (second.error_code, second.base_offset) == (ErrorCode.NONE, 1)
    # only the first batch was in the log while it waited: the second was read after its answer
    assert 0 < size_while_waiting < _log_size(leader)
