"""Admin requests at the versions older clients send, answered as Apache Kafka 3.9 answers them.

sarama 1.22 (Debian's golang-github-shopify-sarama-dev) sends DescribeConfigs v0 from ListTopics and
DescribeConfig whatever Kafka version it is configured for, and reads only the error *message* of each
resource; kafka-go 0.2.1 creates topics with CreateTopics v0. Kafka 3.9 serves all of these.
"""

from protocol import ErrorCode, messages

from tests.broker.test_admin_apis import BROKER, TOPIC, create

INVALID_REQUEST_TEXT = ("This most likely occurs because of a request being malformed by the client "
                        "library or the message was sent to an incompatible broker. See the broker "
                        "logs for more details.")


def describe_v0(client, *resources):
    D = messages.DescribeConfigsRequest
    return client.request(32, 0, D(resources=[
        D.DescribeConfigsResource(resource_type=t, resource_name=n, configuration_keys=keys)
        for t, n, keys in resources])).results


def test_describe_configs_v0(client):
    create(client, ("old-conf", 1, 1, {"retention.ms": "123456"}))
    [result] = describe_v0(client, (TOPIC, "old-conf", None))
    entries = {c.name: c for c in result.configs}
    assert result.error_code == 0 and len(entries) > 20
    assert entries["retention.ms"].value == "123456"
    assert entries["segment.bytes"].value == "1073741824"
    # Kafka 3.9 leaves IsDefault false in v0 answers, defaults included (sarama's ListTopics shows them)
    assert not any(c.is_default for c in result.configs)
    [result] = describe_v0(client, (TOPIC, "old-conf", ["retention.ms", "segment.ms"]))
    assert sorted((c.name, c.value) for c in result.configs) == [
        ("retention.ms", "123456"), ("segment.ms", "604800000")]
    [result] = describe_v0(client, (BROKER, "1", ["num.io.threads"]))
    assert [(c.name, c.read_only) for c in result.configs] == [("num.io.threads", False)]


def test_describe_configs_of_a_missing_topic_has_an_empty_message(client):
    for version in (0, 4):
        D = messages.DescribeConfigsRequest
        [result] = client.request(32, version, D(resources=[D.DescribeConfigsResource(
            resource_type=TOPIC, resource_name="absent", configuration_keys=None)])).results
        assert (result.error_code, result.error_message, result.configs) == (
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "", [])


def test_an_unknown_resource_type_fails_the_whole_describe(client):
    create(client, ("typed", 1, 1, {}))
    results = describe_v0(client, (TOPIC, "typed", None), (5, "1", None))
    assert [(r.resource_type, r.resource_name, r.error_code, r.error_message, r.configs)
            for r in results] == [(TOPIC, "typed", ErrorCode.INVALID_REQUEST, INVALID_REQUEST_TEXT, []),
                                  (5, "1", ErrorCode.INVALID_REQUEST, INVALID_REQUEST_TEXT, [])]
    A = messages.AlterConfigsRequest
    response = client.request(33, 0, A(resources=[
        A.AlterConfigsResource(resource_type=5, resource_name="1", configs=[]),
        A.AlterConfigsResource(resource_type=TOPIC, resource_name="absent", configs=[])],
        validate_only=True))
    assert [(r.error_code, r.error_message) for r in response.responses] == [
        (ErrorCode.INVALID_REQUEST, "Unknown resource type 5"),
        (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'absent' does not exist.")]


def test_create_and_delete_topics_v0_and_v1(client):
    T = messages.CreateTopicsRequest

    def topic(name, partitions=2):
        return T.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1,
                                assignments=[], configs=[T.CreatableTopicConfig(name="retention.ms",
                                                                                value="5000")])
    response = client.request(19, 0, T(topics=[topic("v0-topic"), topic("bad/name")], timeout_ms=5000))
    assert [(r.name, r.error_code) for r in response.topics] == [
        ("v0-topic", 0), ("bad/name", ErrorCode.INVALID_TOPIC_EXCEPTION)]
    response = client.request(19, 1, T(topics=[topic("v1-dry", 3), topic("v0-topic")], timeout_ms=5000,
                                       validate_only=True))
    assert [(r.name, r.error_code, r.error_message) for r in response.topics] == [
        ("v1-dry", 0, None),
        ("v0-topic", ErrorCode.TOPIC_ALREADY_EXISTS, "Topic 'v0-topic' already exists.")]
    metadata = client.request(3, 1, messages.MetadataRequest(topics=[
        messages.MetadataRequest.MetadataRequestTopic(name="v0-topic")]))
    assert len(metadata.topics[0].partitions) == 2
    [result] = describe_v0(client, (TOPIC, "v0-topic", ["retention.ms"]))
    assert [(c.name, c.value) for c in result.configs] == [("retention.ms", "5000")]

    D = messages.DeleteTopicsRequest
    response = client.request(20, 0, D(topic_names=["v0-topic", "v1-dry"], timeout_ms=5000))
    assert [(r.name, r.error_code) for r in response.responses] == [
        ("v0-topic", 0), ("v1-dry", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]


def test_topic_name_errors_read_as_kafkas(client):
    T = messages.CreateTopicsRequest
    names = ["", "..", "x" * 250, "bad/name"]
    response = client.request(19, 5, T(topics=[
        T.CreatableTopic(name=n, num_partitions=1, replication_factor=1, assignments=[], configs=[])
        for n in names], timeout_ms=5000, validate_only=True))
    assert [(r.error_code, r.error_message) for r in response.topics] == [
        (ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is invalid: the empty string is not allowed"),
        (ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is invalid: '..' is not allowed"),
        (ErrorCode.INVALID_TOPIC_EXCEPTION, f"Topic name is invalid: the length of '{'x' * 250}' is "
                                            "longer than the max allowed length 249"),
        (ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is invalid: 'bad/name' contains one or more "
                                            "characters other than ASCII alphanumerics, '.', '_' and '-'")]


def test_create_partitions_of_a_missing_topic_has_no_message(client):
    C = messages.CreatePartitionsRequest
    response = client.request(37, 0, C(topics=[C.CreatePartitionsTopic(name="absent", count=3)],
                                       timeout_ms=5000, validate_only=False))
    assert [(r.error_code, r.error_message) for r in response.results] == [
        (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)]
