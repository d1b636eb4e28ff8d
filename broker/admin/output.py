"""How admin commands print: human tables by default, JSON with ``--json``, errors on stderr."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterable, Sequence
from typing import Any, TextIO


class CommandFailed(Exception):
    """A command-level failure with the message to print (exit status 1)."""


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], out: TextIO | None = None) -> None:
    """Left-aligned columns separated by two spaces, like Kafka's shell tools."""
    out = out or sys.stdout
    rows = [["-" if v is None else str(v) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    for row in [list(headers), *rows]:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip(), file=out)


def emit_json(doc: Any, out: TextIO | None = None) -> None:
    print(json.dumps(doc, indent=2, sort_keys=False, default=_default), file=out or sys.stdout)


def _default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", "backslashreplace")
    return str(value)


def error(message: str) -> None:
    print(f"odradek: error: {message}", file=sys.stderr, flush=True)


def info(message: str) -> None:
    """Status lines go to stderr so stdout stays clean for data (consume, --json)."""
    print(message, file=sys.stderr, flush=True)


class Progress:
    """Periodic progress lines on stderr for long operations, only when stderr is a terminal."""

    def __init__(self, what: str, every_s: float = 2.0):
        self.what = what
        self.every_s = every_s
        self.enabled = sys.stderr.isatty()
        self._next = time.monotonic() + every_s

    def update(self, n: int) -> None:
        if self.enabled and time.monotonic() >= self._next:
            self._next = time.monotonic() + self.every_s
            print(f"... {n} {self.what}", file=sys.stderr, flush=True)
