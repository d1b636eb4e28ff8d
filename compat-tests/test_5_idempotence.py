"""Scenario 5: the idempotent producer (the Java default): 10,000 records, each present exactly once; a
batch retried after a lost response is not duplicated."""

from collections import Counter

import pytest

from odradek_compat.checks import Step
from odradek_compat.clients import make_client
from odradek_compat.faults import DropProduceResponses
from odradek_compat.records import Rec
from odradek_compat.topics import create_topic, produce_ok

SCENARIO = "5 idempotence"


def test_ten_thousand_records_exactly_once(client, helper, names):
    step = Step(client)
    topic = create_topic(helper, names("idem"), partitions=4)
    sent = [Rec(f"k{i}".encode(), f"value-{i}".encode()) for i in range(10_000)]
    produce_ok(step, client, topic, sent, idempotent=True, linger_ms=20, timeout=120)
    got = client.consume(topic, timeout=60)
    counts = Counter(r.value for r in got)
    step("records read back", 10_000, len(got))
    step("records present more than once", [], sorted(v for v, n in counts.items() if n > 1)[:20])
    step("records missing", [], sorted({r.value for r in sent} - set(counts))[:20])
    for p in range(4):
        offsets = sorted(r.offset for r in got if r.partition == p)
        step(f"partition {p} offsets contiguous", list(range(len(offsets))), offsets)


def test_retried_batch_not_duplicated(client, helper, names, own_broker):
    """A proxy drops the connection instead of passing on the first Produce responses: the client must
    retry the same batches (same producer id and sequence) and the broker must not store them twice."""
    step = Step(client)
    if not client.survives_disconnects:
        pytest.skip(f"{client.name} terminates when its only broker connection drops")
    with DropProduceResponses(drop=2) as proxy:
        broker = own_broker(advertised_port=proxy.port)
        proxy.target_port = broker.port
        faulty = make_client(client.name, proxy.bootstrap)
        setup = make_client("confluent-kafka", f"127.0.0.1:{broker.port}")
        try:
            topic = create_topic(setup, names("retry"), partitions=1)
            sent = [Rec(None, f"retry-{i}".encode()) for i in range(50)]
            produce_ok(step, faulty, topic, sent, idempotent=True, linger_ms=50, timeout=60)
            step("responses the proxy dropped", 2, proxy.dropped)
            got = faulty.consume(topic)
        finally:
            faulty.close()
            setup.close()
    step("records after retried batches, each once, in order", [r.value for r in sent], [r.value for r in got])
