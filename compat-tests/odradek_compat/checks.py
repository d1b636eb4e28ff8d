"""Assertions whose failure message names the client, the step, what was expected and what came back."""

from __future__ import annotations

import time
from collections import Counter
from typing import Callable, TypeVar

T = TypeVar("T")


class Step:
    """`step = Step(client)`; `step("read back", expected, got)` fails with a message fit for the matrix."""

    def __init__(self, client) -> None:
        self.client = client

    def __call__(self, name: str, expected, got, ok: bool | None = None) -> None:
        if ok is None:
            ok = expected == got
        if not ok:
            raise AssertionError(
                f"[{self.client.name}] step '{name}':{_difference(expected, got)} "
                f"expected {_short(expected)}, got {_short(got)}")

    def fail(self, name: str, message: str) -> None:
        raise AssertionError(f"[{self.client.name}] step '{name}': {message}")


def _difference(expected, got) -> str:
    """For two lists, what is missing and what is extra (first few), so long values stay readable."""
    if not (isinstance(expected, (list, tuple)) and isinstance(got, (list, tuple))):
        return ""
    try:
        missing = list((Counter(expected) - Counter(got)).elements())
        extra = list((Counter(got) - Counter(expected)).elements())
    except TypeError:  # unhashable items
        return ""
    if not missing and not extra:
        return " same items, different order;"
    return (f" {len(missing)} missing {_short(missing[:8], 200)}, {len(extra)} unexpected "
            f"{_short(extra[:8], 200)};")


def _short(value, limit: int = 600) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} chars)"


def wait_until(what: str, attempt: Callable[[], T], done: Callable[[T], bool], timeout: float,
               pause: float = 0) -> T:
    """Calls `attempt` until `done(result)`, `pause` seconds apart; returns the last result (the caller's
    check reports it)."""
    deadline = time.monotonic() + timeout
    while True:
        result = attempt()
        if done(result) or time.monotonic() > deadline:
            return result
        time.sleep(pause)
