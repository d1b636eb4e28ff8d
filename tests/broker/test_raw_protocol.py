"""Raw-protocol integration tests against an in-process broker."""

import socket
import struct
import threading
import time
import uuid

import pytest

from protocol import ErrorCode, messages
from protocol.records import iter_batches

from tests.broker.raw_client import RawClient, batch

# Java 4.x refuses brokers below the KIP-896 baseline (highest advertised version at least ...).
KIP_896_BASELINE = {0: 3, 1: 4, 2: 1, 3: 4, 19: 2, 20: 1, 23: 2, 32: 1}


def test_api_versions_advertise_the_registry_and_meet_the_java_baseline(client, broker):
    for version in range(5):
        response = client.request(18, version, messages.ApiVersionsRequest(
            client_software_name="raw-test", client_software_version="1.0"))
        assert response.error_code == 0
        ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        assert ranges == {key: (low, high) for key, (low, high, _) in broker.broker.handlers.items()}
    for key, minimum in KIP_896_BASELINE.items():
        assert ranges[key][1] >= minimum
    assert ranges[0][0] == 0   # Produce min 0, as Kafka 4 (librdkafka keeps compression on)


def test_unknown_api_versions_version_gets_a_v0_answer_with_our_ranges(client):
    # KIP-511: a version we do not know is answered in v0 format with UNSUPPORTED_VERSION.
    header = struct.pack(">hhi", 18, 99, 7) + struct.pack(">h", 3) + b"raw" + b"\x00"
    client.send_raw(struct.pack(">i", len(header)) + header)
    correlation_id, response = client.receive(18, 0)
    assert correlation_id == 7
    assert response.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert any(k.api_key == 0 for k in response.api_keys)


def test_metadata_auto_creates_and_reports_ids_and_epochs(client, broker):
    M = messages.MetadataRequest
    # as Kafka 3.9 (KRaft): the request that creates the topic answers it unknown, the next finds it
    response = client.request(3, 12, M(topics=[M.MetadataRequestTopic(name="auto-1")],
                                       allow_auto_topic_creation=True))
    [topic] = response.topics
    assert (topic.error_code, topic.name, topic.topic_id, topic.partitions) == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "auto-1", uuid.UUID(int=0), [])
    response = client.request(3, 12, M(topics=[M.MetadataRequestTopic(name="auto-1")],
                                       allow_auto_topic_creation=True))
    [topic] = response.topics
    assert topic.error_code == 0 and topic.name == "auto-1"
    assert topic.topic_id != uuid.UUID(int=0)
    assert [p.partition_index for p in topic.partitions] == [0]
    assert topic.partitions[0].leader_id == 1 and topic.partitions[0].leader_epoch >= 0
    assert response.controller_id == 1 and response.cluster_id
    assert [(b.node_id, b.host, b.port) for b in response.brokers] == [(1, "127.0.0.1", broker.port)]

    response = client.request(3, 12, M(topics=[M.MetadataRequestTopic(name="nope")],
                                       allow_auto_topic_creation=False))
    assert response.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    response = client.request(3, 12, M(topics=[M.MetadataRequestTopic(name="bad name!")]))
    assert response.topics[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    # null topics = all topics; by id works too
    response = client.request(3, 12, M(topics=None))
    assert [t.name for t in response.topics] == ["auto-1"]
    response = client.request(3, 12, M(topics=[M.MetadataRequestTopic(name=None, topic_id=topic.topic_id)]))
    assert response.topics[0].name == "auto-1"


def test_metadata_auto_creates_the_offsets_topic_as_an_internal_topic(client, broker):
    """Kafka 3.9 creates __consumer_offsets (internal, offsets.topic.num.partitions) on a Metadata
    request that may auto-create it; Burrow's first request, before any group exists, is one."""
    M = messages.MetadataRequest
    ask = lambda auto: client.request(3, 12, M(topics=[M.MetadataRequestTopic(name="__consumer_offsets")],
                                               allow_auto_topic_creation=auto)).topics[0]
    refused = ask(False)
    assert (refused.error_code, refused.partitions) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, [])
    creating = ask(True)   # as any auto-created topic: unknown in the answer that creates it
    assert (creating.error_code, creating.partitions) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, [])
    created = ask(False)
    partitions = int(broker.broker.config["offsets.topic.num.partitions"])
    assert (created.error_code, created.is_internal, len(created.partitions)) == (0, True, partitions)


