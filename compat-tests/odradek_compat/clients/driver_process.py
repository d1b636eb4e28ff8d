"""A long-lived driver process (the JVM, node) speaking one JSON command/answer per line.

One process serves a whole pytest session, so the JVM starts once per kafka-clients version. A command
that overruns its time limit kills the process (its state is unknown) and the next command starts a
fresh one.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
import time

from .base import Client, ClientError


class DriverProcess:
    def __init__(self, name: str, argv: list[str], cwd: str | None = None, env: dict | None = None) -> None:
        self.name = name
        self.argv = argv
        self.cwd = cwd
        self.env = env
        self.proc: subprocess.Popen | None = None
        self.answers: queue.Queue = queue.Queue()
        self.stderr_tail: list[str] = []

    def _start(self) -> None:
        self.proc = subprocess.Popen(
            self.argv, cwd=self.cwd, env={**os.environ, **(self.env or {})}, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, encoding="utf-8", bufsize=1)
        self.answers = queue.Queue()
        threading.Thread(target=self._pump, args=(self.proc.stdout, self.answers), daemon=True).start()
        threading.Thread(target=self._drain_stderr, args=(self.proc.stderr,), daemon=True).start()

    @staticmethod
    def _pump(stream, answers: queue.Queue) -> None:
        for line in stream:
            answers.put(line)
        answers.put(None)

    def _drain_stderr(self, stream) -> None:
        for line in stream:
            self.stderr_tail = (self.stderr_tail + [line.rstrip()])[-30:]

    def call(self, op: str, timeout: float = 60, **args):
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        self.proc.stdin.write(json.dumps({"op": op, **args}) + "\n")
        self.proc.stdin.flush()
        try:
            line = self.answers.get(timeout=timeout)
        except queue.Empty:
            self.stop()
            raise TimeoutError(f"{self.name} driver: '{op}' gave no answer within {timeout}s") from None
        if line is None:
            time.sleep(0.2)
            tail = "\n".join(self.stderr_tail[-10:])
            self.proc = None
            raise ClientError(f"{self.name} driver exited during '{op}':\n{tail}")
        answer = json.loads(line)
        if not answer["ok"]:
            raise ClientError(answer["error"])
        return answer["result"]

    def stop(self) -> None:
        if self.proc is not None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=10)
            except Exception:
                self.proc.kill()
                self.proc.wait()
            self.proc = None


class DriverClient(Client):
    """A client whose operations run in a DriverProcess: the admin calls every driver answers alike."""

    driver: DriverProcess

    def close(self) -> None:
        self.driver.stop()

    def metadata(self) -> dict:
        return self.driver.call("metadata")

    def create_topic(self, topic, partitions, configs=None):
        self.driver.call("create_topic", topic=topic, partitions=partitions, configs=configs or {})

    def partition_count(self, topic):
        return len(self.driver.call("describe_topic", topic=topic)["partitions"])

    def describe_configs(self, topic):
        return self.driver.call("describe_configs", topic=topic)

    def create_partitions(self, topic, total):
        self.driver.call("create_partitions", topic=topic, total=total)

    def delete_topic(self, topic):
        self.driver.call("delete_topic", topic=topic)
