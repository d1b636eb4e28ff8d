"""Each record refusal, sent to Odradek and to the reference Apache Kafka 3.9: both answer the same
code, the same per-record errors (Produce v8+ record_errors, KIP-467), and store nothing.

The expected answers below are what Kafka 3.9 answered when these tests were written; running the
same cases against it (the `kafka` parameter) keeps them honest. Kafka's runs skip, with the
reason, where Java or the Kafka directory is missing (tests/apache_kafka.py).
"""

from __future__ import annotations

import collections
import random
import struct
import time
import uuid

import pytest

from protocol import ErrorCode
from protocol.records import HEADER, Compression, SimpleRecord, build_batch

from tests import apache_kafka as oracle
from tests.broker.raw_client import RawClient, batch
from tests.robustness.support import with_fixed_crc

NOW = int(time.time() * 1000)
HOUR = 3_600_000
_FIELDS = ["base_offset", "batch_length", "partition_leader_epoch", "magic", "crc", "attributes",
           "last_offset_delta", "base_timestamp", "max_timestamp", "producer_id", "producer_epoch",
           "base_sequence", "record_count"]


def _patched(data: bytes, **fields) -> bytes:
    values = list(HEADER.unpack_from(data, 0))
    for name, value in fields.items():
        values[_FIELDS.index(name)] = value
    out = bytearray(data)
    HEADER.pack_into(out, 0, *values)
    return with_fixed_crc(out)


def _resized(data: bytes) -> bytes:
    out = bytearray(data)
    struct.pack_into(">i", out, 8, len(out) - 12)
    return with_fixed_crc(out)


def _garbled(codec: Compression) -> bytes:
    data = bytearray(build_batch([SimpleRecord(value=b"x" * 100, timestamp=NOW)] * 3,
                                 compression_type=codec))
    data[61:] = random.Random(codec).randbytes(len(data) - 61)
    return with_fixed_crc(data)


def _keys(*keys, codec=Compression.NONE) -> bytes:
    return build_batch([SimpleRecord(value=b"v", key=k, timestamp=NOW) for k in keys],
                       compression_type=codec)


def _stamps(*stamps) -> bytes:
    return build_batch([SimpleRecord(value=b"v", key=b"k", timestamp=t) for t in stamps])


THREE = batch([b"a", b"b", b"c"])
COMPACT = {"cleanup.policy": "compact"}
BEFORE_1H = {"message.timestamp.before.max.ms": str(HOUR)}
AFTER_1H = {"message.timestamp.after.max.ms": str(HOUR)}

# name: (topic configs, batch, Produce version, Kafka's code, indices of the per-record errors)
CASES = {
    "count-above-records": ({}, _patched(THREE, record_count=5, last_offset_delta=4), 9,
                            ErrorCode.INVALID_RECORD, []),
    "count-below-records": ({}, _patched(THREE, record_count=1, last_offset_delta=0), 9,
                            ErrorCode.INVALID_RECORD, []),
    "records-cut-short": ({}, _resized(THREE[:-5]), 9, ErrorCode.INVALID_RECORD, []),
    "trailing-bytes": ({}, _resized(THREE + b"\0\0\0"), 9, ErrorCode.INVALID_RECORD, []),
    "gzip-count-above": ({}, _patched(_keys(b"a", b"b", codec=Compression.GZIP), record_count=4,
                                      last_offset_delta=3), 9, ErrorCode.INVALID_RECORD, []),
    "gzip-undecodable": ({}, _garbled(Compression.GZIP), 9, ErrorCode.UNKNOWN_SERVER_ERROR, []),
    "snappy-undecodable": ({}, _garbled(Compression.SNAPPY), 9, ErrorCode.UNKNOWN_SERVER_ERROR, []),
    "lz4-undecodable": ({}, _garbled(Compression.LZ4), 9, ErrorCode.UNKNOWN_SERVER_ERROR, []),
    "zstd-undecodable": ({}, _garbled(Compression.ZSTD), 9, ErrorCode.UNKNOWN_SERVER_ERROR, []),
    "compacted-without-keys": (COMPACT, _keys(b"k", None, b"k", None), 9,
                               ErrorCode.INVALID_RECORD, [1, 3]),
    "compacted-without-keys-gzip": (COMPACT, _keys(None, b"k", codec=Compression.GZIP), 9,
                                    ErrorCode.INVALID_RECORD, [0]),
    "compacted-without-keys-v7": (COMPACT, _keys(b"k", None), 7, ErrorCode.INVALID_RECORD, []),
    "timestamp-too-old": (BEFORE_1H, _stamps(NOW, NOW - 2 * HOUR, NOW, NOW - 2 * HOUR - 1), 9,
                          ErrorCode.INVALID_TIMESTAMP, [1, 3]),
    "timestamp-too-new": (AFTER_1H, _stamps(NOW, NOW + 2 * HOUR), 9, ErrorCode.INVALID_TIMESTAMP, [1]),
    "timestamp-too-old-v7": (BEFORE_1H, _stamps(NOW - 2 * HOUR), 7, ErrorCode.INVALID_TIMESTAMP, []),
    "keyless-and-too-old": ({**COMPACT, **BEFORE_1H},
                            build_batch([SimpleRecord(value=b"v", key=None, timestamp=NOW),
                                         SimpleRecord(value=b"v", key=b"k", timestamp=NOW - 2 * HOUR)]),
                            9, ErrorCode.INVALID_TIMESTAMP, [0, 1]),
}
# Accepted by both: Kafka does not check the offset deltas of uncompressed records.
ACCEPTED = {
    "uncompressed-deltas-0-0-0": build_batch([SimpleRecord(value=b"v", timestamp=NOW, offset_delta=0)] * 3,
                                             last_offset_delta=2),
}


