"""Admin APIs over the raw protocol: topics, partitions, records, configs, cluster views."""

import uuid

from protocol import ErrorCode, messages

from tests.broker.raw_client import batch

TOPIC, BROKER = 2, 4


def create(client, *topics, validate_only=False, version=7):
    T = messages.CreateTopicsRequest
    return client.request(19, version, T(topics=[
        T.CreatableTopic(name=name, num_partitions=partitions, replication_factor=factor,
                         configs=[T.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()])
        for name, partitions, factor, configs in topics], timeout_ms=5000,
        validate_only=validate_only)).topics


def test_create_topics_results_and_errors(client):
    results = create(client, ("good", 2, 1, {"cleanup.policy": "compact"}), ("bad/name", 1, 1, {}),
                     ("cfg", 1, 1, {"retention.ms": "soon"}), ("unknown-cfg", 1, 1, {"no.such": "1"}),
                     ("zero", 0, 1, {}), ("rf", 1, 3, {}))
    codes = {r.name: r.error_code for r in results}
    assert all(r.configs == [] for r in results if r.error_code)   # never null, as Kafka
    assert codes == {"good": 0, "bad/name": ErrorCode.INVALID_TOPIC_EXCEPTION,
                     "cfg": ErrorCode.INVALID_CONFIG, "unknown-cfg": ErrorCode.INVALID_CONFIG,
                     "zero": ErrorCode.INVALID_PARTITIONS, "rf": ErrorCode.INVALID_REPLICATION_FACTOR}
    good = results[0]
    assert good.num_partitions == 2 and good.replication_factor == 1
    configs = {c.name: c for c in good.configs}
    assert configs["cleanup.policy"].value == "compact"
    assert configs["cleanup.policy"].config_source == 1   # DYNAMIC_TOPIC_CONFIG
    assert configs["retention.ms"].config_source == 5     # DEFAULT_CONFIG
    assert create(client, ("good", 1, 1, {}))[0].error_code == ErrorCode.TOPIC_ALREADY_EXISTS
    # defaults (-1) and validate_only
    [dry] = create(client, ("dry", -1, -1, {}), validate_only=True)
    assert (dry.error_code, dry.num_partitions) == (0, 1)
    assert "dry" not in client.request(3, 12, messages.MetadataRequest(topics=None)).topics.__repr__()


