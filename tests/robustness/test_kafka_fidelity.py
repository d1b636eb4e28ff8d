"""Kafka-fidelity probes over the raw protocol: the error codes and edge cases real clients rely on.

Each test names the Kafka behaviour it pins (KafkaApis / UnifiedLog / the protocol guide); the
DESIGN.md "Facts and traps" list is where other Kafka-compatible brokers broke real clients.
"""

from __future__ import annotations

import os
import struct
import threading
import time
import uuid
import zlib

import pytest

import protocol
from protocol import ErrorCode, messages
from protocol.records import iter_batches

from tests.broker.raw_client import RawClient, batch
from tests.robustness.support import sized, wait_closed

M = messages


def _metadata(client, names, version=12, auto=False, **kwargs):
    request = M.MetadataRequest(
        topics=None if names is None else [M.MetadataRequest.MetadataRequestTopic(name=n) for n in names],
        **({"allow_auto_topic_creation": auto} if version >= 4 else {}), **kwargs)
    return client.request(3, version, request)


def _fetch_partition(client, topic, offset, **kwargs):
    response = client.fetch(topic, 0, offset, **kwargs)
    assert response.error_code == 0
    return response.responses[0].partitions[0]


def _batches(data):
    return [(b.base_offset, b.record_count) for b in iter_batches(bytes(data.records or b""))]


# ------------------------------------------------------------------------------ errors

def test_unknown_topic_and_partition_errors(client):
    assert client.create_topic("known", 2).error_code == 0
    assert client.produce("nosuch", 0, batch([b"a"])).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert client.produce("known", 2, batch([b"a"])).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert client.produce("known", -1, batch([b"a"])).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert client.fetch("known", 7, 0).responses[0].partitions[0].error_code == \
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert client.fetch("nosuch", 0, 0).responses[0].partitions[0].error_code == \
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert client.list_offset("known", 9, -1).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert client.list_offset("nosuch", 0, -1).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


@pytest.mark.parametrize("name,code", [
    ("bad name!", ErrorCode.INVALID_TOPIC_EXCEPTION), ("", ErrorCode.INVALID_TOPIC_EXCEPTION),
    (".", ErrorCode.INVALID_TOPIC_EXCEPTION), ("..", ErrorCode.INVALID_TOPIC_EXCEPTION),
    ("a" * 250, ErrorCode.INVALID_TOPIC_EXCEPTION), ("\u00fc", ErrorCode.INVALID_TOPIC_EXCEPTION),
    ("a" * 249, ErrorCode.NONE), ("ok.name_with-all", ErrorCode.NONE),
])
def test_topic_names_are_validated_as_kafka(client, name, code):
    assert client.create_topic(name).error_code == code


def test_duplicate_and_colliding_topics(client):
    assert client.create_topic("a.b_c").error_code == 0
    assert client.create_topic("a.b_c").error_code == ErrorCode.TOPIC_ALREADY_EXISTS
    # '.' and '_' collide in metric names: Kafka refuses the second one.
    assert client.create_topic("a_b.c").error_code == ErrorCode.INVALID_TOPIC_EXCEPTION


def test_produce_to_an_internal_topic_is_refused(client):
    assert client.produce("__consumer_offsets", 0, batch([b"x"])).error_code == \
        ErrorCode.INVALID_TOPIC_EXCEPTION


def test_message_too_large_and_record_list_too_large(client):
    # UnifiedLog: a batch over max.message.bytes is MESSAGE_TOO_LARGE; one over segment.bytes is
    # RECORD_LIST_TOO_LARGE.
    assert client.create_topic("small", 1, {"max.message.bytes": "200"}).error_code == 0
    assert client.produce("small", 0, batch([b"x" * 500])).error_code == ErrorCode.MESSAGE_TOO_LARGE
    assert client.create_topic("broker-default", 1).error_code == 0
    assert client.produce("broker-default", 0, batch([os.urandom(1_100_000)])).error_code == \
        ErrorCode.MESSAGE_TOO_LARGE
    assert client.create_topic("segment", 1, {"segment.bytes": "1048576",
                                              "max.message.bytes": "4000000"}).error_code == 0
    assert client.produce("segment", 0, batch([os.urandom(1_200_000)])).error_code == \
        ErrorCode.RECORD_LIST_TOO_LARGE
    assert _fetch_partition(client, "small", 0).high_watermark == 0


