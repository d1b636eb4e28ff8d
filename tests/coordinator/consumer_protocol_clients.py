"""Real KIP-848 consumers for the tests: the Java client (compat-tests' driver, one JVM per process
we may crash) with `group.protocol=consumer`, polled round-robin, every poll's records and
assignment remembered, the assignments checked for overlap after every poll."""

from __future__ import annotations

import os
import sys
import time

COMPAT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "compat-tests")
if COMPAT not in sys.path:
    sys.path.insert(0, COMPAT)
from odradek_compat.clients.base import ClientError  # noqa: E402
from odradek_compat.clients.java import JavaClient, jars_missing  # noqa: E402,F401
from odradek_compat.records import Rec, from_json  # noqa: E402,F401

__all__ = ["JavaClient", "jars_missing", "Rec", "JavaMember", "FAST_CONSUMER_GROUPS", "assert_disjoint",
           "poll_until", "covers"]

# the broker settings that keep the tests quick: a short session, frequent heartbeats
FAST_CONSUMER_GROUPS = {
    "group.consumer.session.timeout.ms": "6000", "group.consumer.min.session.timeout.ms": "6000",
    "group.consumer.heartbeat.interval.ms": "500", "group.consumer.min.heartbeat.interval.ms": "500",
    "offsets.topic.replication.factor": "1", "offsets.topic.num.partitions": "5",
}


class JavaMember:
    def __init__(self, client: JavaClient, group: str, topic: str, name: str, instance_id: str | None = None,
                 protocol: str = "consumer"):
        config = {"group.protocol": protocol, "auto.offset.reset": "earliest", "enable.auto.commit": "false",
                  "client.id": name, "max.poll.records": 100}
        if instance_id is not None:
            config["group.instance.id"] = instance_id
        self.client, self.name = client, name
        self.handle = client.driver.call("group_open", group=group, topic=topic, config=config)
        self.assignment: list[int] = []
        self.values: list[bytes] = []
        self.alive = True

    def poll(self, timeout_ms: int = 200) -> None:
        answer = self.client.driver.call("group_poll", handle=self.handle, timeout_ms=timeout_ms)
        self.values += [from_json(r).value for r in answer["records"]]
        self.assignment = answer["assignment"]
        try:
            self.client.driver.call("group_commit", handle=self.handle)
        except ClientError as exc:
            # A commit that crossed an epoch bump is refused (STALE_MEMBER_EPOCH, as Kafka's strict
            # check); the next poll learns the new epoch and its commit covers these offsets too.
            if "stale member epoch" not in str(exc):
                raise

    def close(self) -> None:
        self.client.driver.call("group_close", handle=self.handle, timeout=30)
        self.alive = False

    def crash(self) -> None:
        """The whole JVM dies at once: no leave, no commit."""
        self.client.driver.proc.kill()
        self.client.driver.proc.wait()
        self.client.driver.proc = None
        self.alive = False


def assert_disjoint(members) -> None:
    seen: dict[int, str] = {}
    for m in members:
        if not m.alive:
            continue
        for p in m.assignment:
            assert p not in seen, f"partition {p} owned by {seen[p]} and {m.name} at once"
            seen[p] = m.name


def poll_until(members, condition, timeout: float = 90.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while True:
        for m in members:
            if m.alive:
                m.poll()
                assert_disjoint(members)
        if condition():
            return
        assert time.monotonic() < deadline, f"timed out waiting for {what}: " + \
            ", ".join(f"{m.name}={m.assignment}" for m in members if m.alive)


def covers(members, partitions: int, every_member: bool = True):
    live = [m for m in members if m.alive]

    def check() -> bool:
        owned = [p for m in live for p in m.assignment]
        return sorted(owned) == list(range(partitions)) and (not every_member or all(m.assignment for m in live))
    return check