def test_delete_topics_by_name_and_id(client):
    [created] = create(client, ("doomed", 1, 1, {}))
    create(client, ("doomed2", 1, 1, {}))
    D = messages.DeleteTopicsRequest
    response = client.request(20, 6, D(topics=[D.DeleteTopicState(name=None, topic_id=created.topic_id),
                                               D.DeleteTopicState(name="doomed2"),
                                               D.DeleteTopicState(name="never")], timeout_ms=5000))
    codes = [(r.name, r.error_code) for r in response.responses]
    assert codes == [("doomed2", 0), ("never", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), ("doomed", 0)] \
        or sorted(codes) == sorted([("doomed", 0), ("doomed2", 0),
                                    ("never", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)])
    response = client.request(20, 4, D(topic_names=["doomed"], timeout_ms=5000))
    assert response.responses[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    # the topic can be created again, empty
    create(client, ("doomed", 1, 1, {}))
    assert client.list_offset("doomed", 0, -1).offset == 0


def test_delete_topics_naming_a_topic_by_both_or_neither_or_twice_is_invalid(client):
    """As Kafka 3.9 (checked side by side): INVALID_REQUEST with its reason, nothing deleted; a name or
    id asked twice gets one answer."""
    [kept] = create(client, ("kept", 1, 1, {}))
    D, zero = messages.DeleteTopicsRequest, uuid.UUID(int=0)

    def delete(*states, version=6):
        body = D(topics=list(states), timeout_ms=5000) if version >= 6 else \
            D(topic_names=list(states), timeout_ms=5000)
        return [(r.name, r.error_code, r.error_message) for r in client.request(20, version, body).responses]
    invalid = ErrorCode.INVALID_REQUEST
    assert delete(D.DeleteTopicState(name="kept", topic_id=kept.topic_id)) == [
        ("kept", invalid, "You may not specify both topic name and topic id.")]
    assert delete(D.DeleteTopicState(name=None, topic_id=zero)) == [
        (None, invalid, "Neither topic name nor id were specified.")]
    assert delete(D.DeleteTopicState(name="kept", topic_id=zero), D.DeleteTopicState(name="kept", topic_id=zero)) \
        == [("kept", invalid, "Duplicate topic name.")]
    assert delete(*[D.DeleteTopicState(name=None, topic_id=kept.topic_id)] * 2) == [
        (None, invalid, "Duplicate topic id.")]
    assert delete("kept", "kept", version=5) == [("kept", invalid, "Duplicate topic name.")]
    assert client.list_offset("kept", 0, -1).error_code == 0
    assert delete(D.DeleteTopicState(name=None, topic_id=kept.topic_id)) == [("kept", 0, None)]


def test_create_partitions(client):
    create(client, ("grow", 1, 1, {}))
    C = messages.CreatePartitionsRequest
    response = client.request(37, 3, C(topics=[C.CreatePartitionsTopic(name="grow", count=3),
                                               C.CreatePartitionsTopic(name="missing", count=2)],
                                       timeout_ms=5000, validate_only=False))
    assert [(r.name, r.error_code) for r in response.results] == [
        ("grow", 0), ("missing", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    assert client.produce("grow", 2, batch([b"x"])).error_code == 0
    response = client.request(37, 3, C(topics=[C.CreatePartitionsTopic(name="grow", count=2)],
                                       timeout_ms=5000, validate_only=False))
    assert response.results[0].error_code == ErrorCode.INVALID_PARTITIONS


def test_a_name_asked_twice_gets_one_answer_where_kafka_puts_it(client):
    """Kafka 3.9 answers a name asked more than once once, INVALID_REQUEST: after the other topics
    in CreateTopics, before them in CreatePartitions."""
    create(client, ("twice-a", 1, 1, {}))
    created = create(client, ("twice-x", 1, 1, {}), ("twice-y", 1, 1, {}), ("twice-x", 1, 1, {}))
    assert [(r.name, r.error_code) for r in created] == [("twice-y", 0), ("twice-x", ErrorCode.INVALID_REQUEST)]
    C = messages.CreatePartitionsRequest
    response = client.request(37, 3, C(topics=[C.CreatePartitionsTopic(name=n, count=2)
                                               for n in ("twice-y", "twice-a", "twice-y")],
                                       timeout_ms=5000, validate_only=False))
    assert [(r.name, r.error_code) for r in response.results] == [
        ("twice-y", ErrorCode.INVALID_REQUEST), ("twice-a", 0)]


def test_delete_records_moves_the_log_start(client):
    create(client, ("trim", 1, 1, {}))
    client.produce("trim", 0, batch([b"a", b"b", b"c", b"d"]))
    R = messages.DeleteRecordsRequest
    response = client.request(21, 2, R(topics=[R.DeleteRecordsTopic(name="trim", partitions=[
        R.DeleteRecordsPartition(partition_index=0, offset=2)])], timeout_ms=5000))
    result = response.topics[0].partitions[0]
    assert (result.error_code, result.low_watermark) == (0, 2)
    assert client.list_offset("trim", 0, -2).offset == 2
    assert client.fetch("trim", 0, 0).responses[0].partitions[0].error_code == \
        ErrorCode.OFFSET_OUT_OF_RANGE
    response = client.request(21, 2, R(topics=[R.DeleteRecordsTopic(name="trim", partitions=[
        R.DeleteRecordsPartition(partition_index=0, offset=99)])], timeout_ms=5000))
    assert response.topics[0].partitions[0].error_code == ErrorCode.OFFSET_OUT_OF_RANGE


def describe(client, resource_type, name, keys=None, synonyms=True):
    D = messages.DescribeConfigsRequest
    response = client.request(32, 4, D(resources=[D.DescribeConfigsResource(
        resource_type=resource_type, resource_name=name, configuration_keys=keys)],
        include_synonyms=synonyms, include_documentation=False))
    return response.results[0]


def test_describe_and_alter_configs(client):
    create(client, ("conf", 1, 1, {"retention.ms": "1000"}))
    result = describe(client, TOPIC, "conf", ["retention.ms", "segment.bytes"])
    entries = {c.name: c for c in result.configs}
    assert entries["retention.ms"].value == "1000" and entries["retention.ms"].config_source == 1
    assert [(s.name, s.source) for s in entries["retention.ms"].synonyms][0] == ("retention.ms", 1)
    assert entries["segment.bytes"].config_type == 3    # INT
    assert describe(client, TOPIC, "absent").error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert len(describe(client, BROKER, "1").configs) > 100
    assert describe(client, BROKER, "7").error_code == ErrorCode.INVALID_REQUEST

    I = messages.IncrementalAlterConfigsRequest
    response = client.request(44, 1, I(resources=[I.AlterConfigsResource(
        resource_type=TOPIC, resource_name="conf", configs=[
            I.AlterableConfig(name="retention.ms", config_operation=1, value=None),
            I.AlterableConfig(name="cleanup.policy", config_operation=0, value="compact")])],
        validate_only=False))
    assert response.responses[0].error_code == 0
    entries = {c.name: c for c in describe(client, TOPIC, "conf").configs}
    assert entries["retention.ms"].config_source == 5 and entries["retention.ms"].value == "604800000"
    assert entries["cleanup.policy"].value == "compact"
    response = client.request(44, 1, I(resources=[I.AlterConfigsResource(
        resource_type=TOPIC, resource_name="conf", configs=[
            I.AlterableConfig(name="segment.bytes", config_operation=0, value="12")])],
        validate_only=False))
    assert response.responses[0].error_code == ErrorCode.INVALID_CONFIG

    # APPEND and SUBTRACT on a list start from its default; the last item taken leaves an empty list
    # (Kafka 3.9: an override of "", not the default back)
    def step(name, op, value):
        answer = client.request(44, 1, I(validate_only=False, resources=[I.AlterConfigsResource(
            resource_type=TOPIC, resource_name="listed", configs=[
                I.AlterableConfig(name=name, config_operation=op, value=value)])])).responses[0]
        entry = describe(client, TOPIC, "listed", [name]).configs[0]
        return answer.error_code, answer.error_message, entry.value, entry.config_source
    create(client, ("listed", 1, 1, {}))
    assert step("cleanup.policy", 2, "compact") == (0, None, "delete,compact", 1)
    assert step("cleanup.policy", 3, "delete,compact") == (0, None, "", 1)
    assert step("cleanup.policy", 1, None) == (0, None, "delete", 5)
    assert step("cleanup.policy", 3, "delete") == (0, None, "", 1)
    assert step("retention.ms", 2, "5") == (
        ErrorCode.INVALID_CONFIG, "Can't APPEND to key retention.ms because its type is not LIST.",
        "604800000", 5)

    # a cluster-wide dynamic broker default reaches topics that do not override it
    response = client.request(44, 1, I(resources=[I.AlterConfigsResource(
        resource_type=BROKER, resource_name="", configs=[
            I.AlterableConfig(name="log.retention.ms", config_operation=0, value="5000")])],
        validate_only=False))
    assert response.responses[0].error_code == 0
    entries = {c.name: c for c in describe(client, TOPIC, "conf").configs}
    assert (entries["retention.ms"].value, entries["retention.ms"].config_source) == ("5000", 3)

    A = messages.AlterConfigsRequest
    response = client.request(33, 2, A(resources=[A.AlterConfigsResource(
        resource_type=TOPIC, resource_name="conf", configs=[
            A.AlterableConfig(name="max.message.bytes", value="2000")])], validate_only=False))
    assert response.responses[0].error_code == 0
    entries = {c.name: c for c in describe(client, TOPIC, "conf").configs}
    assert entries["max.message.bytes"].value == "2000"
    assert entries["cleanup.policy"].value == "delete"     # legacy AlterConfigs replaces the set
    response = client.request(33, 2, A(resources=[A.AlterConfigsResource(    # a key twice: as Kafka 3.9
        resource_type=TOPIC, resource_name="conf", configs=[
            A.AlterableConfig(name="segment.ms", value="100000"),
            A.AlterableConfig(name="segment.ms", value="200000")])], validate_only=False))
    assert (response.responses[0].error_code, response.responses[0].error_message) == (
        ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
    assert client.produce("conf", 0, batch([b"x" * 3000])).error_code == ErrorCode.MESSAGE_TOO_LARGE


def test_described_configs_carry_an_empty_message_not_null(client):
    """Kafka 3.9 answers every DescribeConfigs result, at every version, with error_message ''
    (never null): on success, and on an unknown topic."""
    create(client, ("msg", 1, 1, {}))
    D = messages.DescribeConfigsRequest
    resources = [(TOPIC, "msg"), (BROKER, "1"), (BROKER, ""), (8, "1"), (TOPIC, "absent")]
    for version in range(5):
        response = client.request(32, version, D(resources=[
            D.DescribeConfigsResource(resource_type=kind, resource_name=name, configuration_keys=None)
            for kind, name in resources]))
        assert [(r.error_code, r.error_message) for r in response.results] == \
            [(0, "")] * 4 + [(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "")], version


def test_cluster_views(client, broker):
    create(client, ("view-a", 3, 1, {}), ("view-b", 2, 1, {}))
    cluster = client.request(60, 1, messages.DescribeClusterRequest(
        include_cluster_authorized_operations=True, endpoint_type=1))
    assert cluster.error_code == 0 and cluster.controller_id == 1
    assert [(b.broker_id, b.port) for b in cluster.brokers] == [(1, broker.port)]
    # asking a broker listener for controllers, or for a kind it does not know: Kafka 3.9's answers
    for endpoint, code, message in (
            (2, ErrorCode.MISMATCHED_ENDPOINT_TYPE,
             "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER"),
            (0, ErrorCode.UNSUPPORTED_ENDPOINT_TYPE, "Unsupported endpoint type 0")):
        refused = client.request(60, 1, messages.DescribeClusterRequest(endpoint_type=endpoint))
        assert (refused.error_code, refused.error_message, refused.endpoint_type, refused.brokers) == \
            (code, message, 1, [])

    D = messages.DescribeTopicPartitionsRequest
    page = client.request(75, 0, D(topics=[], response_partition_limit=4, cursor=None))
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in page.topics] == \
        [("view-a", [0, 1, 2]), ("view-b", [0])]
    assert (page.next_cursor.topic_name, page.next_cursor.partition_index) == ("view-b", 1)
    page = client.request(75, 0, D(topics=[], response_partition_limit=4, cursor=page.next_cursor))
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in page.topics] == \
        [("view-b", [1])]
    assert page.next_cursor is None
    missing = client.request(75, 0, D(topics=[D.TopicRequest(name="nope")], cursor=None))
    assert missing.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    # a cursor at a negative partition: the request is refused topic by topic (Kafka 3.9)
    bad = client.request(75, 0, D(topics=[D.TopicRequest(name="view-a"), D.TopicRequest(name="nope")],
                                  response_partition_limit=4, cursor=D.Cursor(topic_name="view-a",
                                                                              partition_index=-1)))
    assert [(t.name, t.error_code, t.partitions) for t in bad.topics] == [
        ("view-a", ErrorCode.INVALID_REQUEST, []), ("nope", ErrorCode.INVALID_REQUEST, [])]
    assert bad.next_cursor is None

    client.produce("view-a", 0, batch([b"x" * 100]))
    L = messages.DescribeLogDirsRequest
    dirs = client.request(35, 4, L(topics=None))
    [result] = dirs.results
    sizes = {(t.name, p.partition_index): p.partition_size for t in result.topics for p in t.partitions}
    assert sizes[("view-a", 0)] > 100 and sizes[("view-b", 0)] == 0
    assert result.total_bytes > 0
    # v0 too, as Kafka 3.9 serves it (the same answer without totals)
    asked = L(topics=[L.DescribableLogDirTopic(topic="view-a", partitions=[0, 9])])
    [old] = client.request(35, 0, asked).results
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in old.topics] == [("view-a", [0])]

    E = messages.ElectLeadersRequest
    elect = client.request(43, 2, E(election_type=0, topic_partitions=[
        E.TopicPartitions(topic="view-a", partitions=[0, 9])], timeout_ms=1000))
    codes = [p.error_code for p in elect.replica_election_results[0].partition_result]
    assert codes == [ErrorCode.ELECTION_NOT_NEEDED, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    everything = client.request(43, 2, E(election_type=0, topic_partitions=None, timeout_ms=1000))
    # as Kafka 3.9: every topic appears, without the partitions that need no election
    assert [(t.topic, t.partition_result) for t in everything.replica_election_results] == [
        (name, []) for name in sorted(t.topic for t in everything.replica_election_results)]
    assert everything.replica_election_results
    bad = client.request(43, 2, E(election_type=5, topic_partitions=[
        E.TopicPartitions(topic="view-a", partitions=[0])], timeout_ms=1000))
    assert bad.error_code == ErrorCode.INVALID_REQUEST
    assert [(p.error_code, p.error_message) for p in bad.replica_election_results[0].partition_result] == [
        (ErrorCode.INVALID_REQUEST, "Unknown election type 5")]



def test_elect_leaders_without_time_left_times_out_every_requested_partition(client):
    # Kafka 3.9 with timeout_ms <= 0: REQUEST_TIMED_OUT at the top (v1+) and on each requested
    # partition as asked (duplicates, unknown topics and unknown election types alike), none for
    # "all partitions"; v0 has only the partitions' codes.
    create(client, ("elect-t", 2, 1, {}))
    E = messages.ElectLeadersRequest
    asked = [E.TopicPartitions(topic="elect-t", partitions=[0, 1, 0]),
             E.TopicPartitions(topic="nope", partitions=[3])]
    for version, timeout, election_type in ((2, 0, 0), (1, -1, 1), (2, 0, 5), (0, 0, 0)):
        answer = client.request(43, version, E(election_type=election_type, timeout_ms=timeout,
                                               topic_partitions=asked))
        assert answer.error_code == (ErrorCode.REQUEST_TIMED_OUT if version else 0)
        assert [(t.topic, [(p.partition_id, p.error_code, p.error_message) for p in t.partition_result])
                for t in answer.replica_election_results] == [
            ("elect-t", [(0, 7, None), (1, 7, None), (0, 7, None)]), ("nope", [(3, 7, None)])]
    everything = client.request(43, 2, E(election_type=0, topic_partitions=None, timeout_ms=0))
    assert (everything.error_code, everything.replica_election_results) == (7, [])
    nothing = client.request(43, 2, E(election_type=0, topic_partitions=[], timeout_ms=0))
    assert (nothing.error_code, nothing.replica_election_results) == (0, [])


def test_broker_logger_levels(client):
    BROKER_LOGGER = 8
    I = messages.IncrementalAlterConfigsRequest
    response = client.request(44, 1, I(resources=[
        I.AlterConfigsResource(resource_type=BROKER_LOGGER, resource_name="1", configs=[
            I.AlterableConfig(name="odradek.test", config_operation=0, value="DEBUG")]),
        I.AlterConfigsResource(resource_type=TOPIC, resource_name="absent", configs=[]),
        I.AlterConfigsResource(resource_type=BROKER_LOGGER, resource_name="1", configs=[
            I.AlterableConfig(name="odradek.test", config_operation=0, value="LOUD")])],
        validate_only=False))
    assert [r.error_code for r in response.responses] == [
        0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.INVALID_CONFIG]
    levels = {c.name: c.value for c in describe(client, BROKER_LOGGER, "1").configs}
    assert levels["odradek.test"] == "DEBUG"


def test_describe_quorum(client):
    Q = messages.DescribeQuorumRequest
    for version in (0, 1, 2):
        response = client.request(55, version, Q(topics=[Q.TopicData(
            topic_name="__cluster_metadata", partitions=[Q.PartitionData(partition_index=0)])]))
        [topic] = response.topics
        [partition] = topic.partitions
        assert partition.error_code == 0 and partition.leader_id == 1
        assert [v.replica_id for v in partition.current_voters] == [1]
