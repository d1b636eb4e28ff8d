"""The fault run's summary table: one row per (workload, client, nemesis), from results.jsonl."""

from __future__ import annotations

import os

from tests.faults import checker

CLIENTS = ("librdkafka", "java")
# resent: acknowledged values the client wrote again in a new producer epoch (checker.py);
# diverged: partitions whose copies on two nodes hold different batches (log_files.py);
# unstable: records a consumer saw during the trial that the final read no longer has there;
# violations: what a nemesis saw go wrong (env.violations), a graceful one's delivery errors too
COLUMNS = ("trials", "acknowledged", "lost", "duplicated", "reordered", "phantom", "diverged",
           "unstable", "violations", "unknown", "resent", "dup_unacked", "windows", "longest_window_s", "unrecovered", "failed")
RESULTS = "results.jsonl"


def key(result: dict) -> tuple[str, str, str]:
    """(workload, client, nemesis): what a trial counts towards."""
    return (result.get("workload", "producer"), result.get("client", "librdkafka"),
            result["nemesis"])


def load_results(path: str) -> list[dict]:
    """The results of a run directory (or of one results file); a line cut short by a kill is
    skipped."""
    if os.path.isdir(path):
        path = os.path.join(path, RESULTS)
    return [result for result in checker.load(path) if "nemesis" in result]


def summarize(results: list[dict]) -> dict[tuple[str, str, str], dict]:
    """(workload, client, nemesis) -> the row of the summary table."""
    table: dict[tuple[str, str, str], dict] = {}
    for result in results:
        row = table.setdefault(key(result), dict.fromkeys(COLUMNS, 0))
        row["trials"] += 1
        if result.get("unrecovered") or not result.get("read_complete", True):
            row["unrecovered"] += 1
            row["failed"] += 1
            continue
        for column in ("acknowledged", "lost", "duplicated", "reordered", "phantom", "unknown",
                       "windows"):
            row[column] += result[column]
        row["dup_unacked"] += result.get("duplicated_unacknowledged", 0)
        row["resent"] += result.get("resent", 0)
        row["diverged"] += result.get("diverged", 0)
        row["unstable"] += result.get("unstable", 0)
        row["violations"] += len(result.get("violations", ()))
        row["longest_window_s"] = max(row["longest_window_s"], result["longest_window_s"])
        row["failed"] += 0 if result["ok"] else 1
    return table


def format_table(table: dict[tuple[str, str, str], dict]) -> str:
    """One line per workload, client and nemesis, grouped by workload and client."""
    keys = sorted(table, key=lambda k: (k[0] != "producer", k[0], CLIENTS.index(k[1])
                                        if k[1] in CLIENTS else len(CLIENTS)))
    heads = ("workload", "client", "nemesis")
    widths = [max([len(h)] + [len(k[i]) for k in keys]) for i, h in enumerate(heads)]
    widths += [len(c) for c in COLUMNS]
    lines = ["  ".join([h.ljust(w) for h, w in zip(heads, widths)] +
                       [c.rjust(w) for c, w in zip(COLUMNS, widths[3:])])]
    for key_ in keys:
        row = table[key_]
        cells = [f"{row[c]:.1f}" if c == "longest_window_s" else str(row[c]) for c in COLUMNS]
        lines.append("  ".join([k.ljust(w) for k, w in zip(key_, widths)] +
                               [cell.rjust(w) for cell, w in zip(cells, widths[3:])]))
    return "\n".join(lines)