def test_corrupt_crc_and_legacy_magic(client):
    assert client.create_topic("crc", 1).error_code == 0
    good = bytearray(batch([b"a", b"b"]))
    for at in (len(good) - 1, 17, 30):   # last record byte, the CRC itself, the attributes area
        bad = bytearray(good)
        bad[at] ^= 0xFF
        assert client.produce("crc", 0, bytes(bad)).error_code == ErrorCode.CORRUPT_MESSAGE, at
    # Produce v3+ only carries magic 2 (ProduceRequest.validateRecords): INVALID_RECORD.
    legacy_body = struct.pack(">bbq", 1, 0, 1000) + struct.pack(">i", -1) + struct.pack(">i", 1) + b"v"
    message = struct.pack(">I", zlib.crc32(legacy_body)) + legacy_body
    legacy = struct.pack(">qi", 0, len(message)) + message
    for version in (3, 9):
        assert client.produce("crc", 0, legacy, version=version).error_code == ErrorCode.INVALID_RECORD
    assert client.produce("crc", 0, bytes(good) + bytes(good)).error_code == ErrorCode.INVALID_RECORD
    assert client.produce("crc", 0, b"").error_code == ErrorCode.INVALID_RECORD
    assert _fetch_partition(client, "crc", 0).high_watermark == 0
    assert client.produce("crc", 0, bytes(good)).base_offset == 0


# ------------------------------------------------------------------------------ acks=0

def test_acks_zero_gets_no_response_and_the_next_request_keeps_its_correlation_id(client):
    assert client.create_topic("fire", 1).error_code == 0
    for _ in range(3):
        client.produce("fire", 0, batch([b"q"]), acks=0)
    sent = client.send(18, 0, M.ApiVersionsRequest(), correlation_id=4242)
    correlation_id, response = client.receive(18, 0)
    assert correlation_id == sent == 4242 and response.error_code == 0
    assert _fetch_partition(client, "fire", 0).high_watermark == 3


def test_acks_zero_with_an_error_closes_the_connection(client):
    # KafkaApis: acks=0 has no response to carry an error, so Kafka closes the connection and the
    # producer refreshes its metadata.
    client.produce("nosuch-acks0", 0, batch([b"q"]), acks=0)
    client.send(18, 0, M.ApiVersionsRequest())
    assert wait_closed(client.sock) == "closed"


# ------------------------------------------------------------------------------ fetch

def test_fetch_middle_of_batch_end_of_log_and_beyond(client):
    assert client.create_topic("hw", 1).error_code == 0
    assert client.produce("hw", 0, batch([b"a", b"b", b"c"])).base_offset == 0
    assert client.produce("hw", 0, batch([b"d", b"e", b"f"])).base_offset == 3
    middle = _fetch_partition(client, "hw", 4)
    assert middle.error_code == 0 and middle.high_watermark == 6
    assert _batches(middle) == [(3, 3)]          # the whole batch holding offset 4
    at_end = _fetch_partition(client, "hw", 6)
    assert at_end.error_code == 0 and _batches(at_end) == []
    assert _fetch_partition(client, "hw", 7).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert _fetch_partition(client, "hw", -5).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    # KIP-74: the first batch comes back even when larger than max_bytes
    tiny = _fetch_partition(client, "hw", 0, max_bytes=1)
    assert tiny.error_code == 0 and _batches(tiny)[:1] == [(0, 3)]


