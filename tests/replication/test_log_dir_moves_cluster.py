"""Moving replicas of a replicated partition between log dirs (AlterReplicaLogDirs) across real
`odradek serve` processes with two log dirs each: the leader's and a follower's replica move while
an idempotent acks=all producer streams; the followers keep fetching (the ISR stays whole), every
acknowledged record is read back once and in order, and every replica holds the same bytes."""

from __future__ import annotations

import os
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from protocol import ErrorCode, messages as m

from broker.testing_cluster import call, running_cluster

from .test_cluster_replication import _consume_all, _create, _state

SECOND_DIR = "-b"


def _second_dirs(tmp_path) -> dict:
    return {n: {"log.dirs": f"{tmp_path}/node-{n},{tmp_path}/node-{n}{SECOND_DIR}"} for n in (1, 2, 3)}


def _alter(node, topic: str, path: str, partition: int = 0) -> int:
    R = m.AlterReplicaLogDirsRequest
    body = R(dirs=[R.AlterReplicaLogDir(path=path, topics=[
        R.AlterReplicaLogDirTopic(name=topic, partitions=[partition])])])
    response = call(node.address, 34, 2, body, timeout=15)
    return response.results[0].partitions[0].error_code


def _placement(node, topic: str) -> dict:
    """{log dir: is future} of partition 0 of `topic` on `node` (DescribeLogDirs)."""
    response = call(node.address, 35, 4, m.DescribeLogDirsRequest(topics=None), timeout=15)
    return {result.log_dir: p.is_future_key for result in response.results
            for t in result.topics if t.name == topic for p in t.partitions}


def _log_bytes(directory: str) -> bytes:
    out = b""
    for name in sorted(n for n in os.listdir(directory) if n.endswith(".log")):
        with open(os.path.join(directory, name), "rb") as f:
            out += f.read()
    return out


def test_leader_and_follower_replicas_move_while_acks_all_producing(tmp_path):
    with running_cluster(tmp_path, nodes=3, node_overrides=_second_dirs(tmp_path),
                         overrides={"min.insync.replicas": "2"}) as cluster:
        _create(cluster, "moving")
        leader, isr = _state(cluster, 1, "moving")
        assert isr == [1, 2, 3]
        follower = next(b for b in cluster.brokers if b != leader)
        movers = (leader, follower)
        targets = {b: cluster.nodes[b].data_dir + SECOND_DIR for b in movers}
        acknowledged, errors = [], []

        def delivered(err, message):
            (errors if err else acknowledged).append(err or (message.offset(), message.value()))

        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                             "enable.idempotence": True, "linger.ms": 2,
                             "message.timeout.ms": 60000})
        sent, asked, deadline = 0, False, time.monotonic() + 120
        while True:
            assert time.monotonic() < deadline, "the moves never finished"
            producer.produce("moving", b"%08d" % sent + b"." * 200, on_delivery=delivered)
            sent += 1
            producer.poll(0)
            time.sleep(0.001)
            if not asked and len(acknowledged) >= 2000:
                for broker in movers:
                    assert _alter(cluster.nodes[broker], "moving", targets[broker]) == ErrorCode.NONE
                asked, moved_at = True, sent
            if asked and sent % 100 == 0 and all(
                    _placement(cluster.nodes[b], "moving") == {targets[b]: False} for b in movers):
                break
        for _ in range(300):          # appends to the moved replicas too
            producer.produce("moving", b"%08d" % sent + b"." * 200, on_delivery=delivered)
            sent += 1
            producer.poll(0)
        assert producer.flush(60) == 0
        assert not errors and len(acknowledged) == sent and moved_at < sent

        assert _state(cluster, leader, "moving") == (leader, [1, 2, 3])   # followers kept up
        got = _consume_all(cluster.bootstrap, "moving", sent)
        assert [v[:8] for _, v in got] == [b"%08d" % i for i in range(sent)]   # once, in order
        assert sorted(acknowledged) == got
        stayed = next(b for b in cluster.brokers if b not in movers)
        directories = [os.path.join(targets[b], "moving-0") for b in movers]
        directories.append(os.path.join(cluster.nodes[stayed].data_dir, "moving-0"))
        cluster.wait_until(lambda: len({_log_bytes(d) for d in directories}) == 1, 30,
                           "every replica to hold the same bytes")
        for broker in movers:
            old = os.path.join(cluster.nodes[broker].data_dir, "moving-0")
            assert not os.path.exists(old)


def test_a_replica_yet_to_come_is_replica_not_available_then_placed_in_the_dir_asked(tmp_path):
    """kafka-reassign-partitions with log_dirs: AlterReplicaLogDirs for a replica the broker does
    not have yet answers REPLICA_NOT_AVAILABLE (as Kafka 3.9) and remembers the dir; the replica the
    reassignment then brings is created there."""
    with running_cluster(tmp_path, nodes=2, node_overrides=_second_dirs(tmp_path)) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("elsewhere", num_partitions=1, replica_assignment=[[2]])])["elsewhere"].result(30)
        cluster.wait_until(lambda: _state(cluster, 1, "elsewhere")[0] == 2, 30, "the topic")
        node = cluster.nodes[1]
        assert _alter(node, "elsewhere", "/no/such/dir") == ErrorCode.LOG_DIR_NOT_FOUND
        assert _alter(node, "nowhere", node.data_dir + SECOND_DIR) == \
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert _alter(node, "elsewhere", node.data_dir + SECOND_DIR) == ErrorCode.REPLICA_NOT_AVAILABLE
        R = m.AlterPartitionReassignmentsRequest
        response = call(cluster.nodes[1].address, 45, 0, R(timeout_ms=30000, topics=[
            R.ReassignableTopic(name="elsewhere", partitions=[
                R.ReassignablePartition(partition_index=0, replicas=[1])])]), timeout=35)
        assert response.error_code == ErrorCode.NONE
        cluster.wait_until(lambda: _state(cluster, 1, "elsewhere")[0] == 1, 60, "the reassignment")
        assert _placement(node, "elsewhere") == {node.data_dir + SECOND_DIR: False}
        assert not os.path.exists(os.path.join(node.data_dir, "elsewhere-0"))
