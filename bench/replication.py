"""`python -m bench.replication`: what replication costs, measured side by side in one run.

- throughput: acks=all on a replication-factor-3 topic of a 3-node cluster vs acks=1 on a
  replication-factor-1 topic of a single node (issue 13's target: at least 0.5x);
- latency: p50/p99 of acks=all RF 3 vs acks=1 RF 1 at a fixed produce rate (target: p99 at most 2x);
- catch-up: a follower stopped while `--catch-up-mb` of records are written, then started: the rate
  at which it copies the leader's log (target: at least 100 MB/s on loopback; `--catch-up-mb 1024` is
  the issue's 1 GiB).

Real `odradek serve` processes (broker.testing_cluster) and the confluent-kafka client; figures are
printed, nothing is asserted (speed targets are ratios, never timed test assertions).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from broker.testing_cluster import running_cluster

VALUE = os.urandom(1024)


def _create(bootstrap: str, topic: str, replication: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, replication)], request_timeout=30)[topic].result(60)
    time.sleep(1)


def throughput(bootstrap: str, topic: str, acks: str, records: int) -> float:
    """Records per second of one producer sending `records` 1 KiB records as fast as it can."""
    # The same producer on both sides but for acks (idempotence would cap acks=all at 5 requests
    # in flight and measure the client's pipelining rather than the broker's replication).
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5,
                         "batch.size": 262144, "queue.buffering.max.kbytes": 262144,
                         "enable.idempotence": False})
    producer.produce(topic, VALUE)
    producer.flush(30)
    started = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, VALUE)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(300) == 0
    return records / (time.perf_counter() - started)


def latency(bootstrap: str, topic: str, acks: str, rate: int, seconds: float) -> tuple[float, float]:
    """(p50, p99) in ms of produce acknowledgements at a fixed `rate` per second."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0,
                         "enable.idempotence": False})
    samples: list[float] = []
    total = int(rate * seconds)
    started = time.perf_counter()
    for i in range(total):
        due = started + i / rate
        while time.perf_counter() < due:
            producer.poll(0)
        at = time.perf_counter()
        producer.produce(topic, VALUE[:100],
                         on_delivery=lambda err, msg, at=at: samples.append((time.perf_counter() - at) * 1000))
    producer.flush(60)
    samples.sort()
    return samples[len(samples) // 2], samples[int(len(samples) * 0.99)]


def _log_bytes(node, topic: str) -> int:
    directory = os.path.join(node.data_dir, f"{topic}-0")
    if not os.path.isdir(directory):
        return 0
    return sum(os.path.getsize(os.path.join(directory, n)) for n in os.listdir(directory) if n.endswith(".log"))


def catch_up(cluster, megabytes: int) -> float:
    """MB/s a restarted follower copies the leader's log at."""
    _create(cluster.bootstrap, "catch-up", 3)
    leader = cluster.metadata(1, ["catch-up"]).topics[0].partitions[0].leader_id
    follower = next(b for b in cluster.brokers if b != leader)
    cluster.stop(follower)
    records = megabytes * 1024
    throughput(cluster.bootstrap, "catch-up", "1", records)
    target = _log_bytes(cluster.nodes[leader], "catch-up")
    before = _log_bytes(cluster.nodes[follower], "catch-up")
    cluster.start(follower)
    # timed from the follower's first fetched bytes (not its process start-up) to the leader's size
    while _log_bytes(cluster.nodes[follower], "catch-up") <= before:
        time.sleep(0.005)
    started, first = time.perf_counter(), _log_bytes(cluster.nodes[follower], "catch-up")
    while _log_bytes(cluster.nodes[follower], "catch-up") < target:
        time.sleep(0.005)
    return (target - first) / (time.perf_counter() - started) / 1e6


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.replication", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=100_000, help="records per throughput run")
    parser.add_argument("--rate", type=int, default=1000, help="records per second for latency")
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds of latency load")
    parser.add_argument("--catch-up-mb", type=int, default=256, help="MB the follower catches up")
    args = parser.parse_args(argv)
    settings = {"log.segment.bytes": str(256 * 1024 * 1024)}
    with tempfile.TemporaryDirectory(prefix="bench-repl-") as root:
        for name in ("one", "three"):
            os.makedirs(os.path.join(root, name))
        with running_cluster(os.path.join(root, "one"), nodes=1, overrides=settings) as single:
            _create(single.bootstrap, "rf1", 1)
            rf1 = throughput(single.bootstrap, "rf1", "1", args.records)
            rf1_latency = latency(single.bootstrap, "rf1", "1", args.rate, args.seconds)
        with running_cluster(os.path.join(root, "three"), nodes=3,
                             overrides=dict(settings, **{"min.insync.replicas": "2"})) as cluster:
            _create(cluster.bootstrap, "rf3", 3)
            rf3 = throughput(cluster.bootstrap, "rf3", "all", args.records)
            rf3_latency = latency(cluster.bootstrap, "rf3", "all", args.rate, args.seconds)
            rate = catch_up(cluster, args.catch_up_mb)
    print(f"throughput  acks=1 RF1 x1 node: {rf1:10.0f} rec/s   acks=all RF3 x3: {rf3:10.0f} rec/s"
          f"   ratio {rf3 / rf1:.2f}x (target >= 0.5x)")
    print(f"latency     acks=1 RF1 p50 {rf1_latency[0]:.1f} ms p99 {rf1_latency[1]:.1f} ms   "
          f"acks=all RF3 p50 {rf3_latency[0]:.1f} ms p99 {rf3_latency[1]:.1f} ms   "
          f"p99 ratio {rf3_latency[1] / rf1_latency[1]:.2f}x (target <= 2x)")
    print(f"catch-up    {args.catch_up_mb} MB at {rate:.0f} MB/s (target >= 100 MB/s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