def test_high_watermark_after_multi_record_batches_and_log_start_after_delete_records(client):
    assert client.create_topic("multi", 1).error_code == 0
    total = 0
    for size in (1, 5, 17, 2):
        assert client.produce("multi", 0, batch([b"r"] * size)).base_offset == total
        total += size
    assert _fetch_partition(client, "multi", 0).high_watermark == total
    assert client.list_offset("multi", 0, -1).offset == total
    D = M.DeleteRecordsRequest
    response = client.request(21, 2, D(topics=[D.DeleteRecordsTopic(name="multi", partitions=[
        D.DeleteRecordsPartition(partition_index=0, offset=6)])], timeout_ms=5000))
    assert response.topics[0].partitions[0].low_watermark == 6
    assert client.list_offset("multi", 0, -2).offset == 6
    below = client.fetch("multi", 0, 0).responses[0].partitions[0]
    # Kafka 3.9 answers a consumer's out-of-range fetch with unknown offsets (-1), not its log start
    assert (below.error_code, below.high_watermark, below.last_stable_offset, below.log_start_offset) \
        == (ErrorCode.OFFSET_OUT_OF_RANGE, -1, -1, -1)


# ------------------------------------------------------------------------------ ListOffsets

def test_list_offsets_on_an_empty_partition(client):
    assert client.create_topic("empty", 1).error_code == 0
    for timestamp in (-1, -2):
        answer = client.list_offset("empty", 0, timestamp)
        assert (answer.error_code, answer.offset) == (0, 0)
    for timestamp in (0, 12345):
        answer = client.list_offset("empty", 0, timestamp)
        assert (answer.error_code, answer.offset, answer.timestamp) == (0, -1, -1)


def test_list_offsets_by_timestamp_before_between_after(client):
    assert client.create_topic("ts", 1).error_code == 0
    client.produce("ts", 0, batch([b"a", b"b"], timestamps=[1000, 2000]))
    client.produce("ts", 0, batch([b"c", b"d"], timestamps=[3000, 4000]))
    expected = {0: (0, 1000), 1000: (0, 1000), 1500: (1, 2000), 2000: (1, 2000),
                2500: (2, 3000), 4000: (3, 4000), 4001: (-1, -1)}
    for timestamp, (offset, found) in expected.items():
        answer = client.list_offset("ts", 0, timestamp)
        assert (answer.error_code, answer.offset, answer.timestamp) == (0, offset, found), timestamp
    assert client.list_offset("ts", 0, -3).offset == 3         # max timestamp (KIP-734)
    assert client.list_offset("ts", 0, -1, version=1).offset == 4


# ------------------------------------------------------------------------------ idempotence

def test_duplicate_idempotent_batches_return_the_original_offsets(client):
    assert client.create_topic("idem", 1).error_code == 0
    answer = client.request(22, 4, M.InitProducerIdRequest(
        transactional_id=None, transaction_timeout_ms=-1, producer_id=-1, producer_epoch=-1))
    pid, epoch = answer.producer_id, answer.producer_epoch
    first = batch([b"a", b"b"], producer_id=pid, producer_epoch=epoch, base_sequence=0)
    second = batch([b"c"], producer_id=pid, producer_epoch=epoch, base_sequence=2)
    assert client.produce("idem", 0, first).base_offset == 0
    assert client.produce("idem", 0, second).base_offset == 2
    for duplicate, offset in ((first, 0), (second, 2)):
        answer = client.produce("idem", 0, duplicate)
        assert (answer.error_code, answer.base_offset) == (0, offset)
    gap = batch([b"d"], producer_id=pid, producer_epoch=epoch, base_sequence=5)
    assert client.produce("idem", 0, gap).error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert _fetch_partition(client, "idem", 0).high_watermark == 3
    v0 = client.request(22, 0, M.InitProducerIdRequest(transactional_id=None,
                                                        transaction_timeout_ms=60000))
    assert v0.error_code == 0 and v0.producer_id >= 0 and v0.producer_id != pid


