"""`python -m bench`: Odradek against the peer and the ceiling, in one run, printed as ratios."""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

from bench import kafka, memory_cgroup, report, suite, targets
from bench.loopback import loopback_bytes_per_second

ALL_TARGETS = ("odradek", "peer", "sink", "kafka", "odradek-durable", "kafka-durable")
KAFKA_TARGETS = ("kafka", "kafka-durable")
# The durability-matched twins: fsync before every acknowledgement on both sides.
ODRADEK_DURABLE = {"log.flush.before.acknowledge": "true"}
KAFKA_DURABLE = {"log.flush.interval.messages": "1"}


def default_targets() -> list[str]:
    """Every target; Apache Kafka's two only where it can run (`bench.kafka.available`)."""
    return [name for name in ALL_TARGETS if name not in KAFKA_TARGETS or kafka.available() is None]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="Throughput and latency of Odradek next to a peer broker (Tansu, in-memory) and a "
                    "null-sink ceiling, on free loopback ports, in one run.")
    parser.add_argument("--quick", action="store_true", help="about a minute: short runs, no repetition")
    parser.add_argument("--targets", default=None,
                        help=f"comma-separated subset of {','.join(ALL_TARGETS)} (default: all; the Kafka "
                             "ones only when $APACHE_KAFKA_HOME or /work/shared/apache-kafka and java exist)")
    parser.add_argument("--scale", action="store_true",
                        help="also the slow scale rows: 10,000 partitions on Odradek and Kafka (bench/scale.py)")
    parser.add_argument("--no-replicated", action="store_true",
                        help="skip the replicated rows (three Odradek nodes vs three Kafka nodes, RF 3, acks=all; "
                             "several minutes: six more servers start)")
    parser.add_argument("--no-ssl", action="store_true",
                        help="skip the SSL rows (Odradek and Kafka without their SSL listener)")
    parser.add_argument("--only", default="", help="run only cases whose name contains this text")
    parser.add_argument("--duration", type=float, help="override seconds of load per throughput run")
    parser.add_argument("--repeats", type=int, help="override repetitions per cell")
    parser.add_argument("--setting", action="append", default=[], metavar="FIELD=NUMBER",
                        help="override any field of bench.suite.Settings, e.g. consume_records=1000000")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="extra odradek config override (repeatable)")
    parser.add_argument("--odradek-command", metavar="CMD",
                        help="launch Odradek with CMD (+ 'serve --override ...') instead of this checkout")
    parser.add_argument("--candidate-command", metavar="CMD",
                        help="A/B: also run a second Odradek launched with CMD, wherever Odradek runs, "
                             "and print candidate/Odradek ratios")
    parser.add_argument("--profile", metavar="DIR", help="record py-spy profiles of Odradek into DIR")
    parser.add_argument("--no-results-md", action="store_true", help="do not rewrite bench/RESULTS.md")
    args = parser.parse_args(argv)
    args.default_targets = args.targets is None
    args.targets = default_targets() if args.targets is None else [
        name.strip() for name in args.targets.split(",") if name.strip()]
    unknown = set(args.targets) - set(ALL_TARGETS)
    if unknown:
        parser.error(f"unknown targets: {', '.join(sorted(unknown))}")
    return args


def idle_cpu(running: list[targets.Target], seconds: float) -> suite.Row:
    """Each server's CPU use while nobody talks to it: an idle broker should use next to nothing."""
    row = suite.Row("idle (no clients)", "server CPU % of a core", higher_is_better=False)
    before = {target.name: target.cpu_seconds() for target in running}
    began = time.monotonic()
    time.sleep(seconds)
    elapsed = time.monotonic() - began
    for target in running:
        if target.column != target.name:  # a durable twin: the row has no column of its own for it
            continue
        after = target.cpu_seconds()
        if before[target.name] is not None and after is not None:
            row.samples[target.name] = [100.0 * (after - before[target.name]) / elapsed]
    return row


def _announce(target: targets.Target) -> None:
    print(f"{target.name}: {target.label} at {target.bootstrap} (pid {target.pid})", flush=True)
    if target.ssl_bootstrap:
        print(f"  SSL listener at {target.ssl_bootstrap}", flush=True)
    if target.details.get("jvm_flags"):
        print(f"  JVM flags (jcmd VM.flags): {target.details['jvm_flags']}", flush=True)