def test_high_watermark_is_last_offset_plus_one_after_multi_record_batches(client):
    client.create_topic("hw")
    assert client.produce("hw", 0, batch([b"a", b"b", b"c"])).base_offset == 0
    assert client.produce("hw", 0, batch([b"d", b"e"])).base_offset == 3
    response = client.fetch("hw", 0, 0)
    data = response.responses[0].partitions[0]
    assert data.error_code == 0
    assert data.high_watermark == 5 and data.last_stable_offset == 5
    batches = list(iter_batches(bytes(data.records)))
    assert [(b.base_offset, b.record_count) for b in batches] == [(0, 3), (3, 2)]
    assert client.list_offset("hw", 0, -1).offset == 5
    assert client.list_offset("hw", 0, -2).offset == 0


def test_fetch_from_the_middle_of_a_batch_returns_that_batch(client):
    client.create_topic("mid")
    client.produce("mid", 0, batch([b"a", b"b", b"c", b"d"]))
    data = client.fetch("mid", 0, 2).responses[0].partitions[0]
    assert [b.base_offset for b in iter_batches(bytes(data.records))] == [0]


def test_list_offsets_by_timestamp_and_on_an_empty_partition(client):
    # Old timestamps roll a segment per batch (segment.ms counts from the first timestamp),
    # which also exercises lookups across segments.
    client.create_topic("ts")
    empty = client.list_offset("ts", 0, -1)
    assert (empty.error_code, empty.offset) == (0, 0)
    assert client.list_offset("ts", 0, -2).offset == 0
    assert client.list_offset("ts", 0, 1000).offset == -1
    client.produce("ts", 0, batch([b"a", b"b"], timestamps=[1000, 2000]))
    client.produce("ts", 0, batch([b"c", b"d"], timestamps=[3000, 4000]))
    assert client.list_offset("ts", 0, 0).offset == 0
    assert client.list_offset("ts", 0, 1500).offset == 1          # inside the first batch
    found = client.list_offset("ts", 0, 3000)
    assert (found.offset, found.timestamp) == (2, 3000)
    assert client.list_offset("ts", 0, 3500).offset == 3
    assert client.list_offset("ts", 0, 5000).offset == -1          # after the last record
    latest = client.list_offset("ts", 0, -3)                       # max timestamp
    assert (latest.offset, latest.timestamp) == (3, 4000)


def test_list_offsets_of_a_special_timestamp_this_version_does_not_know(client):
    """Kafka 3.9: -3, -4, -5 before the version that brought them, and any lower one at every
    version, are UNSUPPORTED_VERSION (not a search by timestamp)."""
    client.create_topic("special")
    client.produce("special", 0, batch([b"a", b"b"]))
    for timestamp, version in ((-6, 9), (-6, 0), (-100, 5), (-5, 8), (-4, 7), (-3, 6)):
        answer = client.list_offset("special", 0, timestamp, version=version)
        assert (answer.error_code, answer.offset) == (ErrorCode.UNSUPPORTED_VERSION, -1), (timestamp, version)
    assert client.list_offset("special", 0, -5, version=9).error_code == 0


