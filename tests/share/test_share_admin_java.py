"""Java 4.x clients against Odradek's share groups, beyond plain consumption: Admin's
alterShareGroupOffsets / deleteShareGroupOffsets, a killed KafkaShareConsumer's acquired records going
to another member long before their locks expire, and `share.isolation.level=read_committed` with a
transactional producer that aborts (tests/share/clients/ShareAdminCheck.java prints the facts)."""

import os
import signal
import subprocess
import time

import pytest

from broker.testing import running_broker
from tests.java_clients import JAVA, MISSING, compile_check, java_available
from tests.share.test_share_java import SHARE_BROKER

HERE = os.path.dirname(os.path.abspath(__file__))
LOCK_MS = 40_000
BROKER = dict(SHARE_BROKER, **{
    # long acquisition locks: a crashed member's records must come back through its closed connection
    "group.share.record.lock.duration.ms": str(LOCK_MS),
    # and a session timeout (Kafka's default) that fences the dead member only after the check is over
    "group.share.session.timeout.ms": "45000",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
})


@pytest.fixture(scope="module")
def classpath(tmp_path_factory):
    if not java_available():
        pytest.skip(MISSING)
    return compile_check(os.path.join(HERE, "clients", "ShareAdminCheck.java"), tmp_path_factory.mktemp("classes"))


def facts_of(output: str) -> dict:
    return dict(line.split("=", 1) for line in output.splitlines() if "=" in line and " " not in line.split("=")[0])


def run_check(classpath, bootstrap, mode):
    run = subprocess.run(JAVA + ["-cp", classpath, "ShareAdminCheck", bootstrap, mode],
                         capture_output=True, text=True, timeout=200)
    facts = facts_of(run.stdout)
    assert facts.get("done") == "true", run.stdout + run.stderr[-4000:]
    return facts


@pytest.mark.timeout(300)
def test_admin_alter_and_delete_share_group_offsets(classpath, tmp_path):
    with running_broker(tmp_path / "data", BROKER) as broker:
        facts = run_check(classpath, broker.bootstrap, "offsets")
    # set before the group existed: listed, and consumption starts there
    assert facts["offsets.listed"] == "12"
    assert facts["offsets.first"] == "[o12, o13, o14, o15, o16, o17, o18, o19]"
    # a member in the group: Kafka's NON_EMPTY_GROUP
    assert facts["offsets.busy_alter"] == facts["offsets.busy_delete"] == "GroupNotEmptyException"
    # moved back to 5 once empty: 5..19 delivered again
    assert facts["offsets.after_alter"] == "15/o5"
    # deleted: no start offset any more; the next member starts at share.auto.offset.reset=earliest
    assert facts["offsets.after_delete_listed"] in ("none", "-1")
    assert facts["offsets.after_delete"] == "20/o0"
    assert facts["offsets.unknown_partition"] == "UnknownTopicOrPartitionException"
    assert facts["offsets.unknown_topic"] == "UnknownTopicOrPartitionException"
    assert facts["offsets.unknown_group"] == "GroupIdNotFoundException"
    assert facts["offsets.other_type"] == "GroupIdNotFoundException"


@pytest.mark.timeout(300)
def test_killed_share_consumer_records_go_to_another_member_at_once(classpath, tmp_path):
    with running_broker(tmp_path / "data", BROKER) as broker:
        holder = subprocess.Popen(JAVA + ["-cp", classpath, "ShareAdminCheck", broker.bootstrap, "hold"],
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            held = None
            deadline = time.monotonic() + 120
            while held is None and time.monotonic() < deadline:
                line = holder.stdout.readline()
                if not line:
                    break
                held = facts_of(line).get("hold.held")
        finally:
            holder.send_signal(signal.SIGKILL)       # no close, no leave: only the connection drops
            holder.wait(timeout=30)
        assert held and held != "[]", held
        killed_at = time.monotonic()
        facts = run_check(classpath, broker.bootstrap, "take")
        elapsed_ms = (time.monotonic() - killed_at) * 1000
    got = facts["take.got"].strip("{}").split(", ")
    counts = dict(item.split("=") for item in got)
    assert sorted(counts) == sorted(f"c{i}" for i in range(10)), facts["take.got"]
    # the killed member's records came back as their second delivery, the rest as their first
    held_values = held.strip("[]").split(", ")
    assert all(counts[v] == "2" for v in held_values), (held, facts["take.got"])
    assert all(counts[v] == "1" for v in counts if v not in held_values), facts["take.got"]
    # well under the 40 s lock and the 45 s session timeout, JVM start included
    assert elapsed_ms < LOCK_MS / 3, (elapsed_ms, facts["take.ms"])
    print(f"killed member's records taken over after {elapsed_ms:.0f} ms (consumer {facts['take.ms']} ms)")


@pytest.mark.timeout(300)
def test_read_committed_share_group_skips_aborted_and_open_transactions(classpath, tmp_path):
    with running_broker(tmp_path / "data", BROKER) as broker:
        facts = run_check(classpath, broker.bootstrap, "committed")
    committed = [f"t{i}" for i in range(10)]
    # the aborted transaction's records never, the open one's not before its commit, markers never
    assert facts["committed.before_commit"] == "[" + ", ".join(committed) + "]"
    assert facts["committed.after_commit"] == "[p0, p1, p2]"
    # read_uncommitted (the default) delivers everything but the markers: 10 + 5 aborted + 3
    assert facts["committed.uncommitted"] == "18/5"