def _run_replicated(args, bench_suite: suite.Suite, running: list[targets.Target], log_dir: Path,
                    errors: list[str]) -> None:
    """Three Odradek nodes against three Kafka nodes. The single-node servers stop first (their rows
    are done), so the six cluster processes have the machine to themselves."""
    from bench.clusters import start_kafka_cluster, start_odradek_cluster
    from bench.replicated_rows import build_replicated_cases

    cases = [case for case in build_replicated_cases(bench_suite) if args.only in case.name]
    if not cases:
        return
    for target in running:
        bench_suite.forget(target.name)
        target.stop()
    starters = [("odradek-rf3", lambda: start_odradek_cluster(log_dir, dict(item.split("=", 1)
                                                                        for item in args.override)))]
    if args.candidate_command:
        starters.append(("candidate-rf3", lambda: start_odradek_cluster(
            log_dir, dict(item.split("=", 1) for item in args.override), name="candidate-rf3",
            column="candidate", program=shlex.split(args.candidate_command))))
    if "kafka" in args.targets:
        starters.append(("kafka-rf3", lambda: start_kafka_cluster(log_dir)))
    for name, start in starters:
        print(f"starting {name}", flush=True)
        try:
            target = start()
        except Exception as error:  # noqa: BLE001 - the other cluster's rows still mean something
            errors.append(f"start {name}: {error}")
            print(f"could not start {name}: {error}", flush=True)
            continue
        _confine(target, bench_suite.settings)
        running.append(target)
        bench_suite.targets[target.name] = target
        _announce(target)
    bench_suite.run(cases)


