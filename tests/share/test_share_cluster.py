"""A share group on a 3-node cluster whose share coordinator (the leader of the key's
`__share_group_state` partition) is another broker than the topic partition's leader: the leader
reads, initializes and writes the share-partition's state with the share coordinator's RPCs, and
Java 4.x's KafkaShareConsumer sees release and redelivery work as on one node."""

import base64
import os
import subprocess

import pytest

from broker.coordinator.serde import partition_for
from broker.testing_cluster import call, running_cluster
from protocol import messages as m
from tests.share.test_share_java import JARS, SHARE_BROKER, java_available, run_check

HERE = os.path.dirname(os.path.abspath(__file__))
STATE_PARTITIONS = 6


@pytest.mark.timeout(300)
@pytest.mark.skipif(not java_available(), reason="needs a JDK and compat-tests/.cache/java4 (compat-tests/setup.sh)")
def test_share_coordinator_on_another_broker(tmp_path):
    classes = tmp_path / "classes"
    classpath = os.pathsep.join([str(classes), os.path.join(JARS, "*")])
    subprocess.run(["javac", "-nowarn", "-d", str(classes), "-cp", classpath,
                    os.path.join(HERE, "clients", "ShareCheck.java")], check=True, capture_output=True, timeout=120)
    settings = {**SHARE_BROKER, "share.coordinator.state.topic.num.partitions": str(STATE_PARTITIONS)}
    with running_cluster(tmp_path, nodes=3, overrides=settings) as cluster:
        node = cluster.brokers[0]
        address = cluster.nodes[node].address
        C = m.CreateTopicsRequest
        call(address, 19, 5, C(topics=[C.CreatableTopic(name="q-release", num_partitions=1, replication_factor=1,
                                                         assignments=[], configs=[])], timeout_ms=30000))
        # any share-state RPC creates __share_group_state (as a share group's first fetch would)
        R = m.ReadShareGroupStateRequest
        call(address, 84, 0, R(group_id="probe", topics=[]), timeout=30)

        def leaders():
            meta = cluster.metadata(node, ["q-release", "__share_group_state"])
            topics = {t.name: t for t in meta.topics}
            return topics

        cluster.wait_until(lambda: all(t.error_code == 0 and t.partitions and all(p.leader_id >= 0 for p in t.partitions)
                                       for t in leaders().values()) and len(leaders()) == 2,
                           60, "q-release and __share_group_state have leaders")
        topics = leaders()
        topic_id = topics["q-release"].topic_id
        data_leader = topics["q-release"].partitions[0].leader_id
        state_leader = {p.partition_index: p.leader_id for p in topics["__share_group_state"].partitions}
        kafka_id = base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")
        # a group whose share coordinator is not the partition's leader
        suffix = next(s for s in (f"-{i}" for i in range(1000)) if state_leader[
            partition_for(f"g-release{s}:{kafka_id}:0", STATE_PARTITIONS)] != data_leader)
        facts = run_check(classpath, cluster.bootstrap, "main", "release", suffix)
    assert facts["release.deliveries"] == "{r0=[1], r1=[1], r2=[1, 2], r3=[1], r4=[1]}", facts
