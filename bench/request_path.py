"""The per-request cost of a one-record Produce, without a client library in the way.

    python -m bench.request_path [--tree DIR ...] [--requests N] [--in-flight W] [--rounds R]
                                 [--acks 1|-1] [--calls]

Starts `odradek serve` from each tree (default: this checkout; give the tree before a change as a
second `--tree` for an A/B), pipelines N pre-encoded Produce v9 requests (one 100-byte record each,
acks=1, or --acks -1 for acks=all) over one raw socket with W in flight, and prints requests/s, the broker's CPU µs per request
and the p50/p99 round trip, rounds alternating between trees. `--calls` runs the broker under
cProfile instead and prints Python calls per request (the difference between N and 2N requests):
steady where CPU time swings with the machine's load. A script for bench/PROFILE.md, not a test.
"""

from __future__ import annotations

import argparse
import os
import pstats
import re
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

import protocol  # noqa: E402
from protocol import messages as m  # noqa: E402
from protocol.records import SimpleRecord, build_batch  # noqa: E402

_SIZE = struct.Struct(">i")
_LISTENING = re.compile(r"odradek: listening on PLAINTEXT://[\d.]+:(\d+)")
_PROFILED_LAUNCH = """
import cProfile, sys
from broker.cli import main
stats_path = sys.argv.pop(1)
sys.argv[0] = "odradek"
profile = cProfile.Profile()
profile.enable()
try:
    main()
finally:
    profile.disable()
    profile.dump_stats(stats_path)
"""
_LAUNCH = "import sys; from broker.cli import main; sys.argv[0] = 'odradek'; sys.exit(main())"


class Broker:
    """`odradek serve` from `tree` on a fresh data dir (under cProfile when `profile_to` is set)."""

    def __init__(self, tree: Path, profile_to: str | None = None):
        self.data = tempfile.mkdtemp(prefix="request-path-")
        launch = ["-c", _PROFILED_LAUNCH, profile_to] if profile_to else ["-c", _LAUNCH]
        args = [sys.executable, *launch, "serve", "--override", "listeners=PLAINTEXT://127.0.0.1:0",
                "--override", f"log.dirs={self.data}/log", "--override", "num.partitions=1"]
        self.log = open(Path(self.data) / "broker.out", "w+")
        self.process = subprocess.Popen(args, cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)},
                                        stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            found = _LISTENING.search((Path(self.data) / "broker.out").read_text())
            if found:
                self.port = int(found.group(1))
                return
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"odradek from {tree} did not start")
            time.sleep(0.05)

    def cpu_seconds(self) -> float:
        with open(f"/proc/{self.process.pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(30)
        self.log.close()
        shutil.rmtree(self.data, ignore_errors=True)


class Client:
    """One raw connection: size-prefixed frames out, responses matched by correlation id."""

    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = bytearray()

    def call(self, frame: bytes) -> bytes:
        self.sock.sendall(_SIZE.pack(len(frame)) + frame)
        return self.receive()

    def receive(self) -> bytes:
        while True:
            if len(self.buffer) >= 4:
                (size,) = _SIZE.unpack_from(self.buffer)
                if len(self.buffer) >= 4 + size:
                    frame = bytes(self.buffer[4:4 + size])
                    del self.buffer[:4 + size]
                    return frame
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            self.buffer += chunk

    def wait_for_leader(self, topic: str) -> None:
        request = m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name=topic)],
                                    allow_auto_topic_creation=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            _, body = protocol.decode_response(
                3, 9, self.call(protocol.encode_request(3, 9, 1, "request-path", request)))
            found = body.topics[0]
            if found.error_code == 0 and found.partitions and found.partitions[0].leader_id >= 0:
                return
            time.sleep(0.05)
        raise RuntimeError(f"no leader for {topic}")

    def pipeline(self, frames: list[bytes], in_flight: int) -> list[float]:
        """Send `frames` keeping `in_flight` unanswered; the round trip of each, in seconds."""
        sent_at: dict[int, float] = {}
        latencies = []
        sent = 0
        while len(latencies) < len(frames):
            while sent < len(frames) and sent - len(latencies) < in_flight:
                sent_at[sent] = time.perf_counter()
                self.sock.sendall(frames[sent])
                sent += 1
            (correlation_id,) = _SIZE.unpack_from(self.receive())
            latencies.append(time.perf_counter() - sent_at.pop(correlation_id))
        return latencies


