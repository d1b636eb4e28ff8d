"""Scenario 6: transactions. Commit one batch, abort another: read_committed sees only the committed,
read_uncommitted sees both; an open transaction bounds read_committed at the last stable offset;
consume-transform-produce with the offsets sent to the transaction."""

from odradek_compat.checks import Step
from odradek_compat.records import Rec
from odradek_compat.topics import create_topic

SCENARIO = "6 transactions"


def test_commit_abort_and_isolation_levels(client, helper, names):
    step = Step(client)
    topic = create_topic(helper, names("txn"), partitions=2)
    committed_1 = [Rec(f"c{i}".encode(), f"committed-1-{i}".encode(), partition=i % 2) for i in range(10)]
    aborted = [Rec(f"a{i}".encode(), f"aborted-{i}".encode(), partition=i % 2) for i in range(10)]
    committed_2 = [Rec(f"d{i}".encode(), f"committed-2-{i}".encode(), partition=i % 2) for i in range(10)]
    client.txn_produce(topic, names("txid"), [(committed_1, True), (aborted, False), (committed_2, True)])

    def by_partition(records):
        return {p: [r.value for r in sorted(records, key=lambda r: r.offset) if r.partition == p] for p in (0, 1)}

    got_committed = client.consume(topic, isolation="read_committed")
    step("read_committed sees only committed records, in order",
         {p: [r.value for r in [*committed_1, *committed_2] if r.partition == p] for p in (0, 1)},
         by_partition(got_committed))
    got_all = client.consume(topic, isolation="read_uncommitted")
    step("read_uncommitted sees committed and aborted records, in order",
         {p: [r.value for r in [*committed_1, *aborted, *committed_2] if r.partition == p] for p in (0, 1)},
         by_partition(got_all))
    ends = helper.list_offsets(topic, [0, 1])
    step("control markers take offsets: 15 records + 3 markers per partition", {0: (0, 18), 1: (0, 18)}, ends)


def test_open_transaction_bounds_read_committed(client, helper, names):
    """read_committed stops at the last stable offset: an open transaction's records stay invisible (and
    do not hang the reader) until it commits; read_uncommitted sees them at once."""
    step = Step(client)
    topic = create_topic(helper, names("lso"))
    before = [Rec(None, f"committed-{i}".encode()) for i in range(5)]
    pending = [Rec(None, f"pending-{i}".encode()) for i in range(5)]
    client.txn_produce(topic, names("txid-a"), [(before, True)])
    handle = client.txn_open(topic, names("txid-b"), pending)
    try:
        step("read_committed while a transaction is open", [r.value for r in before],
             [r.value for r in client.consume(topic, isolation="read_committed", timeout=20)])
        step("read_uncommitted while a transaction is open", [r.value for r in before + pending],
             [r.value for r in client.consume(topic, isolation="read_uncommitted", timeout=20)])
    finally:
        client.txn_close(handle, commit=True)
    step("read_committed after the commit", [r.value for r in before + pending],
         [r.value for r in client.consume(topic, isolation="read_committed", timeout=20)])


def test_consume_transform_produce(client, helper, names):
    step = Step(client)
    source = create_topic(helper, names("ctp-in"))
    sink = create_topic(helper, names("ctp-out"))
    inputs = [Rec(f"k{i}".encode(), f"word-{i}".encode()) for i in range(20)]
    helper.produce(source, inputs)
    group = names("group")
    processed = client.consume_transform_produce(source, sink, group, names("txid"), count=len(inputs))
    step("records processed", len(inputs), processed)
    out = helper.consume(sink, isolation="read_committed")
    step("transformed records committed to the sink, in order",
         [(r.key, r.value.upper()) for r in inputs], [(r.key, r.value) for r in out])
    committed = helper.committed(group, source, [0])
    step("consumed offsets committed through the transaction", len(inputs),
         committed[0][0] if committed[0] else None)