def test_produce_errors_report_the_log_start_offset_as_kafka(client):
    """Kafka 3.9 (checked side by side): an append the log refuses (sequence, epoch, timestamp)
    answers the partition's log start offset; one refused before the log (corrupt, too large,
    unknown partition) answers -1."""
    client.create_topic("lso", configs={"message.timestamp.before.max.ms": "3600000"})
    client.produce("lso", 0, batch([b"a", b"b"]))
    D = messages.DeleteRecordsRequest
    client.request(21, 2, D(timeout_ms=5000, topics=[D.DeleteRecordsTopic(
        name="lso", partitions=[D.DeleteRecordsPartition(partition_index=0, offset=1)])]))
    pid = client.request(22, 4, messages.InitProducerIdRequest(transactional_id=None,
                                                               transaction_timeout_ms=0)).producer_id

    def answered(records, partition=0):
        answer = client.produce("lso", partition, records)
        return answer.error_code, answer.log_start_offset
    assert answered(batch([b"c"], producer_id=pid, producer_epoch=0, base_sequence=0)) == (0, 1)
    assert answered(batch([b"d"], producer_id=pid, producer_epoch=0, base_sequence=5)) == (
        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, 1)
    assert answered(batch([b"old"], timestamps=[int(time.time() * 1000) - 7_200_000])) == (
        ErrorCode.INVALID_TIMESTAMP, 1)
    corrupt = bytearray(batch([b"e"]))
    corrupt[-1] ^= 0xFF
    assert answered(bytes(corrupt)) == (ErrorCode.CORRUPT_MESSAGE, -1)
    assert answered(batch([b"f"]), partition=3) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1)


def test_produce_errors(client):
    client.create_topic("small", configs={"max.message.bytes": "1000"})
    too_big = client.produce("small", 0, batch([b"x" * 2000]))
    assert too_big.error_code == ErrorCode.MESSAGE_TOO_LARGE
    assert client.produce("nosuch", 0, batch([b"a"])).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert client.produce("small", 7, batch([b"a"])).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    corrupt = bytearray(batch([b"abc"]))
    corrupt[-1] ^= 0xFF
    assert client.produce("small", 0, bytes(corrupt)).error_code == ErrorCode.CORRUPT_MESSAGE
    assert client.produce("small", 0, batch([b"a"]), acks=2).error_code == ErrorCode.INVALID_REQUIRED_ACKS
    assert client.produce("__consumer_offsets", 0, batch([b"a"])).error_code == \
        ErrorCode.INVALID_TOPIC_EXCEPTION


def test_acks_zero_gets_no_response_and_later_responses_stay_paired(client):
    client.create_topic("a0")
    client.produce("a0", 0, batch([b"fire", b"forget"]), acks=0)
    M = messages.MetadataRequest
    sent = client.send(3, 9, M(topics=[M.MetadataRequestTopic(name="a0")]))
    correlation_id, response = client.receive(3, 9)
    assert correlation_id == sent and response.topics[0].name == "a0"
    assert client.list_offset("a0", 0, -1).offset == 2


def test_pipelined_requests_are_answered_in_order(client):
    client.create_topic("pipe")
    P = messages.ProduceRequest
    sent = []
    for i in range(20):
        body = P(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[P.TopicProduceData(
            name="pipe", partition_data=[P.PartitionProduceData(index=0, records=batch([b"%d" % i]))])])
        sent.append(client.send(0, 9, body))
    offsets = []
    for expected in sent:
        correlation_id, response = client.receive(0, 9)
        assert correlation_id == expected
        offsets.append(response.responses[0].partition_responses[0].base_offset)
    assert offsets == list(range(20))


def test_long_poll_fetch_is_woken_by_an_append(client, broker):
    client.create_topic("poll")

    def produce_later():
        time.sleep(0.3)
        with RawClient("127.0.0.1", broker.port) as other:
            other.produce("poll", 0, batch([b"late"]))

    threading.Thread(target=produce_later).start()
    started = time.monotonic()
    response = client.fetch("poll", 0, 0, max_wait_ms=5000, min_bytes=1)
    elapsed = time.monotonic() - started
    assert response.responses[0].partitions[0].high_watermark == 1
    assert 0.2 < elapsed < 3.0


def test_fetch_waits_max_wait_when_nothing_arrives(client):
    client.create_topic("idle")
    started = time.monotonic()
    response = client.fetch("idle", 0, 0, max_wait_ms=300, min_bytes=1)
    assert 0.25 < time.monotonic() - started < 3.0
    assert len(response.responses[0].partitions[0].records or b"") == 0


