"""Answers @platformatic/kafka showed differing from Kafka's, sent over the raw protocol to
Odradek and to the reference Apache Kafka 3.9 (the `kafka` parameter keeps the expected values
honest; it skips, with the reason, where Java or the Kafka directory is missing)."""

from __future__ import annotations

import time

import pytest

from protocol import ErrorCode, messages

from tests import apache_kafka as oracle
from tests.broker.raw_client import RawClient, batch

apache_kafka = oracle.apache_kafka   # the session fixture

# Every topic operation Kafka's KIP-430 bitfield names (READ..DESCRIBE_CONFIGS, ALTER_CONFIGS):
# what a principal gets with no authorizer.
ALL_TOPIC_OPERATIONS = 3576
NOT_REQUESTED = -(2 ** 31)


@pytest.fixture(params=["odradek", "kafka"])
def port(request, shared_broker):
    if request.param == "kafka":
        return request.getfixturevalue("apache_kafka").port
    return shared_broker.port


def test_metadata_names_operations_on_unknown_and_invalid_topics_too(port):
    M = messages.MetadataRequest
    with RawClient("127.0.0.1", port, timeout=30) as client:
        assert client.create_topic("ops-known", 1).error_code in (0, ErrorCode.TOPIC_ALREADY_EXISTS)
        answer = client.request(3, 12, M(topics=[M.MetadataRequestTopic(name=name) for name in (
            "ops-known", "ops-unknown", "bad name!")], allow_auto_topic_creation=False,
            include_topic_authorized_operations=True))
        plain = client.request(3, 12, M(topics=[M.MetadataRequestTopic(name="ops-unknown")],
                                        allow_auto_topic_creation=False,
                                        include_topic_authorized_operations=False))
    assert [(t.name, t.error_code, t.topic_authorized_operations) for t in answer.topics] == [
        ("ops-known", 0, ALL_TOPIC_OPERATIONS),
        ("ops-unknown", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ALL_TOPIC_OPERATIONS),
        ("bad name!", ErrorCode.INVALID_TOPIC_EXCEPTION, ALL_TOPIC_OPERATIONS)]
    assert plain.topics[0].topic_authorized_operations == NOT_REQUESTED


def test_describe_topic_partitions_names_operations_on_unknown_topics_too(port):
    R = messages.DescribeTopicPartitionsRequest
    with RawClient("127.0.0.1", port, timeout=30) as client:
        assert client.create_topic("ops-known", 1).error_code in (0, ErrorCode.TOPIC_ALREADY_EXISTS)
        answer = client.request(75, 0, R(topics=[R.TopicRequest(name=name) for name in (
            "ops-known", "ops-unknown")], response_partition_limit=100))
    assert [(t.name, t.error_code, t.topic_authorized_operations) for t in answer.topics] == [
        ("ops-known", 0, ALL_TOPIC_OPERATIONS),
        ("ops-unknown", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ALL_TOPIC_OPERATIONS)]


def test_fetch_out_of_range_answers_unknown_offsets(port):
    with RawClient("127.0.0.1", port, timeout=30) as client:
        assert client.create_topic("fetch-range", 1).error_code in (0, ErrorCode.TOPIC_ALREADY_EXISTS)
        deadline = time.monotonic() + 30
        while client.produce("fetch-range", 0, batch([b"a", b"b"])).error_code != 0:
            assert time.monotonic() < deadline, "the new topic never took a record"
            time.sleep(0.2)   # Kafka: NOT_LEADER_OR_FOLLOWER until its broker learns the topic
        beyond = client.fetch("fetch-range", 0, 1000).responses[0].partitions[0]
        inside = client.fetch("fetch-range", 0, 0).responses[0].partitions[0]
    assert (beyond.error_code, beyond.high_watermark, beyond.last_stable_offset,
            beyond.log_start_offset) == (ErrorCode.OFFSET_OUT_OF_RANGE, -1, -1, -1)
    assert (inside.error_code, inside.log_start_offset) == (0, 0) and inside.high_watermark >= 2
