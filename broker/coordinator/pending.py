"""A result that arrives later: how the coordinator cores answer requests that must wait.

A JoinGroup waits for the rebalance to finish, a leader's SyncGroup for the group to be stored, a
follower's SyncGroup for the leader. The core hands back a `Pending`; the caller registers a
callback (the trio layer wakes the request's task from it) or, in tests, reads `.result`.
"""

from __future__ import annotations

from typing import Callable, Generic, TypeVar

T = TypeVar("T")


class Pending(Generic[T]):
    __slots__ = ("_result", "_done", "_callbacks")

    def __init__(self) -> None:
        self._done = False
        self._result: T | None = None
        self._callbacks: list[Callable[[T], None]] = []

    @classmethod
    def completed(cls, result: T) -> "Pending[T]":
        pending = cls()
        pending.complete(result)
        return pending

    @property
    def done(self) -> bool:
        return self._done

    @property
    def result(self) -> T:
        if not self._done:
            raise RuntimeError("result not available yet")
        return self._result  # type: ignore[return-value]

    def complete(self, result: T) -> bool:
        """Set the result once; later completions are ignored (returns whether this one won)."""
        if self._done:
            return False
        self._done = True
        self._result = result
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(result)
        return True

    def add_callback(self, callback: Callable[[T], None]) -> None:
        if self._done:
            callback(self._result)  # type: ignore[arg-type]
        else:
            self._callbacks.append(callback)
