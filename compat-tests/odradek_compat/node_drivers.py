"""Running a Node.js driver script (compat-tests/drivers/): one scenario per run, its answer the last
line of standard output, JSON {ok, result | error, errors?, stack?}."""

from __future__ import annotations

import json
import os
import subprocess
import uuid

COMPAT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_scenario(script: str, bootstrap: str, scenario: str, prefix: str, timeout: float) -> dict:
    """The scenario's result; topic and group names start with `prefix` and a random suffix."""
    done = subprocess.run(["node", script, bootstrap, scenario, f"{prefix}-{uuid.uuid4().hex[:8]}"],
                          cwd=COMPAT_DIR, capture_output=True, text=True, timeout=timeout)
    lines = done.stdout.strip().splitlines()
    assert lines, f"{scenario}: no answer (exit {done.returncode}): {done.stderr[-2000:]}"
    answer = json.loads(lines[-1])
    assert answer["ok"], f"{scenario}: {answer.get('error')} {answer.get('errors') or ''}\n{answer.get('stack')}"
    return answer["result"]
