"""A pytest plugin that prints the client × scenario table and writes it as JSON.

Each compat test module names its scenario (`SCENARIO = "2 produce"`); the client is the test's `client`
parameter. A cell sums up its tests: FAIL if any failed, else xfail if any is a known failure, else pass if
any passed, else skip; the reasons for skips and failures are listed under the table. The JSON (``COMPAT_REPORT``, default compat-tests/.cache/matrix.json)
keeps every test's outcome and message.
"""

from __future__ import annotations

import json
import os
import time
from collections import defaultdict

DEFAULT_REPORT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".cache", "matrix.json")


def _first_line(text: str, limit: int = 300) -> str:
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("E "):
            line = line[1:].strip()
        if line and (line.startswith("AssertionError") or line.startswith("[") or "Error" in line):
            return line[:limit]
    return text.strip().splitlines()[-1][:limit] if text.strip() else ""


class MatrixReport:
    def __init__(self) -> None:
        self.cells: dict[tuple[str, str], list[dict]] = defaultdict(list)
        self.cell_of: dict[str, tuple[str, str]] = {}
        self.started = time.monotonic()

    # -- hooks --
    def pytest_collection_modifyitems(self, items) -> None:
        for item in items:
            scenario = getattr(item.module, "SCENARIO", None)
            client = getattr(item, "callspec", None) and item.callspec.params.get("client")
            if scenario and client:
                self.cell_of[item.nodeid] = (scenario, client)

    def pytest_runtest_logreport(self, report) -> None:
        cell = self.cell_of.get(report.nodeid)
        if cell is None:
            return
        entry = None
        if report.when == "call" or report.outcome != "passed":
            if hasattr(report, "wasxfail"):
                outcome, message = ("xfail", report.wasxfail) if report.skipped else ("xpass", report.wasxfail)
                if report.failed:  # strict xpass
                    outcome = "xpass"
            elif report.skipped:
                outcome = "skip"
                message = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
                message = message.removeprefix("Skipped: ")
            elif report.failed:
                crash = getattr(report.longrepr, "reprcrash", None)
                message = crash.message if crash is not None else _first_line(report.longreprtext)
                outcome, message = "fail", message.splitlines()[0][:3000] if message else ""
            else:
                outcome, message = "pass", ""
            entry = {"test": report.nodeid.split("::", 1)[-1], "phase": report.when, "outcome": outcome,
                     "message": message, "seconds": round(report.duration, 2)}
        if entry is not None:
            tests = self.cells[cell]
            if not any(t["test"] == entry["test"] for t in tests):
                tests.append(entry)
            elif entry["outcome"] == "fail":  # a teardown error after a pass
                tests[:] = [t for t in tests if t["test"] != entry["test"]] + [entry]

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.cells:
            return
        summary = {cell: self.summarize(tests) for cell, tests in self.cells.items()}
        scenarios = sorted({s for s, _ in self.cells}, key=lambda s: (int(s.split()[0]), s))
        from .clients import CLIENTS
        clients = [c for c in (*CLIENTS, "spark") if any(c == k for _, k in self.cells)]
        width = max(len(s) for s in scenarios) + 2
        col = 22
        tr = terminalreporter
        tr.section("Odradek compatibility matrix (client × scenario)")
        tr.write_line(" " * width + "".join(c[:col - 1].ljust(col) for c in clients))
        for s in scenarios:
            row = s.ljust(width)
            for c in clients:
                row += summary.get((s, c), {"short": "-"})["short"][:col - 1].ljust(col)
            tr.write_line(row)
        notes = [(s, c, v["detail"]) for (s, c), v in sorted(summary.items()) if v["detail"]]
        if notes:
            tr.write_line("")
            for s, c, detail in notes:
                tr.write_line(f"  {s} × {c}: {detail[:800]}")
        path = os.environ.get("COMPAT_REPORT", DEFAULT_REPORT)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        document = {
            "generated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "broker": os.environ.get("COMPAT_BOOTSTRAP") or os.environ.get("COMPAT_BROKER_CMD") or "odradek serve",
            "seconds": round(time.monotonic() - self.started, 1),
            "clients": clients,
            "scenarios": scenarios,
            "cells": [{"scenario": s, "client": c, "status": summary[(s, c)]["status"],
                       "tests": self.cells[(s, c)]} for s in scenarios for c in clients if (s, c) in summary],
        }
        with open(path, "w") as f:
            json.dump(document, f, indent=1)
        tr.write_line(f"\nmatrix written to {path}")

    @staticmethod
    def summarize(tests: list[dict]) -> dict:
        by = defaultdict(list)
        for t in tests:
            by[t["outcome"]].append(t)
        n = len(tests)
        if by["fail"] or by["xpass"]:
            bad = by["fail"] + by["xpass"]
            detail = "; ".join(f"{t['test']}: {t['message']}" for t in bad)
            return {"status": "fail", "short": f"FAIL {len(bad)}/{n}", "detail": detail}
        if by["xfail"]:
            reasons = sorted({t["message"] for t in by["xfail"]})
            return {"status": "xfail", "short": f"xfail {len(by['xfail'])}/{n}", "detail": "; ".join(reasons)}
        if by["pass"]:
            extra = f" +{len(by['skip'])} skip" if by["skip"] else ""
            detail = "; ".join(sorted({f"{t['test']}: {t['message']}" for t in by["skip"]}))
            return {"status": "pass", "short": f"pass {len(by['pass'])}/{n}{extra}", "detail": detail}
        reasons = sorted({t["message"] for t in by["skip"]})
        return {"status": "skip", "short": f"skip ({n})", "detail": "; ".join(reasons)}
