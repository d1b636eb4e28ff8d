"""Scenario 15: a Quix Streams application (confluent-kafka inside) keeping per-key state on the broker.

A real ``quixstreams`` Application process reads an input topic, counts per key in its RocksDB state
store (backed by a changelog topic it creates itself, as it does the input and output topics with their
partitions and configs) and writes each count to an output topic. The first instance is stopped with
work in flight: under exactly-once it is SIGKILLed inside an open transaction, under at-least-once it
gets SIGTERM. A second instance starts on an empty state directory, so its state must come back from
the changelog, and a third one joins its consumer group so the partitions (and their state) split
between them. The output must hold every input record exactly once with its count, 1, 2, 3... per key.
Skips unless quixstreams is importable (``pip install quixstreams``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("quixstreams", reason="needs quixstreams: pip install quixstreams")

from odradek_compat.brokers import terminate  # noqa: E402
from odradek_compat.checks import wait_until  # noqa: E402
from odradek_compat.records import Rec  # noqa: E402

KEYS = [f"sensor-{i}" for i in range(5)]
PARTITIONS = 2
RETENTION_MS = "3600000"

APP = textwrap.dedent("""
    import os
    from quixstreams import Application
    from quixstreams.models import TopicConfig

    env = os.environ
    app = Application(
        broker_address=env["QUIX_BOOTSTRAP"], consumer_group=env["QUIX_GROUP"],
        auto_offset_reset="earliest", processing_guarantee=env["QUIX_GUARANTEE"],
        state_dir=env["QUIX_STATE_DIR"],
        commit_interval=float(env["QUIX_COMMIT_INTERVAL"]), commit_every=int(env["QUIX_COMMIT_EVERY"]),
        # a killed instance's open transaction and group membership must expire within the test
        producer_extra_config={"transaction.timeout.ms": 5000},
        consumer_extra_config={"session.timeout.ms": 6000})
    config = TopicConfig(num_partitions=int(env["QUIX_PARTITIONS"]), replication_factor=1,
                         extra_config={"retention.ms": env["QUIX_RETENTION_MS"]})
    source = app.topic(env["QUIX_INPUT"], value_deserializer="json", config=config)
    sink = app.topic(env["QUIX_OUTPUT"], value_serializer="json", config=config)

    def count(reading, state):
        seen = state.get("count", 0) + 1
        state.set("count", seen)
        return {"key": reading["key"], "n": reading["n"], "count": seen}

    app.dataframe(source).apply(count, stateful=True).to_topic(sink)
    app.run()
