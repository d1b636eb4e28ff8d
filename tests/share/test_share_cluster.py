"""A share group on a 3-node cluster whose share coordinator (the leader of the key's
`__share_group_state` partition) is another broker than the topic partition's leader: the leader
reads, initializes and writes the share-partition's state with the share coordinator's RPCs, and
Java 4.x's KafkaShareConsumer sees release and redelivery work as on one node."""

import base64
import os

import pytest
from confluent_kafka import Producer

from broker.admin.client import BrokerConnection
from broker.coordinator.serde import partition_for
from broker.testing_cluster import call, running_cluster
from protocol import messages as m
from tests.java_clients import MISSING, compile_check, java_available
from tests.share.test_share_java import SHARE_BROKER, run_check

HERE = os.path.dirname(os.path.abspath(__file__))
STATE_PARTITIONS = 6


def session_call(connection, api_key, body):
    return connection.request(api_key, body, min_version=1, max_version=1)[1]


@pytest.mark.timeout(300)
@pytest.mark.skipif(not java_available(), reason=MISSING)
def test_share_coordinator_on_another_broker(tmp_path):
    classpath = compile_check(os.path.join(HERE, "clients", "ShareCheck.java"), tmp_path / "classes")
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


@pytest.mark.timeout(300)
def test_offsets_admin_and_delete_groups_reach_the_share_coordinator_on_another_broker(tmp_path):
    """AlterShareGroupOffsets and DeleteGroups are answered by the group coordinator; the share-partition's
    state lives at its share coordinator, here another broker: Initialize/DeleteShareGroupState go there."""
    settings = {**SHARE_BROKER, "share.coordinator.state.topic.num.partitions": str(STATE_PARTITIONS)}
    with running_cluster(tmp_path, nodes=3, overrides=settings) as cluster:
        node = cluster.brokers[0]
        address = cluster.nodes[node].address
        C = m.CreateTopicsRequest
        call(address, 19, 5, C(topics=[C.CreatableTopic(name="q-admin", num_partitions=1, replication_factor=1,
                                                         assignments=[], configs=[])], timeout_ms=30000))
        R = m.ReadShareGroupStateRequest
        call(address, 84, 0, R(group_id="probe", topics=[]), timeout=30)      # creates __share_group_state
        F = m.FindCoordinatorRequest

        def group_coordinator(group):
            answer = call(address, 10, 4, F(key_type=0, coordinator_keys=[group]), timeout=30).coordinators[0]
            return answer.node_id if answer.error_code == 0 else -1

        def topics():
            return {t.name: t for t in cluster.metadata(node, ["q-admin", "__share_group_state"]).topics}

        cluster.wait_until(lambda: len(topics()) == 2 and all(
            t.error_code == 0 and t.partitions and all(p.leader_id >= 0 for p in t.partitions)
            for t in topics().values()), 60, "q-admin and __share_group_state have leaders")
        cluster.wait_until(lambda: group_coordinator("g-admin") >= 0, 60, "a group coordinator")
        described = topics()
        topic_id = described["q-admin"].topic_id
        state_leader = {p.partition_index: p.leader_id for p in described["__share_group_state"].partitions}
        kafka_id = base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")

        def share_coordinator(group):
            return state_leader[partition_for(f"{group}:{kafka_id}:0", STATE_PARTITIONS)]
        data_leader = described["q-admin"].partitions[0].leader_id
        group = next(g for g in (f"g-admin-{i}" for i in range(1000)) if group_coordinator(g) >= 0
                     and share_coordinator(g) not in (group_coordinator(g), data_leader))
        leader = cluster.nodes[data_leader].address
        coordinator = cluster.nodes[group_coordinator(group)].address
        holder = cluster.nodes[share_coordinator(group)].address

        def state():
            answer = call(holder, 84, 0, R(group_id=group, topics=[R.ReadStateData(topic_id=topic_id, partitions=[
                R.PartitionData(partition=0, leader_epoch=0)])]), timeout=30)
            result = answer.results[0].partitions[0]
            return result.error_code, result.start_offset
        A = m.AlterShareGroupOffsetsRequest
        body = A(group_id=group, topics=[A.AlterShareGroupOffsetsRequestTopic(topic_name="q-admin", partitions=[
            A.AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=7)])])
        answers = []
        # as a client does, again while the coordinators are loading (COORDINATOR_LOAD_IN_PROGRESS, ...)
        cluster.wait_until(lambda: answers.append(call(coordinator, 91, 0, body, timeout=30)) or
                           answers[-1].error_code not in (14, 15, 16), 60, "the group coordinator answers")
        altered = answers[-1]
        assert altered.error_code == 0, altered
        assert altered.responses[0].partitions[0].error_code == 0, altered
        assert state() == (0, 7)            # initialized at the share coordinator, not the group coordinator
        producer = Producer({"bootstrap.servers": cluster.bootstrap})
        for i in range(10):
            producer.produce("q-admin", value=b"a%d" % i, partition=0)
        producer.flush(30)

        def consume_once(member):
            """Join, fetch from the partition's leader (its share-partition state comes from the share
            coordinator), accept what came, close the session and leave; the offsets acquired."""
            H, Fe, Ack = m.ShareGroupHeartbeatRequest, m.ShareFetchRequest, m.ShareAcknowledgeRequest
            joined = call(coordinator, 76, 1, H(group_id=group, member_id=member, member_epoch=0,
                                                subscribed_topic_names=["q-admin"]), timeout=30)
            assert joined.error_code == 0, joined
            session = BrokerConnection(*leader)     # a share session lives as long as its connection
            fetched = session_call(session, 78, Fe(group_id=group, member_id=member, share_session_epoch=0, max_wait_ms=5000,
                                             min_bytes=1, max_bytes=1 << 20, max_records=100, batch_size=100,
                                             forgotten_topics_data=[], topics=[Fe.FetchTopic(topic_id=topic_id, partitions=[
                                                 Fe.FetchPartition(partition_index=0)])]))
            got = [(a.first_offset, a.last_offset) for a in fetched.responses[0].partitions[0].acquired_records]
            acked = session_call(session, 79, Ack(group_id=group, member_id=member, share_session_epoch=-1, topics=[
                Ack.AcknowledgeTopic(topic_id=topic_id, partitions=[Ack.AcknowledgePartition(partition_index=0,
                    acknowledgement_batches=[Ack.AcknowledgementBatch(first_offset=a, last_offset=b, acknowledge_types=[1])
                                             for a, b in got])])]))
            session.close()
            assert acked.error_code == 0 and acked.responses[0].partitions[0].error_code == 0, acked
            call(coordinator, 76, 1, H(group_id=group, member_id=member, member_epoch=-1), timeout=30)
            return got
        assert consume_once("m1") == [(7, 9)]
        # the group is empty again: back to 2; the leader (which held the share-partition) reads it afresh
        body.topics[0].partitions[0].start_offset = 2
        assert call(coordinator, 91, 0, body, timeout=30).responses[0].partitions[0].error_code == 0
        assert consume_once("m2") == [(2, 9)]
        deleted = call(coordinator, 42, 2, m.DeleteGroupsRequest(groups_names=[group]), timeout=30)
        assert deleted.results[0].error_code == 0
        assert state() == (0, -1)           # DeleteShareGroupState reached the other broker
