"""max.connections.per.ip.overrides: "host:limit,host:limit" (hosts by IP or name), as Kafka parses it."""

from __future__ import annotations

import functools
import ipaddress
import socket


def parse_ip_overrides(text: str | None) -> dict[str, int]:
    """{host as written: limit}; ValueError (Kafka's message) for a malformed entry."""
    limits: dict[str, int] = {}
    for entry in (text or "").split(","):
        entry = entry.strip()
        if not entry:
            continue
        host, sep, limit = entry.rpartition(":")
        try:
            value = int(limit)
        except ValueError:
            value = -1
        if not sep or not host or value < 0:
            raise ValueError(f"Error parsing configuration property 'max.connections.per.ip.overrides': "
                             f"Invalid entry {entry!r}")
        limits[host.strip("[]")] = value
    return limits


def check_ip_overrides(text) -> None:
    """A ConfigDef validator."""
    parse_ip_overrides(text)


@functools.lru_cache(maxsize=8)
def limits_by_address(text: str | None) -> dict[str, int]:
    """The overrides keyed by IP address (names resolved once per config value, as Kafka does)."""
    out = {}
    for host, limit in parse_ip_overrides(text).items():
        try:
            out[str(ipaddress.ip_address(host))] = limit
        except ValueError:
            try:
                out[socket.gethostbyname(host)] = limit
            except OSError:
                continue   # an unresolvable name limits nobody
    return out