""")


class Pipeline:
    """The input records sent so far and the application instances started on them."""

    def __init__(self, helper, names, tmp_path, guarantee):
        self.helper, self.tmp_path = helper, tmp_path
        self.input, self.output, self.group = names("readings"), names("counts"), names("quix")
        self.sent: list[tuple[str, int]] = []
        self.instances: list[subprocess.Popen] = []
        (tmp_path / "app.py").write_text(APP)
        self.env = {"QUIX_BOOTSTRAP": helper.bootstrap, "QUIX_GROUP": self.group, "QUIX_GUARANTEE": guarantee,
                    "QUIX_INPUT": self.input, "QUIX_OUTPUT": self.output, "QUIX_PARTITIONS": str(PARTITIONS),
                    "QUIX_RETENTION_MS": RETENTION_MS}

    @property
    def changelog(self) -> str:   # Quix's naming: changelog__<group>--<topic>--<store>
        return f"changelog__{self.group}--{self.input}--default"

    def start(self, name: str, commit_interval: float = 0.5, commit_every: int = 0) -> subprocess.Popen:
        env = {**self.env, "QUIX_STATE_DIR": str(self.tmp_path / name),
               "QUIX_COMMIT_INTERVAL": str(commit_interval), "QUIX_COMMIT_EVERY": str(commit_every)}
        with open(self.tmp_path / f"{name}.log", "ab") as log:
            process = subprocess.Popen([sys.executable, "app.py"], cwd=self.tmp_path, stdout=log,
                                       stderr=subprocess.STDOUT, env={**os.environ, **env})
        self.instances.append(process)
        return process

    def send(self, count: int) -> None:
        records = []
        for n in range(len(self.sent), len(self.sent) + count):
            key = KEYS[n % len(KEYS)]
            records.append(Rec(key.encode(), json.dumps({"key": key, "n": n}).encode()))
            self.sent.append((key, n))
        assert not [d.error for d in self.helper.produce(self.input, records) if d.error]

    def output_records(self, isolation: str) -> list[dict]:
        return [json.loads(r.value) for r in self.helper.consume(self.output, isolation=isolation, timeout=10)]

    def wait_for_output(self, count: int, isolation: str = "read_committed", timeout: float = 45) -> list[dict]:
        return wait_until(f"{count} output records", lambda: self.output_records(isolation),
                          lambda records: len(records) >= count, timeout, pause=0.3)

    def expected(self) -> list[tuple[str, int, int]]:
        seen: dict[str, int] = {}
        out = []
        for key, n in self.sent:
            seen[key] = seen.get(key, 0) + 1
            out.append((key, n, seen[key]))
        return sorted(out)

    def log(self, name: str) -> str:
        return (self.tmp_path / f"{name}.log").read_text(errors="replace")

    def close(self) -> None:
        for process in self.instances:
            terminate(process, 20)


def group_members(helper, group) -> list[list[int]]:
    """The input partitions of each member of the consumer group (Quix also assigns changelog partitions)."""
    (future,) = helper.admin.describe_consumer_groups([group], request_timeout=10).values()
    description = future.result()
    return sorted(sorted({tp.partition for tp in m.assignment.topic_partitions}) for m in description.members)


@pytest.fixture
def pipeline_factory(helper, names, tmp_path):
    made = []

    def make(guarantee):
        made.append(Pipeline(helper, names, tmp_path, guarantee))
        return made[-1]
    yield make
    for pipeline in made:
        pipeline.close()


@pytest.mark.timeout(150)
@pytest.mark.parametrize("guarantee", ["exactly-once", "at-least-once"])
def test_quixstreams_stateful_app(pipeline_factory, helper, guarantee):
    p = pipeline_factory(guarantee)
    # The first instance commits after every 40 records (and otherwise not for a minute), so the 20
    # records after the first 40 are processed but not committed when it stops.
    first = p.start("first", commit_interval=60, commit_every=40)
    wait_until("topics created", lambda: [t for t in (p.input, p.output, p.changelog)
                                          if t in helper.admin.list_topics(timeout=10).topics],
               lambda found: len(found) == 3, 30, pause=0.2)
    p.send(40)
    assert len(p.wait_for_output(40)) == 40, p.log("first")[-3000:]
    p.send(20)
    assert len(p.wait_for_output(60, "read_uncommitted")) == 60   # processed, not yet committed
    if guarantee == "exactly-once":
        first.send_signal(signal.SIGKILL)   # inside an open transaction: the next owner must abort it
        assert first.wait(10) == -signal.SIGKILL
    else:
        assert terminate(first, 20) == 0    # a clean stop commits what was processed
    p.send(20)

    second = p.start("second")   # an empty state directory: its counts come from the changelog
    assert len(p.wait_for_output(80)) == 80, p.log("second")[-3000:]
    third = p.start("third")
    members = wait_until("two members sharing the input", lambda: group_members(helper, p.group),
                         lambda found: found == [[0], [1]], 30, pause=0.3)
    assert members == [[0], [1]], p.log("third")[-3000:]
    p.send(40)
    p.wait_for_output(120)
    assert terminate(second, 20) == 0 and terminate(third, 20) == 0

    committed = p.output_records("read_committed")
    assert sorted((r["key"], r["n"], r["count"]) for r in committed) == p.expected()
    everything = p.output_records("read_uncommitted")
    # Under exactly-once the killed instance's 20 uncommitted outputs stay in the log, aborted.
    assert len(everything) == 120 + (20 if guarantee == "exactly-once" else 0)
    ends = helper.list_offsets(p.input, range(PARTITIONS))
    assert helper.group_offsets(p.group) == {(p.input, i): ends[i][1] for i in range(PARTITIONS)}

    for topic in (p.input, p.output, p.changelog):
        assert helper.partition_count(topic) == PARTITIONS, topic
        configs = helper.describe_configs(topic)
        assert configs["retention.ms"] == RETENTION_MS, (topic, configs)
        assert configs["cleanup.policy"] == ("compact" if topic == p.changelog else "delete"), (topic, configs)
    for name in ("first", "second", "third"):
        assert "Traceback" not in p.log(name), p.log(name)[-3000:]
    assert "Recovery successful" in p.log("second")

