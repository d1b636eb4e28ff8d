"""Client metrics subscriptions (KIP-714) over the raw protocol: CLIENT_METRICS config resources set
with IncrementalAlterConfigs, described, listed by ListClientMetricsResources and kept across a
restart. Every expected answer is Kafka 3.9's to the same request."""

import time

import pytest

from protocol import messages

from broker.testing import running_broker
from tests import apache_kafka as oracle
from tests.broker.raw_client import RawClient

apache_kafka = oracle.apache_kafka   # the session fixture

CLIENT_METRICS = 16
I = messages.IncrementalAlterConfigsRequest
D = messages.DescribeConfigsRequest
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def alter(client, name, *configs, validate_only=False):
    response = client.request(44, 1, I(validate_only=validate_only, resources=[I.AlterConfigsResource(
        resource_type=CLIENT_METRICS, resource_name=name, configs=[
            I.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in configs])]))
    answer = response.responses[0]
    return answer.error_code, answer.error_message


def describe(client, name, keys=None):
    response = client.request(32, 4, D(include_synonyms=True, include_documentation=True, resources=[
        D.DescribeConfigsResource(resource_type=CLIENT_METRICS, resource_name=name,
                                  configuration_keys=keys)]))
    result = response.results[0]
    return result.error_code, result.error_message, [
        (c.name, c.value, c.read_only, c.config_source, c.synonyms, c.config_type, c.documentation)
        for c in result.configs]


def listed(client):
    response = client.request(74, 0, messages.ListClientMetricsResourcesRequest())
    return response.error_code, sorted(r.name for r in response.client_metrics_resources)


def listed_soon(client, expected):
    """Kafka lists a removed subscription for a moment longer: its list follows the image lazily."""
    deadline = time.monotonic() + 10
    while listed(client) != expected and time.monotonic() < deadline:
        time.sleep(0.1)
    return listed(client)


INTERVAL_RANGE = "for interval.ms, interval must be between 100 and 3600000 (1 hour)"
REFUSED = [
    (("bogus", SET, "1"), (42, "Unknown client metrics configuration: bogus")),
    (("interval.ms", SET, "50"), (42, f"Invalid value 50 {INTERVAL_RANGE}")),
    (("interval.ms", SET, "3600001"), (42, f"Invalid value 3600001 {INTERVAL_RANGE}")),
    (("interval.ms", SET, "abc"), (-1, None)),
    (("match", SET, "nosuch=1"), (40, "Illegal client matching pattern: nosuch=1")),
    (("match", SET, "client_id"), (40, "Illegal client matching pattern: client_id")),
    (("match", SET, "client_id=["), (40, "Illegal client matching pattern: client_id=[")),
    (("metrics", APPEND, "org.apache.kafka.consumer."),
     (40, "Can't APPEND to key metrics because its type is not LIST.")),
    (("metrics", SUBTRACT, "org.apache.kafka.consumer."),
     (40, "Can't SUBTRACT to key metrics because its type is not LIST.")),
]


MATCH = "client_id=foo.*,client_software_name=apache-kafka-java"
# only what is set, whatever keys are asked for; no synonyms, no type, documentation "" (not null)
SUB1 = (0, "", [("interval.ms", "1000", False, 7, [], 0, ""), ("match", MATCH, False, 7, [], 0, ""),
                ("metrics", "org.apache.kafka.producer.", False, 7, [], 0, "")])


def check_subscriptions(client):
    assert listed(client) == (0, [])
    assert describe(client, "nosuch") == (0, "", [])
    assert describe(client, "") == (42, "Client metrics subscription name must not be empty", [])
    assert alter(client, "sub1", ("metrics", SET, "org.apache.kafka.producer."),
                 ("interval.ms", SET, "1000"), ("match", SET, MATCH)) == (0, None)
    assert alter(client, "dry", ("interval.ms", SET, "1000"), validate_only=True) == (0, None)
    for change, answer in REFUSED:
        assert alter(client, "sub1", change) == answer, change
    assert alter(client, "", ("interval.ms", SET, "1000")) == (42, "Subscription name can't be empty")
    assert alter(client, "never", ("interval.ms", DELETE, None)) == (0, None)
    assert alter(client, "sub5", ("metrics", SET, "")) == (0, None)
    assert listed_soon(client, (0, ["sub1", "sub5"])) == (0, ["sub1", "sub5"])
    assert describe(client, "sub1") == describe(client, "sub1", ["interval.ms"]) == SUB1
    assert alter(client, "sub5", ("metrics", DELETE, None)) == (0, None)
    assert listed_soon(client, (0, ["sub1"])) == (0, ["sub1"])


def test_client_metrics_subscriptions_as_kafka(tmp_path):
    with running_broker(tmp_path / "data") as broker, \
            RawClient("127.0.0.1", broker.port) as client:
        check_subscriptions(client)
    with running_broker(tmp_path / "data") as broker, \
            RawClient("127.0.0.1", broker.port) as client:
        assert listed(client) == (0, ["sub1"])
        assert describe(client, "sub1") == SUB1


@pytest.mark.slow
def test_kafka_answers_the_subscription_facts(apache_kafka):
    with RawClient("127.0.0.1", apache_kafka.port) as client:
        try:
            check_subscriptions(client)
        finally:   # the session's Kafka has no subscriptions again for the tests after this
            alter(client, "sub1", *[(k, DELETE, None) for k in ("metrics", "interval.ms", "match")])
