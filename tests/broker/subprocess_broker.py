"""`odradek serve` as a subprocess on a free loopback port, for end-to-end tests."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

LISTENING = re.compile(r"odradek: listening on PLAINTEXT://([0-9.]+):(\d+)")


class ServeProcess:
    def __init__(self, data_dir, *overrides: str, port: int = 0, config_file=None):
        self.data_dir = os.fspath(data_dir)
        self.overrides = list(overrides)
        self.port = port
        self.config_file = config_file
        self.process: subprocess.Popen | None = None
        self.output: list[str] = []

    def start(self, timeout: float = 20.0) -> "ServeProcess":
        command = [sys.executable, "-m", "broker.cli", "serve",
                   "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
                   "--override", f"log.dirs={self.data_dir}"]
        if self.config_file is not None:
            command += ["--config", os.fspath(self.config_file)]
        for override in self.overrides:
            command += ["--override", override]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        text=True, cwd=os.path.dirname(os.path.dirname(
                                            os.path.dirname(os.path.abspath(__file__)))))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                break
            self.output.append(line)
            match = LISTENING.search(line)
            if match:
                self.port = int(match.group(2))   # restarts reuse it (clients keep the address)
                return self
        self.kill()
        raise RuntimeError("broker did not start:\n" + "".join(self.output))

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self, timeout: float = 20.0) -> int:
        self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout)
        finally:
            self.output.extend(self.process.stdout.readlines())
        return code

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def __enter__(self):
        return self if self.process is not None and self.process.poll() is None else self.start()

    def __exit__(self, *exc):
        if self.process.poll() is None:
            self.stop()
