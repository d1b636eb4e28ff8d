"""Event-loop hold watch: which task steps keep the trio loop from serving everything else.

One trio loop serves every connection and background job, so a request waits for whatever step runs
before it. Trio has no built-in measure of that; this instrument times every task step and, through a
sampler thread, records where the loop thread was while a step ran past the threshold (a small
profile of only the long steps). Off by default and then costs nothing (not installed):

    ODRADEK_LOOP_HOLD_MS=5 odradek serve ...

logs one WARNING line per step held longer than 5 ms (logger ``odradek.loop``: task name, how long
(and how much of it on the CPU: the rest is the OS running something else),
the stacks sampled meanwhile, most frequent first) and, when the loop ends, the longest holds and a
count per task name. ``ODRADEK_LOOP_HOLD_REPORT=path`` also writes that summary to a file.
"""

from __future__ import annotations

import collections
import gc
import heapq
import logging
import os
import sys
import threading
import time

import trio

log = logging.getLogger("odradek.loop")

THRESHOLD_ENV = "ODRADEK_LOOP_HOLD_MS"
REPORT_ENV = "ODRADEK_LOOP_HOLD_REPORT"
KEEP_LONGEST = 25
STACK_DEPTH = 8
# Frames of these packages say nothing about which of our jobs held the loop.
_SKIPPED_PREFIXES = (os.path.dirname(trio.__file__),)


def instruments_from_env() -> list:
    """The watch when $ODRADEK_LOOP_HOLD_MS asks for it, else nothing (no cost at all)."""
    value = os.environ.get(THRESHOLD_ENV)
    if not value:
        return []
    return [LoopHoldWatch(float(value), report_path=os.environ.get(REPORT_ENV))]


def _stack_summary(frame) -> str:
    """The innermost `STACK_DEPTH` frames outside trio, innermost last: ``module:function:line``."""
    parts: list[str] = []
    while frame is not None and len(parts) < STACK_DEPTH:
        code = frame.f_code
        if not code.co_filename.startswith(_SKIPPED_PREFIXES):
            module = frame.f_globals.get("__name__", "?")
            parts.append(f"{module}:{code.co_name}:{frame.f_lineno}")
        frame = frame.f_back
    return " < ".join(parts)


class LoopHoldWatch(trio.abc.Instrument):
    """Times task steps; samples the loop thread's stack while a step runs past `threshold_ms`."""

    def __init__(self, threshold_ms: float, report_path: str | None = None,
                 sample_every_ms: float | None = None):
        self.threshold = threshold_ms / 1000
        self.sample_every = (sample_every_ms if sample_every_ms is not None
                             else max(1.0, threshold_ms / 2)) / 1000
        self.report_path = report_path
        self.longest: list[tuple[float, int, str, list[str]]] = []   # a min-heap of the longest holds
        self.holds_by_task: collections.Counter = collections.Counter()
        self.held_by_task: collections.Counter = collections.Counter()   # seconds over all its holds
        self.cpu_by_task: collections.Counter = collections.Counter()    # of which on the CPU
        self.steps = 0
        self._sequence = 0
        self._step_began = 0.0            # perf_counter() of the running step, 0.0 between steps
        self._step_cpu_began = 0.0        # the loop thread's CPU time then (wall minus CPU: preempted)
        self._samples: list[str] = []     # stacks sampled during the running step
        self._loop_thread = 0
        self._stop = threading.Event()
        self._sampler: threading.Thread | None = None
        self._gc_began = 0.0
        self.gc_pauses: collections.Counter = collections.Counter()    # generation -> pauses over threshold
        self.gc_longest: dict[int, float] = {}

    # ------------------------------------------------------------------- trio's instrument hooks
    def before_run(self) -> None:
        self._loop_thread = threading.get_ident()
        self._sampler = threading.Thread(target=self._sample_loop, name="loop-hold-sampler", daemon=True)
        self._sampler.start()
        gc.callbacks.append(self._on_gc)

    def before_task_step(self, task) -> None:
        self._samples = []
        self._step_cpu_began = time.thread_time()
        self._step_began = time.perf_counter()

    def after_task_step(self, task) -> None:
        held = time.perf_counter() - self._step_began
        self._step_began = 0.0
        self.steps += 1
        if held >= self.threshold:
            self._record(task.name, held, time.thread_time() - self._step_cpu_began, self._samples)

    def after_run(self) -> None:
        self._stop.set()
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)
        summary = self.summary()
        log.warning("event loop holds over %.1f ms, longest first:\n%s", self.threshold * 1e3, summary)
        if self.report_path:
            with open(self.report_path, "w") as report:
                report.write(summary + "\n")

    # ---------------------------------------------------------------------------------- the rest
    def _record(self, task_name: str, held: float, cpu: float, samples: list[str]) -> None:
        stacks = [f"{count}× {stack}" for stack, count in collections.Counter(samples).most_common(3)]
        self.holds_by_task[task_name] += 1
        self.held_by_task[task_name] += held
        self._sequence += 1
        self.cpu_by_task[task_name] += cpu
        entry = (held, self._sequence, f"{task_name} ({cpu * 1e3:.1f} ms CPU)", stacks)
        if len(self.longest) < KEEP_LONGEST:
            heapq.heappush(self.longest, entry)
        elif held > self.longest[0][0]:
            heapq.heapreplace(self.longest, entry)
        log.warning("event loop held %.1f ms (%.1f ms CPU) by %s%s", held * 1e3, cpu * 1e3, task_name,
                    "".join(f"\n    {line}" for line in stacks))

    def _on_gc(self, phase: str, info: dict) -> None:
        """The collector runs inside whatever step allocates: its pauses are holds of their own."""
        if threading.get_ident() != self._loop_thread:
            return
        if phase == "start":
            self._gc_began = time.perf_counter()
            return
        paused = time.perf_counter() - self._gc_began
        generation = info.get("generation", -1)
        self.gc_longest[generation] = max(self.gc_longest.get(generation, 0.0), paused)
        if paused >= self.threshold:
            self.gc_pauses[generation] += 1
            # (no gc.get_freeze_count(): it walks the frozen list, 745 ms of the watch's own at 50,000)
            log.warning("event loop held %.1f ms by a generation-%d garbage collection (%d collected)",
                        paused * 1e3, generation, info.get("collected", 0))

    def _sample_loop(self) -> None:
        while not self._stop.wait(self.sample_every):
            began = self._step_began
            if not began or time.perf_counter() - began < self.threshold:
                continue
            frame = sys._current_frames().get(self._loop_thread)
            samples = self._samples
            if frame is not None and self._step_began == began:   # still the same step
                samples.append(_stack_summary(frame))

    def summary(self) -> str:
        lines = [f"{self.steps} steps; holds per task (count, total ms, of which CPU):"]
        for name, count in self.holds_by_task.most_common(15):
            lines.append(f"  {count:6d} {self.held_by_task[name] * 1e3:10.1f} ms "
                         f"{self.cpu_by_task[name] * 1e3:10.1f} ms  {name}")
        for generation, longest in sorted(self.gc_longest.items()):
            lines.append(f"  garbage collection, generation {generation}: {self.gc_pauses[generation]} "
                         f"pauses over the threshold, longest {longest * 1e3:.1f} ms")
        lines.append("longest:")
        for held, _, name, stacks in sorted(self.longest, reverse=True):
            lines.append(f"  {held * 1e3:8.1f} ms  {name}")
            lines.extend(f"      {stack}" for stack in stacks)
        return "\n".join(lines)
