"""Structured logging for the broker: one setup call, a start-up banner, an optional request log.

* :func:`configure_logging` installs one handler on the root logger, so every module's lines
  (``odradek.*`` and libraries') share one format: ``fmt="text"`` gives
  ``2026-01-01T00:00:00.000Z INFO odradek.x msg k=v`` lines, ``fmt="json"`` one JSON object each. Fields passed as ``extra={"fields": {...}}``
  become ``k=v`` pairs / JSON keys, so log lines stay machine-readable.
* :func:`log_startup_banner` logs version, node id, listeners, data dirs and config overrides.
* :class:`RequestLogger` writes one line per request (api, version, client id, latency, error)
  when the ``odradek.request`` logger is enabled for DEBUG, and costs one level check when not.
  There is never a line per record.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Mapping, Sequence
from typing import IO

ROOT_LOGGER = "odradek"
REQUEST_LOGGER = "odradek.request"


def _timestamp(created: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created)) + f".{int(created % 1 * 1000):03d}Z"


def _fields(record: logging.LogRecord) -> Mapping[str, object]:
    fields = getattr(record, "fields", None)
    return fields if isinstance(fields, Mapping) else {}


def _text_value(value: object) -> str:
    text = str(value)
    if not text or any(c in text for c in ' "=\n'):
        return json.dumps(text)
    return text


class TextFormatter(logging.Formatter):
    """``<utc time> <LEVEL> <logger> <message> k=v ...`` on one line."""

    def format(self, record: logging.LogRecord) -> str:
        line = (f"{_timestamp(record.created)} {record.levelname:<5} {record.name} "
                f"{record.getMessage()}")
        pairs = " ".join(f"{k}={_text_value(v)}" for k, v in _fields(record).items())
        if pairs:
            line += " " + pairs
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, msg, then the record's fields."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, object] = {"ts": _timestamp(record.created), "level": record.levelname,
                                  "logger": record.name, "msg": record.getMessage()}
        for key, value in _fields(record).items():
            doc.setdefault(key, value)
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        return json.dumps(doc, default=str)


def configure_logging(level: str | int = "INFO", fmt: str = "text",
                      stream: IO[str] | None = None, *, request_log: bool = False
                      ) -> logging.Logger:
    """Send every logger (ours and libraries') through one handler on ``stream`` (stderr by
    default) in ``fmt``; idempotent. ``request_log`` turns on the per-request lines whatever the
    level. Returns the ``odradek`` logger."""
    if fmt not in ("text", "json"):
        raise ValueError(f"unknown log format {fmt!r} (use 'text' or 'json')")
    if isinstance(level, str):
        resolved = logging.getLevelName(level.upper())
        if not isinstance(resolved, int):
            raise ValueError(f"unknown log level {level!r}")
        level = resolved
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_odradek", False):
            root.removeHandler(handler)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler._odradek = True  # type: ignore[attr-defined]
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root.addHandler(handler)
    root.setLevel(level)
    logging.getLogger(REQUEST_LOGGER).setLevel(logging.DEBUG if request_log else logging.NOTSET)
    return logging.getLogger(ROOT_LOGGER)


def log_startup_banner(*, version: str, node_id: int, listeners: Sequence[str],
                       advertised_listeners: Sequence[str] = (), log_dirs: Sequence[str] = (),
                       overrides: Mapping[str, str] | None = None, metrics_port: int | None = None,
                       logger: logging.Logger | None = None) -> None:
    """One INFO line (plus one per config override) telling an operator what started where."""
    logger = logger or logging.getLogger(ROOT_LOGGER)
    fields: dict[str, object] = {"version": version, "node_id": node_id,
                                 "listeners": ",".join(listeners),
                                 "log_dirs": ",".join(log_dirs)}
    if advertised_listeners:
        fields["advertised_listeners"] = ",".join(advertised_listeners)
    if metrics_port is not None and metrics_port >= 0:
        fields["metrics_port"] = metrics_port
    logger.info("Odradek broker started", extra={"fields": fields})
    for key, value in sorted((overrides or {}).items()):
        if _is_sensitive(key):
            value = "[hidden]"   # passwords, keys and JAAS entries never reach the log, as Kafka
        logger.info("config override", extra={"fields": {"key": key, "value": value}})


def log_unknown_keys(keys: Sequence[str], logger: logging.Logger | None = None) -> None:
    """One WARNING per configuration key the broker does not know: kept, but otherwise ignored."""
    logger = logger or logging.getLogger(ROOT_LOGGER)
    for key in keys:
        logger.warning("unknown config key ignored", extra={"fields": {"key": key}})


def _is_sensitive(key: str) -> bool:
    """Whether `key`, or the key it overrides per listener or mechanism
    (listener.name.<listener>.[<mechanism>.]<key>), is a sensitive setting."""
    from broker.config.broker_catalog import BROKER_CONFIGS

    parts = key.split(".")
    for start in range(len(parts)):
        definition = BROKER_CONFIGS.get(".".join(parts[start:]))
        if definition is not None:
            return definition.sensitive
    return False


class RequestLogger:
    """The optional per-request log: DEBUG lines on the ``odradek.request`` logger.

    Off unless that logger is enabled for DEBUG (``configure_logging(request_log=True)``, or
    ``--log-level debug``); when off, ``log`` costs one cached level check.
    """

    __slots__ = ("_logger",)

    def __init__(self, logger: logging.Logger | None = None) -> None:
        self._logger = logger or logging.getLogger(REQUEST_LOGGER)

    @property
    def enabled(self) -> bool:
        return self._logger.isEnabledFor(logging.DEBUG)

    def log(self, api_name: str, api_version: int, client_id: str | None, latency_s: float,
            error: str | None = None, correlation_id: int | None = None) -> None:
        if not self._logger.isEnabledFor(logging.DEBUG):
            return
        fields: dict[str, object] = {"api": api_name, "version": api_version,
                                     "client_id": client_id or "",
                                     "latency_ms": round(latency_s * 1000.0, 3)}
        if correlation_id is not None:
            fields["correlation_id"] = correlation_id
        if error:
            fields["error"] = error
        self._logger.debug("request", extra={"fields": fields})
