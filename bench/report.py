"""Machine facts, the result table, and the files a run leaves behind (JSON + bench/RESULTS.md)."""

from __future__ import annotations

import json
import os
import platform
from datetime import datetime
from pathlib import Path

from bench.suite import Row

BENCH_DIR = Path(__file__).resolve().parent
RESULTS_DIR = BENCH_DIR / "results"
RESULTS_MD = BENCH_DIR / "RESULTS.md"
# Everything in RESULTS.md from this line on is hand-written (A/B runs of one change) and is kept
# when a run rewrites the generated part above it.
NOTES_MARKER = "<!-- notes below are kept across runs -->"

COLUMNS = (("odradek", "Odradek"), ("candidate", "candidate"), ("peer", "peer"), ("kafka", "Kafka"),
           ("sink", "null sink"))


def machine_info() -> dict:
    """Cores, memory, CPU model, Python and librdkafka versions, and the load when we started."""
    model = "unknown"
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            model = next((line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")),
                         model)
    except OSError:
        pass
    memory = None
    try:
        with open("/proc/meminfo") as meminfo:
            memory = int(next(line for line in meminfo if line.startswith("MemTotal:")).split()[1]) * 1024
    except (OSError, StopIteration):
        pass
    try:
        import confluent_kafka

        version = confluent_kafka.version()
        version = version[0] if isinstance(version, tuple) else version
        client = f"confluent-kafka {version} / librdkafka {confluent_kafka.libversion()[0]}"
    except ImportError:
        client = "confluent-kafka not installed"
    return {
        "cpu_model": model,
        "cores": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)),
        "memory_bytes": memory,
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "kernel": platform.release(),
        "client": client,
        "load_average": list(os.getloadavg()),
    }


def describe_machine(info: dict) -> str:
    memory = f"{info['memory_bytes'] / (1 << 30):.1f} GiB" if info.get("memory_bytes") else "? GiB"
    load = " ".join(f"{x:.2f}" for x in info["load_average"])
    return (f"{info['cores']} cores ({info['cores_usable']} usable), {memory} RAM, {info['cpu_model']}, "
            f"{info['python']}, Linux {info['kernel']}, {info['client']}, load average at start {load}")


def format_value(value: float | None, metric: str) -> str:
    if value is None:
        return "n/a"
    if metric.endswith("records/s"):
        return f"{value / 1e6:.2f} M" if value >= 1e6 else f"{value / 1e3:.1f} k" if value >= 1e3 else f"{value:.0f}"
    if metric == "GB/s":
        return f"{value:.2f}"
    return f"{value:,.0f}" if value >= 1000 else f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def format_ratio(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}×"


def format_table(rows: list[Row], columns=COLUMNS, extra_rows: list[tuple[str, str, str]] = ()) -> str:
    """A Markdown table: median per server and the Odradek/peer, Odradek/Kafka and Odradek/sink ratios.

    `extra_rows` are (case, metric, ceiling value) lines that only have a ceiling, e.g. raw loopback.
    """
    present = [(key, title) for key, title in columns if any(row.samples.get(key) for row in rows)]
    present_keys = {key for key, _ in present}
    header = ["workload", "metric"] + [title for _, title in present]
    ratios = [("odradek", "peer", "Odradek/peer"), ("odradek", "kafka", "Odradek/Kafka"),
              ("odradek", "sink", "Odradek/sink"),
              ("candidate", "odradek", "candidate/Odradek")]
    ratios = [r for r in ratios if {r[0], r[1]} <= present_keys]
    header += [title for _, _, title in ratios]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] * 2 + ["---:"] * (len(header) - 2)) + "|"]
    previous_case = None
    for row in rows:
        case = row.case if row.case != previous_case else ""
        previous_case = row.case
        direction = "" if row.higher_is_better else " (lower is better)"
        cells = [case, row.metric + direction]
        cells += [format_value(row.median(key), row.metric) for key, _ in present]
        cells += [format_ratio(row.ratio(a, b)) if row.samples.get(b) else "" for a, b, _ in ratios]
        lines.append("| " + " | ".join(cells) + " |")
    sink_column = 2 + [key for key, _ in present].index("sink") if "sink" in present_keys else None
    for case, metric, value in extra_rows:  # a ceiling: in the sink's column, else beside its metric
        cells = [case, metric if sink_column else f"{metric}: {value}"] + [""] * (len(header) - 2)
        if sink_column:
            cells[sink_column] = value
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _find(rows: list[Row], case_prefix: str, metric: str) -> Row | None:
    return next((r for r in rows if r.case.startswith(case_prefix) and r.metric.startswith(metric)), None)


