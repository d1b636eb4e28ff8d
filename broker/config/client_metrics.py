"""Client metrics subscriptions (KIP-714): ConfigResource type CLIENT_METRICS, set with
(Incremental)AlterConfigs, stored in the metadata log, listed by ListClientMetricsResources. They
are stored and described; this broker does not serve client telemetry itself. The checks are
Kafka 3.9's, with its error codes."""

from __future__ import annotations

import re
from typing import Mapping

from protocol import ErrorCode

from .values import ConfigError

INTERVAL = "interval.ms"
CLIENT_METRICS_CONFIGS = ("metrics", INTERVAL, "match")
MIN_INTERVAL_MS, MAX_INTERVAL_MS = 100, 3_600_000
# What a "match" entry may select clients by: <selector>=<regular expression>
SELECTORS = {"client_instance_id", "client_id", "client_software_name", "client_software_version",
             "client_source_address", "client_source_port"}
_JAVA_INT = re.compile(r"[+-]?[0-9]+")


def validate_client_metrics(configs: Mapping[str, str]) -> None:
    for name in configs:
        if name not in CLIENT_METRICS_CONFIGS:
            raise ConfigError(f"Unknown client metrics configuration: {name}",
                              error_code=ErrorCode.INVALID_REQUEST)
    if INTERVAL in configs:
        value = configs[INTERVAL]
        if not _JAVA_INT.fullmatch(value) or not -2**31 <= int(value) < 2**31:
            # Kafka fails to parse it and answers an unexplained server error
            raise ConfigError("", error_code=ErrorCode.UNKNOWN_SERVER_ERROR)
        if not MIN_INTERVAL_MS <= int(value) <= MAX_INTERVAL_MS:
            raise ConfigError(f"Invalid value {int(value)} for {INTERVAL}, interval must be between "
                              f"{MIN_INTERVAL_MS} and {MAX_INTERVAL_MS} (1 hour)",
                              error_code=ErrorCode.INVALID_REQUEST)
    if "match" in configs:
        for pattern in configs["match"].split(","):
            if not _valid_match(pattern):
                raise ConfigError(f"Illegal client matching pattern: {pattern}")


def _valid_match(pattern: str) -> bool:
    selector, equals, regex = pattern.partition("=")
    if not equals or selector.strip() not in SELECTORS or not regex.strip():
        return False
    try:
        re.compile(regex.strip())
    except re.error:
        return False
    return True