apache_kafka = oracle.apache_kafka   # the session fixture, used through `target`


@pytest.fixture(params=["odradek", "kafka"])
def target(request, shared_broker):
    if request.param == "kafka":
        kafka = request.getfixturevalue("apache_kafka")
        return "127.0.0.1", kafka.port
    return "127.0.0.1", shared_broker.port


def _produce_when_ready(client, topic, data, version):
    deadline = time.monotonic() + 30
    while True:   # Kafka needs a moment before a new partition has its leader
        answer = client.produce(topic, 0, data, version=version)
        if answer.error_code not in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                     ErrorCode.NOT_LEADER_OR_FOLLOWER) or time.monotonic() > deadline:
            return answer
        time.sleep(0.1)


def _new_topic(client, configs) -> str:
    topic = f"refuse-{uuid.uuid4().hex[:10]}"
    assert client.create_topic(topic, 1, configs).error_code == 0
    return topic


@pytest.mark.parametrize("case", sorted(CASES))
def test_refusal_matches_kafka(target, case):
    configs, data, version, code, bad_records = CASES[case]
    with RawClient(*target, timeout=30) as client:
        topic = _new_topic(client, configs)
        answer = _produce_when_ready(client, topic, data, version)
        assert answer.error_code == code
        assert [e.batch_index for e in answer.record_errors] == bad_records
        if bad_records:
            assert answer.error_message.startswith("One or more records have been rejected")
        assert client.fetch(topic, 0, 0).responses[0].partitions[0].high_watermark == 0
        assert _produce_when_ready(client, topic, _keys(b"k", b"k"), version).error_code == 0


@pytest.mark.parametrize("case", sorted(ACCEPTED))
def test_acceptance_matches_kafka(target, case):
    with RawClient(*target, timeout=30) as client:
        topic = _new_topic(client, {})
        assert _produce_when_ready(client, topic, ACCEPTED[case], 9).error_code == 0


def test_librdkafka_counts_the_records_of_a_refused_batch(target):
    # librdkafka fails the keyless records with INVALID_RECORD and the rest of their batch with
    # _INVALID_DIFFERENT_RECORD (its own test suite checks exactly these counts).
    confluent_kafka = pytest.importorskip("confluent_kafka")
    with RawClient(*target, timeout=30) as client:
        topic = _new_topic(client, COMPACT)
        _produce_when_ready(client, topic, _keys(b"warm-up"), 9)
    producer = confluent_kafka.Producer({"bootstrap.servers": "%s:%d" % target, "linger.ms": 200,
                                         "retries": 0, "enable.idempotence": False})
    outcomes = collections.Counter()
    for i in range(10):
        producer.produce(topic, value=b"v%d" % i, key=None if i in (3, 7) else b"k",
                         on_delivery=lambda err, _msg: outcomes.update([err.name() if err else "OK"]))
    assert producer.flush(30) == 0
    assert outcomes == {"INVALID_RECORD": 2, "_INVALID_DIFFERENT_RECORD": 8}


