"""A small pool of long-lived worker processes that run workload functions side by side.

`multiprocessing.Pool` can hang for good in `terminate()` when a worker was killed while holding the
task queue's lock (Ctrl-C or `timeout` signal the whole process group). Here each worker has its own
pipe and nothing is shared, so a stuck or dead worker is simply killed and replaced.

Workers are spawned (never forked: the parent runs librdkafka threads) and import confluent-kafka
once, so its import cost stays out of the timed runs.
"""

from __future__ import annotations

import multiprocessing
import signal
import time
from collections.abc import Callable


class WorkerTimeout(RuntimeError):
    """A worker did not answer in time (or died); it has been replaced."""


class WorkerError(RuntimeError):
    """The workload function raised in the worker; the message names the original exception."""


def _serve(conn) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when a run is interrupted
    import confluent_kafka  # noqa: F401 - pay the import before the first timed run

    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            return
        if task is None:
            return
        function, args = task
        try:
            reply = (True, function(*args))
        except BaseException as error:  # noqa: BLE001 - everything goes back to the parent
            reply = (False, f"{type(error).__name__}: {error}")
        conn.send(reply)


class WorkerPool:
    def __init__(self, size: int):
        self._context = multiprocessing.get_context("spawn")
        self._workers = [self._start() for _ in range(size)]

    def _start(self):
        parent_end, child_end = self._context.Pipe()
        process = self._context.Process(target=_serve, args=(child_end,), daemon=True)
        process.start()
        child_end.close()
        return process, parent_end

    def run(self, calls: list[tuple[Callable, tuple]], timeout: float) -> list:
        """Runs each (function, args) in its own worker at once; results in call order."""
        while len(self._workers) < len(calls):
            self._workers.append(self._start())
        used = list(range(len(calls)))
        for index, call in zip(used, calls):
            self._workers[index][1].send(call)
        deadline = time.monotonic() + timeout
        replies: dict[int, tuple[bool, object]] = {}
        try:
            for index in used:
                conn = self._workers[index][1]
                if not conn.poll(max(deadline - time.monotonic(), 0)):
                    raise WorkerTimeout(f"workers did not finish within {timeout:.0f}s")
                replies[index] = conn.recv()
        except (WorkerTimeout, EOFError, OSError) as error:
            for index in used:
                if index not in replies:  # stuck or dead: not trustworthy for the next call
                    self._replace(index)
            if isinstance(error, WorkerTimeout):
                raise
            raise WorkerTimeout(f"a worker died: {error}") from None
        failures = [value for ok, value in replies.values() if not ok]
        if failures:
            raise WorkerError(failures[0])
        return [replies[index][1] for index in used]

    def _replace(self, index: int) -> None:
        process, conn = self._workers[index]
        process.kill()
        process.join(5)
        conn.close()
        self._workers[index] = self._start()

    def close(self) -> None:
        for process, conn in self._workers:
            try:
                conn.send(None)
            except OSError:
                pass
        for process, conn in self._workers:
            process.join(2)
            if process.is_alive():
                process.kill()
                process.join(5)
            conn.close()
        self._workers = []
