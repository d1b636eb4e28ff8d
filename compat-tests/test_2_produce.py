"""Scenario 2: produce with acks 0/1/all; keys and the client's partitioner; headers; null key and value;
every compression codec; a record near the size limit succeeds and one over it fails with the right error."""

import os
import re
from collections import defaultdict

import pytest

from odradek_compat.checks import Step, wait_until
from odradek_compat.clients import COMPRESSIONS
from odradek_compat.records import Rec
from odradek_compat.topics import create_topic, produce_ok

SCENARIO = "2 produce"


def contents(records):
    return [r.content() for r in records]


def check_deliveries(step, deliveries, n, expect_offsets: bool, partition: int = 0):
    errors = [d.error for d in deliveries if d.error]
    step("produce without errors", [], errors)
    step("one delivery per record", n, len(deliveries))
    if expect_offsets and all(d.offset is not None for d in deliveries):
        step("assigned offsets", list(range(n)), [d.offset for d in deliveries])


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_acks(client, helper, names, acks):
    step = Step(client)
    topic = create_topic(helper, names("acks"))
    sent = [Rec(f"k{i}".encode(), f"acks={acks} #{i}".encode()) for i in range(20)]
    deliveries = client.produce(topic, sent, acks=acks)
    check_deliveries(step, deliveries, len(sent), expect_offsets=acks != "0")
    if acks == "0":  # nothing tells the producer when the broker appended: wait for it (bounded)
        wait_until("appended", lambda: helper.list_offsets(topic, [0]), lambda o: o[0][1] >= len(sent), 15)
    got = client.consume(topic)
    step(f"read back what acks={acks} produced", contents(sent), contents(got))
    step("offsets read back", list(range(len(sent))), [r.offset for r in got])


def test_keys_use_one_partition(client, helper, names):
    step = Step(client)
    topic = create_topic(helper, names("keys"), partitions=4)
    keys = [f"key-{k}".encode() for k in range(6)]
    sent = [Rec(keys[i % len(keys)], f"value-{i}".encode()) for i in range(60)]
    deliveries = client.produce(topic, sent)
    step("produce without errors", [], [d.error for d in deliveries if d.error])
    got = client.consume(topic)
    step("count read back", len(sent), len(got))
    partitions_of_key = defaultdict(set)
    values_of_key = defaultdict(list)
    for r in sorted(got, key=lambda r: (r.partition, r.offset)):
        partitions_of_key[r.key].add(r.partition)
        values_of_key[r.key].append(r.value)
    step("each key in exactly one partition", {k: 1 for k in keys},
         {k: len(partitions_of_key[k]) for k in keys})
    step("per-key order kept", {k: [r.value for r in sent if r.key == k] for k in keys}, dict(values_of_key))
    reported = {(r.key, d.partition) for r, d in zip(sent, deliveries) if d.partition is not None}
    step("reported partitions match where records landed", set(),
         {(k, p) for k, p in reported if p not in partitions_of_key[k]})


def test_headers(client, helper, names):
    step = Step(client)
    topic = create_topic(helper, names("headers"))
    sent = [
        Rec(b"dup", b"v0", [("trace", b"a"), ("trace", b"b"), ("other", b"c")]),
        Rec(b"binary", b"v1", [("bin", bytes(range(256))), ("utf8", "žluť".encode())]),
        Rec(b"empty", b"v2", [("empty", b"")]),
        Rec(b"none", b"v3", []),
    ]
    produce_ok(step, client, topic, sent)
    got = client.consume(topic)
    step("headers read back (order, duplicate keys, binary, empty)", contents(sent), contents(got))


def test_header_null_value(client, helper, names):
    step = Step(client)
    topic = create_topic(helper, names("header-null"))
    sent = [Rec(b"k", b"v", [("null", None), ("after", b"x")])]
    produce_ok(step, client, topic, sent)
    step("a null header value read back as null", contents(sent), contents(client.consume(topic)))


