"""`python -m bench.replicated_profile`: where a 3-node Odradek cluster spends an acks=all produce.

    python -m bench.replicated_profile [--seconds 10] [--size 1024] [--py-spy DIR] [--override K=V ...]

One RF 3 topic with one partition (so one node leads and two only follow; `--partitions 2` as in the
bench's rows), min.insync.replicas=2,
the cluster of the bench's replicated rows (bench/clusters.py). For acks=all and then acks=1 on the
same topic: records/s, each node's CPU (% of a core: a node near 100 % is CPU-bound, one far below
waits), and the produce acknowledgement latency of lone records at a low rate (acks=all minus acks=1
is what waiting for the followers to advance the high watermark costs). `--py-spy DIR` records the
leader's and a follower's stacks during the acks=all run (`python -m bench.profile FILE` ranks them).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time
from pathlib import Path

from bench import workloads
from bench.clusters import start_odradek_cluster
from bench.profile import py_spy_binary
from bench.suite import BATCHED, percentile


def _ack_latency(bootstrap: str, topic: str, acks: str, count: int, rate: float) -> tuple[float, float]:
    """(p50, p99) ms from produce() to the delivery report, one record at a time at `rate`/s."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0, "log_level": 3,
                         "enable.idempotence": False})
    samples: list[float] = []
    for _ in range(count):
        sent = time.perf_counter()
        producer.produce(topic, b"x" * 100, on_delivery=lambda err, msg, sent=sent: samples.append(
            (time.perf_counter() - sent) * 1000))
        producer.flush(30)
        time.sleep(max(0.0, 1 / rate - (time.perf_counter() - sent)))
    samples.sort()
    return percentile(samples, 0.5), percentile(samples, 0.99)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.replicated_profile", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--latency-records", type=int, default=300)
    parser.add_argument("--partitions", type=int, default=1,
                        help="partitions of the RF 3 topic (the bench's rows use 2: two nodes lead one each)")
    parser.add_argument("--py-spy", metavar="DIR")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    log_dir = Path(tempfile.mkdtemp(prefix="replicated-profile-"))
    target = start_odradek_cluster(log_dir, dict(item.split("=", 1) for item in args.override))
    print(f"cluster: {target.label}; logs in {log_dir}; load average {os.getloadavg()[0]:.1f}", flush=True)
    try:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": target.bootstrap, "log_level": 3})
        topic = "profile-rf3"
        admin.create_topics([NewTopic(topic, args.partitions, 3)])[topic].result(60)
        while True:
            partitions = admin.list_topics(topic, timeout=10).topics[topic].partitions
            if len(partitions) == args.partitions and all(
                    p.leader >= 0 and len(p.isrs) == 3 for p in partitions.values()):
                break
            time.sleep(0.2)
        leaders = {p.leader for p in partitions.values()}
        leader = partitions[0].leader
        follower = next((node for node in target.processes if node not in leaders),
                        next(node for node in target.processes if node != leader))
        roles = {node: "leader" if node in leaders else "follower" for node in target.processes}
        for acks in ("all", "1"):
            spies = []
            if args.py_spy and acks == "all":
                Path(args.py_spy).mkdir(parents=True, exist_ok=True)
                for node in (leader, follower):
                    spies.append(subprocess.Popen(
                        [py_spy_binary(), "record", "--format", "raw", "--rate", "200", "--nonblocking",
                         "--pid", str(target.processes[node].pid), "--duration", str(int(args.seconds) + 2),
                         "--output", str(Path(args.py_spy) / f"{roles[node]}-node{node}.txt")],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            before, began = target.node_cpu_seconds(), time.monotonic()
            result = workloads.produce(target.bootstrap, topic, args.size, args.seconds,
                                       {**BATCHED, "acks": acks}, time.time() + 0.5)
            elapsed = time.monotonic() - began
            after = target.node_cpu_seconds()
            for spy in spies:
                spy.wait(60)
            rate = result["records"] / (result["end"] - result["start"])
            cpu = ", ".join(f"node {node} ({roles[node]}) {100 * (after[node] - before[node]) / elapsed:.0f}% "
                            f"= {1e6 * (after[node] - before[node]) / max(result['records'], 1):.2f} µs/record"
                            for node in sorted(target.processes))
            print(f"acks={acks:3} {args.size} B batched: {rate:,.0f} records/s "
                  f"({result['errors']} errors); CPU % of a core: {cpu}", flush=True)
        for acks in ("all", "1"):
            p50, p99 = _ack_latency(target.bootstrap, topic, acks, args.latency_records, 50)
            print(f"acks={acks:3} lone 100 B records at 50/s: acknowledgement p50 {p50:.2f} ms, p99 {p99:.2f} ms",
                  flush=True)
        print(f"load average at the end {os.getloadavg()[0]:.1f}")
    finally:
        target.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
