"""Storage benchmarks and the SIGKILL crash test.  Not a test: it prints figures.

    python bench/storage_bench.py                 # append/read MB/s, recovery, RSS (short)
    python bench/storage_bench.py --log-mb 1024 --rss-mb 2048     # the issue's full sizes
    python bench/storage_bench.py crash --iterations 100          # kill -9 loop, verified
    python bench/storage_bench.py worker DIR SEED MODE            # (the crash loop's child)

Append throughput is shown next to a plain write() loop to a file on the same disk
(the ratio is the figure to watch); reads go through the byte ranges `Log.read`
returns, sent with os.sendfile to /dev/null.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from protocol import records as r  # noqa: E402
from storage.config import LogConfig  # noqa: E402
from storage.log import Log  # noqa: E402
from storage.manager import LogManager  # noqa: E402

MiB = 1024 * 1024
CRASH_TOPIC = "crash"
CRASH_PRODUCER = 1000


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def make_batch(batch_bytes: int) -> bytes:
    # One batch of ~batch_bytes, made of records of at most 1 KiB (as clients batch them).
    per = min(1024, batch_bytes)
    count = max(1, batch_bytes // (per + 8))
    value = os.urandom(per)
    return r.build_batch([r.SimpleRecord(value=value, timestamp=int(time.time() * 1000))] * count)


# ---------------------------------------------------------------------------------- throughput

def bench_append(root: str, batch_bytes: int, total_bytes: int) -> tuple[float, float]:
    data = make_batch(batch_bytes)
    n = max(1, total_bytes // len(data))
    log = Log(os.path.join(root, f"append{batch_bytes}-0"), LogConfig(segment_bytes=256 * MiB, max_message_bytes=8 * MiB))
    view = memoryview(data)
    t0 = time.perf_counter()
    for _ in range(n):
        log.append(view)
    elapsed = time.perf_counter() - t0
    log.close()
    ours = n * len(data) / elapsed / MiB
    path = os.path.join(root, f"plain{batch_bytes}")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    t0 = time.perf_counter()
    for _ in range(n):
        os.write(fd, data)
    elapsed = time.perf_counter() - t0
    os.close(fd)
    plain = n * len(data) / elapsed / MiB
    shutil.rmtree(os.path.join(root, f"append{batch_bytes}-0"))
    os.remove(path)
    return ours, plain


def fill_log(path: str, total_bytes: int, batch_bytes: int = 16 * 1024) -> Log:
    log = Log(path, LogConfig(segment_bytes=128 * MiB))
    view = memoryview(make_batch(batch_bytes))
    for _ in range(max(1, total_bytes // len(view))):
        log.append(view)
    log.set_high_watermark(log.log_end_offset)
    return log


def bench_read(log: Log, max_bytes: int = MiB) -> float:
    sink = os.open(os.devnull, os.O_WRONLY)
    offset, sent = log.log_start_offset, 0
    t0 = time.perf_counter()
    while offset < log.log_end_offset:
        pieces = log.read(offset, max_bytes)
        if not pieces:
            break
        for piece in pieces:
            done = 0
            while done < len(piece):
                done += os.sendfile(sink, piece.fileno(), piece.position + done, len(piece) - done)
            sent += len(piece)
        # The next fetch offset comes from the last batch header in the range.
        offset = _next_offset_after(pieces[-1])
    elapsed = time.perf_counter() - t0
    os.close(sink)
    return sent / elapsed / MiB


def _next_offset_after(piece) -> int:
    # Walk the headers in the range (as a consumer would) to find where it ends.
    pos, end, next_offset = piece.position, piece.position + len(piece), None
    while pos < end:
        header = os.pread(piece.fileno(), r.HEADER_SIZE, pos)
        batch = r.RecordBatch(header)
        next_offset = batch.next_offset
        pos += batch.size
    return next_offset


def bench_recovery(root: str, total_bytes: int) -> tuple[float, float, float]:
    path = os.path.join(root, "recover-0")
    t0 = time.perf_counter()
    log = fill_log(path, total_bytes)
    fill_time = time.perf_counter() - t0
    log.flush()
    log.close_clean()
    log.close()
    t0 = time.perf_counter()
    clean = Log(path, LogConfig(segment_bytes=128 * MiB), clean_shutdown=True,
                recovery_point=log.recovery_point)
    clean_time = time.perf_counter() - t0
    end = clean.log_end_offset
    clean.close()
    t0 = time.perf_counter()
    unclean = Log(path, LogConfig(segment_bytes=128 * MiB), clean_shutdown=False, recovery_point=0)
    unclean_time = time.perf_counter() - t0
    assert unclean.log_end_offset == end
    unclean.close()
    shutil.rmtree(path)
    return fill_time, clean_time, unclean_time


def bench_rss(root: str, total_bytes: int) -> tuple[float, float]:
    before = rss_mb()
    log = fill_log(os.path.join(root, "rss-0"), total_bytes, batch_bytes=64 * 1024)
    after = rss_mb()
    log.close()
    shutil.rmtree(os.path.join(root, "rss-0"))
    return before, after


def run_benchmarks(args) -> None:
    root = tempfile.mkdtemp(prefix="storage-bench-", dir=args.dir)
    try:
        print(f"storage bench in {root} (python {sys.version.split()[0]})")
        total = args.append_mb * MiB
        for size, label in ((1024, "1 KiB"), (16 * 1024, "16 KiB"), (MiB, "1 MiB")):
            # Interleaved rounds, medians: a shared machine's disk and CPU drift a lot.
            runs = [bench_append(root, size, total) for _ in range(args.rounds)]
            ours = statistics.median(o for o, _ in runs)
            plain = statistics.median(p for _, p in runs)
            ratio = statistics.median(o / p for o, p in runs)
            print(f"append {label:>6} batches: {ours:8.1f} MB/s   plain write(): {plain:8.1f} MB/s"
                  f"   ratio {ratio:5.2f} (median of {args.rounds})")
        log = fill_log(os.path.join(root, "read-0"), args.read_mb * MiB)
        print(f"read via byte ranges + sendfile ({args.read_mb} MiB, 1 MiB fetches): "
              f"{bench_read(log):8.1f} MB/s")
        log.close()
        shutil.rmtree(os.path.join(root, "read-0"))
        fill_time, clean_time, unclean_time = bench_recovery(root, args.log_mb * MiB)
        print(f"recovery of a {args.log_mb} MiB log: clean stop {clean_time * 1000:8.1f} ms, "
              f"unclean stop (full scan, CRC, index rebuild) {unclean_time * 1000:8.1f} ms "
              f"({args.log_mb / unclean_time:.0f} MB/s)")
        before, after = bench_rss(root, args.rss_mb * MiB)
        print(f"RSS before writing {args.rss_mb} MiB: {before:6.1f} MiB, after: {after:6.1f} MiB")
    finally:
        shutil.rmtree(root, ignore_errors=True)


# ---------------------------------------------------------------------------------- crash loop

def record_value(i: int) -> bytes:
    return b"record-%012d" % i


def worker(directory: str, seed: int, mode: str) -> None:
    """Append forever; report acknowledged offsets on stdout.  mode 'fsync': each
    append waits for the group commit (fsync-before-ack); 'os': flush every 20."""
    rng = random.Random(seed)
    mgr = LogManager(directory, {"segment.bytes": 64 * 1024, "index.interval.bytes": 512})
    log = mgr.get_or_create_log(CRASH_TOPIC, 0)
    next_record = log.log_end_offset
    out = sys.stdout
    appended = 0
    while True:
        n = rng.randint(1, 20)
        recs = [r.SimpleRecord(value=record_value(next_record + j) * rng.randint(1, 8),
                               key=b"%d" % (next_record + j), timestamp=int(time.time() * 1000))
                for j in range(n)]
        codec = rng.choice([r.Compression.NONE, r.Compression.NONE, r.Compression.LZ4, r.Compression.ZSTD])
        # An idempotent producer whose sequence is the offset: after every restart the
        # recovered producer state must accept the next sequence.
        res = log.append(r.build_batch(recs, compression_type=codec, producer_id=CRASH_PRODUCER,
                                       producer_epoch=0, base_sequence=next_record))
        assert res.first_offset == next_record, (res, next_record)
        next_record += n
        appended += 1
        if mode == "fsync":
            log.wait_flushed(res.last_offset + 1)
            out.write(f"ack {res.last_offset}\n")
            out.flush()
        elif appended % 20 == 0:
            log.flush()
            out.write(f"ack {log.recovery_point - 1}\n")
            out.flush()


def verify_log(directory: str, acked: int) -> int:
    """Reopen after a kill: the log is a gap-free prefix of what was written, every
    batch is intact, and every acknowledged (flushed) offset is present."""
    mgr = LogManager(directory)
    log = mgr.get_or_create_log(CRASH_TOPIC, 0)
    offset, end = 0, log.log_end_offset
    while offset < end:
        batches = log.read_batches(offset)
        assert batches, f"nothing readable at {offset} below the log end {end}"
        for batch in batches:
            batch.ensure_valid()
            for rec in batch.records():
                assert rec.offset == offset, f"gap or reordering at {offset}: found {rec.offset}"
                assert rec.value.startswith(record_value(offset)), f"wrong record at {offset}"
                offset += 1
    assert end - 1 >= acked, f"acknowledged offset {acked} lost (log end {end})"
    if end:
        entry = log.producer_state.producers.get(CRASH_PRODUCER)
        assert entry is not None and entry.last_seq == end - 1, "producer state not recovered"
    mgr.close()
    return end


def chop_unflushed_tail(directory: str, acked: int, rng: random.Random) -> None:
    """Simulate losing page-cache data that was never fsynced: cut the newest segment
    somewhere after the last acknowledged batch (a torn write included)."""
    part = os.path.join(directory, f"{CRASH_TOPIC}-0")
    logs = sorted(n for n in os.listdir(part) if n.endswith(".log"))
    if not logs:
        return
    path = os.path.join(part, logs[-1])
    size = os.path.getsize(path)
    # the first byte we may cut: the end of the batch holding the acknowledged offset
    floor, pos = 0, 0
    with open(path, "rb") as f:
        data = f.read()
    while pos + r.HEADER_SIZE <= len(data):
        batch = r.RecordBatch(data, pos)
        if batch.last_offset <= acked:
            floor = pos + batch.size
        pos += batch.size
    if size > floor:
        os.truncate(path, rng.randint(floor, size))


def crash_loop(iterations: int, seed: int = 1, directory: str | None = None, verbose: bool = True) -> dict:
    rng = random.Random(seed)
    root = directory or tempfile.mkdtemp(prefix="storage-crash-")
    stats = {"iterations": 0, "records": 0, "chopped": 0}
    try:
        acked = -1
        for i in range(iterations):
            mode = "fsync" if i % 2 == 0 else "os"
            child = subprocess.Popen([sys.executable, os.path.abspath(__file__), "worker", root,
                                      str(rng.randrange(1 << 30)), mode],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            deadline = time.monotonic() + rng.uniform(0.3, 1.0)
            seen = acked
            while time.monotonic() < deadline:
                line = child.stdout.readline()
                if not line:
                    break
                seen = max(seen, int(line.split()[1]))
            child.send_signal(signal.SIGKILL)
            # acknowledgements already written to the pipe count too
            rest, err = child.communicate(timeout=30)
            for line in rest.splitlines():
                if line.startswith("ack "):
                    seen = max(seen, int(line.split()[1]))
            if child.returncode != -signal.SIGKILL:
                raise AssertionError(f"worker exited by itself ({child.returncode}): {err[-2000:]}")
            acked = seen
            if rng.random() < 0.5:
                chop_unflushed_tail(root, acked, rng)
                stats["chopped"] += 1
            end = verify_log(root, acked)
            if verbose:
                print(f"kill {i + 1:4d}: mode={mode:5s} last acknowledged={acked:8d} "
                      f"recovered log end={end:8d}", flush=True)
            acked = end - 1  # the verifying open flushed everything it kept
            stats["iterations"] += 1
            stats["records"] = end
    finally:
        if directory is None:
            shutil.rmtree(root, ignore_errors=True)
    return stats


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command")
    crash = sub.add_parser("crash", help="SIGKILL a writer repeatedly and verify the log each time")
    crash.add_argument("--iterations", type=int, default=100)
    crash.add_argument("--seed", type=int, default=1)
    w = sub.add_parser("worker")
    w.add_argument("directory")
    w.add_argument("seed", type=int)
    w.add_argument("mode", choices=["fsync", "os"])
    parser.add_argument("--dir", default=None, help="where to put the benchmark files (default: $TMPDIR)")
    parser.add_argument("--append-mb", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3, help="interleaved append rounds (median)")
    parser.add_argument("--read-mb", type=int, default=256)
    parser.add_argument("--log-mb", type=int, default=256, help="log size for the recovery figures")
    parser.add_argument("--rss-mb", type=int, default=512, help="bytes written for the RSS figure")
    args = parser.parse_args(argv)
    if args.command == "worker":
        worker(args.directory, args.seed, args.mode)
    elif args.command == "crash":
        t0 = time.perf_counter()
        stats = crash_loop(args.iterations, args.seed)
        print(f"{stats['iterations']} kills verified ({stats['chopped']} with an unflushed tail cut), "
              f"{stats['records']} records, {time.perf_counter() - t0:.1f} s")
    else:
        run_benchmarks(args)


if __name__ == "__main__":
    main()
