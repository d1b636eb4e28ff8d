"""Java 4.x's KafkaShareConsumer (KIP-932) against Odradek: cooperative consumption of one partition,
release and redelivery, acquisition-lock expiry, the delivery count limit, and share state surviving a
broker restart (tests/share/clients/ShareCheck.java prints the facts)."""

import os
import subprocess

import pytest

from broker.testing import running_broker
from tests.java_clients import JAVA, MISSING, compile_check, java_available

HERE = os.path.dirname(os.path.abspath(__file__))

SHARE_BROKER = {
    "group.share.enable": "true",
    "offsets.topic.replication.factor": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "share.coordinator.state.topic.num.partitions": "3",
    # short locks, few deliveries and quick heartbeats keep the scenarios fast
    "group.share.min.record.lock.duration.ms": "1000",
    "group.share.record.lock.duration.ms": "3000",
    "group.share.delivery.count.limit": "3",
    "group.share.min.heartbeat.interval.ms": "500",
    "group.share.heartbeat.interval.ms": "500",
    "group.share.min.session.timeout.ms": "6000",
    "group.share.session.timeout.ms": "6000",
}


def run_check(classpath, bootstrap, *args):
    run = subprocess.run([*JAVA, "-cp", classpath, "ShareCheck", bootstrap, *args],
                         capture_output=True, text=True, timeout=200)
    facts = dict(line.split("=", 1) for line in run.stdout.splitlines() if "=" in line and " " not in line.split("=")[0])
    assert facts.get("done") == "true", run.stdout + run.stderr[-4000:]
    return facts


@pytest.mark.timeout(300)
@pytest.mark.skipif(not java_available(), reason=MISSING)
def test_kafka_share_consumer(tmp_path):
    classpath = compile_check(os.path.join(HERE, "clients", "ShareCheck.java"), tmp_path / "classes")
    data = tmp_path / "data"
    with running_broker(data, SHARE_BROKER) as broker:
        facts = run_check(classpath, broker.bootstrap, "main")
    # two members over one partition: both consumed, every record exactly once, first delivery each
    assert facts["accept.total"] == facts["accept.distinct"] == "200", facts
    assert facts["accept.both"] == "true", facts["accept.split"]
    assert facts["accept.max_delivery_count"] == "1"
    assert facts["accept.extra"] == "0"
    assert facts["accept.described"] == "Stable/2"           # Admin.describeShareGroups
    # the released record came back once more, with delivery count 2; the others once
    assert facts["release.deliveries"] == "{r0=[1], r1=[1], r2=[1, 2], r3=[1], r4=[1]}"
    # the silent holder's locks ran out (3 s) and a member that joined later got the records as a
    # later delivery (the holder's client may have re-acquired them once more meanwhile)
    held = facts["lock.held"].strip("[]").split(", ")
    assert held and set(held) <= {"l0", "l1", "l2"}, facts["lock.held"]
    assert facts["lock.later_deliveries"] == str(len(held)), facts["lock.redelivered"]
    assert int(facts["lock.waited_ms"]) >= 2000
    # group.share.delivery.count.limit=3: delivered three times, then archived, never again
    assert facts["limit.poison_deliveries"] == "[1, 2, 3]"
    assert facts["limit.fine"] == "[fine]"
    # share.auto.offset.reset=earliest as a group config: the records produced before the group existed
    assert facts["earliest.got"] == "[e0, e1, e2]"
    assert (facts["earliest.described"], facts["earliest.bad_value"]) == ("earliest", "refused")
    # implicit acknowledgement (the client's default): everything accepted, nothing left for a later member
    assert (facts["implicit.got"], facts["implicit.again"]) == ("50/50", "0")
    # Admin.listShareGroupOffsets (DescribeShareGroupOffsets): the start offset is the log end, no lag
    assert facts["implicit.start_at_end"] == "true/0"
    assert facts["restart.before"] == "10"
    # a new broker process over the same data: the share-partition resumes at offset 4, and the
    # released records come back as their second delivery
    with running_broker(data, SHARE_BROKER) as broker:
        after = run_check(classpath, broker.bootstrap, "restart")
    assert after["restart.after"] == "{s4=2, s5=2, s6=2, s7=2, s8=2, s9=2}", after