def produce_frames(topic: str, count: int, first_id: int = 0, acks: int = 1) -> list[bytes]:
    batch = build_batch([SimpleRecord(key=None, value=b"x" * 100, timestamp=int(time.time() * 1000),
                                      headers=())])
    body = m.ProduceRequest(acks=acks, timeout_ms=30000, topic_data=[m.ProduceRequest.TopicProduceData(
        name=topic, partition_data=[m.ProduceRequest.PartitionProduceData(index=0, records=batch)])])
    frames = []
    for correlation_id in range(first_id, first_id + count):
        frame = protocol.encode_request(0, 9, correlation_id, "request-path", body)
        frames.append(_SIZE.pack(len(frame)) + frame)
    return frames


def measure(tree: Path, requests: int, in_flight: int, acks: int = 1) -> dict[str, float]:
    broker = Broker(tree)
    try:
        client = Client(broker.port)
        client.wait_for_leader("request-path")
        client.pipeline(produce_frames("request-path", 2000, acks=acks), in_flight)   # warm-up
        frames = produce_frames("request-path", requests, acks=acks)
        cpu_before, began = broker.cpu_seconds(), time.perf_counter()
        latencies = sorted(client.pipeline(frames, in_flight))
        elapsed, cpu = time.perf_counter() - began, broker.cpu_seconds() - cpu_before
    finally:
        broker.close()
    return {"requests/s": requests / elapsed, "CPU µs/request": 1e6 * cpu / requests,
            "p50 ms": 1e3 * latencies[len(latencies) // 2],
            "p99 ms": 1e3 * latencies[int(len(latencies) * 0.99)]}


def calls_per_request(tree: Path, requests: int, in_flight: int, acks: int = 1) -> float:
    """Python calls the broker makes per request (cProfile over N and 2N requests)."""
    totals = []
    with tempfile.TemporaryDirectory(prefix="request-path-prof-") as scratch:
        for count in (requests, 2 * requests):
            stats_path = str(Path(scratch) / f"{count}.prof")
            broker = Broker(tree, profile_to=stats_path)
            try:
                client = Client(broker.port)
                client.wait_for_leader("request-path")
                client.pipeline(produce_frames("request-path", count, acks=acks), in_flight)
            finally:
                broker.close()
            totals.append(pstats.Stats(stats_path).total_calls)
    return (totals[1] - totals[0]) / requests


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", action="append", type=Path,
                        help="a checkout to run the broker from (repeatable; default: this one)")
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--in-flight", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--acks", type=int, default=1, choices=(1, -1), help="1, or -1 for all")
    parser.add_argument("--calls", action="store_true", help="Python calls per request instead")
    args = parser.parse_args(argv)
    trees = [tree.resolve() for tree in (args.tree or [REPO_ROOT])]
    print(f"one-record Produce v9, acks={args.acks}, {args.in_flight} in flight; load average "
          f"{os.getloadavg()[0]:.2f} at start")
    if args.calls:
        for tree in trees:
            print(f"{tree}: {calls_per_request(tree, args.requests // 2, args.in_flight, args.acks):.1f} "
                  "Python calls per request")
        return 0
    results: dict[Path, list[dict[str, float]]] = {tree: [] for tree in trees}
    for round_number in range(1, args.rounds + 1):
        for tree in trees:
            values = measure(tree, args.requests, args.in_flight, args.acks)
            results[tree].append(values)
            print(f"  #{round_number} {tree}: " + ", ".join(f"{k} {v:,.2f}" for k, v in values.items()))
    for tree, rounds in results.items():
        print(f"{tree} (median of {len(rounds)}): " + ", ".join(
            f"{key} {statistics.median(r[key] for r in rounds):,.2f}" for key in rounds[0]))
    print(f"load average {os.getloadavg()[0]:.2f} at end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