def test_read_committed_is_bounded_by_the_last_stable_offset(client):
    assert client.create_topic("tx", 1).error_code == 0
    assert client.request(10, 3, M.FindCoordinatorRequest(key="txn-1", key_type=1)).error_code == 0
    init = client.request(22, 4, M.InitProducerIdRequest(
        transactional_id="txn-1", transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1))
    pid, epoch = init.producer_id, init.producer_epoch
    A = M.AddPartitionsToTxnRequest
    added = client.request(24, 3, A(v3_and_below_transactional_id="txn-1",
                                    v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
                                    v3_and_below_topics=[A.AddPartitionsToTxnTopic(name="tx", partitions=[0])]))
    assert added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
    client.produce("tx", 0, batch([b"before"]))
    assert client.produce("tx", 0, batch([b"t1", b"t2"], producer_id=pid, producer_epoch=epoch,
                                         base_sequence=0, transactional=True),
                          transactional_id="txn-1").base_offset == 1
    client.produce("tx", 0, batch([b"after"]))
    committed = _fetch_partition(client, "tx", 0, isolation_level=1)
    assert (committed.high_watermark, committed.last_stable_offset) == (4, 1)
    assert _batches(committed) == [(0, 1)]
    uncommitted = _fetch_partition(client, "tx", 0, isolation_level=0)
    assert _batches(uncommitted) == [(0, 1), (1, 2), (3, 1)]
    assert client.list_offset("tx", 0, -1, isolation_level=1).offset == 1
    assert client.list_offset("tx", 0, -1, isolation_level=0).offset == 4
    ended = client.request(26, 3, M.EndTxnRequest(transactional_id="txn-1", producer_id=pid,
                                                  producer_epoch=epoch, committed=False))
    assert ended.error_code == 0
    # As in Kafka, EndTxn answers once the decision is in the transaction log; the markers reach
    # the partition right after (asynchronously), and with them the last stable offset moves.
    deadline = time.monotonic() + 10
    aborted = _fetch_partition(client, "tx", 0, isolation_level=1)
    while aborted.last_stable_offset != 5 and time.monotonic() < deadline:
        time.sleep(0.01)
        aborted = _fetch_partition(client, "tx", 0, isolation_level=1)
    assert aborted.last_stable_offset == aborted.high_watermark == 5
    assert [(t.producer_id, t.first_offset) for t in aborted.aborted_transactions] == [(pid, 1)]


# ------------------------------------------------------------------------------ admin & groups

