"""Liveness, readiness and the operations HTTP endpoint (``metrics.port``).

* :class:`Health` holds what the probes report. Readiness is a set of named conditions, each a
  flag the broker sets (``health.set("recovery", True)``) or a callable checked at probe time
  (``health.add_check("controller", lambda: ...)``); ``begin_shutdown()`` makes readiness fail
  at once so Kubernetes stops routing clients here while in-flight work drains. Liveness is the
  event loop's responsiveness, measured by :meth:`Health.watch_event_loop`.
* :func:`serve_ops_http` serves, on trio, ``GET /metrics`` (Prometheus text from a
  :class:`broker.metrics.BrokerMetrics`), ``/healthz`` (200 while the process is alive and the
  loop wakes timers on time, else 503) and ``/readyz`` (200 once every condition holds, else 503
  with the failing ones listed). Bodies of the probes are small JSON documents.
"""

from __future__ import annotations

import functools
import gzip
import json
import time
from collections.abc import Callable, Iterable

import trio

from broker.metrics import BrokerMetrics

#: The readiness conditions a broker has to meet before it takes traffic.
DEFAULT_CONDITIONS = ("recovery", "controller", "listeners")

MAX_HEADER_BYTES = 8192
REQUEST_TIMEOUT_S = 5.0
PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class Health:
    """What /healthz and /readyz report for one broker."""

    def __init__(self, conditions: Iterable[str] = DEFAULT_CONDITIONS, *,
                 max_loop_lag_s: float = 5.0, metrics: BrokerMetrics | None = None) -> None:
        self._flags: dict[str, tuple[bool, str]] = {name: (False, "pending") for name in conditions}
        self._checks: dict[str, Callable[[], bool]] = {}
        self.max_loop_lag_s = max_loop_lag_s
        self.loop_lag_s = 0.0
        self._last_tick: float | None = None
        self._interval_s = 0.0
        self.shutting_down = False
        self.started_at = time.time()
        self._metrics = metrics

    # ---------------------------------------------------------------- readiness

    def set(self, name: str, ok: bool = True, detail: str = "") -> None:
        """Set a readiness condition (adding it if new)."""
        self._flags[name] = (bool(ok), detail or ("ok" if ok else "pending"))

    def add_check(self, name: str, check: Callable[[], bool | tuple[bool, str]]) -> None:
        """A readiness condition evaluated at probe time (a bool, or (ok, detail) to say why);
        an exception counts as not ready."""
        self._flags.pop(name, None)
        self._checks[name] = check

    def begin_shutdown(self) -> None:
        self.shutting_down = True

    def readiness(self) -> tuple[bool, dict[str, str]]:
        status = {name: detail for name, (ok, detail) in self._flags.items()}
        ready = all(ok for ok, _ in self._flags.values())
        for name, check in self._checks.items():
            try:
                outcome = check()
            except Exception as exc:  # a broken check must not break the probe
                ok, status[name] = False, f"error: {exc!r}"
            else:
                if isinstance(outcome, tuple):
                    ok, status[name] = bool(outcome[0]), outcome[1]
                else:
                    ok = bool(outcome)
                    status[name] = "ok" if ok else "pending"
            ready = ready and ok
        if self.shutting_down:
            ready, status["shutdown"] = False, "shutting down"
        return ready, status

    # ---------------------------------------------------------------- liveness

    def liveness(self) -> tuple[bool, dict[str, object]]:
        lag = self.loop_lag_s
        if self._last_tick is not None:
            # A probe answered right after a long block may run before the watchdog wakes.
            lag = max(lag, time.monotonic() - self._last_tick - self._interval_s)
        alive = lag <= self.max_loop_lag_s
        return alive, {"loop_lag_seconds": round(lag, 6),
                       "uptime_seconds": round(time.time() - self.started_at, 3)}

    async def watch_event_loop(self, interval_s: float = 0.5) -> None:
        """Forever: measure how late the loop wakes a timer (a blocked loop shows up here)."""
        self._interval_s = interval_s
        while True:
            before = trio.current_time()
            self._last_tick = time.monotonic()
            await trio.sleep(interval_s)
            self.loop_lag_s = max(0.0, trio.current_time() - before - interval_s)
            if self._metrics is not None:
                self._metrics.loop_lag_seconds = self.loop_lag_s


# --------------------------------------------------------------------------- HTTP