def test_fetch_offset_out_of_range(client):
    client.create_topic("oor")
    client.produce("oor", 0, batch([b"a"]))
    data = client.fetch("oor", 0, 10).responses[0].partitions[0]
    assert data.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    # as Kafka 3.9: a consumer's failed read answers unknown offsets
    assert (data.high_watermark, data.last_stable_offset, data.log_start_offset) == (-1, -1, -1)


def test_fetch_max_bytes_always_returns_a_whole_first_batch(client):
    client.create_topic("big", partitions=2)
    client.produce("big", 0, batch([b"x" * 3000]))
    client.produce("big", 1, batch([b"y" * 3000]))
    F = messages.FetchRequest
    body = F(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=100, isolation_level=0,
             session_id=0, session_epoch=-1, topics=[F.FetchTopic(topic="big", partitions=[
                 F.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=100),
                 F.FetchPartition(partition=1, fetch_offset=0, partition_max_bytes=100)])])
    response = client.request(1, 11, body)
    sizes = [len(p.records or b"") for p in response.responses[0].partitions]
    assert sizes[0] > 3000 and sizes[1] == 0


def test_incremental_fetch_session_sends_only_changes(client):
    client.create_topic("sess", partitions=2)
    client.produce("sess", 0, batch([b"a"]))
    F = messages.FetchRequest
    full = F(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
             session_id=0, session_epoch=0, topics=[F.FetchTopic(topic="sess", partitions=[
                 F.FetchPartition(partition=0, fetch_offset=1, partition_max_bytes=1 << 20),
                 F.FetchPartition(partition=1, fetch_offset=0, partition_max_bytes=1 << 20)])])
    response = client.request(1, 11, full)
    assert response.session_id != 0
    assert len(response.responses[0].partitions) == 2
    incremental = F(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                    isolation_level=0, session_id=response.session_id, session_epoch=1, topics=[])
    assert client.request(1, 11, incremental).responses == []        # nothing changed
    client.produce("sess", 1, batch([b"b"]))
    incremental.session_epoch = 2
    changed = client.request(1, 11, incremental)
    assert [(t.topic, [p.partition_index for p in t.partitions]) for t in changed.responses] == \
        [("sess", [1])]
    incremental.session_epoch = 7
    assert client.request(1, 11, incremental).error_code == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    incremental.session_id, incremental.session_epoch = 12345, 1
    assert client.request(1, 11, incremental).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_fetch_by_topic_id(client):
    topic_id = client.create_topic("byid").topic_id
    client.produce("byid", 0, batch([b"a", b"b"]))
    F = messages.FetchRequest
    body = F(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
             session_id=0, session_epoch=-1, topics=[F.FetchTopic(topic_id=topic_id, partitions=[
                 F.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])])
    response = client.request(1, 16, body)
    assert response.responses[0].topic_id == topic_id
    assert response.responses[0].partitions[0].high_watermark == 2
    body.topics[0].topic_id = uuid.uuid4()
    response = client.request(1, 16, body)
    assert response.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID


def test_oversized_frame_closes_the_connection(broker):
    with RawClient("127.0.0.1", broker.port) as raw:
        raw.send_raw(struct.pack(">i", 200 * 1024 * 1024))
        raw.sock.settimeout(5)
        assert raw.sock.recv(1) == b""


def test_garbage_closes_the_connection_but_not_the_broker(broker):
    with RawClient("127.0.0.1", broker.port) as raw:
        raw.send_raw(struct.pack(">i", 6) + b"\xff\xff\x00\x00\x00\x01")
        raw.sock.settimeout(5)
        assert raw.sock.recv(1) == b""
    with RawClient("127.0.0.1", broker.port) as raw:
        assert raw.request(18, 3, messages.ApiVersionsRequest(
            client_software_name="x", client_software_version="1")).error_code == 0


