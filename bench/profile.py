"""py-spy sampling of the Odradek process while a workload runs, and a summary of where time went.

`PySpy(out_dir).record(target, case)` is a context manager the suite wraps around each Odradek run:
it attaches ``py-spy record --format raw`` (collapsed stacks) to the broker's pid and stops it when
the run ends. `summarize(path)` reads a collapsed-stack file and ranks functions by self time (the
sample's leaf frame) and by total time (anywhere on the stack), as percentages of all samples.

CLI: ``python -m bench.profile FILE [--top 25]`` prints both rankings; ``--categories`` prints the
shares of the buckets PROFILE.md's table uses (thread hop, socket send/recv, frame reads, ...).
"""

from __future__ import annotations

import argparse
import re
import shutil
import signal
import subprocess
import sys
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

SAMPLE_RATE = 200  # per second; low enough to cost the broker little


def py_spy_binary() -> str:
    found = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(found).exists():
        raise RuntimeError("py-spy not found: pip install -e '.[bench]'")
    return found


class PySpy:
    """Records one collapsed-stack file per (case, Odradek run) into `out_dir`."""

    def __init__(self, out_dir: Path, only: str = "odradek"):
        self.out_dir = out_dir
        self.only = only
        self.files: list[Path] = []
        self.binary = py_spy_binary()

    @contextmanager
    def record(self, target, case: str):
        if target.name != self.only:
            yield
            return
        self.out_dir.mkdir(parents=True, exist_ok=True)
        slug = re.sub(r"[^a-z0-9]+", "-", case.lower()).strip("-")
        path = self.out_dir / f"{slug}-{len(self.files)}.txt"
        process = subprocess.Popen(
            [self.binary, "record", "--pid", str(target.pid), "--rate", str(SAMPLE_RATE), "--format", "raw",
             "--output", str(path), "--nonblocking"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        try:
            yield
        finally:
            process.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            if path.exists():
                self.files.append(path)


@dataclass
class Summary:
    samples: int
    self_time: list[tuple[str, float]]  # (function, % of samples), descending
    total_time: list[tuple[str, float]]


def summarize(path: Path, top: int = 25, include_idle: bool = False) -> Summary:
    """Ranks functions by self and total samples; idle frames (waiting in epoll) are left out unless asked."""
    self_counts: Counter[str] = Counter()
    total_counts: Counter[str] = Counter()
    samples = 0
    for line in path.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        frames = [_function_name(frame) for frame in stack.split(";")]
        if not include_idle and frames and _is_idle(frames[-1]):
            continue
        count = int(count_text)
        samples += count
        self_counts[frames[-1]] += count
        for frame in set(frames):
            total_counts[frame] += count
    if not samples:
        return Summary(0, [], [])

    def ranked(counter: Counter[str]) -> list[tuple[str, float]]:
        return [(name, 100.0 * count / samples) for name, count in counter.most_common(top)]

    return Summary(samples, ranked(self_counts), ranked(total_counts))


# Buckets for PROFILE.md's table: (label, is it this bucket? given the leaf and the whole stack).
CATEGORIES = (
    ("thread hop", lambda leaf, stack: any(word in leaf for word in (
        "start_thread_soon", "wakeup_thread_and_signal_safe", "namefunc", "to_thread_run_sync"))),
    ("socket send", lambda leaf, stack: "_nonblocking_helper" in leaf and "send" in stack),
    ("socket recv", lambda leaf, stack: "_nonblocking_helper" in leaf and "send" not in stack),
    ("frame reads", lambda leaf, stack: "_read_frame" in leaf or "_receive_more" in leaf),
    ("pwritev", lambda leaf, stack: "LogSegment.write" in leaf),
    ("sendfile", lambda leaf, stack: "_send_file_slice" in leaf),
    ("CRC32C", lambda leaf, stack: "compute_crc" in leaf),
)


def categorize(path: Path) -> tuple[int, dict[str, float]]:
    """Busy samples and the % of them in each of CATEGORIES (the rest is 'other')."""
    counts: Counter[str] = Counter()
    samples = 0
    for line in path.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        frames = [_function_name(frame) for frame in stack.split(";")]
        if _is_idle(frames[-1]):
            continue
        count = int(count_text)
        samples += count
        label = next((name for name, match in CATEGORIES if match(frames[-1], stack)), "other")
        counts[label] += count
    return samples, {name: 100.0 * counts[name] / samples for name, _ in CATEGORIES + (("other", None),)
                     if samples}


def _function_name(frame: str) -> str:
    """'handle (broker/handlers/produce.py:42)' -> 'handle (broker/handlers/produce.py)'."""
    return re.sub(r":\d+\)$", ")", frame.strip())


IDLE_LEAVES = (
    "epoll",  # trio's event loop waiting for I/O
    "select (selectors", "poll (selectors",
    "WorkerThread._work (",  # a trio worker thread parked on its lock, waiting for a job
    "wait (threading",
)


def _is_idle(leaf: str) -> bool:
    return any(word in leaf for word in IDLE_LEAVES)


def format_summary(summary: Summary, title: str = "") -> str:
    lines = [f"{title} ({summary.samples} busy samples)" if title else f"{summary.samples} busy samples"]
    lines.append("  self%  function")
    lines += [f"  {pct:5.1f}  {name}" for name, pct in summary.self_time]
    lines.append("  total% function")
    lines += [f"  {pct:5.1f}  {name}" for name, pct in summary.total_time]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.profile", description="Summarize py-spy raw output")
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--include-idle", action="store_true")
    parser.add_argument("--categories", action="store_true", help="print only the PROFILE.md buckets")
    args = parser.parse_args(argv)
    for path in args.files:
        if args.categories:
            samples, shares = categorize(path)
            print(f"{path} ({samples} busy samples): " + ", ".join(f"{k} {v:.1f}%" for k, v in shares.items()))
        else:
            print(format_summary(summarize(path, args.top, args.include_idle), str(path)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
