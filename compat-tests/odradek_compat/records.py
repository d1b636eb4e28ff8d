"""The record shape every client adapter produces from and returns: plain bytes, no client types."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field


@dataclass
class Rec:
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    partition: int | None = None      # produce: explicit partition (None = client's partitioner)
    timestamp: int | None = None      # produce: explicit CreateTime in ms (None = client's clock)
    offset: int | None = None         # set on records read back

    def content(self) -> tuple:
        """What must survive a round trip unchanged."""
        return (self.key, self.value, tuple(self.headers))


def b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def to_json(rec: Rec) -> dict:
    return {
        "key": b64(rec.key),
        "value": b64(rec.value),
        "headers": [[k, b64(v)] for k, v in rec.headers],
        "partition": rec.partition,
        "timestamp": rec.timestamp,
    }


def from_json(obj: dict) -> Rec:
    return Rec(
        key=unb64(obj["key"]),
        value=unb64(obj["value"]),
        headers=[(k, unb64(v)) for k, v in obj.get("headers") or []],
        partition=obj["partition"],
        timestamp=obj.get("timestamp"),
        offset=obj["offset"],
    )