def target_checks(rows: list[Row]) -> list[tuple[str, str, str]]:
    """Issue 9's targets, each as (target, what this run measured, met / missed / n/a)."""
    checks: list[tuple[str, str, str]] = []

    def ratio_check(goal: str, case: str, metric: str, other: str, at_least: float) -> None:
        row = _find(rows, case, metric)
        value = row.ratio("odradek", other) if row else None
        verdict = "n/a" if value is None else "met" if value >= at_least else "missed"
        checks.append((goal, format_ratio(value), verdict))

    for label in ("100 B acks=1", "100 B acks=all", "1 KiB acks=1", "1 KiB acks=all"):
        ratio_check(f"batched produce {label} ≥ 1.0× peer", f"produce batched {label}", "records/s", "peer", 1.0)
    ratio_check("consume ≥ 1.0× peer", "consume", "records/s", "peer", 1.0)
    ratio_check("unbatched produce ≥ 0.5× peer (stretch 1.0×)", "produce unbatched", "records/s", "peer", 0.5)
    # Issue 21: against warmed-up Apache Kafka
    for label in ("100 B acks=1", "100 B acks=all", "1 KiB acks=1", "1 KiB acks=all"):
        ratio_check(f"batched produce {label} ≥ 1.0× Kafka", f"produce batched {label}", "records/s", "kafka", 1.0)
    ratio_check("consume ≥ 1.0× Kafka", "consume", "records/s", "kafka", 1.0)
    ratio_check("unbatched produce ≥ 1.0× Kafka", "produce unbatched", "records/s", "kafka", 1.0)
    ratio_check("durable batched produce ≥ 1.0× durable Kafka", "durable: produce batched", "records/s", "kafka", 1.0)
    ratio_check("durable unbatched produce ≥ 1.0× durable Kafka", "durable: produce unbatched", "records/s",
                "kafka", 1.0)
    latency = _find(rows, "end-to-end latency", "p99 ms")
    value = latency.ratio("odradek", "kafka") if latency else None
    checks.append(("p99 end-to-end ≤ Kafka's", format_ratio(value),
                   "n/a" if value is None else "met" if value <= 1.0 else "missed"))
    # Issue 21: three nodes each, RF 3, acks=all, min.insync.replicas=2
    for label in ("100 B", "1 KiB"):
        ratio_check(f"replicated: batched produce {label} acks=all ≥ 1.0× Kafka's cluster",
                    f"replicated: produce batched {label}", "records/s", "kafka", 1.0)
    ratio_check("replicated: consume ≥ 1.0× Kafka's cluster", "replicated: consume", "records/s", "kafka", 1.0)
    latency = _find(rows, "replicated: end-to-end latency", "p99 ms")
    value = latency.ratio("odradek", "kafka") if latency else None
    checks.append(("replicated: p99 end-to-end ≤ Kafka's", format_ratio(value),
                   "n/a" if value is None else "met" if value <= 1.0 else "missed"))
    for label in ("produce batched 100 B", "produce batched 1 KiB", "consume"):
        ratio_check(f"SSL: {label} ≥ 1.0× Kafka over SSL", f"SSL: {label}", "SSL records/s", "kafka", 1.0)
    for metric in ("CreateTopics s", "full Metadata ms"):
        row = _find(rows, "scale:", metric)
        value = row.ratio("odradek", "kafka") if row else None
        checks.append((f"10,000 partitions: {metric} within 2× Kafka's", format_ratio(value),
                       "n/a" if value is None else "met" if value <= 2.0 else "missed"))
    quiet = _find(rows, "scale:", "e2e p99 ms, quiet")
    value = quiet.median("odradek") if quiet else None
    checks.append(("10,000 partitions: p99 on a quiet topic ≤ 10 ms", "n/a" if value is None else f"{value:.1f} ms",
                   "n/a" if value is None else "met" if value <= 10 else "missed"))
    busy = _find(rows, "scale:", "e2e p99 ms, + full")
    value = busy.ratio("odradek", "kafka") if busy else None
    checks.append(("10,000 partitions: p99 with metadata pollers ≤ Kafka's", format_ratio(value),
                   "n/a" if value is None else "met" if value <= 1.0 else "missed"))
    for label in ("100 B acks=1", "1 KiB acks=1"):
        ratio_check(f"batched produce {label} ≥ 50% of the null sink", f"produce batched {label}", "records/s",
                    "sink", 0.5)

    p99 = _find(rows, "end-to-end latency", "p99 ms")
    mine, peer = (p99.median("odradek"), p99.median("peer")) if p99 else (None, None)
    if mine is None:
        checks.append(("p99 end-to-end ≤ 10 ms and below the peer's", "n/a", "n/a"))
    else:
        met = mine <= 10 and (peer is None or mine < peer)
        checks.append(("p99 end-to-end ≤ 10 ms and below the peer's",
                       f"{mine:.1f} ms (peer {format_value(peer, 'ms')} ms)", "met" if met else "missed"))

    growth = _find(rows, "RSS while writing", "growth %")
    value = growth.median("odradek") if growth else None
    checks.append(("RSS flat (±10%) from 1 to 2 GiB written", "n/a" if value is None else f"{value:+.1f}%",
                   "n/a" if value is None else "met" if abs(value) <= 10 else "missed"))

    idle = _find(rows, "idle", "server CPU %")
    value = idle.median("odradek") if idle else None
    checks.append(("idle broker uses < 1% of a core (bench's own check)", "n/a" if value is None else f"{value:.1f}%",
                   "n/a" if value is None else "met" if value < 1 else "missed"))

    one, thousand = _find(rows, "scaling: 1 partition", "records/s"), _find(rows, "scaling: 1000 partitions", "records/s")
    slowdown = None
    if one and thousand and thousand.median("odradek"):
        slowdown = one.median("odradek") / thousand.median("odradek")
    checks.append(("1000 partitions at most 2× slower than 1", "n/a" if slowdown is None else f"{slowdown:.2f}× slower",
                   "n/a" if slowdown is None else "met" if slowdown <= 2 else "missed"))
    return checks


