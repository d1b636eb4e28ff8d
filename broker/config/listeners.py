"""Listener definitions (NAME://host:port) and the listener → security protocol map."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping

from .values import ConfigError


@dataclass(frozen=True)
class Listener:
    name: str            # listener name, e.g. PLAINTEXT
    security_protocol: str
    host: str            # "" = all interfaces
    port: int

    def __str__(self):
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


_LISTENER_RE = re.compile(r"^([A-Za-z0-9_]+)://(\[[0-9A-Fa-f:.]*\]|[^:\[\]]*):(-?\d+)$")


def parse_listeners(text: str | None, protocol_map: Mapping[str, str],
                    config_name: str = "listeners") -> list[Listener]:
    if not text or not text.strip():
        return []
    listeners = []
    for item in text.split(","):
        item = item.strip()
        match = _LISTENER_RE.match(item)
        if not match:
            raise ConfigError(f"Invalid value {item} for configuration {config_name}: "
                              "expected NAME://host:port", config_name)
        name, host, port = match.group(1).upper(), match.group(2), int(match.group(3))
        host = host[1:-1] if host.startswith("[") else host
        if not 0 <= port <= 65535:
            raise ConfigError(f"Invalid port {port} in {config_name}", config_name)
        if name not in protocol_map:
            raise ConfigError(f"No security protocol defined for listener {name} "
                              f"(listener.security.protocol.map)", config_name)
        if name in (listener.name for listener in listeners):
            raise ConfigError(f"Each listener must have a different name, {name} repeats",
                              config_name)
        listeners.append(Listener(name, protocol_map[name], host, port))
    return listeners


def _parse_protocol_map(text: str) -> dict[str, str]:
    mapping = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        name, sep, protocol = item.partition(":")
        if not sep or protocol.strip().upper() not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT",
                                                       "SASL_SSL"):
            raise ConfigError(f"Invalid value {item} for configuration "
                              "listener.security.protocol.map", "listener.security.protocol.map")
        mapping[name.strip().upper()] = protocol.strip().upper()
    return mapping
