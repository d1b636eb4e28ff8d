"""A KIP-848 consumer group follows its `__consumer_offsets` partition's leadership: kill the
coordinator's broker mid-stream, and the new leader of the partition loads the group (its epoch,
members, member epochs and assignments) from its replica; the consumer goes on under the same member
epoch — not fenced, no rebalance — and reads every record."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from broker.testing_cluster import call, running_cluster
from protocol import messages as m
from tests.cluster.test_coordinators_cluster import commit_sync, create_topic, find_coordinator, leaders


def describe(cluster, node: int, group: str):
    answer = call(cluster.nodes[node].address, 69, 1, m.ConsumerGroupDescribeRequest(group_ids=[group]))
    return answer.groups[0]


@pytest.mark.timeout(300)
def test_a_consumer_group_moves_with_its_offsets_partition(tmp_path):
    settings = {"offsets.topic.replication.factor": "3", "offsets.topic.num.partitions": "3"}
    with running_cluster(tmp_path, nodes=3, overrides=settings) as cluster:
        create_topic(cluster.bootstrap, "cf", 3, replication=3)
        cluster.wait_until(lambda: all(len(leaders(cluster, "cf", b)) == 3 for b in cluster.brokers), 30, "cf")
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 5, "acks": "all"})
        sent = {b"v-%d" % i for i in range(300)}
        for i in range(300):
            producer.produce("cf", b"v-%d" % i, partition=i % 3)
        assert producer.flush(60) == 0

        group = "kip848-survivors"
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "group.protocol": "consumer",
                             "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        consumer.subscribe(["cf"])
        seen, deadline = set(), time.monotonic() + 120
        while len(seen) < 150 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                seen.add(message.value())
                if len(seen) % 10 == 0:
                    commit_sync(consumer, deadline)
        commit_sync(consumer, deadline)
        coordinator = cluster.wait_until(lambda: max(find_coordinator(cluster, group), 0), 30, "a coordinator")
        before = describe(cluster, coordinator, group)
        assert before.error_code == 0 and before.group_state == "Stable" and len(before.members) == 1
        cluster.kill(coordinator)
        new = cluster.wait_until(lambda: find_coordinator(cluster, group) not in (-1, coordinator) and
                                 find_coordinator(cluster, group), 60, "the group's new coordinator")

        def loaded():
            d = describe(cluster, new, group)
            return d if d.error_code == 0 else None
        after = cluster.wait_until(loaded, 60, "the group loaded at the new coordinator")
        # the same group, read from the replica: nothing rejoined, nothing was reassigned
        assert (after.group_epoch, after.assignment_epoch) == (before.group_epoch, before.assignment_epoch)
        assert [(x.member_id, x.member_epoch) for x in after.members] == \
            [(x.member_id, x.member_epoch) for x in before.members]

        deadline = time.monotonic() + 120
        while len(seen) < len(sent) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                seen.add(message.value())
        commit_sync(consumer, deadline)
        assert seen == sent
        final = describe(cluster, new, group)
        assert [(x.member_id, x.member_epoch) for x in final.members] == \
            [(x.member_id, x.member_epoch) for x in before.members]   # the member was never fenced
        offsets = consumer.committed([TopicPartition("cf", p) for p in range(3)], timeout=60)
        assert sum(tp.offset for tp in offsets) == 300
        consumer.close()
