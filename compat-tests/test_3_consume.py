"""Scenario 3: consume from earliest with exact content and per-partition order; seek; offsets for times;
committed offsets round-trip (also all of a group's offsets at once); the high watermark equals the records
produced after multi-record batches; empty partitions answer offset lookups."""

import time

from odradek_compat.checks import Step
from odradek_compat.clients import Unsupported
from odradek_compat.records import Rec
from odradek_compat.topics import create_topic, produce_ok

SCENARIO = "3 consume"


def test_earliest_exact_content_and_order(client, helper, names):
    step = Step(client)
    topic = create_topic(helper, names("order"), partitions=3)
    sent = [Rec(f"k{i}".encode(), f"value {i}".encode(), [("seq", str(i).encode())], partition=i % 3)
            for i in range(90)]
    produce_ok(step, client, topic, sent, linger_ms=50)
    got = client.consume(topic)
    step("count", len(sent), len(got))
    for p in range(3):
        mine = [r for r in got if r.partition == p]
        step(f"partition {p} content in order", [r.content() for r in sent[p::3]], [r.content() for r in mine])
        step(f"partition {p} offsets", list(range(30)), [r.offset for r in mine])


def test_seek(client, helper, names):
    step = Step(client)
    topic = create_topic(helper, names("seek"))
    sent = [Rec(None, f"value {i}".encode()) for i in range(30)]
    produce_ok(step, client, topic, sent, linger_ms=50)
    got = client.consume(topic, start={0: 17})
    step("records from offset 17 (mid-batch)", [(i, sent[i].value) for i in range(17, 30)],
         [(r.offset, r.value) for r in got])


def test_offsets_for_times(client, helper, names):
    step = Step(client)
    topic = create_topic(helper, names("times"))
    base = int(time.time() * 1000) - 60_000
    sent = [Rec(b"a", b"first", timestamp=base), Rec(b"b", b"second", timestamp=base + 10_000),
            Rec(b"c", b"third", timestamp=base + 20_000)]
    try:
        produce_ok(step, client, topic, sent)
    except Unsupported:  # the lookup is what is tested here; kcat cannot set timestamps
        helper.produce(topic, sent)
    queries = [base - 5_000, base, base + 5_000, base + 10_000, base + 20_000, base + 20_001]
    got = client.offsets_for_times(topic, 0, queries)
    after_last = 3 if client.no_offset_is_latest else None  # KafkaJS substitutes the latest offset for -1
    step("offsets for: before first, first, between, exact, last, after last",
         [0, 0, 1, 1, 2, after_last], got)


def test_committed_offsets_round_trip(client, helper, names):
    step = Step(client)
    topic = create_topic(helper, names("commit"), partitions=2)
    helper.produce(topic, [Rec(None, b"x", partition=i % 2) for i in range(20)])
    group = names("group")
    offsets = {0: (5, "meta-zero"), 1: (10, "")}
    client.commit(group, topic, offsets)
    got = client.committed(group, topic, [0, 1])
    if client.commit_metadata:
        step("committed offsets and metadata", offsets, got)
    else:
        step("committed offsets", {p: o for p, (o, _) in offsets.items()},
             {p: (v[0] if v else None) for p, v in got.items()})
    fresh = client.committed(names("other-group"), topic, [0, 1])
    step("a group without commits has none", {0: None, 1: None}, fresh)


def test_all_offsets_of_a_group(client, helper, names):
    """OffsetFetch without a topic list answers every topic the group committed (not short)."""
    step = Step(client)
    first = create_topic(helper, names("all-a"), partitions=2)
    second = create_topic(helper, names("all-b"))
    group = names("group")
    helper.commit(group, first, {0: (4, ""), 1: (6, "")})
    helper.commit(group, second, {0: (9, "")})
    step("all of the group's committed offsets", {(first, 0): 4, (first, 1): 6, (second, 0): 9},
         client.group_offsets(group))


def test_high_watermark_after_multi_record_batches(client, helper, names):
    step = Step(client)
    topic = create_topic(helper, names("hwm"), partitions=2)
    sent = [Rec(f"k{i}".encode(), f"v{i}".encode(), partition=i % 2) for i in range(250)]
    produce_ok(step, client, topic, sent, linger_ms=100)
    step("earliest and latest offsets", {0: (0, 125), 1: (0, 125)}, client.list_offsets(topic, [0, 1]))
    step("records read back", 250, len(client.consume(topic)))


def test_empty_partition_offsets(client, helper, names):
    step = Step(client)
    topic = create_topic(helper, names("empty"), partitions=2)
    step("earliest and latest of empty partitions", {0: (0, 0), 1: (0, 0)}, client.list_offsets(topic, [0, 1]))
    after = None if not client.no_offset_is_latest else 0
    step("offset for a time on an empty partition", [after], client.offsets_for_times(topic, 0, [0]))
    step("reading an empty topic", [], client.consume(topic, timeout=10))