def test_describe_configs_with_no_keys_lists_every_config(client):
    assert client.create_topic("cfg", 1).error_code == 0
    D = M.DescribeConfigsRequest
    for keys in (None, []):
        result = client.request(32, 4, D(resources=[D.DescribeConfigsResource(
            resource_type=2, resource_name="cfg", configuration_keys=keys)])).results[0]
        names = {c.name for c in result.configs}
        assert result.error_code == 0 and {"cleanup.policy", "retention.ms",
                                           "max.message.bytes"} <= names
    broker_result = client.request(32, 4, D(resources=[D.DescribeConfigsResource(
        resource_type=4, resource_name="1", configuration_keys=None)])).results[0]
    assert broker_result.error_code == 0 and len(broker_result.configs) > 20
    unknown = client.request(32, 4, D(resources=[D.DescribeConfigsResource(
        resource_type=2, resource_name="nosuch", configuration_keys=None)])).results[0]
    assert unknown.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_create_partitions_answers_every_topic(client):
    assert client.create_topic("grow", 1).error_code == 0
    P = M.CreatePartitionsRequest

    def create(name, count):
        return client.request(37, 3, P(topics=[P.CreatePartitionsTopic(
            name=name, count=count, assignments=None)], timeout_ms=5000, validate_only=False)).results

    [result] = create("grow", 3)
    assert (result.name, result.error_code) == ("grow", 0)
    assert len(_metadata(client, ["grow"]).topics[0].partitions) == 3
    assert create("grow", 2)[0].error_code == ErrorCode.INVALID_PARTITIONS
    assert create("grow", 3)[0].error_code == ErrorCode.INVALID_PARTITIONS
    assert create("nosuch", 2)[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def _commit(client, group, topic, offset, metadata, version=8):
    C = M.OffsetCommitRequest
    return client.request(8, version, C(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                                        topics=[C.OffsetCommitRequestTopic(name=topic, partitions=[
                                            C.OffsetCommitRequestPartition(
                                                partition_index=0, committed_offset=offset,
                                                committed_metadata=metadata)])]))


def test_offset_commit_keeps_metadata_and_offset_fetch_null_topics_returns_all(client):
    assert client.create_topic("oc", 2).error_code == 0
    assert client.request(10, 3, M.FindCoordinatorRequest(key="g1", key_type=0)).error_code == 0
    assert _commit(client, "g1", "oc", 7, "meta-x").topics[0].partitions[0].error_code == 0
    F = M.OffsetFetchRequest
    everything = client.request(9, 7, F(group_id="g1", topics=None, require_stable=False))
    assert [(t.name, [(p.partition_index, p.committed_offset, p.metadata) for p in t.partitions])
            for t in everything.topics] == [("oc", [(0, 7, "meta-x")])]
    listed = client.request(9, 1, F(group_id="g1", topics=[F.OffsetFetchRequestTopic(
        name="oc", partition_indexes=[0, 1])]))
    assert [(p.partition_index, p.committed_offset) for p in listed.topics[0].partitions] == \
        [(0, 7), (1, -1)]
    grouped = client.request(9, 8, F(groups=[F.OffsetFetchRequestGroup(group_id="g1", topics=None)]))
    assert grouped.groups[0].topics[0].partitions[0].metadata == "meta-x"
    assert _commit(client, "g1", "nosuch", 1, "").topics[0].partitions[0].error_code == \
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert _commit(client, "g1", "oc", 1, "m" * 5000).topics[0].partitions[0].error_code == \
        ErrorCode.OFFSET_METADATA_TOO_LARGE


# ------------------------------------------------------------------------------ ApiVersions

def _uvarint(data, pos):
    value = shift = 0
    while True:
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        if byte < 0x80:
            return value, pos
        shift += 7


def test_api_versions_v3_bytes_carry_no_tagged_field_at_its_default(client):
    frame = protocol.encode_request(18, 3, 77, "x", M.ApiVersionsRequest(
        client_software_name="probe", client_software_version="1.0"))
    client.send_raw(sized(frame))
    raw = client.receive_frame()
    # Response header v0 (never flexible for ApiVersions): correlation id only.
    assert struct.unpack_from(">i", raw)[0] == 77
    pos = 4
    assert struct.unpack_from(">h", raw, pos)[0] == 0
    pos += 2
    count, pos = _uvarint(raw, pos)
    for _ in range(count - 1):
        pos += 6
        tags, pos = _uvarint(raw, pos)
        assert tags == 0
    pos += 4   # throttle_time_ms
    tags, pos = _uvarint(raw, pos)
    seen = []
    for _ in range(tags):
        tag, pos = _uvarint(raw, pos)
        size, pos = _uvarint(raw, pos)
        value = raw[pos:pos + size]
        pos += size
        seen.append(tag)
        if tag in (0, 2):
            assert value[0] > 1, f"tag {tag}: empty array written"
        elif tag == 1:
            assert struct.unpack(">q", value)[0] != -1, "FinalizedFeaturesEpoch -1 written"
        elif tag == 3:
            assert value != b"\x00", "ZkMigrationReady false written"
    assert pos == len(raw) and seen == sorted(seen)


def test_api_versions_unknown_version_gets_a_v0_answer(client):
    # KIP-511: an ApiVersions version the broker does not know gets UNSUPPORTED_VERSION in v0 form.
    header = struct.pack(">hhih", 18, 99, 7, 3) + b"raw" + b"\x00\x01\x02"
    client.send_raw(sized(header))
    raw = client.receive_frame()
    correlation_id, error_code, count = struct.unpack_from(">ihi", raw)
    assert (correlation_id, error_code) == (7, ErrorCode.UNSUPPORTED_VERSION)
    assert len(raw) == 10 + count * 6   # v0 layout: int32 array of (key, min, max), nothing else
    keys = {struct.unpack_from(">h", raw, 10 + 6 * i)[0] for i in range(count)}
    assert {0, 1, 3, 18} <= keys
    # the connection stays usable
    assert client.request(18, 0, M.ApiVersionsRequest()).error_code == 0


# ------------------------------------------------------------------------------ Metadata

def test_metadata_null_empty_and_auto_create(client):
    assert client.create_topic("present", 1).error_code == 0
    for version in (1, 4, 9, 12):
        assert [t.name for t in _metadata(client, None, version).topics] == ["present"]
        assert _metadata(client, [], version).topics == []
    assert [t.name for t in _metadata(client, [], 0).topics] == ["present"]   # v0: empty = all
    # the request that creates a topic answers it unknown (as Kafka 3.9 in KRaft), the next finds it
    creating = _metadata(client, ["auto-made"], 12, auto=True).topics[0]
    assert (creating.error_code, creating.partitions) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, [])
    created = _metadata(client, ["auto-made"], 12, auto=True).topics[0]
    assert created.error_code == 0 and len(created.partitions) == 1
    missing = _metadata(client, ["not-made"], 12, auto=False).topics[0]
    assert missing.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert _metadata(client, ["bad name!"], 12, auto=True).topics[0].error_code == \
        ErrorCode.INVALID_TOPIC_EXCEPTION
    # v0-3 always auto-create
    assert _metadata(client, ["made-by-v3"], 3).topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert _metadata(client, ["made-by-v3"], 3).topics[0].error_code == 0


