"""`python -m bench.group_settle`: how long a 10-member group takes to settle after an 11th member
joins, the classic protocol (JoinGroup/SyncGroup, eager `range`) next to KIP-848's
(`group.protocol=consumer`), confluent-kafka clients against one Odradek process.

"Settled": the 11 members' assignments cover every partition, none twice, none empty. Also counted:
how many of the 10 existing members had partitions taken away and given back (a stop-the-world
rebalance takes everything from everyone; an incremental one only what moves). Each protocol runs
with its clients' default heartbeat interval (classic 3 s; the broker's 5 s for KIP-848) and with
both at 1 s, since the heartbeat interval bounds how soon members hear of a join.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

from bench.targets import start_odradek

PARTITIONS = 22
MEMBERS = 10


class Member:
    def __init__(self, bootstrap: str, group: str, protocol: str, heartbeat_ms: int | None):
        config = {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"}
        if protocol == "consumer":
            config["group.protocol"] = "consumer"
        else:
            config.update({"partition.assignment.strategy": "range", "session.timeout.ms": 45000})
            if heartbeat_ms:
                config["heartbeat.interval.ms"] = heartbeat_ms
        self.consumer = Consumer(config)
        self.consumer.subscribe(["settle"])
        self.owned: frozenset = frozenset()
        self.lost = False   # had partitions taken away since the last reset

    def poll(self) -> None:
        self.consumer.poll(0.01)
        owned = frozenset(tp.partition for tp in self.consumer.assignment())
        if self.owned - owned:
            self.lost = True
        self.owned = owned


def settled(members) -> bool:
    owned = [p for m in members for p in m.owned]
    return sorted(owned) == list(range(PARTITIONS)) and all(m.owned for m in members)


def run_once(bootstrap: str, protocol: str, heartbeat_ms: int | None, index: int, timeout: float = 120.0):
    group = f"settle-{protocol}-{heartbeat_ms}-{index}"
    members = [Member(bootstrap, group, protocol, heartbeat_ms) for _ in range(MEMBERS)]
    deadline = time.monotonic() + timeout
    try:
        while not settled(members):
            for m in members:
                m.poll()
            if time.monotonic() > deadline:
                raise TimeoutError(f"{group}: the first {MEMBERS} members never settled")
        for _ in range(30):          # let the group be stable for a moment
            for m in members:
                m.poll()
        for m in members:
            m.lost = False
        began = time.monotonic()
        members.append(Member(bootstrap, group, protocol, heartbeat_ms))
        while not settled(members):
            for m in members:
                m.poll()
            if time.monotonic() > deadline:
                raise TimeoutError(f"{group}: the group never settled after the join")
        return time.monotonic() - began, sum(m.lost for m in members[:MEMBERS])
    finally:
        for m in members:
            m.consumer.close()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.group_settle", description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    rows = []
    for label, heartbeat in (("client defaults", None), ("1 s heartbeats", 1000)):
        # KIP-848 heartbeats are the broker's to decide: one broker per setting
        log_dir = Path(tempfile.mkdtemp(prefix="bench-settle-"))
        target = start_odradek(log_dir, {"offsets.topic.replication.factor": "1",
                                         "group.consumer.min.heartbeat.interval.ms": "1000",
                                         "group.consumer.heartbeat.interval.ms": str(heartbeat or 5000)})
        try:
            admin = AdminClient({"bootstrap.servers": target.bootstrap})
            admin.create_topics([NewTopic("settle", PARTITIONS, 1)])["settle"].result(60)
            medians = {}
            for protocol in ("classic", "consumer"):
                runs = [run_once(target.bootstrap, protocol, heartbeat, i) for i in range(args.repeats)]
                medians[protocol] = statistics.median(r[0] for r in runs)
                rows.append((label, protocol, medians[protocol], statistics.median(r[1] for r in runs)))
            rows.append((label, "consumer/classic", medians["consumer"] / medians["classic"], None))
        finally:
            target.stop()
    print(f"| heartbeats | protocol | settle after the 11th joins (median of {args.repeats}) | "
          f"existing members that lost partitions |")
    print("|---|---|---:|---:|")
    for label, protocol, value, lost in rows:
        if lost is None:
            print(f"| {label} | {protocol} | {value:.2f}x | |")
        else:
            print(f"| {label} | {protocol} | {value:.2f} s | {lost:g} of {MEMBERS} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
