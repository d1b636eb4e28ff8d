"""Every API under the StandardAuthorizer, over real sockets: a denied principal gets Kafka's
*_AUTHORIZATION_FAILED code, sees nothing it may not describe and writes nothing; once granted the
ACL Kafka requires, the same request succeeds.

Two identities without any test hook in the server: both connections are User:ANONYMOUS (plain
listener), told apart by the ACLs' host field — the admin connects from 127.0.0.1 (which ACLs
allow everything), the user from 127.0.0.2 (nothing, until a test grants it).
"""

import uuid

import pytest

from protocol import ErrorCode as E, messages
from broker.security.acls import (
    AclOperation as Op, AclPermissionType as Perm, PatternType as PT, ResourceType as RT,
)
from broker.security.authorizer import STANDARD_AUTHORIZER
from broker.testing import running_broker
from tests.broker.raw_client import batch
from tests.security.acl_client import (
    ADMIN_HOST, USER_HOST, HostClient, create_acls, creation, delete_acls, delete_filter,
    describe_acls, grant,
)

TOPIC_CONFIG, BROKER_CONFIG = 2, 4


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    """A broker whose ACLs give 127.0.0.1 everything: created while allow.everyone is on, then
    the broker restarts without it (the ACLs come back from the metadata log)."""
    data = tmp_path_factory.mktemp("acl") / "data"
    overrides = {"authorizer.class.name": STANDARD_AUTHORIZER,
                 "allow.everyone.if.no.acl.found": "true"}
    with running_broker(data, overrides) as first:
        with HostClient(first.port, ADMIN_HOST) as admin:
            for rtype, name in ((RT.CLUSTER, "kafka-cluster"), (RT.TOPIC, "*"), (RT.GROUP, "*"),
                                (RT.TRANSACTIONAL_ID, "*")):
                grant(admin, rtype, name, Op.ALL, host=ADMIN_HOST)
    overrides["allow.everyone.if.no.acl.found"] = "false"
    with running_broker(data, overrides) as broker:
        yield broker


@pytest.fixture
def admin(secured):
    with HostClient(secured.port, ADMIN_HOST) as client:
        yield client


@pytest.fixture
def user(secured):
    with HostClient(secured.port, USER_HOST) as client:
        yield client