def format_checks(checks: list[tuple[str, str, str]]) -> str:
    lines = ["| target | this run | |", "|---|---:|---|"]
    lines += [f"| {goal} | {measured} | {verdict} |" for goal, measured, verdict in checks]
    return "\n".join(lines)


def results_document(run: dict, table: str) -> str:
    """The text of bench/RESULTS.md for one run."""
    targets = "\n".join(f"- **{name}**: {label}" for name, label in run["targets"].items())
    for name, details in run.get("target_details", {}).items():
        if details.get("jvm_flags"):
            targets += f"\n  - {name} JVM flags (`jcmd PID VM.flags`): `{details['jvm_flags']}`"
    errors = "\n".join(f"- {error}" for error in run["errors"]) or "- none"
    return f"""# Benchmark results

Latest run of `{run['command']}` on {run['date']} ({run['settings']['mode']} mode, median of
{run['settings']['repeats']} run(s) per cell ({run['settings'].get('scaling_repeats') or run['settings']['repeats']} for scaling rows), {run['settings']['duration']} s of load each,
{run['settings'].get('producers', '?')} producer process(es) on {run['settings'].get('partitions', '?')} partitions).

Machine: {run['machine_text']}.
The machine is shared with other work: absolute figures are noisy, the ratios from one run are what we
compare. The peer keeps everything in memory (no disk at all); Odradek and Kafka write to their log
directories at their default durability (page cache, flushed by the OS) except in the `durable:` rows,
where both fsync before acknowledging (separate instances, shown in the Odradek and Kafka columns).
Kafka runs one unmeasured warm-up pass of every case before its measured ones (its JIT is warm).
{_memory_text(run['settings'].get('memory_limit_mib', 0))}
"server CPU µs/record" is the server process's CPU time (all threads) during a run divided by the
records it handled: the client shares the cores, so records/s is often client-bound while this shows
each server's own cost. Profiles and what to change next: `bench/PROFILE.md`. TLS and SASL_SSL
next to PLAINTEXT (`python -m bench.security`): `bench/RESULTS-security.md`.
`SSL:` rows: the same broker (Odradek and single-node Kafka each have an SSL listener next to the
PLAINTEXT one, certificates from a CA made for the run) moves the same workload over PLAINTEXT and
then over SSL in every repetition; "SSL/PLAINTEXT" is each broker's own ratio. `replicated:` rows:
three Odradek nodes against three Kafka nodes (each node broker and controller), RF 3 topics, acks=all,
min.insync.replicas=2 (internal topics RF 3 too), Kafka's default replica fetch settings on both; run
last, after the single-node servers have stopped; CPU is the sum over the three nodes. Load average
at the end of the run: {' '.join(f'{x:.2f}' for x in run.get('load_average_end', []))}.

Servers:
{targets}

{table}

Issue 9's and issue 21's targets, as measured in this run (single runs on a loaded machine swing; re-run before
trusting a verdict near its threshold):

{run.get('checks_table', 'n/a')}

Errors during the run:
{errors}
"""


