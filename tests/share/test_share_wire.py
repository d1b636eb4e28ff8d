"""Share groups over a real socket with raw requests: the share session rules, acknowledgements and
their errors, the share coordinator's state RPCs, ListGroups / DeleteGroups, and the switch."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from broker.admin.client import KafkaClient
from broker.admin.groups import describe_group
from broker.testing import running_broker
from protocol import ErrorCode as E
from protocol import messages as m
from tests.share.test_share_java import SHARE_BROKER

F = m.ShareFetchRequest
A = m.ShareAcknowledgeRequest


@pytest.fixture(scope="module")
def share(tmp_path_factory):
    with running_broker(tmp_path_factory.mktemp("share-wire"), SHARE_BROKER) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("sw", 1, 1)])["sw"].result(30)
        client = KafkaClient(broker.bootstrap)
        try:
            yield broker, client, client.coordinator("wg")
        finally:
            client.close()


def heartbeat(conn, member, epoch, topics=None):
    _, r = conn.request(76, m.ShareGroupHeartbeatRequest(group_id="wg", member_id=member, member_epoch=epoch,
                                                         subscribed_topic_names=topics), min_version=1, max_version=1)
    return r


def fetch(conn, member, epoch, topic_id, acks=(), wait_ms=0, max_records=100):
    body = F(group_id="wg", member_id=member, share_session_epoch=epoch, max_wait_ms=wait_ms, min_bytes=1,
             max_bytes=1 << 20, max_records=max_records, batch_size=max_records,
             topics=[F.FetchTopic(topic_id=topic_id, partitions=[F.FetchPartition(partition_index=0, acknowledgement_batches=[
                 F.AcknowledgementBatch(first_offset=a, last_offset=b, acknowledge_types=list(t)) for a, b, t in acks])])],
             forgotten_topics_data=[])
    _, r = conn.request(78, body, min_version=1, max_version=2)
    return r


def part(r):
    return r.responses[0].partitions[0]


def acquired(r):
    return [(a.first_offset, a.last_offset, a.delivery_count) for a in part(r).acquired_records]


def test_share_session_and_acknowledgements(share):
    broker, client, conn = share
    joined = heartbeat(conn, "m1", 0, ["sw"])
    assert E(joined.error_code) is E.NONE and joined.member_epoch == 1
    topic_id = joined.assignment.topic_partitions[0].topic_id
    described, code = describe_group(client, "wg")            # what `odradek groups describe` shows
    assert (code, described.group_type, described.state, described.protocol) == (0, "share", "Stable", "simple")
    assert [(mb.member_id, mb.assignment, mb.member_epoch) for mb in described.members] == [("m1", {"sw": [0]}, 1)]
    # no session yet / a wrong epoch / acknowledgements on the opening request
    assert E(fetch(conn, "m1", 3, topic_id).error_code) is E.SHARE_SESSION_NOT_FOUND
    assert E(fetch(conn, "m1", 0, topic_id, acks=[(0, 0, [1])]).error_code) is E.INVALID_REQUEST
    opened = fetch(conn, "m1", 0, topic_id)                 # initializes the share-partition at the HWM (0)
    assert E(opened.error_code) is E.NONE and opened.acquisition_lock_timeout_ms == 3000
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20})
    for i in range(6):
        producer.produce("sw", value=b"w%d" % i, partition=0)
    producer.flush(30)
    assert E(fetch(conn, "m1", 5, topic_id).error_code) is E.INVALID_SHARE_SESSION_EPOCH
    first = fetch(conn, "m1", 1, topic_id, wait_ms=5000, max_records=4)
    assert acquired(first) == [(0, 3, 1)] and len(part(first).records) > 0
    # accept 0-1, release 2, reject 3 (piggy-backed); the next records come with it
    second = fetch(conn, "m1", 2, topic_id, acks=[(0, 3, [1, 1, 2, 3])], wait_ms=5000)
    assert E(part(second).acknowledge_error_code) is E.NONE
    assert acquired(second) == [(2, 2, 2), (4, 5, 1)]
    # acknowledging what one does not hold
    _, bad = conn.request(79, A(group_id="wg", member_id="m1", share_session_epoch=3, topics=[
        A.AcknowledgeTopic(topic_id=topic_id, partitions=[A.AcknowledgePartition(partition_index=0, acknowledgement_batches=[
            A.AcknowledgementBatch(first_offset=0, last_offset=0, acknowledge_types=[1])])])]), min_version=1, max_version=2)
    assert E(bad.responses[0].partitions[0].error_code) is E.INVALID_RECORD_STATE
    _, ok = conn.request(79, A(group_id="wg", member_id="m1", share_session_epoch=4, topics=[
        A.AcknowledgeTopic(topic_id=topic_id, partitions=[A.AcknowledgePartition(partition_index=0, acknowledgement_batches=[
            A.AcknowledgementBatch(first_offset=2, last_offset=2, acknowledge_types=[1]),
            A.AcknowledgementBatch(first_offset=4, last_offset=5, acknowledge_types=[1])])])]), min_version=1, max_version=2)
    assert E(ok.responses[0].partitions[0].error_code) is E.NONE
    # the share coordinator's view of it: everything up to 6 is done
    R = m.ReadShareGroupStateRequest
    _, state = conn.request(84, R(group_id="wg", topics=[R.ReadStateData(topic_id=topic_id, partitions=[
        R.PartitionData(partition=0, leader_epoch=0)])]), min_version=0, max_version=0)
    result = state.results[0].partitions[0]
    assert (E(result.error_code), result.start_offset, list(result.state_batches)) == (E.NONE, 6, [])
    S = m.ReadShareGroupStateSummaryRequest
    _, summary = conn.request(87, S(group_id="wg", topics=[S.ReadStateSummaryData(topic_id=topic_id, partitions=[
        S.PartitionData(partition=0, leader_epoch=0)])]), min_version=1, max_version=1)
    result = summary.results[0].partitions[0]
    assert (E(result.error_code), result.start_offset, result.delivery_complete_count) == (E.NONE, 6, 0)
    # closing the session, leaving the group; then the empty group can be listed and deleted
    _, closed = conn.request(79, A(group_id="wg", member_id="m1", share_session_epoch=-1, topics=[]),
                             min_version=1, max_version=2)
    assert E(closed.error_code) is E.NONE
    assert E(heartbeat(conn, "m1", -1).error_code) is E.NONE
    _, listed = conn.request(16, m.ListGroupsRequest(states_filter=[], types_filter=["share"]), min_version=5, max_version=5)
    assert [(g.group_id, g.group_type, g.group_state) for g in listed.groups] == [("wg", "share", "Empty")]
    _, deleted = conn.request(42, m.DeleteGroupsRequest(groups_names=["wg"]), min_version=2, max_version=2)
    assert E(deleted.results[0].error_code) is E.NONE
    _, state = conn.request(84, R(group_id="wg", topics=[R.ReadStateData(topic_id=topic_id, partitions=[
        R.PartitionData(partition=0, leader_epoch=0)])]), min_version=0, max_version=0)
    assert state.results[0].partitions[0].start_offset == -1


def test_share_groups_off_by_default(tmp_path):
    with running_broker(tmp_path / "d", {"offsets.topic.replication.factor": "1"}) as broker:
        client = KafkaClient(broker.bootstrap)
        try:
            conn = client.coordinator("off")
            # share.version's minimum is 0: advertised from ApiVersions v4 on (v3 leaves it out, as Kafka)
            _, versions = conn.request(18, m.ApiVersionsRequest(client_software_name="t", client_software_version="1"),
                                       min_version=4, max_version=4)
            assert {76, 77, 78, 79, 83, 84, 85, 86} <= {k.api_key for k in versions.api_keys}
            assert "share.version" in {f.name for f in versions.supported_features}
            off = heartbeat(conn, "m", 0, ["t"])
            assert E(off.error_code) is E.UNSUPPORTED_VERSION
            # finalizing share.version 1 turns them on, as `kafka-features upgrade` does in Kafka 4.1+
            U = m.UpdateFeaturesRequest
            _, updated = conn.request(57, U(feature_updates=[U.FeatureUpdateKey(
                feature="share.version", max_version_level=1, upgrade_type=1)]), min_version=1, max_version=1)
            assert [(r.feature, r.error_code) for r in updated.results] == [("share.version", 0)]
            on = heartbeat(conn, "m", 0, ["t"])
            assert E(on.error_code) is E.NONE and on.member_epoch == 1
        finally:
            client.close()


def alter_offsets(conn, group, topic, offsets):
    Q = m.AlterShareGroupOffsetsRequest
    _, r = conn.request(91, Q(group_id=group, topics=[Q.AlterShareGroupOffsetsRequestTopic(
        topic_name=topic, partitions=[Q.AlterShareGroupOffsetsRequestPartition(partition_index=p, start_offset=o)
                                      for p, o in offsets])]), min_version=0, max_version=0)
    return r


def delete_offsets(conn, group, topics):
    Q = m.DeleteShareGroupOffsetsRequest
    _, r = conn.request(92, Q(group_id=group, topics=[Q.DeleteShareGroupOffsetsRequestTopic(topic_name=t)
                                                      for t in topics]), min_version=0, max_version=0)
    return r


def read_state(conn, group, topic_id):
    R = m.ReadShareGroupStateRequest
    _, state = conn.request(84, R(group_id=group, topics=[R.ReadStateData(topic_id=topic_id, partitions=[
        R.PartitionData(partition=0, leader_epoch=0)])]), min_version=0, max_version=0)
    result = state.results[0].partitions[0]
    return result.start_offset, result.state_epoch


def test_alter_and_delete_share_group_offsets(share):
    broker, client, conn = share
    topic_id = client.metadata(["sw"]).topics["sw"].topic_id
    # a group that does not exist yet is created by altering its offsets (Kafka 4.2+)
    altered = alter_offsets(conn, "wo", "sw", [(0, 3)])
    assert E(altered.error_code) is E.NONE
    assert [(t.topic_name, t.topic_id) for t in altered.responses] == [("sw", topic_id)]
    assert [(p.partition_index, E(p.error_code)) for p in altered.responses[0].partitions] == [(0, E.NONE)]
    assert read_state(conn, "wo", topic_id) == (3, 1)          # state epoch: the bumped group epoch
    # per-partition errors: an unknown partition or topic, a negative offset
    bad = alter_offsets(conn, "wo", "sw", [(0, -5), (9, 1)])
    assert [E(p.error_code) for p in bad.responses[0].partitions] == [E.INVALID_REQUEST, E.UNKNOWN_TOPIC_OR_PARTITION]
    unknown = alter_offsets(conn, "wo", "nope", [(0, 1)])
    assert E(unknown.responses[0].partitions[0].error_code) is E.UNKNOWN_TOPIC_OR_PARTITION
    assert read_state(conn, "wo", topic_id)[0] == 3
    # a member in the group: NON_EMPTY_GROUP for both
    _, joined = conn.request(76, m.ShareGroupHeartbeatRequest(group_id="wo", member_id="mo", member_epoch=0,
                                                              subscribed_topic_names=["sw"]), min_version=1, max_version=1)
    assert E(joined.error_code) is E.NONE
    assert E(alter_offsets(conn, "wo", "sw", [(0, 0)]).error_code) is E.NON_EMPTY_GROUP
    assert E(delete_offsets(conn, "wo", ["sw"]).error_code) is E.NON_EMPTY_GROUP
    _, left = conn.request(76, m.ShareGroupHeartbeatRequest(group_id="wo", member_id="mo", member_epoch=-1),
                           min_version=1, max_version=1)
    assert E(left.error_code) is E.NONE
    deleted = delete_offsets(conn, "wo", ["sw", "nope"])
    assert [(t.topic_name, E(t.error_code)) for t in deleted.responses] == [
        ("sw", E.NONE), ("nope", E.UNKNOWN_TOPIC_OR_PARTITION)]
    assert read_state(conn, "wo", topic_id)[0] == -1
    # group-level errors
    assert E(delete_offsets(conn, "wo-missing", ["sw"]).error_code) is E.GROUP_ID_NOT_FOUND
    assert E(alter_offsets(conn, "", "sw", [(0, 1)]).error_code) is E.INVALID_GROUP_ID
    _, versions = conn.request(18, m.ApiVersionsRequest(client_software_name="t", client_software_version="1"),
                               min_version=3, max_version=3)
    assert {(k.api_key, k.min_version, k.max_version) for k in versions.api_keys} >= {(91, 0, 0), (92, 0, 0)}


def test_records_released_when_the_share_session_connection_closes(share):
    broker, client, conn = share
    C = m.IncrementalAlterConfigsRequest
    _, configured = conn.request(44, C(resources=[C.AlterConfigsResource(resource_type=32, resource_name="wc", configs=[
        C.AlterableConfig(name="share.record.lock.duration.ms", config_operation=0, value="60000"),
        C.AlterableConfig(name="share.auto.offset.reset", config_operation=0, value="earliest")])], validate_only=False),
        min_version=1, max_version=1)
    assert E(configured.responses[0].error_code) is E.NONE
    topic_id = client.metadata(["sw"]).topics["sw"].topic_id

    def member_fetch(connection, member, epoch, wait_ms):
        body = F(group_id="wc", member_id=member, share_session_epoch=epoch, max_wait_ms=wait_ms, min_bytes=1,
                 max_bytes=1 << 20, max_records=100, batch_size=100, forgotten_topics_data=[],
                 topics=[F.FetchTopic(topic_id=topic_id, partitions=[F.FetchPartition(partition_index=0)])])
        _, r = connection.request(78, body, min_version=1, max_version=2)
        return r

    joined_at = time.monotonic()
    for member in ("crash", "other"):
        _, joined = conn.request(76, m.ShareGroupHeartbeatRequest(group_id="wc", member_id=member, member_epoch=0,
                                                                  subscribed_topic_names=["sw"]), min_version=1, max_version=1)
        assert E(joined.error_code) is E.NONE
    doomed = KafkaClient(broker.bootstrap)
    try:
        holder = doomed.coordinator("wc")
        held = acquired(member_fetch(holder, "crash", 0, 5000))
        assert held and held[0][0] == 0 and all(count == 1 for _, _, count in held), held
    finally:
        doomed.close()            # the connection goes; the 60 s locks stay with nobody
    opened = member_fetch(conn, "other", 0, 0)
    assert E(opened.error_code) is E.NONE
    again, epoch = acquired(opened), 1
    while not again and time.monotonic() - joined_at < 10:
        again = acquired(member_fetch(conn, "other", epoch, 200))
        epoch += 1
    assert again and again[0][:1] == (0,) and all(count == 2 for _, _, count in again), again
    # before the silent member's session timed out (6 s), let alone its 60 s locks: the closed connection did it
    assert time.monotonic() - joined_at < 6.0