def unique(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def make_topic(admin, prefix="t", partitions=1):
    name = unique(prefix)
    assert admin.create_topic(name, partitions).error_code == 0
    return name


def metadata(client, topics, version=12, auto_create=False, operations=False):
    M = messages.MetadataRequest
    return client.request(3, version, M(
        topics=None if topics is None else [M.MetadataRequestTopic(name=t) for t in topics],
        allow_auto_topic_creation=auto_create, include_topic_authorized_operations=operations,
        include_cluster_authorized_operations=operations))


def end_offset(admin, topic):
    return admin.list_offset(topic, 0, -1).offset


# ---------------------------------------------------------------------------------- ACL APIs

def test_acl_apis_need_cluster_alter_and_describe(admin, user):
    assert create_acls(user, creation(RT.TOPIC, "x", Op.READ)) == [E.CLUSTER_AUTHORIZATION_FAILED]
    described = describe_acls(user)
    assert described.error_code == E.CLUSTER_AUTHORIZATION_FAILED and described.resources == []
    deleted = delete_acls(user, delete_filter())
    assert [r.error_code for r in deleted.filter_results] == [E.CLUSTER_AUTHORIZATION_FAILED]
    # Nothing was deleted: the admin still has its cluster ACL.
    assert describe_acls(admin, RT.CLUSTER).resources


def test_acl_round_trip_and_validation(admin):
    name = unique("acl")
    # As Kafka 3.9: a filter-only value (ANY, MATCH) anywhere fails the whole request, nothing stored
    unbuildable = [creation(RT.TOPIC, name, Op.READ), creation(RT.ANY, name, Op.READ),
                   creation(RT.TOPIC, name, Op.ANY), creation(RT.TOPIC, name, Op.READ,
                                                              pattern=PT.MATCH)]
    assert create_acls(admin, *unbuildable) == [E.UNKNOWN_SERVER_ERROR] * 4
    # ... a bad cluster name or an unrecognised code fails that binding only (INVALID_REQUEST)
    codes = create_acls(
        admin, creation(RT.TOPIC, name, Op.READ), creation(RT.TOPIC, name, Op.WRITE, perm=Perm.DENY),
        creation(RT.GROUP, name, Op.READ, pattern=PT.PREFIXED), creation(RT.CLUSTER, "x", Op.ALTER),
        creation(99, name, Op.READ))
    assert codes == [0, 0, 0, E.INVALID_REQUEST, E.INVALID_REQUEST]
    described = describe_acls(admin, RT.ANY, name, PT.ANY)
    assert described.error_code == 0
    summary = sorted((r.resource_type, r.resource_name, r.pattern_type, a.operation, a.permission_type)
                     for r in described.resources for a in r.acls)
    assert summary == sorted([(RT.TOPIC, name, PT.LITERAL, Op.READ, Perm.ALLOW),
                              (RT.TOPIC, name, PT.LITERAL, Op.WRITE, Perm.DENY),
                              (RT.GROUP, name, PT.PREFIXED, Op.READ, Perm.ALLOW)])
    # MATCH also finds the wildcard ACLs that apply to the name.
    matching = describe_acls(admin, RT.TOPIC, name, PT.MATCH).resources
    assert sorted(r.resource_name for r in matching) == ["*", name]
    unrecognised = describe_acls(admin, RT.ANY, op=77)
    assert (unrecognised.error_code, unrecognised.resources) == (0, [])
    deleted = delete_acls(admin, delete_filter(RT.TOPIC, name, op=Op.WRITE),
                          delete_filter(RT.ANY, name, PT.ANY), delete_filter(99))
    results = deleted.filter_results
    assert [len(r.matching_acls) for r in results] == [1, 3, 0]
    assert results[2].error_code == E.INVALID_REQUEST
    assert describe_acls(admin, RT.ANY, name, PT.ANY).resources == []


@pytest.mark.parametrize("request_of", [
    lambda client: describe_acls(client, RT.UNKNOWN),
    lambda client: describe_acls(client, op=Op.UNKNOWN),
    lambda client: create_acls(client, creation(RT.TOPIC, "x", Op.READ, perm=Perm.UNKNOWN)),
    lambda client: delete_acls(client, delete_filter(pattern=PT.UNKNOWN)),
], ids=["describe-resource", "describe-operation", "create-permission", "delete-pattern"])
def test_acl_requests_naming_unknown_close_the_connection(secured, request_of):
    """Kafka's request validation refuses the UNKNOWN code (0) in any ACL field by closing."""
    with HostClient(secured.port, ADMIN_HOST) as client, pytest.raises(ConnectionError):
        request_of(client)


def test_acl_apis_without_an_authorizer_say_security_disabled(tmp_path):
    with running_broker(tmp_path / "plain") as broker, HostClient(broker.port, ADMIN_HOST) as client:
        created = client.request(30, 3, messages.CreateAclsRequest(
            creations=[creation(RT.TOPIC, "x", Op.READ)])).results
        described = describe_acls(client)
        deleted = delete_acls(client, delete_filter()).filter_results
        # Kafka 3.9's words, which differ for DescribeAcls
        assert [(r.error_code, r.error_message) for r in created] == [
            (E.SECURITY_DISABLED, "No Authorizer is configured.")]
        assert (described.error_code, described.error_message) == (
            E.SECURITY_DISABLED, "No Authorizer is configured on the broker")
        assert [(r.error_code, r.error_message) for r in deleted] == [
            (E.SECURITY_DISABLED, "No Authorizer is configured.")]
        # Everything is allowed, and KIP-430 reports every operation of the resource type.
        topic = make_topic(client)
        response = metadata(client, [topic], version=10, operations=True)
        assert response.topics[0].topic_authorized_operations == sum(
            1 << op for op in (Op.READ, Op.WRITE, Op.CREATE, Op.DESCRIBE, Op.DELETE, Op.ALTER,
                               Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS))
        assert response.cluster_authorized_operations == sum(
            1 << op for op in (Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS,
                               Op.IDEMPOTENT_WRITE, Op.ALTER, Op.DESCRIBE))


# --------------------------------------------------------------------------- produce and fetch

def test_produce_needs_write(admin, user):
    topic = make_topic(admin)
    assert user.produce(topic, 0, batch([b"no"])).error_code == E.TOPIC_AUTHORIZATION_FAILED
    assert end_offset(admin, topic) == 0                                  # nothing written
    grant(admin, RT.TOPIC, topic, Op.WRITE)
    answer = user.produce(topic, 0, batch([b"yes"]))
    assert answer.error_code == 0 and end_offset(admin, topic) == 1
    # A DENY for the user's host wins over its ALLOW.
    grant(admin, RT.TOPIC, topic, Op.WRITE, perm=Perm.DENY)
    assert user.produce(topic, 0, batch([b"no"])).error_code == E.TOPIC_AUTHORIZATION_FAILED
    assert end_offset(admin, topic) == 1


def test_transactional_produce_needs_the_transactional_id(admin, user):
    topic = make_topic(admin)
    grant(admin, RT.TOPIC, topic, Op.WRITE)
    P = messages.ProduceRequest
    records = batch([b"t"], producer_id=5, producer_epoch=0, base_sequence=0, transactional=True)
    response = user.request(0, 9, P(transactional_id=unique("txn"), acks=-1, timeout_ms=5000,
                                    topic_data=[P.TopicProduceData(name=topic, partition_data=[
                                        P.PartitionProduceData(index=0, records=records)])]))
    code = response.responses[0].partition_responses[0].error_code
    assert code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert end_offset(admin, topic) == 0


def test_fetch_needs_read(admin, user):
    topic = make_topic(admin)
    admin.produce(topic, 0, batch([b"secret"]))
    [partition] = user.fetch(topic, 0, 0).responses[0].partitions
    assert partition.error_code == E.TOPIC_AUTHORIZATION_FAILED
    assert not partition.records and partition.high_watermark == -1
    grant(admin, RT.TOPIC, topic, Op.READ)
    [partition] = user.fetch(topic, 0, 0).responses[0].partitions
    assert partition.error_code == 0 and b"secret" in bytes(partition.records)


def test_list_offsets_and_leader_epochs_need_describe(admin, user):
    topic = make_topic(admin)
    assert user.list_offset(topic, 0, -1).error_code == E.TOPIC_AUTHORIZATION_FAILED
    O = messages.OffsetForLeaderEpochRequest
    request = O(replica_id=-1, topics=[O.OffsetForLeaderTopic(topic=topic, partitions=[
        O.OffsetForLeaderPartition(partition=0, current_leader_epoch=-1, leader_epoch=0)])])
    code = lambda: user.request(23, 4, request).topics[0].partitions[0].error_code  # noqa: E731
    assert code() == E.TOPIC_AUTHORIZATION_FAILED
    grant(admin, RT.TOPIC, topic, Op.READ)          # READ implies DESCRIBE
    assert user.list_offset(topic, 0, -1).error_code == 0
    assert code() == 0


# ----------------------------------------------------------------------------------- metadata

def test_metadata_hides_topics_the_principal_may_not_describe(admin, user):
    hidden, shown = make_topic(admin, "hidden"), make_topic(admin, "shown")
    grant(admin, RT.TOPIC, shown, Op.DESCRIBE)
    listed = {t.name for t in metadata(user, None).topics}
    assert shown in listed and hidden not in listed
    named = {t.name: t.error_code for t in metadata(user, [hidden, shown, "absent-x"]).topics}
    # Unauthorized and absent look the same: existence is not revealed.
    assert named == {hidden: E.TOPIC_AUTHORIZATION_FAILED, shown: 0,
                     "absent-x": E.TOPIC_AUTHORIZATION_FAILED}
    assert all(not t.partitions for t in metadata(user, [hidden]).topics)


def test_metadata_authorized_operations(admin, user):
    topic = make_topic(admin)
    grant(admin, RT.TOPIC, topic, Op.WRITE)
    response = metadata(user, [topic], version=10, operations=True)
    assert response.topics[0].topic_authorized_operations == (1 << Op.WRITE) | (1 << Op.DESCRIBE)
    assert response.cluster_authorized_operations == 0       # no DESCRIBE on the cluster
    admin_view = metadata(admin, [topic], version=10, operations=True)
    assert admin_view.cluster_authorized_operations == sum(
        1 << op for op in (Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS,
                           Op.IDEMPOTENT_WRITE, Op.ALTER, Op.DESCRIBE))
    not_asked = metadata(user, [topic], version=10)
    assert not_asked.topics[0].topic_authorized_operations == -(2 ** 31)


def test_metadata_auto_creation_needs_create(admin, user):
    name = unique("auto")
    grant(admin, RT.TOPIC, name, Op.DESCRIBE)
    [topic] = metadata(user, [name], auto_create=True).topics
    assert topic.error_code == E.TOPIC_AUTHORIZATION_FAILED
    assert name not in {t.name for t in metadata(admin, None).topics}
    grant(admin, RT.TOPIC, name, Op.CREATE)
    [topic] = metadata(user, [name], auto_create=True).topics   # creates it, answers it unknown
    assert topic.error_code == E.UNKNOWN_TOPIC_OR_PARTITION
    [topic] = metadata(user, [name], auto_create=True).topics
    assert topic.error_code == 0 and topic.partitions


# ------------------------------------------------------------------------------ topic admin

def create_topic(client, name):
    T = messages.CreateTopicsRequest
    return client.request(19, 7, T(topics=[T.CreatableTopic(
        name=name, num_partitions=1, replication_factor=1)], timeout_ms=5000)).topics[0]


def test_create_topics_needs_create_on_cluster_or_topic(admin, user):
    name = unique("team")
    result = create_topic(user, name)
    assert result.error_code == E.TOPIC_AUTHORIZATION_FAILED
    assert name not in {t.name for t in metadata(admin, None).topics}
    prefix = name.split("-")[0] + "-" + name.split("-")[1][:4]
    grant(admin, RT.TOPIC, prefix, Op.CREATE, pattern=PT.PREFIXED)
    result = create_topic(user, name)
    assert result.error_code == 0
    # Created, but without DESCRIBE_CONFIGS its settings stay hidden (KIP-525), as in Kafka 3.9.
    assert result.configs == [] and result.topic_config_error_code == E.TOPIC_AUTHORIZATION_FAILED
    assert (result.num_partitions, result.replication_factor) == (-1, -1)
    assert name in {t.name for t in metadata(admin, None).topics}


def test_delete_topics_needs_delete(admin, user):
    topic = make_topic(admin)
    D = messages.DeleteTopicsRequest
    topic_id = next(t.topic_id for t in metadata(admin, [topic]).topics)
    response = user.request(20, 6, D(topics=[D.DeleteTopicState(name=topic),
                                             D.DeleteTopicState(name=None, topic_id=topic_id)],
                                     timeout_ms=5000))
    assert [(r.name, r.error_code) for r in response.responses] == [
        (topic, E.TOPIC_AUTHORIZATION_FAILED), (None, E.TOPIC_AUTHORIZATION_FAILED)]
    assert topic in {t.name for t in metadata(admin, None).topics}
    grant(admin, RT.TOPIC, topic, Op.DELETE)
    response = user.request(20, 6, D(topics=[D.DeleteTopicState(name=topic)], timeout_ms=5000))
    assert response.responses[0].error_code == 0


def test_create_partitions_needs_alter(admin, user):
    topic = make_topic(admin)
    C = messages.CreatePartitionsRequest
    request = C(topics=[C.CreatePartitionsTopic(name=topic, count=3, assignments=None)],
                timeout_ms=5000, validate_only=False)
    assert user.request(37, 3, request).results[0].error_code == E.TOPIC_AUTHORIZATION_FAILED
    assert len(metadata(admin, [topic]).topics[0].partitions) == 1
    grant(admin, RT.TOPIC, topic, Op.ALTER)
    assert user.request(37, 3, request).results[0].error_code == 0


def test_delete_records_needs_delete(admin, user):
    topic = make_topic(admin)
    admin.produce(topic, 0, batch([b"a", b"b"]))
    D = messages.DeleteRecordsRequest
    request = D(topics=[D.DeleteRecordsTopic(name=topic, partitions=[
        D.DeleteRecordsPartition(partition_index=0, offset=2)])], timeout_ms=5000)
    assert user.request(21, 2, request).topics[0].partitions[0].error_code == \
        E.TOPIC_AUTHORIZATION_FAILED
    assert admin.list_offset(topic, 0, -2).offset == 0
    grant(admin, RT.TOPIC, topic, Op.DELETE)
    assert user.request(21, 2, request).topics[0].partitions[0].error_code == 0


def test_configs_need_describe_configs_and_alter_configs(admin, user):
    topic = make_topic(admin)
    D = messages.DescribeConfigsRequest
    describe = D(resources=[D.DescribeConfigsResource(resource_type=TOPIC_CONFIG, resource_name=topic,
                                                      configuration_keys=None),
                            D.DescribeConfigsResource(resource_type=BROKER_CONFIG, resource_name="1",
                                                      configuration_keys=None)],
                 include_synonyms=False, include_documentation=False)
    results = user.request(32, 4, describe).results
    assert [(r.error_code, r.configs) for r in results] == [
        (E.TOPIC_AUTHORIZATION_FAILED, []), (E.CLUSTER_AUTHORIZATION_FAILED, [])]
    I = messages.IncrementalAlterConfigsRequest
    alter = I(resources=[I.AlterConfigsResource(resource_type=TOPIC_CONFIG, resource_name=topic,
                                                configs=[I.AlterableConfig(
                                                    name="retention.ms", config_operation=0,
                                                    value="1234")])], validate_only=False)
    assert user.request(44, 1, alter).responses[0].error_code == E.TOPIC_AUTHORIZATION_FAILED
    A = messages.AlterConfigsRequest
    legacy = A(resources=[A.AlterConfigsResource(resource_type=BROKER_CONFIG, resource_name="",
                                                 configs=[])], validate_only=True)
    assert user.request(33, 2, legacy).responses[0].error_code == E.CLUSTER_AUTHORIZATION_FAILED
    grant(admin, RT.TOPIC, topic, Op.ALTER_CONFIGS)        # implies DESCRIBE_CONFIGS
    assert user.request(44, 1, alter).responses[0].error_code == 0
    topic_result = user.request(32, 4, describe).results[0]
    assert topic_result.error_code == 0
    assert {c.name: c.value for c in topic_result.configs}["retention.ms"] == "1234"


# ------------------------------------------------------------------------------------ groups

def join(client, group):
    J = messages.JoinGroupRequest
    return client.request(11, 9, J(group_id=group, session_timeout_ms=10000,
                                   rebalance_timeout_ms=10000, member_id="", group_instance_id=None,
                                   protocol_type="consumer", protocols=[
                                       J.JoinGroupRequestProtocol(name="range", metadata=b"")],
                                   reason=None))


def find_coordinator(client, key, key_type=0):
    F = messages.FindCoordinatorRequest
    return client.request(10, 4, F(key_type=key_type, coordinator_keys=[key])).coordinators[0]


def commit(client, group, topic, offset=1, version=9):
    O = messages.OffsetCommitRequest
    return client.request(8, version, O(
        group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        topics=[O.OffsetCommitRequestTopic(name=topic, partitions=[
            O.OffsetCommitRequestPartition(partition_index=0, committed_offset=offset,
                                           committed_leader_epoch=-1, committed_metadata="")])]))


def fetch_offsets(client, group, topics):
    O = messages.OffsetFetchRequest
    return client.request(9, 9, O(groups=[O.OffsetFetchRequestGroup(
        group_id=group, member_id=None, member_epoch=-1,
        topics=None if topics is None else [O.OffsetFetchRequestTopics(name=t, partition_indexes=[0])
                                            for t in topics])], require_stable=False)).groups[0]


def test_group_membership_apis_need_group_read(admin, user):
    group = unique("g")
    assert find_coordinator(user, group).error_code == E.GROUP_AUTHORIZATION_FAILED
    assert join(user, group).error_code == E.GROUP_AUTHORIZATION_FAILED
    S, H, L = messages.SyncGroupRequest, messages.HeartbeatRequest, messages.LeaveGroupRequest
    assert user.request(14, 5, S(group_id=group, generation_id=1, member_id="m",
                                 group_instance_id=None, protocol_type="consumer",
                                 protocol_name="range", assignments=[])).error_code == \
        E.GROUP_AUTHORIZATION_FAILED
    assert user.request(12, 4, H(group_id=group, generation_id=1, member_id="m",
                                 group_instance_id=None)).error_code == E.GROUP_AUTHORIZATION_FAILED
    assert user.request(13, 5, L(group_id=group, members=[L.MemberIdentity(
        member_id="m", group_instance_id=None, reason=None)])).error_code == \
        E.GROUP_AUTHORIZATION_FAILED
    grant(admin, RT.GROUP, group, Op.READ)
    assert find_coordinator(user, group).error_code == 0      # READ implies DESCRIBE
    # Joined the group (first join of a v4+ client: MEMBER_ID_REQUIRED, not an auth error)
    assert join(user, group).error_code == E.MEMBER_ID_REQUIRED


def test_offset_commit_and_fetch(admin, user):
    group, topic, other = unique("g"), make_topic(admin), make_topic(admin)
    assert commit(user, group, topic).topics[0].partitions[0].error_code == \
        E.GROUP_AUTHORIZATION_FAILED
    assert fetch_offsets(user, group, [topic]).error_code == E.GROUP_AUTHORIZATION_FAILED
    grant(admin, RT.GROUP, group, Op.READ)
    assert commit(user, group, topic).topics[0].partitions[0].error_code == \
        E.TOPIC_AUTHORIZATION_FAILED
    grant(admin, RT.TOPIC, topic, Op.READ)
    assert commit(user, group, topic, offset=7).topics[0].partitions[0].error_code == 0
    assert commit(admin, group, other, offset=3).topics[0].partitions[0].error_code == 0
    # The user sees its topic's offset, not the other topic's (not even in "all offsets").
    every = fetch_offsets(user, group, None)
    assert [(t.name, t.partitions[0].committed_offset) for t in every.topics] == [(topic, 7)]
    named = fetch_offsets(user, group, [topic, other])
    codes = {t.name: (t.partitions[0].error_code, t.partitions[0].committed_offset)
             for t in named.topics}
    assert codes == {topic: (0, 7), other: (E.TOPIC_AUTHORIZATION_FAILED, -1)}


def test_describe_list_delete_groups(admin, user):
    group, topic = unique("g"), make_topic(admin)
    assert commit(admin, group, topic).topics[0].partitions[0].error_code == 0
    D = messages.DescribeGroupsRequest
    described = user.request(15, 5, D(groups=[group], include_authorized_operations=True)).groups[0]
    assert described.error_code == E.GROUP_AUTHORIZATION_FAILED
    listed = user.request(16, 5, messages.ListGroupsRequest(states_filter=[], types_filter=[]))
    assert group not in {g.group_id for g in listed.groups}
    G = messages.DeleteGroupsRequest
    assert user.request(42, 2, G(groups_names=[group])).results[0].error_code == \
        E.GROUP_AUTHORIZATION_FAILED
    O = messages.OffsetDeleteRequest
    offset_delete = O(group_id=group, topics=[O.OffsetDeleteRequestTopic(
        name=topic, partitions=[O.OffsetDeleteRequestPartition(partition_index=0)])])
    assert user.request(47, 0, offset_delete).error_code == E.GROUP_AUTHORIZATION_FAILED
    assert fetch_offsets(admin, group, [topic]).topics[0].partitions[0].committed_offset == 1

    grant(admin, RT.GROUP, group, Op.DESCRIBE)
    described = user.request(15, 5, D(groups=[group], include_authorized_operations=True)).groups[0]
    assert described.error_code == 0 and described.authorized_operations == 1 << Op.DESCRIBE
    listed = user.request(16, 5, messages.ListGroupsRequest(states_filter=[], types_filter=[]))
    assert group in {g.group_id for g in listed.groups}
    grant(admin, RT.GROUP, group, Op.DELETE)
    response = user.request(47, 0, offset_delete)
    assert response.topics[0].partitions[0].error_code == E.TOPIC_AUTHORIZATION_FAILED
    assert user.request(42, 2, G(groups_names=[group])).results[0].error_code == 0


# ------------------------------------------------------------------------------ transactions

def init_producer_id(client, transactional_id):
    I = messages.InitProducerIdRequest
    return client.request(22, 5, I(transactional_id=transactional_id, transaction_timeout_ms=60000,
                                   producer_id=-1, producer_epoch=-1))


def test_idempotent_producer_needs_idempotent_write_or_write_on_a_topic(secured, admin):
    # A third identity (host 127.0.0.3) that no other test grants anything.
    with HostClient(secured.port, "127.0.0.3") as fresh:
        assert init_producer_id(fresh, None).error_code == E.CLUSTER_AUTHORIZATION_FAILED
        grant(admin, RT.TOPIC, make_topic(admin), Op.WRITE, host="127.0.0.3")
        assert init_producer_id(fresh, None).error_code == 0


def test_transaction_apis_need_the_transactional_id(admin, user):
    txn, group, topic = unique("txn"), unique("g"), make_topic(admin)
    assert init_producer_id(user, txn).error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert find_coordinator(user, txn, key_type=1).error_code == \
        E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    A = messages.AddPartitionsToTxnRequest
    add = A(v3_and_below_transactional_id=txn, v3_and_below_producer_id=1,
            v3_and_below_producer_epoch=0, v3_and_below_topics=[A.AddPartitionsToTxnTopic(
                name=topic, partitions=[0])])
    codes = user.request(24, 3, add).results_by_topic_v3_and_below[0].results_by_partition
    assert [c.partition_error_code for c in codes] == [E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED]
    O = messages.AddOffsetsToTxnRequest
    assert user.request(25, 4, O(transactional_id=txn, producer_id=1, producer_epoch=0,
                                 group_id=group)).error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    T = messages.EndTxnRequest
    assert user.request(26, 4, T(transactional_id=txn, producer_id=1, producer_epoch=0,
                                 committed=True)).error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    C = messages.TxnOffsetCommitRequest
    txn_commit = C(transactional_id=txn, group_id=group, producer_id=1, producer_epoch=0,
                   generation_id=-1, member_id="", group_instance_id=None, topics=[
                       C.TxnOffsetCommitRequestTopic(name=topic, partitions=[
                           C.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=1,
                                                             committed_leader_epoch=-1,
                                                             committed_metadata="")])])
    assert user.request(28, 4, txn_commit).topics[0].partitions[0].error_code == \
        E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    D = messages.DescribeTransactionsRequest
    assert user.request(65, 0, D(transactional_ids=[txn])).transaction_states[0].error_code == \
        E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED

    # With WRITE on the id (and READ on the group but not the topic):
    grant(admin, RT.TRANSACTIONAL_ID, txn, Op.WRITE)
    assert find_coordinator(user, txn, key_type=1).error_code == 0    # as a client does first
    produced = init_producer_id(user, txn)
    assert produced.error_code == 0
    add.v3_and_below_producer_id, add.v3_and_below_producer_epoch = \
        produced.producer_id, produced.producer_epoch
    codes = user.request(24, 3, add).results_by_topic_v3_and_below[0].results_by_partition
    assert [c.partition_error_code for c in codes] == [E.TOPIC_AUTHORIZATION_FAILED]
    O2 = O(transactional_id=txn, producer_id=produced.producer_id,
           producer_epoch=produced.producer_epoch, group_id=group)
    assert user.request(25, 4, O2).error_code == E.GROUP_AUTHORIZATION_FAILED
    grant(admin, RT.TOPIC, topic, Op.WRITE)
    codes = user.request(24, 3, add).results_by_topic_v3_and_below[0].results_by_partition
    assert [c.partition_error_code for c in codes] == [0]
    described = user.request(65, 0, D(transactional_ids=[txn])).transaction_states[0]
    assert described.error_code == 0 and [t.topic for t in described.topics] == [topic]
    listed = user.request(66, 1, messages.ListTransactionsRequest(
        state_filters=[], producer_id_filters=[], duration_filter=-1))
    assert [t.transactional_id for t in listed.transaction_states] == [txn]
    assert user.request(26, 4, T(transactional_id=txn, producer_id=produced.producer_id,
                                 producer_epoch=produced.producer_epoch,
                                 committed=False)).error_code == 0