def write_results(run: dict, table: str, results_dir: Path = RESULTS_DIR, results_md: Path | None = RESULTS_MD) -> Path:
    """Writes the JSON (bench/results/, ignored by git) and refreshes bench/RESULTS.md."""
    results_dir.mkdir(parents=True, exist_ok=True)
    stamp = datetime.fromisoformat(run["date"]).strftime("%Y%m%dT%H%M%SZ")
    path = results_dir / f"bench-{run['settings']['mode']}-{stamp}.json"
    path.write_text(json.dumps(run, indent=2) + "\n")
    if results_md is not None:
        kept = _extra_sections(results_md.read_text()) if results_md.exists() else ""
        results_md.write_text(results_document(run, table) + kept)
    return path


# Other bench commands (`python -m bench.spark`) keep a "## ..." section of their own at the end of
# bench/RESULTS.md; the main bench rewrites everything above them and leaves them in place.
# Hand-written notes below NOTES_MARKER are kept the same way.
def _extra_sections(text: str) -> str:
    starts = [at for at in (text.find("\n" + NOTES_MARKER), text.find("\n## ")) if at >= 0]
    return text[min(starts):] if starts else ""


def write_section(results_md: Path, heading: str, body: str) -> None:
    """Put `## heading` with `body` at the end of bench/RESULTS.md, replacing an earlier one."""
    text = results_md.read_text() if results_md.exists() else "# Benchmark results\n"
    marker = f"\n## {heading}\n"
    start = text.find(marker)
    if start >= 0:
        following = text.find("\n## ", start + len(marker))
        text = text[:start] + (text[following:] if following >= 0 else "\n")
    results_md.write_text(text.rstrip("\n") + "\n" + marker + "\n" + body.strip("\n") + "\n")


def _memory_text(limit_mib: int) -> str:
    if not limit_mib:
        return ("Every server ran unconfined: its page cache grew into free memory (on a VM that hands free "
                "memory back to its host, the first write into such a page pays a host fault).")
    return (f"Each Odradek and Kafka process (each node of a cluster too) ran in a memory cgroup of "
            f"{limit_mib / 1024:g} GiB, as a Kubernetes pod's limit does, whose page cache was topped up "
            "with a scratch file before every measured run: writes recycle the cgroup's own pages, as on "
            "any broker that has run for a while, instead of faulting in memory this VM handed back to "
            "its host (bench/memory_cgroup.py; `--setting memory_limit_mib=0` runs unconfined).")
