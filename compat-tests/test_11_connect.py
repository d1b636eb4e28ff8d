"""Scenario 11: Kafka Connect 3.9.0 in distributed mode, a framework users run against their brokers.

A real worker JVM keeps its configs, source offsets and statuses in compacted topics it creates itself
(CreateTopics with configs, then a KafkaBasedLog reading each to its end), runs in a group of the
'connect' protocol ('sessioned' assignor), and with exactly.once.source.support=enabled writes every
source batch and its offsets in one transaction (fencing older task producers through InitProducerId).
FileStreamSource copies a file's lines to a topic, FileStreamSink that topic to another file. Calibrated
with `bash compat-tests/against-apache-kafka.sh -k connect`."""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

from odradek_compat.checks import wait_until
from odradek_compat.connect import FILE_SINK, FILE_SOURCE, ConnectWorker, missing, owners, running


@pytest.fixture
def workers(broker, names):
    """make(**settings) -> a started ConnectWorker; every worker of one test shares its group."""
    reason = missing()
    if reason:
        pytest.skip(reason)
    root = tempfile.mkdtemp(prefix="odradek-compat-connect-")
    group = names("connect")
    made: list[ConnectWorker] = []

    def make(**settings: str) -> ConnectWorker:
        workdir = os.path.join(root, f"worker-{len(made)}")
        worker = ConnectWorker(broker["bootstrap"], workdir, group, **settings)
        made.append(worker)
        worker.start()
        return worker

    make.root = root
    make.group = group
    yield make
    for worker in made:
        worker.stop()
    shutil.rmtree(root, ignore_errors=True)


def _append(path: str, lines: list[str]) -> None:
    with open(path, "a") as f:
        f.writelines(line + "\n" for line in lines)


def _lines(path: str) -> list[str]:
    try:
        with open(path) as f:
            return f.read().splitlines()
    except FileNotFoundError:
        return []


def _wait_lines(path: str, expected: list[str], timeout: float = 30) -> None:
    got = wait_until(f"{len(expected)} lines in {path}", lambda: _lines(path),
                     lambda lines: len(lines) >= len(expected), timeout, pause=0.2)
    assert got == expected


def _wait_running(worker: ConnectWorker, name: str, timeout: float = 30) -> dict:
    status = wait_until(f"{name} running", lambda: worker.status(name), running, timeout, pause=0.2)
    assert running(status), f"{name}: {status}\n{worker.log_tail()}"
    return status


def test_exactly_once_file_pipeline_resumes_after_worker_restart(workers, helper, names):
    worker = workers(**{"exactly.once.source.support": "enabled", "offset.storage.partitions": "3",
                        "status.storage.partitions": "2"})
    group = workers.group
    # the internal topics as the worker created them: compacted, with the partition counts it asked for
    for suffix, partitions in (("configs", 1), ("offsets", 3), ("status", 2)):
        assert helper.partition_count(f"{group}-{suffix}") == partitions
        assert helper.describe_configs(f"{group}-{suffix}")["cleanup.policy"] == "compact"

    topic, source_name, sink_name = names("lines"), names("source"), names("sink")
    source, sink = os.path.join(workers.root, "in.txt"), os.path.join(workers.root, "out.txt")
    first = [f"line-{i}" for i in range(30)]
    _append(source, first)
    worker.put_connector(source_name, {"connector.class": FILE_SOURCE, "file": source, "topic": topic,
                                       "tasks.max": "1", "exactly.once.support": "required",
                                       "transaction.boundary": "poll"})
    worker.put_connector(sink_name, {"connector.class": FILE_SINK, "file": sink, "topics": topic,
                                     "tasks.max": "1"})
    for name in (source_name, sink_name):
        assert owners(_wait_running(worker, name)) == {worker.worker_id}
    _wait_lines(sink, first)

    # a clean restart: the source resumes at its committed file position, the sink at its group's offset
    worker.stop()
    second = [f"line-{i}" for i in range(30, 60)]
    _append(source, second)
    worker.start()
    _wait_lines(sink, first + second)
    records = helper.consume(topic, isolation="read_committed")
    assert [r.value.decode() for r in records] == first + second
    # each poll's batch committed with its transaction marker after it: offsets are no longer dense
    assert records[-1].offset > len(records) - 1
    # the sink's group (named after it) has committed the position past the last record
    committed = wait_until("sink offsets", lambda: helper.group_offsets(f"connect-{sink_name}").get((topic, 0)),
                           lambda offset: offset == records[-1].offset + 1, 10, pause=0.2)
    assert committed == records[-1].offset + 1
    assert worker.log_problems() == []


def test_two_workers_share_connectors_and_delete_one(workers, helper, names):
    first = workers(**{"scheduled.rebalance.max.delay.ms": "2000"})
    topic, source_name, sink_name = names("lines"), names("source"), names("sink")
    source, sink = os.path.join(workers.root, "in.txt"), os.path.join(workers.root, "out.txt")
    _append(source, [f"a-{i}" for i in range(10)])
    first.put_connector(source_name, {"connector.class": FILE_SOURCE, "file": source, "topic": topic,
                                      "tasks.max": "1"})
    first.put_connector(sink_name, {"connector.class": FILE_SINK, "file": sink, "topics": topic,
                                    "tasks.max": "1"})
    _wait_lines(sink, [f"a-{i}" for i in range(10)])

    # a second worker joins: the group's leader hands it half of the two connectors and two tasks
    second = workers(**{"scheduled.rebalance.max.delay.ms": "2000"})

    def spread():
        statuses = [second.status(name) for name in (source_name, sink_name)]
        if not all(running(s) for s in statuses):
            return None
        return sorted(worker for s in statuses
                      for worker in [s["connector"]["worker_id"], *(task["worker_id"] for task in s["tasks"])])

    def balanced(owned):
        return owned is not None and owned.count(first.worker_id) == owned.count(second.worker_id) == 2

    # (a cooperative rebalance may take two rounds: revoke first, then assign)
    got = wait_until("work on both workers", spread, balanced, 30, pause=0.2)
    assert balanced(got), got
    _append(source, [f"b-{i}" for i in range(10)])
    _wait_lines(sink, [f"{p}-{i}" for p in "ab" for i in range(10)])

    # deleting through one worker removes the connector everywhere
    status, _ = second.rest("DELETE", f"/connectors/{source_name}")
    assert status == 204
    listed = wait_until("source gone", lambda: first.rest("GET", "/connectors")[1],
                        lambda c: c == [sink_name], 20, pause=0.2)
    assert listed == [sink_name]
    # its status goes once the worker that ran it has stopped it and written the status tombstones
    gone = wait_until("source status gone", lambda: first.rest("GET", f"/connectors/{source_name}/status")[0],
                      lambda code: code == 404, 20, pause=0.2)
    assert gone == 404
    assert first.log_problems() == [] and second.log_problems() == []
