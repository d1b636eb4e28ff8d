"""Apache Kafka itself as a bench target: a single KRaft node started with its own `run.sh`.

Where it lives: ``$APACHE_KAFKA_HOME`` if set, else ``/work/shared/apache-kafka`` (a directory with
``run.sh`` and ``libs/``); Java must be on PATH. `available()` says why not when it cannot run.
Every start gets a fresh data dir and free ports (the controller needs a fixed port, so a port taken
in between is retried). `jvm_settings(pid)` reads heap, GC and the other flags back from the running
JVM (``jcmd PID VM.flags``, else its command line), so the table says what Kafka really ran with.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from bench.targets import Target, TargetError, _spawn, free_port

DEFAULT_HOME = Path("/work/shared/apache-kafka")
STARTUP_TIMEOUT_S = 120.0  # a JVM on a loaded 2-core machine: ~6 s quiet, much longer busy
STOP_TIMEOUT_S = 30.0  # a controlled shutdown takes ~4 s
STARTED = re.compile(r"Kafka Server started")
VERSION = re.compile(r"Kafka version: (\S+)")
DEFAULT_HEAP = "1g"  # run.sh's default, what a new user gets


def kafka_home() -> Path:
    return Path(os.environ.get("APACHE_KAFKA_HOME") or DEFAULT_HOME)


def available() -> str | None:
    """None if Apache Kafka can be started here, else the reason it cannot."""
    home = kafka_home()
    if not (home / "run.sh").is_file() or not (home / "libs").is_dir():
        return f"no Apache Kafka at {home} (set APACHE_KAFKA_HOME to a directory with run.sh and libs/)"
    if shutil.which("java") is None:
        return "no java on PATH"
    return None


def start_kafka(log_dir: Path, properties: dict[str, str] | None = None, name: str = "kafka",
                column: str = "kafka", heap: str | None = None, attempts: int = 3, tls=None) -> Target:
    """A fresh single-node Kafka with run.sh's settings plus `properties`, on free loopback ports.

    `tls` (a `bench.ssl_rows.BenchPki`): an SSL listener next to the PLAINTEXT one."""
    reason = available()
    if reason:
        raise TargetError(f"not available: {reason}")
    heap = heap or os.environ.get("KAFKA_HEAP") or DEFAULT_HEAP
    properties = dict(properties or {})
    log_path = log_dir / f"{name}.log"
    last_error: TargetError | None = None
    for _ in range(attempts):
        data_dir = Path(tempfile.mkdtemp(prefix=f"{name}-bench-"))
        port, controller_port, ssl_port = free_port(), free_port(), free_port()
        listeners = tls.kafka_settings(port, ssl_port, controller_port) if tls is not None else {}
        (data_dir / "extra.properties").write_text(
            "".join(f"{k}={v}\n" for k, v in {**listeners, **properties}.items()))
        env = {**os.environ, "KAFKA_HEAP": heap}
        env.pop("KAFKA_EXTRA_PROPS", None)  # only the properties we name, so the label is the truth
        process = _spawn([str(kafka_home() / "run.sh"), str(port), str(data_dir), str(controller_port)],
                         log_path, env=env)
        try:
            version = _wait_until_started(process, log_path)
        except TargetError as error:
            last_error = error
            shutil.rmtree(data_dir, ignore_errors=True)
            continue
        jvm = jvm_settings(process.pid)
        settings = ", ".join(f"{k}={v}" for k, v in properties.items()) or "run.sh defaults (flush left to the OS)"
        if tls is not None:
            settings += f"; with an SSL listener ({tls.describe()})"
        label = (f"Apache Kafka {version} (KRaft, one node, {kafka_home()}), heap {jvm['heap']}, {jvm['gc']}, "
                 f"{settings}; unmeasured warm-up passes of every workload first")
        return Target(name, label, f"127.0.0.1:{port}", process, log_path, cleanup=[data_dir], column=column,
                      warmup=True, stop_timeout=STOP_TIMEOUT_S, details={"jvm_flags": jvm["flags"],
                                                                         "properties": properties},
                      ssl_bootstrap=f"127.0.0.1:{ssl_port}" if tls is not None else "",
                      ssl_client=tls.client_settings() if tls is not None else {})
    raise last_error or TargetError("kafka did not start")


def _wait_until_started(process: subprocess.Popen, log_path: Path) -> str:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        text = log_path.read_text(errors="replace")
        if STARTED.search(text):
            version = VERSION.search(text)
            return version.group(1) if version else "?"
        if process.poll() is not None:
            break
        time.sleep(0.2)
    if process.poll() is None:
        process.kill()
        process.wait(timeout=10)
    tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-15:])
    raise TargetError(f"kafka did not start (exit code {process.returncode}):\n{tail}")


def _is_java(pid: int) -> bool:
    try:
        return os.path.basename(os.readlink(f"/proc/{pid}/exe")) == "java"
    except OSError:
        return False


def jvm_settings(pid: int) -> dict[str, str]:
    """Heap, garbage collector and all VM flags of a running JVM, as the JVM reports them."""
    flags = ""
    if shutil.which("jcmd") and _is_java(pid):  # jcmd attaches with SIGQUIT, which kills anything else
        try:
            result = subprocess.run(["jcmd", str(pid), "VM.flags"], capture_output=True, text=True, timeout=30)
            flags = next((line.strip() for line in result.stdout.splitlines() if line.strip().startswith("-XX")), "")
        except (OSError, subprocess.TimeoutExpired):
            flags = ""
    if not flags:  # no jcmd (a JRE) or it could not attach: the command line still says what was asked
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                flags = " ".join(arg.decode() for arg in cmdline.read().split(b"\0") if arg.startswith(b"-X"))
        except OSError:
            flags = ""
    heap = re.search(r"-XX:MaxHeapSize=(\d+)", flags)
    if heap:
        heap_text = f"{int(heap.group(1)) / (1 << 20):,.0f} MiB"
    else:
        xmx = re.search(r"-Xmx(\S+)", flags)
        heap_text = xmx.group(1) if xmx else "JVM default"
    gc = re.search(r"-XX:\+Use(\w+GC)\b", flags)
    return {"heap": heap_text, "gc": gc.group(1) if gc else "JVM default GC", "flags": flags}
