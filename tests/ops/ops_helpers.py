"""A tiny HTTP GET for the ops tests (blocking, bounded, no dependencies)."""

from __future__ import annotations

import json
import socket


def http_get(port: int, path: str, host: str = "127.0.0.1", timeout: float = 5.0,
             method: str = "GET", headers: dict[str, str] | None = None
             ) -> tuple[int, dict[str, str], bytes]:
    extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(f"{method} {path} HTTP/1.1\r\nHost: {host}\r\n{extra}\r\n".encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    if not data:  # accepted, then closed unanswered (the server is going away)
        raise ConnectionResetError(f"no HTTP response from {host}:{port}")
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in (l.partition(":") for l in lines[1:])}
    return status, headers, body


def http_json(port: int, path: str) -> tuple[int, dict]:
    status, _, body = http_get(port, path)
    return status, json.loads(body)


def parse_metrics(text: str) -> dict[tuple[str, frozenset], float]:
    """Prometheus text -> {(sample name, frozenset(labels.items())): value}."""
    from prometheus_client.parser import text_string_to_metric_families

    samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples[(s.name, frozenset(s.labels.items()))] = s.value
    return samples


def sample(samples: dict, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))