def test_describe_producers_needs_read(admin, user):
    topic = make_topic(admin)
    D = messages.DescribeProducersRequest
    request = D(topics=[D.TopicRequest(name=topic, partition_indexes=[0])])
    assert user.request(61, 0, request).topics[0].partitions[0].error_code == \
        E.TOPIC_AUTHORIZATION_FAILED
    grant(admin, RT.TOPIC, topic, Op.READ)
    assert user.request(61, 0, request).topics[0].partitions[0].error_code == 0


# ----------------------------------------------------------------------------- cluster views

@pytest.fixture
def loner(secured):
    """Another principal on its own host (127.0.0.5): cluster-level grants stay with it."""
    with HostClient(secured.port, "127.0.0.5") as client:
        yield client


def test_cluster_apis(admin, loner):
    user, host = loner, "127.0.0.5"
    topic = make_topic(admin)
    cluster = user.request(60, 1, messages.DescribeClusterRequest(
        include_cluster_authorized_operations=True, endpoint_type=1))
    assert cluster.error_code == 0 and cluster.cluster_authorized_operations == 0
    T = messages.DescribeTopicPartitionsRequest
    page = user.request(75, 0, T(topics=[T.TopicRequest(name=topic)], response_partition_limit=10,
                                 cursor=None))
    assert [(t.name, t.error_code, t.partitions) for t in page.topics] == \
        [(topic, E.TOPIC_AUTHORIZATION_FAILED, [])]
    everything = user.request(75, 0, T(topics=[], response_partition_limit=1000, cursor=None))
    assert topic not in {t.name for t in everything.topics}
    logs = user.request(35, 4, messages.DescribeLogDirsRequest(topics=None))
    assert logs.error_code == E.CLUSTER_AUTHORIZATION_FAILED and logs.results == []
    L = messages.ElectLeadersRequest
    elect = user.request(43, 2, L(election_type=0, topic_partitions=[
        L.TopicPartitions(topic=topic, partitions=[0])], timeout_ms=1000))
    assert elect.error_code == E.CLUSTER_AUTHORIZATION_FAILED
    elect = user.request(43, 0, L(topic_partitions=[    # v0: no top-level code, the partition's only
        L.TopicPartitions(topic=topic, partitions=[0])], timeout_ms=1000))
    assert [p.error_code for p in elect.replica_election_results[0].partition_result] == \
        [E.CLUSTER_AUTHORIZATION_FAILED]
    Q = messages.DescribeQuorumRequest
    quorum = user.request(55, 2, Q(topics=[Q.TopicData(topic_name="__cluster_metadata",
                                                      partitions=[Q.PartitionData(partition_index=0)])]))
    assert quorum.error_code == E.CLUSTER_AUTHORIZATION_FAILED
    grant(admin, RT.TOPIC, topic, Op.DESCRIBE, host=host)
    page = user.request(75, 0, T(topics=[T.TopicRequest(name=topic)], response_partition_limit=10,
                                 cursor=None))
    assert page.topics[0].error_code == 0 and page.topics[0].topic_authorized_operations == \
        1 << Op.DESCRIBE
    grant(admin, RT.CLUSTER, "kafka-cluster", Op.DESCRIBE, host=host)
    cluster = user.request(60, 1, messages.DescribeClusterRequest(
        include_cluster_authorized_operations=True, endpoint_type=1))
    assert cluster.cluster_authorized_operations == 1 << Op.DESCRIBE
    assert user.request(35, 4, messages.DescribeLogDirsRequest(topics=None)).error_code == 0


