"""Scenario 19: a Bytewax dataflow (confluent-kafka inside) from one topic through a map into another.

A real ``python -m bytewax.run`` process runs a dataflow built with ``bytewax.connectors.kafka.operators``:
input from a three-partition topic (not tailing, so it stops once every partition reports its end),
a map that rewrites each value and adds a header naming where the record came from, output to a
two-partition topic. Every record must come out transformed exactly once, key and headers kept.

Bytewax does not use the broker for offsets: its source assigns partitions itself (group id
``BYTEWAX_IGNORED``, auto-commit off) and keeps each partition's next offset in its own recovery store.
Run again with that store, the dataflow must resume where its last snapshot left off: only records sent
since come out, and no consumer group offsets appear on the broker.
Skips unless bytewax is importable (``pip install 'bytewax[kafka]'``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("bytewax.connectors.kafka", reason="needs bytewax: pip install 'bytewax[kafka]'")

from odradek_compat.records import Rec  # noqa: E402

IN_PARTITIONS, OUT_PARTITIONS = 3, 2

FLOW = textwrap.dedent("""
    import os

    from bytewax import operators as op
    from bytewax.connectors.kafka import KafkaSinkMessage, operators as kop
    from bytewax.dataflow import Dataflow

    env = os.environ
    brokers = [env["BYTEWAX_BOOTSTRAP"]]
    flow = Dataflow("shout")
    source = kop.input("in", flow, brokers=brokers, topics=[env["BYTEWAX_INPUT"]], tail=False)
    op.inspect("errors", source.errs).then(op.raises, "stop-on-error")

    def shout(msg):
        origin = ("origin", f"{msg.partition}:{msg.offset}".encode())
        return KafkaSinkMessage(msg.key, msg.value.upper() + b"!", headers=[*msg.headers, origin])

    kop.output("out", op.map("shout", source.oks, shout), brokers=brokers, topic=env["BYTEWAX_OUTPUT"])
""")


class Flow:
    """The dataflow in `directory`, between two fresh topics, with the records sent to its input so far."""

    def __init__(self, helper, names, directory):
        self.helper, self.directory = helper, directory
        self.input, self.output = names("words"), names("shouts")
        helper.create_topic(self.input, IN_PARTITIONS)
        helper.create_topic(self.output, OUT_PARTITIONS)
        (directory / "flow.py").write_text(FLOW)
        self.env = {**os.environ, "BYTEWAX_BOOTSTRAP": helper.bootstrap, "BYTEWAX_INPUT": self.input,
                    "BYTEWAX_OUTPUT": self.output}
        self.sent = 0

    def send(self, count: int) -> None:
        records = [Rec(f"key-{n % 7}".encode(), f"word {n}".encode(), [("n", str(n).encode())])
                   for n in range(self.sent, self.sent + count)]
        assert not [d.error for d in self.helper.produce(self.input, records) if d.error]
        self.sent += count

    def run(self, *args: str) -> None:
        """One run to the end of the input, bounded; fails with its output if it does not exit cleanly."""
        done = subprocess.run([sys.executable, "-m", "bytewax.run", "flow:flow", *args], cwd=self.directory,
                              env=self.env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    def expected(self, numbers) -> list[tuple]:
        return sorted((f"key-{n % 7}".encode(), f"WORD {n}!".encode(), n) for n in numbers)

    def outputs(self) -> list[tuple]:
        """(key, value, n) per output record, checking each one's origin header names its input record."""
        where = {(r.partition, r.offset): r for r in self.helper.consume(self.input, timeout=10)}
        out = []
        for record in self.helper.consume(self.output, timeout=10):
            headers = dict(record.headers)
            partition, offset = map(int, headers["origin"].split(b":"))
            source = where[(partition, offset)]
            assert (source.key, source.value.upper() + b"!") == (record.key, record.value)
            assert record.headers == [*source.headers, ("origin", headers["origin"])]
            out.append((record.key, record.value, int(headers["n"])))
        return sorted(out)


def test_kafka_source_map_sink(helper, names, tmp_path):
    flow = Flow(helper, names, tmp_path)
    flow.send(60)
    flow.run("-w", "2")   # two workers share the input partitions
    assert flow.outputs() == flow.expected(range(60))
    partitions_of: dict[bytes, set] = {}
    for record in helper.consume(flow.output, timeout=10):
        partitions_of.setdefault(record.key, set()).add(record.partition)
    assert all(len(p) == 1 for p in partitions_of.values()), partitions_of
    assert set().union(*partitions_of.values()) == set(range(OUT_PARTITIONS))


def test_resumes_from_its_recovery_store(helper, names, tmp_path):
    flow = Flow(helper, names, tmp_path)
    store = tmp_path / "recovery"
    store.mkdir()
    subprocess.run([sys.executable, "-m", "bytewax.recovery", str(store), "1"], check=True, timeout=30)
    recovering = ("-r", str(store), "-s", "1", "-b", "0")

    flow.send(30)
    flow.run(*recovering)
    assert flow.outputs() == flow.expected(range(30))

    flow.send(15)
    flow.run(*recovering)   # resumes at the offsets of its last snapshot: only the new records
    assert flow.outputs() == flow.expected(range(45))
    assert helper.group_offsets("BYTEWAX_IGNORED") == {}   # nothing committed to the broker

    flow.run()   # without the store it starts over from the beginning of every partition
    assert flow.outputs() == sorted(flow.expected(range(45)) + flow.expected(range(45)))
