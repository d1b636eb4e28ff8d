"""An offset commit is visible only once its `__consumer_offsets` write commits (a real 3-node cluster).

The coordinator's followers are paused (SIGSTOP), so the commit's acks=all write cannot reach them:
while it waits, OffsetFetch keeps answering the previous offset (require_stable: UNSTABLE_OFFSET_COMMIT);
when it times out (`offsets.commit.timeout.ms`) the client gets COORDINATOR_NOT_AVAILABLE and the
offset never shows. A coordinator elected later never had the write, so showing it would let committed
offsets go backwards. A KIP-848 member's heartbeat is not answered NONE meanwhile either. Once the
followers are back, commits go through as usual.
"""

from __future__ import annotations

import signal
import threading
import time

import pytest

from broker.testing_cluster import call, running_cluster
from protocol import ErrorCode as E
from protocol import messages as m

OVERRIDES = {"offsets.topic.num.partitions": "1", "offsets.topic.replication.factor": "3",
             "offsets.commit.timeout.ms": "3000", "group.initial.rebalance.delay.ms": "0"}
GROUP = "watcher"


def find_coordinator(cluster, key: str = GROUP, key_type: int = 0) -> int:
    """The node coordinating `key` (a group; a transactional id with key_type 1), once one answers."""
    def found():
        for broker in cluster.brokers:
            try:
                answer = call(cluster.nodes[broker].address, 10, 3,
                              m.FindCoordinatorRequest(key=key, key_type=key_type), timeout=10)
            except OSError:
                continue
            if answer.error_code == E.NONE:
                return answer.node_id
        return None
    return cluster.wait_until(found, 60, f"a coordinator for {key}")


def commit(cluster, node: int, offset: int, timeout: float = 15.0) -> int:
    C = m.OffsetCommitRequest
    body = C(group_id=GROUP, generation_id_or_member_epoch=-1, member_id="", topics=[C.OffsetCommitRequestTopic(
        name="t", partitions=[C.OffsetCommitRequestPartition(partition_index=0, committed_offset=offset,
                                                             committed_leader_epoch=-1, committed_metadata="")])])
    return call(cluster.nodes[node].address, 8, 8, body, timeout=timeout).topics[0].partitions[0].error_code


def fetch(cluster, node: int, require_stable: bool = False) -> tuple[int, int]:
    """(committed offset, partition error) as `node` answers OffsetFetch v7."""
    F = m.OffsetFetchRequest
    body = F(group_id=GROUP, require_stable=require_stable,
             topics=[F.OffsetFetchRequestTopic(name="t", partition_indexes=[0])])
    answer = call(cluster.nodes[node].address, 9, 7, body, timeout=10)
    assert answer.error_code == E.NONE
    row = answer.topics[0].partitions[0]
    return row.committed_offset, row.error_code


def consumer_heartbeat(cluster, node: int, member_id: str = "", epoch: int = 0):
    """A KIP-848 member of group `consumers` (ConsumerGroupHeartbeat v0): (error, member id, epoch)."""
    H = m.ConsumerGroupHeartbeatRequest
    body = H(group_id="consumers", member_id=member_id, member_epoch=epoch, rebalance_timeout_ms=30_000,
             subscribed_topic_names=["t"] if epoch == 0 else None, topic_partitions=[] if epoch == 0 else None)
    answer = call(cluster.nodes[node].address, 68, 0, body, timeout=15)
    return answer.error_code, answer.member_id, answer.member_epoch


def create_topic(cluster) -> None:
    C = m.CreateTopicsRequest
    body = C(topics=[C.CreatableTopic(name="t", num_partitions=1, replication_factor=3)], timeout_ms=30_000)
    code = call(cluster.nodes[cluster.brokers[0]].address, 19, 5, body, timeout=40).topics[0].error_code
    assert code in (E.NONE, E.TOPIC_ALREADY_EXISTS)


@pytest.mark.timeout(240)
def test_a_commit_that_cannot_replicate_never_shows(tmp_path):
    with running_cluster(tmp_path, nodes=3, overrides=OVERRIDES) as cluster:
        create_topic(cluster)
        coordinator = find_coordinator(cluster)
        cluster.wait_until(lambda: commit(cluster, coordinator, 205) == E.NONE, 60, "a first commit")
        assert fetch(cluster, coordinator) == (205, E.NONE)
        # a KIP-848 member (its group on the same __consumer_offsets partition: there is one)
        code, member, epoch = consumer_heartbeat(cluster, coordinator)
        assert code == E.NONE and epoch >= 1
        assert consumer_heartbeat(cluster, coordinator, member, epoch) == (E.NONE, member, epoch)

        followers = [b for b in cluster.brokers if b != coordinator]
        outcome: dict = {}
        for node in followers:
            cluster.nodes[node].signal(signal.SIGSTOP)
        try:
            committing = threading.Thread(target=lambda: outcome.setdefault("code", commit(cluster, coordinator, 210)))
            committing.start()
            # the write is appended on the coordinator (a stable fetch sees a commit in flight) ...
            cluster.wait_until(lambda: fetch(cluster, coordinator, require_stable=True)[1]
                               == E.UNSTABLE_OFFSET_COMMIT or fetch(cluster, coordinator)[0] == 210,
                               20, "the commit to reach the coordinator")
            # ... but, unreplicated, it does not count yet
            while committing.is_alive():
                assert fetch(cluster, coordinator) == (205, E.NONE)
                time.sleep(0.2)
            committing.join()
            assert outcome["code"] == E.COORDINATOR_NOT_AVAILABLE   # REQUEST_TIMED_OUT, as Kafka maps it
            assert fetch(cluster, coordinator) == (205, E.NONE)
            assert fetch(cluster, coordinator, require_stable=True) == (205, E.NONE)
            # the member's heartbeat writes nothing, but the coordinator's partition holds a write that
            # has not committed: as Kafka's new coordinator, it is not answered as if all were well
            code, _, _ = consumer_heartbeat(cluster, coordinator, member, epoch)
            assert code == E.COORDINATOR_NOT_AVAILABLE
        finally:
            for node in followers:
                cluster.nodes[node].signal(signal.SIGCONT)

        # the followers are back: commits replicate and show again
        def committed():
            try:
                return commit(cluster, coordinator, 215) == E.NONE
            except OSError:
                return False
        cluster.wait_until(committed, 60, "a commit once the followers are back")
        assert fetch(cluster, coordinator) == (215, E.NONE)
        assert consumer_heartbeat(cluster, coordinator, member, epoch)[0] == E.NONE