def test_denials_are_counted_and_logged(secured, user, caplog):
    caplog.set_level("INFO", logger="odradek.authorizer")
    before = secured.broker.authorizer.denied
    topic = unique("never")
    user.produce(topic, 0, batch([b"x"]))
    assert secured.broker.authorizer.denied > before
    assert any("Denied operation = WRITE" in r.getMessage() and topic in r.getMessage()
               and USER_HOST in r.getMessage() for r in caplog.records)
    assert b"kafka_server_authorizermetrics_authorizationdenied_total" in \
        secured.broker.metrics.render()


@pytest.fixture
def newcomer(secured):
    """A principal on its own host (127.0.0.4) that no other test grants anything."""
    with HostClient(secured.port, "127.0.0.4") as client:
        yield client


def test_scram_and_broker_config_apis_need_cluster_rights(admin, newcomer):
    user = newcomer
    S = messages.AlterUserScramCredentialsRequest
    upsert = S(deletions=[], upsertions=[S.ScramCredentialUpsertion(
        name="carol", mechanism=1, iterations=4096, salt=b"s" * 16, salted_password=b"p" * 32)])
    assert [r.error_code for r in user.request(51, 0, upsert).results] == \
        [E.CLUSTER_AUTHORIZATION_FAILED]
    described = user.request(50, 0, messages.DescribeUserScramCredentialsRequest(users=None))
    assert described.error_code == E.CLUSTER_AUTHORIZATION_FAILED and described.results == []
    assert admin.request(50, 0, messages.DescribeUserScramCredentialsRequest(
        users=None)).results == []                                    # nothing was stored
    A = messages.AlterConfigsRequest
    legacy = A(resources=[A.AlterConfigsResource(resource_type=BROKER_CONFIG, resource_name="",
                                                 configs=[])], validate_only=True)
    grant(admin, RT.CLUSTER, "kafka-cluster", Op.ALTER_CONFIGS, Op.ALTER, host="127.0.0.4")
    assert user.request(33, 2, legacy).responses[0].error_code == 0
    assert [r.error_code for r in user.request(51, 0, upsert).results] == [0]
    # ALTER does not imply DESCRIBE_CONFIGS; ALTER_CONFIGS does.
    D = messages.DescribeConfigsRequest
    broker_configs = user.request(32, 4, D(resources=[D.DescribeConfigsResource(
        resource_type=BROKER_CONFIG, resource_name="1", configuration_keys=["num.partitions"])],
        include_synonyms=False, include_documentation=False)).results[0]
    assert broker_configs.error_code == 0 and broker_configs.configs


