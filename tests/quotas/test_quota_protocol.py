"""Client quotas over the raw protocol against an in-process broker: the admin APIs (validated
as Kafka 3.9 answers), persistence across a restart, and throttling as clients see it: the
response carries throttle_time_ms, then the connection reads nothing for that long (KIP-219)."""

import time

import pytest

from protocol import ErrorCode, messages

from broker.testing import running_broker
from tests.broker.raw_client import RawClient, batch

A = messages.AlterClientQuotasRequest
D = messages.DescribeClientQuotasRequest
P = messages.ProduceRequest
# Short windows keep the tests quick: the rate is over at least (2 - 1) one-second windows.
SHORT_WINDOWS = {"quota.window.num": "2", "quota.window.size.seconds": "1",
                 "controller.quota.window.num": "2", "controller.quota.window.size.seconds": "1"}


def alter(client, entity, ops, validate_only=False):
    response = client.request(49, 1, A(entries=[A.EntryData(
        entity=[A.EntityData(entity_type=t, entity_name=n) for t, n in entity],
        ops=[A.OpData(key=k, value=0.0 if v is None else v, remove=v is None) for k, v in ops])],
        validate_only=validate_only))
    return [(e.error_code, e.error_message) for e in response.entries]


def describe(client, components=(), strict=False):
    response = client.request(48, 1, D(components=[
        D.ComponentData(entity_type=t, match_type=m, match=x) for t, m, x in components],
        strict=strict))
    if response.error_code:
        return response.error_code, response.error_message
    return {tuple((e.entity_type, e.entity_name) for e in entry.entity):
            {v.key: v.value for v in entry.values} for entry in response.entries}


@pytest.fixture
def broker(tmp_path):
    with running_broker(tmp_path / "data", SHORT_WINDOWS) as running:
        yield running


@pytest.fixture
def client(broker):
    with RawClient("127.0.0.1", broker.port) as raw:
        yield raw


def test_alter_and_describe_as_kafka(client):
    assert alter(client, [("user", "alice")], [("producer_byte_rate", 1024),
                                               ("request_percentage", 0.5)]) == [(0, None)]
    assert alter(client, [("user", None), ("client-id", None)],
                 [("consumer_byte_rate", 2048)]) == [(0, None)]
    assert alter(client, [("client-id", "c1")], [("controller_mutation_rate", 3.5)]) == [(0, None)]
    assert alter(client, [("ip", "10.0.0.1")], [("connection_creation_rate", 5)]) == [(0, None)]
    invalid = ErrorCode.INVALID_REQUEST
    assert alter(client, [("user", "alice")], [("nope", 1)]) == \
        [(invalid, "Invalid configuration key nope")]
    assert alter(client, [("user", "alice")], [("producer_byte_rate", 1.5)]) == \
        [(invalid, "producer_byte_rate cannot be a fractional value.")]
    assert alter(client, [("user", "alice")], [("producer_byte_rate", 0)]) == \
        [(invalid, "Quota producer_byte_rate must be greater than 0")]
    assert alter(client, [("user", "")], [("producer_byte_rate", 5)]) == \
        [(invalid, "Empty user not supported")]
    assert alter(client, [], [("producer_byte_rate", 5)]) == \
        [(invalid, "Invalid empty client quota entity")]
    assert alter(client, [("group", "g")], [("producer_byte_rate", 5)]) == \
        [(invalid, "Unhandled client quota entity type: group")]
    assert alter(client, [("ip", "10.0.0.1"), ("user", "x")], [("connection_creation_rate", 5)]) \
        == [(invalid, "Invalid quota entity combination, IP entity shouldnot be combined with "
                      "User or ClientId")]
    assert alter(client, [("user", "dry")], [("producer_byte_rate", 5)],
                 validate_only=True) == [(0, None)]

    everything = describe(client)
    assert everything == {
        (("user", "alice"),): {"producer_byte_rate": 1024.0, "request_percentage": 0.5},
        (("client-id", None), ("user", None)): {"consumer_byte_rate": 2048.0},
        (("client-id", "c1"),): {"controller_mutation_rate": 3.5},
        (("ip", "10.0.0.1"),): {"connection_creation_rate": 5.0},
    }
    assert describe(client, [("user", 2, None)], strict=True) == \
        {(("user", "alice"),): everything[(("user", "alice"),)]}
    assert describe(client, [("user", 1, None)]) == \
        {(("client-id", None), ("user", None)): {"consumer_byte_rate": 2048.0}}
    assert describe(client, [("user", 0, "alice")], strict=True) == \
        {(("user", "alice"),): everything[(("user", "alice"),)]}
    assert describe(client, [], strict=True) == {}
    assert describe(client, [("group", 2, None)]) == \
        (ErrorCode.UNSUPPORTED_VERSION, "Unsupported entity type group")
    assert describe(client, [("user", 0, None)]) == \
        (invalid, "Request specified MATCH_TYPE_EXACT, but set match string to null.")
    # removing the last key removes the entity
    assert alter(client, [("client-id", "c1")], [("controller_mutation_rate", None)]) == [(0, None)]
    assert (("client-id", "c1"),) not in describe(client)


