"""kill -9 with fsync-before-acknowledge: committed offsets, group state and transactions survive."""

import os
import re
import signal
import subprocess
import sys
import time

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class ServeProcess:
    """`odradek serve` as a child process, killable with SIGKILL."""

    def __init__(self, data_dir):
        self.data_dir = str(data_dir)
        self.proc = None
        self.bootstrap = None

    def start(self, port=0):
        cmd = [sys.executable, "-m", "broker.cli", "serve", "--log-level", "warning",
               "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
               "--override", f"log.dirs={self.data_dir}",
               "--override", "log.flush.before.acknowledge=true",
               "--override", "group.initial.rebalance.delay.ms=0",
               "--override", "offsets.topic.num.partitions=3",
               "--override", "transaction.state.log.num.partitions=3"]
        self.proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.time() + 90  # a loaded machine starts slowly
        seen = []
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            seen.append(line or "")
            match = re.search(r"listening on PLAINTEXT://([\d.]+):(\d+)", line or "")
            if match:
                self.bootstrap = f"{match.group(1)}:{match.group(2)}"
                return self
            if self.proc.poll() is not None:
                break
        raise RuntimeError("odradek serve did not start:\n" + "".join(seen)[-3000:])

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        self.proc.stdout.close()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(15)
            self.proc.stdout.close()


@pytest.fixture
def serve(tmp_path):
    started = []

    def start():
        process = ServeProcess(tmp_path / "data").start()
        started.append(process)
        return process
    yield start
    for process in started:
        process.stop()


@pytest.mark.timeout(240)
def test_offsets_and_transactions_survive_kill_9(serve):
    broker = serve()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("k", 1, 1)])["k"].result(10)
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "k-tx"})
    p.init_transactions(20)
    p.begin_transaction()
    p.produce("k", value=b"committed", partition=0)
    p.commit_transaction(20)
    p.begin_transaction()
    p.produce("k", value=b"aborted", partition=0)
    p.flush(10)
    p.abort_transaction(20)
    p.begin_transaction()
    p.produce("k", value=b"open", partition=0)
    p.flush(10)  # left open: the crash must not make it visible
    c = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "kg", "enable.auto.commit": False})
    c.commit(offsets=[ck.TopicPartition("k", 0, 1, metadata="before-crash")], asynchronous=False)
    c.close()
    broker.kill9()

    broker = serve()
    c = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "kg", "enable.auto.commit": False,
                     "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    committed = c.committed([ck.TopicPartition("k", 0)], timeout=10)[0]
    assert (committed.offset, committed.metadata) == (1, "before-crash")
    c.assign([ck.TopicPartition("k", 0, 0)])
    values, deadline = [], time.time() + 5
    while time.time() < deadline:
        m = c.poll(0.2)
        if m is not None and not m.error():
            values.append(m.value())
    c.close()
    assert values == [b"committed"]
    # the new producer instance fences the old one and aborts its open transaction
    p2 = ck.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "k-tx"})
    p2.init_transactions(30)
    p2.begin_transaction()
    p2.produce("k", value=b"after", partition=0)
    p2.commit_transaction(20)
    c = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "kg2", "auto.offset.reset": "earliest",
                     "isolation.level": "read_committed"})
    c.assign([ck.TopicPartition("k", 0, 0)])
    values, deadline = [], time.time() + 10
    while len(values) < 2 and time.time() < deadline:
        m = c.poll(0.2)
        if m is not None and not m.error():
            values.append(m.value())
    c.close()
    assert values == [b"committed", b"after"]
