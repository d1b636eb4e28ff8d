"""How much event-loop time a request's task used: the request quota's "handler thread time".

Kafka charges a request the time a request-handler thread spent on it, not the time it waited (long
polls, purgatory, disk). Here requests are trio tasks, so a trio instrument adds up the duration of
each step of the tasks being timed; waits between steps are not charged. The instrument is installed
only while some request quota exists, so it costs nothing otherwise.
"""

from __future__ import annotations

from time import perf_counter

import trio


class TaskTimer(trio.abc.Instrument):
    def __init__(self):
        self._tracked: dict[object, list[float]] = {}   # task -> [seconds so far, step start]
        self.installed = False

    def install(self) -> None:
        if not self.installed:
            trio.lowlevel.add_instrument(self)
            self.installed = True

    def uninstall(self) -> None:
        if self.installed:
            try:
                trio.lowlevel.remove_instrument(self)
            except (KeyError, ValueError):
                pass
            self.installed = False
            self._tracked.clear()

    # -- instrument hooks
    def before_task_step(self, task) -> None:
        entry = self._tracked.get(task)
        if entry is not None:
            entry[1] = perf_counter()

    def after_task_step(self, task) -> None:
        entry = self._tracked.get(task)
        if entry is not None and entry[1]:
            entry[0] += perf_counter() - entry[1]
            entry[1] = 0.0

    # -- timing the current task
    def start(self) -> object | None:
        if not self.installed:
            return None
        task = trio.lowlevel.current_task()
        self._tracked[task] = [0.0, perf_counter()]   # the current step has begun
        return task

    def elapsed(self, task) -> float:
        """Seconds charged to `task` so far, including the step now running."""
        entry = self._tracked.get(task)
        if entry is None:
            return 0.0
        return entry[0] + (perf_counter() - entry[1] if entry[1] else 0.0)

    def stop(self, task) -> float:
        seconds = self.elapsed(task)
        self._tracked.pop(task, None)
        return seconds
