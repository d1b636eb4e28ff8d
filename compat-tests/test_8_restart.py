"""Scenario 8: the broker restarts (SIGTERM, same port and data dir) in the middle of a consumer group's
life; the group member and new producers reconnect and carry on: no committed record is read again, no
record is lost, committed offsets survive."""

import time

import pytest

from odradek_compat.checks import Step
from odradek_compat.clients import make_client
from odradek_compat.records import Rec
from odradek_compat.topics import create_topic, produce_ok

SCENARIO = "8 restart"


def poll_until(client, member, want: int, timeout: float = 60):
    records = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and len(records) < want:
        records += client.group_poll(member, 300).records
    settle = time.monotonic() + 1.0  # anything extra (re-reads) would arrive right behind
    while time.monotonic() < settle:
        records += client.group_poll(member, 200).records
    return records


def test_group_member_survives_broker_restart(client, names, own_broker):
    step = Step(client)
    if not client.survives_disconnects:
        pytest.skip(f"{client.name} terminates when its only broker connection drops")
    broker = own_broker()
    setup = make_client("confluent-kafka", broker.bootstrap)
    tested = make_client(client.name, broker.bootstrap)
    try:
        topic = create_topic(setup, names("restart"), partitions=2)
        before = [Rec(f"k{i}".encode(), f"before-{i}".encode(), partition=i % 2) for i in range(20)]
        produce_ok(step, tested, topic, before)
        group = names("group")
        member = tested.group_open(group, topic, session_timeout_ms=45000)
        got = poll_until(tested, member, len(before))
        step("member read everything before the restart", sorted(r.value for r in before),
             sorted(r.value for r in got))
        tested.group_commit(member)

        code = broker.stop()
        step("broker exits cleanly on SIGTERM", broker.CLEAN_EXIT_CODES, code,
             ok=code in broker.CLEAN_EXIT_CODES)
        broker.start()

        after = [Rec(f"k{i}".encode(), f"after-{i}".encode(), partition=i % 2) for i in range(20)]
        produce_ok(step, tested, topic, after, timeout=90)
        got = poll_until(tested, member, len(after), timeout=90)
        step("after the restart the member reads exactly the new records", sorted(r.value for r in after),
             sorted(r.value for r in got))
        tested.group_commit(member)
        tested.group_close(member)
        step("committed offsets survive the restart", {0: 20, 1: 20},
             {p: (v[0] if v else None) for p, v in setup.committed(group, topic, [0, 1]).items()})
    finally:
        tested.close()
        setup.close()