def test_metadata_v10_v11_topic_ids_are_an_invalid_request(client):
    # KafkaApis.handleTopicMetadataRequest: before v12 a null name or a topic id is an
    # InvalidRequestException, answered per topic with INVALID_REQUEST (the error response turns a
    # null name into "").
    assert client.create_topic("by-id", 1).error_code == 0
    for version in (10, 11):
        request = M.MetadataRequest(topics=[M.MetadataRequest.MetadataRequestTopic(
            name=None, topic_id=uuid.uuid4())], allow_auto_topic_creation=False)
        response = client.request(3, version, request)
        assert [t.error_code for t in response.topics] == [ErrorCode.INVALID_REQUEST]


def test_list_offsets_with_a_duplicated_partition_is_an_invalid_request(client):
    # KafkaApis.handleListOffsetRequest: a partition named twice (ListOffsetsRequest
    # .duplicatePartitions) is answered INVALID_REQUEST, every time it appears.
    assert client.create_topic("dup", 1).error_code == 0
    L = M.ListOffsetsRequest
    response = client.request(2, 7, L(replica_id=-1, isolation_level=0, topics=[L.ListOffsetsTopic(
        name="dup", partitions=[L.ListOffsetsPartition(partition_index=0, timestamp=-1),
                                L.ListOffsetsPartition(partition_index=0, timestamp=-2)])]))
    codes = [p.error_code for t in response.topics for p in t.partitions]
    assert codes and set(codes) == {ErrorCode.INVALID_REQUEST}   # newer Kafka answers it once


def test_fetch_sessions_and_long_polling(client, broker):
    assert client.create_topic("poll", 2).error_code == 0
    F = M.FetchRequest

    def request(session_id, epoch, topics, wait=0, min_bytes=1):
        return client.request(1, 11, F(
            replica_id=-1, max_wait_ms=wait, min_bytes=min_bytes, max_bytes=1 << 20,
            isolation_level=0, session_id=session_id, session_epoch=epoch, rack_id="",
            forgotten_topics_data=[], topics=[F.FetchTopic(topic="poll", partitions=[
                F.FetchPartition(partition=p, fetch_offset=0, partition_max_bytes=1 << 20)
                for p in partitions]) for partitions in topics]))

    assert request(12345, 3, [[0]]).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    opened = request(0, 0, [[0, 1]])
    assert opened.error_code == 0 and opened.session_id != 0
    assert request(opened.session_id, 5, []).error_code == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    # A long poll is woken by an append from another connection, not by its timeout.
    with RawClient("127.0.0.1", broker.port) as other:
        timer = threading.Timer(0.3, lambda: other.produce("poll", 0, batch([b"wake"])))
        timer.start()
        started = time.monotonic()
        woken = request(0, -1, [[0]], wait=20_000)
        timer.join()
    assert time.monotonic() - started < 10
    assert len(woken.responses[0].partitions[0].records) > 0
    # Responses leave in request order even when the first request long-polls.
    first = client.send(1, 11, F(replica_id=-1, max_wait_ms=500, min_bytes=10**6, max_bytes=1 << 20,
                                 isolation_level=0, session_id=0, session_epoch=-1, rack_id="",
                                 forgotten_topics_data=[], topics=[F.FetchTopic(topic="poll", partitions=[
                                     F.FetchPartition(partition=1, fetch_offset=0,
                                                      partition_max_bytes=1 << 20)])]))
    second = client.send(18, 0, M.ApiVersionsRequest())
    assert client.receive(1, 11)[0] == first
    assert client.receive(18, 0)[0] == second


