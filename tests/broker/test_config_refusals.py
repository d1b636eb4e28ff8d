"""A refused topic config value is explained in Kafka's words: each case's message is what Apache
Kafka 3.9 answered to the same CreateTopics (validate_only) request. Kafka names the parsed value
("-5" for "-05", "2.0" for a double's "2"), or the refused item of a list, and says which bound of a
range was crossed."""

import pytest

from protocol import ErrorCode, messages

CASES = [
    ("unclean.leader.election.enable", "maybe", "maybe", "Expected value to be either true or false"),
    ("segment.index.bytes", "99999999999", "99999999999", "Not a number of type INT"),
    ("segment.ms", "99999999999999999999", "99999999999999999999", "Not a number of type LONG"),
    ("cleanup.policy", "compact,bogus", "bogus", "String must be one of: compact, delete"),
    ("compression.gzip.level", "0", "0", "Value must be between 1 and 9 or equal to -1"),
    ("compression.gzip.level", "10", "10", "Value must be between 1 and 9 or equal to -1"),
    ("compression.lz4.level", "18", "18", "Value must be no more than 17"),
    ("compression.zstd.level", "23", "23", "Value must be no more than 22"),
    ("min.cleanable.dirty.ratio", "1e3", "1000.0", "Value must be no more than 1"),
    ("min.cleanable.dirty.ratio", "2", "2.0", "Value must be no more than 1"),
    ("min.cleanable.dirty.ratio", "-1", "-1.0", "Value must be at least 0"),
    ("segment.ms", "-05", "-5", "Value must be at least 1"),
    ("segment.index.bytes", "3", "3", "Value must be at least 4"),
]


@pytest.mark.parametrize("name, value, shown, reason", CASES)
def test_a_refused_value_gets_kafkas_message(client, name, value, shown, reason):
    topic = _validate(client, name, value)
    assert (topic.error_code, topic.error_message) == (
        ErrorCode.INVALID_CONFIG, f"Invalid value {shown} for configuration {name}: {reason}")


@pytest.mark.parametrize("name, value", [("compression.gzip.level", "-1"), ("compression.gzip.level", "1"),
                                         ("cleanup.policy", ""), ("min.cleanable.dirty.ratio", "1")])
def test_the_bounds_themselves_are_accepted(client, name, value):
    assert _validate(client, name, value).error_code == ErrorCode.NONE


def _validate(client, name: str, value: str):
    """CreateTopics (validate_only) of one topic with `name`=`value`: the topic's answer."""
    C = messages.CreateTopicsRequest
    response = client.request(19, 5, C(topics=[C.CreatableTopic(
        name="checked", num_partitions=1, replication_factor=1, assignments=[],
        configs=[C.CreatableTopicConfig(name=name, value=value)])], timeout_ms=30000, validate_only=True))
    return response.topics[0]