def test_quotas_survive_a_restart(tmp_path):
    data = tmp_path / "data"
    with running_broker(data) as first:
        with RawClient("127.0.0.1", first.port) as client:
            assert alter(client, [("client-id", "kept")], [("producer_byte_rate", 4096)]) == \
                [(0, None)]
    with running_broker(data) as second:
        with RawClient("127.0.0.1", second.port) as client:
            assert describe(client) == {(("client-id", "kept"),): {"producer_byte_rate": 4096.0}}
        assert second.broker.quotas.produce.lookup("ANONYMOUS", "kept") == \
            (("", "kept"), 4096.0)


def produce(client, topic, payload, acks=-1):
    body = P(transactional_id=None, acks=acks, timeout_ms=5000, topic_data=[
        P.TopicProduceData(name=topic, partition_data=[P.PartitionProduceData(
            index=0, records=payload)])])
    return client.request(0, 9, body)


def test_produce_over_quota_is_answered_then_muted(broker, client):
    client.create_topic("limited")
    assert alter(client, [("client-id", "raw-test")], [("producer_byte_rate", 100_000)]) == \
        [(0, None)]
    payload = batch([b"x" * 60_000])
    throttles = []
    for _ in range(4):
        response = produce(client, "limited", payload)
        assert response.responses[0].partition_responses[0].error_code == 0
        throttles.append(response.throttle_time_ms)
        if response.throttle_time_ms:
            break
    throttle = throttles[-1]
    assert 0 < throttle <= 2000, throttles
    # The response came at once; the connection now reads nothing for `throttle` ms.
    started = time.monotonic()
    client.request(3, 12, messages.MetadataRequest(topics=None))
    waited = time.monotonic() - started
    assert waited >= throttle / 1000 * 0.8, (waited, throttle)
    # Nothing was dropped: every batch is in the log.
    offsets = client.list_offset("limited", 0, -1).offset
    assert offsets == len(throttles)
    # Kafka's per-entity quota metrics (the quota is on the client id: user label empty)
    text = broker.broker.metrics.render().decode()
    labels = '{client_id="raw-test",user=""}'
    assert f"kafka_server_produce_byte_rate{labels}" in text
    assert f"kafka_server_produce_throttled_requests_total{labels} 1.0" in text
    throttle_line = next(line for line in text.splitlines()
                         if line.startswith(f"kafka_server_produce_throttle_time{labels}"))
    assert float(throttle_line.split()[-1]) == throttle
    assert "kafka_server_fetch_byte_rate" not in text   # no fetch quota: nothing recorded


def test_fetch_over_quota_returns_no_data_then_everything(client):
    client.create_topic("read-limited")
    payload = batch([b"y" * 40_000])
    for _ in range(5):
        produce(client, "read-limited", payload)
    assert alter(client, [("client-id", "raw-test")], [("consumer_byte_rate", 50_000)]) == \
        [(0, None)]
    offset, empty_throttled, deadline = 0, 0, time.monotonic() + 60
    while offset < 5 and time.monotonic() < deadline:
        response = client.fetch("read-limited", 0, offset, max_bytes=1 << 20)
        if response.throttle_time_ms:
            assert response.responses == []       # Kafka returns no data when throttled
            empty_throttled += 1
            continue
        [partition] = response.responses[0].partitions
        records = bytes(partition.records)
        # max_bytes is cut to what the quota allows in a window (50 kB/s * (2 - 1) s): one batch
        assert 40_000 < len(records) < 2 * 40_000
        offset += 1
    assert offset == 5 and empty_throttled >= 1


@pytest.mark.parametrize("version,strict", [(7, True), (5, False)])
def test_controller_mutation_rate(client, version, strict):
    # 2 partitions/s, burst 2 windows * 1 s * 2 = 4 partitions
    assert alter(client, [("client-id", "raw-test")], [("controller_mutation_rate", 2)]) == \
        [(0, None)]
    T = messages.CreateTopicsRequest
    response = client.request(19, version, T(topics=[
        T.CreatableTopic(name=f"m{version}-{i}", num_partitions=3, replication_factor=1,
                         assignments=[], configs=[]) for i in range(3)], timeout_ms=5000))
    codes = [t.error_code for t in response.topics]
    if strict:
        # 4 - 3 = 1 left: the second topic still goes (into debt), the third is refused
        assert codes == [0, 0, ErrorCode.THROTTLING_QUOTA_EXCEEDED]
        assert response.topics[2].error_message == "The throttling quota has been exceeded."
        assert 800 <= response.throttle_time_ms <= 1000     # 2 partitions of debt at 2/s
    else:
        assert codes == [0, 0, 0]
        assert 2000 <= response.throttle_time_ms <= 2500    # 5 in debt at 2/s


def test_request_percentage_throttles_handler_time(broker, client):
    # 0.01 % of one thread over the (1 s) windows: a few Metadata requests use more than that
    assert alter(client, [("user", "ANONYMOUS")], [("request_percentage", 0.01)]) == [(0, None)]
    throttles = []
    for _ in range(20):
        response = client.request(3, 12, messages.MetadataRequest(topics=None))
        throttles.append(response.throttle_time_ms)
        if response.throttle_time_ms:
            break
    assert 0 < throttles[-1] <= 1000, throttles        # capped at one quota window
    assert broker.broker.quotas.task_timer.installed
    assert alter(client, [("user", "ANONYMOUS")], [("request_percentage", None)]) == [(0, None)]
    assert not broker.broker.quotas.task_timer.installed