def test_offset_for_leader_epoch(client):
    client.create_topic("epochs")
    client.produce("epochs", 0, batch([b"a", b"b", b"c"]))
    O = messages.OffsetForLeaderEpochRequest
    response = client.request(23, 4, O(replica_id=-1, topics=[O.OffsetForLeaderTopic(
        topic="epochs", partitions=[O.OffsetForLeaderPartition(partition=0, current_leader_epoch=-1,
                                                               leader_epoch=0)])]))
    result = response.topics[0].partitions[0]
    assert (result.error_code, result.end_offset) == (0, 3)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_offset_for_leader_epoch_old_versions(client, version):
    """Kafka 3.9 serves v0 (no epoch in the answer) and v1 (old Java clients, 2.0) as well; an epoch
    past the latest is answered undefined (-1, -1), as Kafka does."""
    client.create_topic("old-epochs")
    client.produce("old-epochs", 0, batch([b"a", b"b"]))
    O = messages.OffsetForLeaderEpochRequest

    def ask(epoch):
        response = client.request(23, version, O(topics=[O.OffsetForLeaderTopic(
            topic="old-epochs", partitions=[O.OffsetForLeaderPartition(partition=0, leader_epoch=epoch)])]))
        result = response.topics[0].partitions[0]
        return result.error_code, result.leader_epoch, result.end_offset

    assert ask(0) == (0, -1 if version == 0 else 0, 2)
    assert ask(7) == (0, -1, -1)


def test_api_versions_v3_rejects_bad_software_names(client):
    response = client.request(18, 3, messages.ApiVersionsRequest(
        client_software_name="bad name", client_software_version="1.0"))
    assert response.error_code == ErrorCode.INVALID_REQUEST


def test_idle_connections_are_closed(tmp_path):
    from broker.testing import running_broker

    with running_broker(tmp_path / "data", {"connections.max.idle.ms": "300"}) as running:
        with RawClient("127.0.0.1", running.port) as raw:
            assert raw.request(18, 3, messages.ApiVersionsRequest(
                client_software_name="x", client_software_version="1")).error_code == 0
            raw.sock.settimeout(5)
            started = time.monotonic()
            assert raw.sock.recv(1) == b""
            assert 0.2 < time.monotonic() - started < 3


def test_large_produce_round_trips_byte_exact(client):
    client.create_topic("large")
    value = bytes(range(256)) * 3500            # ~900 KB, read into its own frame buffer
    records = batch([value])
    assert client.produce("large", 0, records).error_code == 0
    data = client.fetch("large", 0, 0).responses[0].partitions[0]
    [stored] = list(iter_batches(bytes(data.records)))
    assert [r.value for r in stored.records()] == [value]


def test_metrics_endpoint_reports_partitions_and_requests(tmp_path):
    import urllib.request

    from broker.testing import running_broker

    with running_broker(tmp_path / "data", {"metrics.port": "0"}) as running:
        with RawClient("127.0.0.1", running.port) as raw:
            raw.create_topic("metered")
            raw.produce("metered", 0, batch([b"a", b"b", b"c"]))
        port = running.broker.metrics_port
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        assert 'kafka_log_log_logendoffset{partition="0",topic="metered"} 3.0' in text
        ready = urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5)
        assert ready.status == 200


def test_a_client_that_does_not_read_slows_only_itself(client, broker):
    client.create_topic("flood")
    client.produce("flood", 0, batch([b"z" * 500_000]))
    F = messages.FetchRequest
    body = F(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
             session_id=0, session_epoch=-1, topics=[F.FetchTopic(topic="flood", partitions=[
                 F.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])])
    for _ in range(150):          # ~75 MB of responses nobody reads
        client.send(1, 11, body)
    with RawClient("127.0.0.1", broker.port) as other:
        started = time.monotonic()
        for _ in range(5):
            assert other.list_offset("flood", 0, -1).offset == 1
        assert time.monotonic() - started < 3
    # the stalled connection still gets its responses, in order, once it reads
    for expected in range(3, 6):
        correlation_id, response = client.receive(1, 11)
        assert correlation_id == expected
        assert response.responses[0].partitions[0].high_watermark == 1