def _confine(target: targets.Target, settings: suite.Settings) -> None:
    """The disk-backed servers into memory cgroups of their own (not the in-memory peer or the sink)."""
    if settings.memory_limit_mib and target.name not in ("peer", "sink"):
        try:
            note = memory_cgroup.confine(target, settings.memory_limit_mib << 20)
        except (OSError, subprocess.SubprocessError) as error:
            note = f"not confined: {error}"
        target.label += "; " + note


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)
    command = " ".join(["python -m bench", shlex.join(sys.argv[1:] if argv is None else argv)]).strip()
    settings = suite.QUICK if args.quick else suite.FULL
    changes = {"duration": args.duration, "repeats": args.repeats}
    for item in args.setting:
        key, _, value = item.partition("=")
        changes[key] = float(value) if "." in value else int(value)
    settings = replace(settings, **{key: value for key, value in changes.items() if value is not None})
    started = datetime.now(timezone.utc).replace(microsecond=0)
    info = report.machine_info()
    machine_text = report.describe_machine(info)
    print(f"odradek bench ({settings.mode}) {started.isoformat()}\nmachine: {machine_text}", flush=True)

    log_dir = report.RESULTS_DIR / f"logs-{started.strftime('%Y%m%dT%H%M%SZ')}"
    log_dir.mkdir(parents=True, exist_ok=True)
    loopback = loopback_bytes_per_second(settings.loopback_duration)
    print(f"raw loopback TCP: {loopback / 1e9:.2f} GB/s", flush=True)

    running: list[targets.Target] = []
    errors: list[str] = []
    overrides = dict(item.split("=", 1) for item in args.override)
    pki = None
    if not args.no_ssl:
        from bench.ssl_rows import BenchPki

        pki = BenchPki(log_dir / "pki")
    starters = {
        "odradek": lambda: targets.start_odradek(
            log_dir, overrides, shlex.split(args.odradek_command) if args.odradek_command else None, tls=pki),
        "peer": lambda: targets.start_peer(log_dir),
        "sink": lambda: targets.start_sink(log_dir, settings.partitions),
        "kafka": lambda: kafka.start_kafka(log_dir, tls=pki),
        "odradek-durable": lambda: targets.start_odradek(
            log_dir, {**overrides, **ODRADEK_DURABLE},
            shlex.split(args.odradek_command) if args.odradek_command else None,
            name="odradek-durable", column="odradek"),
        "kafka-durable": lambda: kafka.start_kafka(log_dir, KAFKA_DURABLE, name="kafka-durable", column="kafka"),
        "candidate": lambda: targets.start_odradek(
            log_dir, overrides, shlex.split(args.candidate_command), name="candidate", tls=pki),
    }
    wanted = args.targets + (["candidate"] if args.candidate_command else [])
    unavailable = kafka.available()
    if unavailable and args.default_targets:
        print(f"kafka: not available ({unavailable}): no Odradek/Kafka column in this run", flush=True)
    profiler = None
    try:
        for name in wanted:
            try:
                target = starters[name]()
            except Exception as error:  # noqa: BLE001 - the rest of the run still means something
                errors.append(f"start {name}: {error}")
                print(f"could not start {name}: {error}", flush=True)
                continue
            _confine(target, settings)
            running.append(target)
            _announce(target)
        if args.profile:
            from bench.profile import PySpy

            profiler = PySpy(Path(args.profile))
        began = time.monotonic()
        idle_row = idle_cpu(running, settings.idle_seconds)
        with suite.Suite(settings, running, profiler=profiler) as bench_suite:
            cases = suite.build_cases(bench_suite)
            if pki is not None:
                from bench.ssl_rows import build_ssl_cases

                consume_at = next(i for i, case in enumerate(cases) if case.name.startswith("consume"))
                cases[consume_at + 1:consume_at + 1] = build_ssl_cases(bench_suite)
            cases = [case for case in cases if args.only in case.name]
            scale_cases = []
            if args.scale:
                from bench.scale import scale_case

                scale_cases = [case for case in [scale_case(bench_suite)] if args.only in case.name]
            rss_row = suite.Row("broker RSS after the workloads (before any scale rows)", "RSS MiB",
                                higher_is_better=False)
            try:
                bench_suite.run(cases)
                for target in running:  # before the scale rows fill the brokers with partitions
                    rss = target.rss_bytes()
                    if rss is not None and target.name in ("odradek", "peer", "kafka", "candidate"):
                        rss_row.samples[target.name] = [rss / (1 << 20)]
                bench_suite.run(scale_cases)
                if not args.no_replicated:
                    _run_replicated(args, bench_suite, running, log_dir, errors)
            except KeyboardInterrupt:  # Ctrl-C or SIGTERM: keep what was measured
                errors.append("run interrupted: later cases missing")
                print("interrupted: writing what was measured so far", flush=True)
            rows = bench_suite.rows + [idle_row, rss_row]
            errors += bench_suite.errors
            rss_timeline = bench_suite.rss_timeline
        elapsed = time.monotonic() - began
    finally:
        for target in running:
            target.stop()

    table = report.format_table(rows, extra_rows=[("raw loopback TCP (1 stream)", "GB/s",
                                                    report.format_value(loopback / 1e9, "GB/s"))])
    run = {
        "date": started.isoformat(),
        "command": command,
        "machine": info,
        "machine_text": machine_text,
        "settings": settings.__dict__ | {"partition_counts": list(settings.partition_counts),
                                         "connection_counts": list(settings.connection_counts)},
        "targets": {target.name: target.label for target in running},
        "target_details": {target.name: target.details for target in running if target.details},
        "loopback_bytes_per_s": loopback,
        "rows": [{"case": row.case, "metric": row.metric, "higher_is_better": row.higher_is_better,
                  "samples": row.samples, "median": {k: row.median(k) for k in row.samples}} for row in rows],
        "rss_timeline": rss_timeline,
        "errors": errors,
        "elapsed_s": elapsed,
        "load_average_end": list(os.getloadavg()),
        "server_logs": str(log_dir),
    }
    checks_table = report.format_checks(report.target_checks(rows))
    run["checks_table"] = checks_table
    complete = (not args.only and set(args.targets) >= set(default_targets()) and not args.no_results_md
                and not args.no_replicated and not args.no_ssl
                and not args.candidate_command and not args.odradek_command
                and "run interrupted: later cases missing" not in errors)
    path = report.write_results(run, table, results_md=report.RESULTS_MD if complete else None)
    print()
    print(table)
    print()
    print(checks_table)
    if errors:
        print("\nerrors:\n" + "\n".join(f"  {error}" for error in errors))
    if profiler and profiler.files:
        from bench.profile import format_summary, summarize

        for file in profiler.files:
            print()
            print(format_summary(summarize(file, top=15), str(file)))
    print(f"\n{elapsed:.0f} s of workloads; results in {path}" + (f" and {report.RESULTS_MD}" if complete else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