def _response(status: int, body: bytes, content_type: str, head_only: bool = False,
              gzipped: bool = False) -> bytes:
    reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
              503: "Service Unavailable", 500: "Internal Server Error"}[status]
    encoding = "Content-Encoding: gzip\r\n" if gzipped else ""
    head = (f"HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\n{encoding}"
            f"Content-Length: {len(body)}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n")
    return head.encode("ascii") + (b"" if head_only else body)


def _json(status: int, doc: dict, head_only: bool) -> bytes:
    return _response(status, json.dumps(doc, sort_keys=True).encode() + b"\n",
                     "application/json", head_only)


def route(method: str, path: str, metrics: BrokerMetrics | None, health: Health,
          accept_gzip: bool = False, sources: dict | None = None) -> bytes:
    """The full HTTP response for one request (pure: no I/O, easy to test). /metrics is
    gzipped for scrapers that accept it (Prometheus does), as large expositions compress ~10x;
    `sources`: the metrics' source values read beforehand (`BrokerMetrics.read_sources`)."""
    if method not in ("GET", "HEAD"):
        return _response(405, b"method not allowed\n", "text/plain", False)
    head_only = method == "HEAD"
    path = path.split("?", 1)[0]
    if path == "/metrics" and metrics is not None:
        try:
            body = metrics.render(sources)
            if accept_gzip:
                return _response(200, gzip.compress(body, compresslevel=1),
                                 PROMETHEUS_CONTENT_TYPE, head_only, gzipped=True)
            return _response(200, body, PROMETHEUS_CONTENT_TYPE, head_only)
        except Exception as exc:
            return _response(500, f"metrics collection failed: {exc!r}\n".encode(),
                             "text/plain", head_only)
    if path == "/healthz":
        alive, detail = health.liveness()
        return _json(200 if alive else 503, {"status": "ok" if alive else "unhealthy", **detail},
                     head_only)
    if path == "/readyz":
        ready, checks = health.readiness()
        return _json(200 if ready else 503,
                     {"status": "ready" if ready else "not ready", "checks": checks}, head_only)
    return _response(404, b"not found\n", "text/plain", head_only)


async def _read_head(stream: trio.SocketStream) -> bytes | None:
    data = b""
    while b"\r\n\r\n" not in data and b"\n\n" not in data:
        if len(data) > MAX_HEADER_BYTES:
            return None
        chunk = await stream.receive_some(4096)
        if not chunk:
            return data or None
        data += chunk
    return data


def _accepts_gzip(head: bytes) -> bool:
    for line in head.split(b"\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"accept-encoding":
            return b"gzip" in value.lower()
    return False


async def _handle(stream: trio.SocketStream, metrics: BrokerMetrics | None, health: Health) -> None:
    try:
        with trio.move_on_after(REQUEST_TIMEOUT_S):
            head = await _read_head(stream)
            if head is None:
                await stream.send_all(_response(400, b"bad request\n", "text/plain"))
                return
            parts = head.split(b"\r\n", 1)[0].split()
            if len(parts) < 2:
                await stream.send_all(_response(400, b"bad request\n", "text/plain"))
                return
            method, path = parts[0].decode("latin-1"), parts[1].decode("latin-1")
            if path.split("?", 1)[0] == "/metrics" and metrics is not None:
                # Thousands of partitions make tens of thousands of samples (100 ms and more to
                # render): off the event loop; the sources read in-memory state only.
                sources = metrics.read_sources()   # on the loop: some read trio state
                answer = await trio.to_thread.run_sync(route, method, path, metrics, health,
                                                       _accepts_gzip(head), sources)
            else:
                answer = route(method, path, metrics, health, _accepts_gzip(head))
            await stream.send_all(answer)
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        pass  # the prober went away; nothing to answer
    finally:
        await trio.aclose_forcefully(stream)


async def serve_ops_http(port: int, *, health: Health, metrics: BrokerMetrics | None = None,
                         host: str = "0.0.0.0",
                         task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
    """Serve /metrics, /healthz and /readyz until cancelled; ``task_status`` gets the bound port.

    Also runs the event-loop watchdog behind /healthz. ``port=0`` picks a free port (tests).
    """
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(functools.partial(
            trio.serve_tcp, lambda s: _handle(s, metrics, health), port, host=host))
        nursery.start_soon(health.watch_event_loop)
        task_status.started(listeners[0].socket.getsockname()[1])