from broker.testing import odradek_broker  # noqa: E402,F401  (the documented fixture)


def test_the_documented_pytest_fixture(odradek_broker):
    with RawClient("127.0.0.1", odradek_broker.port) as raw:
        assert raw.create_topic("fixture").error_code == 0
    assert odradek_broker.bootstrap == f"127.0.0.1:{odradek_broker.port}"


def test_a_failed_acks_zero_produce_closes_the_connection(client):
    client.produce("no-such-topic", 0, batch([b"lost"]), acks=0)
    client.sock.settimeout(5)
    assert client.sock.recv(1) == b""


def test_read_committed_stops_at_the_last_stable_offset(client):
    # Transactional records need the request's transactional id (as Kafka); partition
    # verification (KIP-890) is off here so no transaction coordinator round is needed.
    I = messages.IncrementalAlterConfigsRequest
    assert client.request(44, 1, I(resources=[I.AlterConfigsResource(
        resource_type=4, resource_name="", configs=[I.AlterableConfig(
            name="transaction.partition.verification.enable", config_operation=0, value="false")])],
        validate_only=False)).responses[0].error_code == 0
    client.create_topic("lso")
    client.produce("lso", 0, batch([b"plain"]))
    open_txn = batch([b"pending-1", b"pending-2"], producer_id=4242, producer_epoch=0,
                     base_sequence=0, transactional=True)
    deadline = time.monotonic() + 10
    while (answer := client.produce("lso", 0, open_txn, transactional_id="lso-txn")).error_code \
            and time.monotonic() < deadline:   # until the config change reaches the broker
        time.sleep(0.05)
    assert answer.error_code == 0
    assert client.list_offset("lso", 0, -1, isolation_level=0).offset == 3   # high watermark
    assert client.list_offset("lso", 0, -1, isolation_level=1).offset == 1   # last stable offset
    committed = client.fetch("lso", 0, 0, isolation_level=1).responses[0].partitions[0]
    assert (committed.high_watermark, committed.last_stable_offset) == (3, 1)
    assert committed.aborted_transactions == []
    assert [b.base_offset for b in iter_batches(bytes(committed.records))] == [0]
    uncommitted = client.fetch("lso", 0, 0, isolation_level=0).responses[0].partitions[0]
    assert [b.base_offset for b in iter_batches(bytes(uncommitted.records))] == [0, 1]


def test_a_produce_sent_just_before_a_reset_is_still_appended(client, broker):
    client.create_topic("abrupt")
    for _ in range(5):
        with RawClient("127.0.0.1", broker.port) as gone:
            gone.produce("abrupt", 0, batch([b"a", b"b"]), acks=0)
            gone.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    deadline = time.monotonic() + 5
    while client.list_offset("abrupt", 0, -1).offset < 10 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert client.list_offset("abrupt", 0, -1).offset == 10


def test_a_client_reset_during_a_long_poll_closes_its_connection(client, broker):
    # The answer to a parked Fetch finds the socket reset: the connection must end then (as Kafka
    # drops a disconnected client's channel), not linger till connections.max.idle.ms or hold a
    # shutdown's drain for its whole grace period.
    client.create_topic("reset-poll")
    opened = broker.broker.metrics._connections["PLAINTEXT"]   # [open, created, closed]
    F = messages.FetchRequest
    parked = F(replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=1 << 20, session_id=0,
               session_epoch=-1, topics=[F.FetchTopic(topic="reset-poll", partitions=[
                   F.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])],
               forgotten_topics_data=[], rack_id="")
    with RawClient("127.0.0.1", broker.port) as gone:
        gone.send(1, 11, parked)
        time.sleep(0.1)
        gone.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    deadline = time.monotonic() + 5
    while opened[0] > 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert opened[0] == 1   # only `client`'s