def test_join_group_validation_errors(client):
    J = M.JoinGroupRequest

    def join(group, session_timeout, protocols=("range",)):
        return client.request(11, 5, J(
            group_id=group, session_timeout_ms=session_timeout, rebalance_timeout_ms=1000,
            member_id="", group_instance_id=None, protocol_type="consumer",
            protocols=[J.JoinGroupRequestProtocol(name=n, metadata=b"") for n in protocols])).error_code

    # a client finds the coordinator first (before, a join finds no coordinator: NOT_COORDINATOR)
    assert client.request(10, 3, M.FindCoordinatorRequest(key="g2", key_type=0)).error_code == 0
    assert join("g", 10**9) == ErrorCode.INVALID_SESSION_TIMEOUT
    assert join("g", 10) == ErrorCode.INVALID_SESSION_TIMEOUT
    assert join("", 10_000) == ErrorCode.INVALID_GROUP_ID
    assert join("g2", 10_000, protocols=()) == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_header_edge_cases_are_accepted(client):
    # A null client id (length -1) is legal in request header v1.
    client.send_raw(sized(struct.pack(">hhih", 18, 0, 5, -1)))
    assert client.receive(18, 0)[0] == 5
    # Unknown tagged fields in the v2 request header and in a flexible body are skipped.
    frame = protocol.encode_request(3, 12, 6, "x", M.MetadataRequest(topics=None))
    header_end = 8 + 2 + 1            # api key, version, correlation id, client id "x"
    assert frame[header_end] == 0
    client.send_raw(sized(frame[:header_end] + bytes([1, 5, 3]) + b"abc" + frame[header_end + 1:]))
    assert client.receive(3, 12)[0] == 6
    assert frame[-1] == 0
    client.send_raw(sized(frame[:-1] + bytes([1, 40, 2]) + b"zz"))
    assert client.receive(3, 12)[0] == 6


def test_min_insync_replicas_counts_at_most_the_replicas_there_are(client):
    # Kafka 3.9 (checked side by side): acks=all needs min(min.insync.replicas, replicas) in sync, so
    # a one-replica topic takes acks=all at min.insync.replicas=2 (refusals with three replicas:
    # tests/replication/test_cluster_replication.py)
    assert client.create_topic("isr", 1, {"min.insync.replicas": "2"}).error_code == 0
    assert client.produce("isr", 0, batch([b"x"])).error_code == ErrorCode.NONE
    assert client.produce("isr", 0, batch([b"x"]), acks=1).error_code == ErrorCode.NONE


def test_responses_before_a_bad_frame_are_delivered_then_the_connection_closes(client):
    first = client.send(18, 0, M.ApiVersionsRequest())
    client.send_raw(sized(struct.pack(">hhih", 999, 0, 8, 1) + b"x"))
    assert client.receive(18, 0)[0] == first
    assert wait_closed(client.sock) == "closed"


def test_transactional_produce_to_a_partition_outside_the_transaction_is_refused(client):
    # KIP-890 part 1 (transaction.partition.verification.enable, default true since 3.6): the
    # leader verifies with the coordinator that the partition is in the ongoing transaction and
    # refuses the batch otherwise, so no hanging transaction can stall read_committed consumers.
    assert client.create_topic("unverified", 1).error_code == 0
    assert client.request(10, 3, M.FindCoordinatorRequest(key="txn-v", key_type=1)).error_code == 0
    init = client.request(22, 4, M.InitProducerIdRequest(
        transactional_id="txn-v", transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1))
    answer = client.produce("unverified", 0, batch(
        [b"stray"], producer_id=init.producer_id, producer_epoch=init.producer_epoch,
        base_sequence=0, transactional=True))
    assert answer.error_code != ErrorCode.NONE
    assert client.produce("unverified", 0, batch([b"plain"])).error_code == 0
    data = _fetch_partition(client, "unverified", 0, isolation_level=1)
    assert data.last_stable_offset == data.high_watermark
