"""Partition reassignment: the controller's decisions (pure) and `odradek reassign` on a live cluster."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid

import pytest
from confluent_kafka import Producer

from protocol import ErrorCode, messages as m

from broker.controller import records as r
from broker.controller import reassignment
from broker.controller.errors import ApiError
from broker.controller.image import MetadataImage
from broker.testing_cluster import call, running_cluster

from tests.replication.test_cluster_replication import FAST_FAILURE, _consume_all, _state

TOPIC_ID = uuid.UUID(int=7)


def image(replicas=(1, 2, 3), isr=(1, 2, 3), leader=1):
    records = [r.RegisterBrokerRecord(broker_id=b, incarnation_id=uuid.UUID(int=b), broker_epoch=1,
                                      end_points=[], rack=None, fenced=False) for b in range(1, 6)]
    records += [r.TopicRecord(name="t", topic_id=TOPIC_ID),
                r.PartitionRecord(partition_id=0, topic_id=TOPIC_ID, replicas=list(replicas),
                                  isr=list(isr), leader=leader, leader_epoch=0, partition_epoch=0)]
    return MetadataImage().apply(records, 0)


def test_start_waits_for_the_new_replicas_then_completes():
    img = image()
    start = reassignment.alter(img, "t", 0, [3, 4, 5])
    assert (start.replicas, start.adding_replicas, start.removing_replicas) == ([3, 4, 5, 1, 2], [4, 5], [1, 2])
    img = img.apply([start], 1)
    assert reassignment.completions(img) == []                      # 4, 5 not in sync yet
    assert reassignment.ongoing(img, None) == [("t", [(0, [3, 4, 5, 1, 2], [4, 5], [1, 2])])]
    img = img.apply([r.PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, isr=[1, 2, 3, 4, 5])], 2)
    [done] = reassignment.completions(img)
    assert (done.replicas, done.isr, done.adding_replicas, done.removing_replicas, done.leader) == \
        ([3, 4, 5], [3, 4, 5], [], [], 3)                           # leader 1 was removed
    img = img.apply([done], 3)
    partition = img.partition("t", 0)
    assert partition.leader == 3 and partition.leader_epoch == 1 and reassignment.ongoing(img, None) == []


def test_removal_only_completes_at_once_and_cancel_reverts():
    img = image()
    shrink = reassignment.alter(img, "t", 0, [1, 2])
    done = reassignment.completion(img.apply([shrink]), img.topics["t"], img.apply([shrink]).partition("t", 0))
    assert (done.replicas, done.isr, done.leader) == ([1, 2], [1, 2], -2)
    img = img.apply([reassignment.alter(img, "t", 0, [1, 4])], 1)
    cancel = reassignment.alter(img, "t", 0, None)
    assert (cancel.replicas, cancel.isr, cancel.adding_replicas, cancel.removing_replicas) == \
        ([1, 2, 3], [1, 2, 3], [], [])


@pytest.mark.parametrize("target, code", [
    ([], ErrorCode.INVALID_REPLICA_ASSIGNMENT), ([1, 1], ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    ([1, 9], ErrorCode.INVALID_REPLICA_ASSIGNMENT), (None, ErrorCode.NO_REASSIGNMENT_IN_PROGRESS)])
def test_bad_requests_get_kafkas_errors(target, code):
    with pytest.raises(ApiError) as exc:
        reassignment.alter(image(), "t", 0, target)
    assert exc.value.code == code
    with pytest.raises(ApiError) as exc:
        reassignment.alter(image(), "nope", 0, [1])
    assert exc.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def _odradek(bootstrap, *args):
    return subprocess.run([sys.executable, "-m", "broker.cli", *args, "--bootstrap-server", bootstrap],
                          capture_output=True, text=True, timeout=60)


def test_reassign_moves_a_partition_to_other_brokers(tmp_path):
    """`odradek reassign --execute` moves a single-replica partition to two other brokers; the new
    replicas catch up, join the ISR, the old one is dropped (its log deleted); --verify says so."""
    with running_cluster(tmp_path, nodes=3, overrides=FAST_FAILURE) as cluster:
        R = m.CreateTopicsRequest
        created = call(cluster.nodes[1].address, 19, 7, R(timeout_ms=30000, validate_only=False, topics=[
            R.CreatableTopic(name="moving", num_partitions=-1, replication_factor=-1, configs=[],
                             assignments=[R.CreatableReplicaAssignment(partition_index=0, broker_ids=[1])])]),
            timeout=30)
        assert created.topics[0].error_code == 0
        cluster.wait_until(lambda: _state(cluster, 2, "moving")[0] == 1, 30, "the topic everywhere")
        # one replica: below the cluster's min.insync.replicas=2, so acks=1
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "1"})
        for i in range(300):
            producer.produce("moving", b"%04d" % i)
        assert producer.flush(30) == 0

        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": "moving", "partition": 0, "replicas": [2, 3]}]}))
        started = _odradek(cluster.bootstrap, "reassign", "--reassignment-json-file", str(plan), "--execute")
        assert started.returncode == 0, started.stderr
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            verified = _odradek(cluster.bootstrap, "reassign", "--reassignment-json-file", str(plan), "--verify")
            if verified.returncode == 0:
                break
            time.sleep(0.5)
        assert verified.returncode == 0 and "complete" in verified.stdout, verified.stdout + verified.stderr
        # --verify asked one broker; node 3's metadata image may be a moment behind it, as in Kafka
        cluster.wait_until(lambda: (lambda leader, isr: leader in (2, 3) and isr == [2, 3])(
            *_state(cluster, 3, "moving")), 30, "node 3 to see the new leader and ISR [2, 3]")
        got = _consume_all(cluster.bootstrap, "moving", 300)
        assert [value for _, value in got] == [b"%04d" % i for i in range(300)]
        cluster.wait_until(lambda: not os.path.exists(os.path.join(cluster.nodes[1].data_dir, "moving-0")),
                           30, "the old replica's log to be deleted")