def test_transactional_records_without_a_transactional_id_are_refused(target):
    # Kafka refuses the whole request with TRANSACTIONAL_ID_AUTHORIZATION_FAILED (the id is what
    # the producer is authorised for); it does not look the producer id up.
    from protocol import messages

    I, P = messages.InitProducerIdRequest, messages.ProduceRequest
    with RawClient(*target, timeout=30) as client:
        topic = _new_topic(client, {})
        _produce_when_ready(client, topic, _keys(b"warm-up"), 9)
        deadline = time.monotonic() + 30
        while True:   # Kafka's producer-id manager needs a moment after start
            pid = client.request(22, 4, I(transactional_id=None, transaction_timeout_ms=60000,
                                          producer_id=-1, producer_epoch=-1))
            if pid.error_code == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert pid.error_code == 0
        records = build_batch([SimpleRecord(value=b"v", timestamp=NOW)], producer_id=pid.producer_id,
                              producer_epoch=pid.producer_epoch, base_sequence=0, transactional=True)
        body = P(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[P.TopicProduceData(
            name=topic, partition_data=[P.PartitionProduceData(index=0, records=records)])])
        answer = client.request(0, 9, body).responses[0].partition_responses[0]
        assert answer.error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        assert client.fetch(topic, 0, 0).responses[0].partitions[0].high_watermark == 1


@pytest.mark.parametrize("codec,topic_codec,expected", [
    (Compression.NONE, "gzip", Compression.GZIP),
    (Compression.LZ4, "zstd", Compression.ZSTD),
    (Compression.GZIP, "uncompressed", Compression.NONE),
])
def test_topic_compression_rewrites_batches_as_kafka(target, codec, topic_codec, expected):
    # Kafka rebuilds the batch: offsets 0..n-1, the first record's timestamp as the base
    # timestamp (build_batch's default is the smallest), the largest as the max, producer kept.
    from protocol.records import iter_batches

    records = [SimpleRecord(value=b"v%d" % i, key=b"k", timestamp=NOW + 10 - i) for i in range(3)]
    with RawClient(*target, timeout=30) as client:
        topic = _new_topic(client, {"compression.type": topic_codec})
        data = build_batch(records, compression_type=codec, producer_id=-1)
        assert _produce_when_ready(client, topic, data, 9).error_code == 0
        fetched = client.fetch(topic, 0, 0).responses[0].partitions[0]
    [stored] = list(iter_batches(bytes(fetched.records)))
    assert (stored.compression, stored.last_offset_delta) == (expected, 2)
    assert (stored.base_timestamp, stored.max_timestamp) == (NOW + 10, NOW + 10)
    assert [(r.offset, r.timestamp, r.value) for r in stored.records()] == \
        [(i, NOW + 10 - i, b"v%d" % i) for i in range(3)]


def test_log_append_time_with_topic_compression_as_kafka(target):
    from protocol.records import TimestampType, iter_batches

    records = [SimpleRecord(value=b"v", timestamp=NOW - 5000 + i) for i in range(3)]
    with RawClient(*target, timeout=30) as client:
        topic = _new_topic(client, {"compression.type": "gzip", "message.timestamp.type": "LogAppendTime"})
        answer = _produce_when_ready(client, topic, build_batch(records), 9)
        assert answer.error_code == 0 and answer.log_append_time_ms >= NOW
        [stored] = list(iter_batches(bytes(client.fetch(topic, 0, 0).responses[0].partitions[0].records)))
    assert stored.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert stored.base_timestamp == NOW - 5000          # the first record's own time, as Kafka
    assert stored.max_timestamp == answer.log_append_time_ms
    assert {r.timestamp for r in stored.records()} == {answer.log_append_time_ms}