def test_follower_fetch_needs_cluster_action(admin, user):
    topic = make_topic(admin)
    admin.produce(topic, 0, batch([b"replicated"]))
    grant(admin, RT.TOPIC, topic, Op.READ)       # READ is not enough for a replica
    F = messages.FetchRequest
    follower = F(replica_id=2, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                 session_id=0, session_epoch=-1, topics=[F.FetchTopic(topic=topic, partitions=[
                     F.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])],
                 forgotten_topics_data=[], rack_id="")
    [partition] = user.request(1, 11, follower).responses[0].partitions
    assert partition.error_code == E.TOPIC_AUTHORIZATION_FAILED and not partition.records


def test_denial_log_is_rate_limited(caplog):
    from broker.security.authorizer import LOG_BURST, StandardAuthorizer
    from broker.security.principal import KafkaPrincipal
    caplog.set_level("INFO", logger="odradek.authorizer")
    auth = StandardAuthorizer()
    for _ in range(LOG_BURST * 5):
        assert not auth.authorize(KafkaPrincipal("User", "eve"), "10.0.0.9", Op.READ, RT.TOPIC,
                                  "secrets", api="Fetch")
    lines = [r.getMessage() for r in caplog.records if r.name == "odradek.authorizer"]
    assert auth.denied == LOG_BURST * 5
    assert LOG_BURST <= len(lines) <= LOG_BURST * 2 + 2      # a second boundary may fall inside
    assert "Principal = User:eve is Denied operation = READ from host = 10.0.0.9" in lines[0]