def test_null_key_and_value(client, helper, names):
    step = Step(client)
    topic = create_topic(helper, names("nulls"))
    sent = [Rec(None, b"no key"), Rec(b"tombstone", None), Rec(b"", b"")]
    if client.name == "kcat":  # one kcat run cannot mix NULL and empty fields: the empty record goes alone
        produce_ok(step, client, topic, sent[:2])
        produce_ok(step, client, topic, sent[2:])
    else:
        produce_ok(step, client, topic, sent)
    got = client.consume(topic)
    step("null key, null value (tombstone), empty key and value", contents(sent), contents(got))


def test_null_key_with_null_value(client, helper, names):
    step = Step(client)
    topic = create_topic(helper, names("both-null"))
    sent = [Rec(None, None), Rec(None, b"after")]
    produce_ok(step, client, topic, sent)
    step("a record with neither key nor value", contents(sent), contents(client.consume(topic)))


@pytest.mark.parametrize("codec", COMPRESSIONS)
def test_compression_round_trip(client, helper, names, codec):
    step = Step(client)
    topic = create_topic(helper, names(f"codec-{codec}"), partitions=2)
    sent = [Rec(f"k{i % 7}".encode(), (f"{codec} record {i} " * 20).encode() + os.urandom(8).hex().encode(),
                [("codec", codec.encode())], partition=i % 2) for i in range(300)]
    deliveries = client.produce(topic, sent, compression=codec, linger_ms=50)
    step("produce without errors", [], sorted({d.error for d in deliveries if d.error}))
    got = client.consume(topic)
    for p in (0, 1):
        step(f"{codec} partition {p} read back", contents(sent[p::2]),
             contents(sorted((r for r in got if r.partition == p), key=lambda r: r.offset)))


TOO_LARGE = re.compile(r"too.?large|size.?too|larger than|MSG_SIZE_TOO_LARGE|MESSAGE_TOO_LARGE", re.I)


def test_message_size_limit(client, helper, names):
    step = Step(client)
    limit = 64 * 1024
    topic = create_topic(helper, names("size"), configs={"max.message.bytes": str(limit)})
    near = Rec(b"near", os.urandom((limit - 1024) // 2).hex().encode())  # batch overhead stays under 1 KiB
    over = Rec(b"over", os.urandom((limit + 4096) // 2).hex().encode())
    (ok,) = client.produce(topic, [near])
    step("record near max.message.bytes accepted", None, ok.error)
    (rejected,) = client.produce(topic, [over], timeout=30)
    step("record over max.message.bytes rejected as too large", "a MESSAGE_TOO_LARGE error", rejected.error,
         ok=rejected.error is not None and bool(TOO_LARGE.search(rejected.error)))
    got = client.consume(topic)
    step("only the accepted record is stored", [near.content()], contents(got))


# aiokafka has no name for INVALID_RECORD (87) and reports it as UnknownError (also against Kafka).
INVALID_RECORD = re.compile(r"invalid.?record|validate record|failed the validation|without key|"
                            r"UnknownError", re.I)


def test_compacted_topic_refuses_records_without_keys(client, helper, names):
    # Kafka refuses the whole batch holding a keyless record: those records with INVALID_RECORD
    # and a per-record error (KIP-467), the rest of their batch with them (librdkafka:
    # _INVALID_DIFFERENT_RECORD; Java: a KafkaException naming the batch). Nothing of it is stored.
    step = Step(client)
    topic = create_topic(helper, names("compact-nokey"), configs={"cleanup.policy": "compact"})
    sent = [Rec(None if i in (1, 3) else f"k{i}".encode(), f"v{i}".encode()) for i in range(5)]
    deliveries = client.produce(topic, sent, linger_ms=200, idempotent=False, timeout=30)
    step("keyless records fail as invalid records", "an INVALID_RECORD error",
         [deliveries[1].error, deliveries[3].error],
         ok=all(d.error and INVALID_RECORD.search(d.error) for d in (deliveries[1], deliveries[3])))
    (ok,) = client.produce(topic, [Rec(b"k", b"kept")])
    step("a keyed record is accepted afterwards", None, ok.error)
    delivered = [r.content() for r, d in zip(sent, deliveries) if not d.error] + [Rec(b"k", b"kept").content()]
    step("exactly the records delivered without error are stored", sorted(delivered),
         sorted(contents(client.consume(topic))))
