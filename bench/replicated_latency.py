"""`python -m bench.replicated_latency`: the replicated end-to-end latency row, round after round.

    python -m bench.replicated_latency [--rounds 5] [--warm-up 3] [--seconds 6] [--rate 5000] [--no-kafka]
                                       [--baseline DIR] [--override K=V ...]

The workload of `python -m bench`'s "replicated: end-to-end latency" row (bench/suite.py: 100 B records
at a fixed rate, acks=all, linger.ms=1, one long-polling consumer, a fresh RF 3 topic each round) on
three-node clusters from bench/clusters.py, but the clusters take turns round by round, so a busy
machine weighs on all of them alike: compare medians of rounds (and ratios), not one round's figures.
Each round also shows the cluster's CPU use and the time its threads were runnable but waiting for a
CPU (/proc schedstat), both as % of a core over the round: how much the machine's load held it back.

`--baseline DIR` also runs an Odradek cluster from another checkout (e.g. `git worktree` or
`git archive main | tar -x -C DIR`): a before/after of a change in the same run.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import statistics
import tempfile
import time
from pathlib import Path

from bench.clusters import start_kafka_cluster, start_odradek_cluster
from contextlib import contextmanager
from dataclasses import replace

from bench.suite import FULL, Suite, _latency_case


def _start_odradek_from(root: str, log_dir: Path, overrides: dict, name: str):
    """An Odradek cluster whose nodes run the code in `root` (a checkout of this repository)."""
    import broker.testing_cluster as testing_cluster

    saved = testing_cluster.REPO_ROOT
    testing_cluster.REPO_ROOT = str(Path(root).resolve())
    try:
        return start_odradek_cluster(log_dir, overrides, name=name, column=name)
    finally:
        testing_cluster.REPO_ROOT = saved


def _schedstat(pids) -> tuple[float, float]:
    """(seconds on a CPU, seconds runnable but waiting for one) summed over the threads of `pids`
    (/proc/PID/task/*/schedstat): the second is what a busy machine costs a server."""
    on_cpu = waiting = 0
    for pid in pids:
        for stat in Path(f"/proc/{pid}/task").glob("*/schedstat"):
            try:
                fields = stat.read_text().split()
            except OSError:
                continue
            on_cpu += int(fields[0])
            waiting += int(fields[1])
    return on_cpu / 1e9, waiting / 1e9


@contextmanager
def _py_spy(target, out_dir: Path):
    from bench.profile import SAMPLE_RATE, py_spy_binary

    out_dir.mkdir(parents=True, exist_ok=True)
    spies = [subprocess.Popen([py_spy_binary(), "record", "--pid", str(process.pid), "--rate", str(SAMPLE_RATE),
                               "--format", "raw", "--nonblocking", "--output", str(out_dir / f"node{node}.txt")],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for node, process in target.processes.items()]
    try:
        yield
    finally:
        for spy in spies:
            spy.send_signal(signal.SIGINT)   # py-spy writes its file on SIGINT
        for spy in spies:
            spy.wait(60)


def _run_round(case, target, records: int):
    """The case's values plus the cluster's CPU and run-queue wait per second of the round."""
    pids = [process.pid for process in target.processes.values()]
    cpu_before, wait_before = _schedstat(pids)
    began = time.monotonic()
    values = case.run(target)
    elapsed = time.monotonic() - began
    cpu_after, wait_after = _schedstat(pids)
    values["cpu %"] = 100 * (cpu_after - cpu_before) / elapsed
    values["runqueue %"] = 100 * (wait_after - wait_before) / elapsed
    values["cpu µs/record"] = 1e6 * (cpu_after - cpu_before) / max(records, 1)
    return values


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.replicated_latency", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--rate", type=int, default=5000)
    parser.add_argument("--warm-up", type=int, default=3, metavar="ROUNDS",
                        help="unmeasured rounds first (default 3: one was not enough for Kafka's "
                             "three JVMs, whose p50 stayed at 1-3 s for the next rounds)")
    parser.add_argument("--no-kafka", action="store_true")
    parser.add_argument("--baseline", metavar="DIR", help="also an Odradek cluster running this checkout")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--py-spy", metavar="DIR",
                        help="record every node of odradek-rf3 during its last round (python -m bench.profile FILE)")
    args = parser.parse_args(argv)
    overrides = dict(item.split("=", 1) for item in args.override)
    log_dir = Path(tempfile.mkdtemp(prefix="replicated-latency-"))
    settings = replace(FULL, latency_rate=args.rate, latency_duration=args.seconds)
    suite = Suite(settings, [], log=lambda text: None)
    names = ["odradek-rf3"]
    clusters = []
    try:
        clusters.append(start_odradek_cluster(log_dir, overrides, name="odradek-rf3", column="odradek-rf3"))
        if args.baseline:
            clusters.append(_start_odradek_from(args.baseline, log_dir, overrides, "baseline-rf3"))
            names.append("baseline-rf3")
        if not args.no_kafka:
            clusters.append(start_kafka_cluster(log_dir, name="kafka-rf3", column="kafka-rf3"))
            names.append("kafka-rf3")
        for cluster in clusters:
            suite.targets[cluster.name] = cluster
        case = _latency_case(suite, targets=tuple(names))
        records = int(args.rate * args.seconds)
        print(f"logs in {log_dir}; {case.name}; load average {os.getloadavg()[0]:.1f}", flush=True)
        samples: dict[str, list[dict]] = {name: [] for name in names}
        warm_up = max(args.warm_up, 0)
        for round_ in range(args.rounds + warm_up):   # warm-up rounds first (a JVM compiles first)
            order = names if round_ % 2 else list(reversed(names))
            for name in order:
                target = suite.targets[name]
                try:
                    if args.py_spy and name == "odradek-rf3" and round_ == args.rounds + warm_up - 1:
                        with _py_spy(target, Path(args.py_spy)):
                            values = _run_round(case, target, records)
                    else:
                        values = _run_round(case, target, records)
                except Exception as error:  # noqa: BLE001 - one failed round (a loaded machine) is not the run
                    print(f"round {round_} {name:13} failed: {error}", flush=True)
                    continue
                if round_ >= warm_up:
                    samples[name].append(values)
                print(f"round {round_}{' (warm-up)' if round_ < warm_up else ''} {name:13} p50 {values['p50 ms']:6.2f} "
                      f"p99 {values['p99 ms']:6.2f} p99.9 {values['p99.9 ms']:6.2f} ms; cluster CPU "
                      f"{values['cpu %']:.0f}% of a core ({values['cpu µs/record']:.0f} µs/record), waiting for a CPU "
                      f"{values['runqueue %']:.0f}%; "
                      f"load {os.getloadavg()[0]:.1f}", flush=True)
        print("median of rounds:")
        names = [name for name in names if samples[name]]
        medians = {name: {metric: statistics.median(v[metric] for v in samples[name])
                          for metric in ("p50 ms", "p99 ms", "p99.9 ms", "cpu µs/record")}
                   for name in names}
        for name in names:
            row = medians[name]
            ratios = ""
            if "kafka-rf3" in medians and name != "kafka-rf3":
                ratios = "  vs kafka " + " ".join(
                    f"{row[m] / medians['kafka-rf3'][m]:.2f}x" for m in ("p50 ms", "p99 ms", "p99.9 ms"))
            print(f"  {name:13} p50 {row['p50 ms']:6.2f} p99 {row['p99 ms']:6.2f} "
                  f"p99.9 {row['p99.9 ms']:6.2f} ms, cluster CPU {row['cpu µs/record']:.0f} µs/record{ratios}")
        print(f"load average at the end {os.getloadavg()[0]:.1f}")
    finally:
        suite.__exit__(None, None, None)
        for cluster in clusters:
            cluster.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
