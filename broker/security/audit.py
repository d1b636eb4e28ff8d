"""Authentication outcomes: counters for /metrics (Kafka's socket-server-metrics names) and a
rate-limited audit log of failures that names the peer, listener, mechanism and reason, never a
credential."""

from __future__ import annotations

import logging
import time

from prometheus_client.core import CounterMetricFamily

log = logging.getLogger("odradek.security.audit")

LOG_INTERVAL_S = 10.0       # at most one failure line per peer address in this window
_MAX_TRACKED_PEERS = 10000


class AuthenticationAudit:
    def __init__(self):
        # listener -> [successful, failed, successful re-auth, failed re-auth]
        self._counts: dict[str, list[int]] = {}
        self._last_logged: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}

    def _row(self, listener: str) -> list[int]:
        row = self._counts.get(listener)
        if row is None:
            row = self._counts[listener] = [0, 0, 0, 0]
        return row

    def succeeded(self, listener: str, reauthentication: bool = False) -> None:
        self._row(listener)[2 if reauthentication else 0] += 1

    def failed(self, listener: str, peer: str, mechanism: str | None, reason: str,
               reauthentication: bool = False) -> None:
        self._row(listener)[3 if reauthentication else 1] += 1
        address = peer.rsplit(":", 1)[0]
        now = time.monotonic()
        last = self._last_logged.get(address)
        if last is not None and now - last < LOG_INTERVAL_S:
            self._suppressed[address] = self._suppressed.get(address, 0) + 1
            return
        if len(self._last_logged) >= _MAX_TRACKED_PEERS:
            self._last_logged.clear()
        self._last_logged[address] = now
        suppressed = self._suppressed.pop(address, 0)
        log.warning("authentication failed: peer=%s listener=%s mechanism=%s%s reason=%s%s",
                    peer, listener, mechanism or "-", " (re-authentication)"
                    if reauthentication else "", reason,
                    f" (+{suppressed} more from this address not logged)" if suppressed else "")

    def collect(self):
        base = "kafka_server_socket_server_metrics_"
        names = ("successful_authentication", "failed_authentication",
                 "successful_reauthentication", "failed_reauthentication")
        helps = ("Successful authentications.", "Failed authentications.",
                 "Successful re-authentications (KIP-368).", "Failed re-authentications.")
        families = [CounterMetricFamily(base + name, text, labels=["listener"])
                    for name, text in zip(names, helps)]
        for listener, row in sorted(self._counts.items()):
            for family, value in zip(families, row):
                family.add_metric([listener], value)
        return families
