"""Config value types, parsing and validators, shared by the broker and topic catalogs."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Callable

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1


class ConfigError(ValueError):
    """A configuration key or value that Kafka would reject (INVALID_CONFIG on the wire, unless
    `error_code` says otherwise: Kafka answers INVALID_REQUEST for broker resources)."""

    def __init__(self, message: str, name: str | None = None, error_code: int | None = None):
        super().__init__(message)
        self.name = name
        self.error_code = error_code


class ConfigType(enum.IntEnum):
    """DescribeConfigs' ConfigType (KIP-569)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(enum.IntEnum):
    """DescribeConfigs' ConfigSource."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


# --------------------------------------------------------------------------------------------- values

_INT_RANGES = {
    ConfigType.SHORT: (-(2**15), 2**15 - 1),
    ConfigType.INT: (-(2**31), INT_MAX),
    ConfigType.LONG: (-(2**63), LONG_MAX),
}


def parse_value(ctype: ConfigType, text: str | None) -> Any:
    """Parse a config string as Kafka's ConfigDef does; raise ValueError with the reason."""
    if text is None:
        return None
    if ctype == ConfigType.BOOLEAN:
        lowered = text.strip().lower()
        if lowered in ("true", "false"):
            return lowered == "true"
        raise ValueError("Expected value to be either true or false")
    if ctype in _INT_RANGES:
        try:
            value = int(text.strip(), 10)
        except ValueError:
            raise ValueError(f"Not a number of type {ctype.name}") from None
        low, high = _INT_RANGES[ctype]
        if not low <= value <= high:
            raise ValueError(f"Not a number of type {ctype.name}")
        return value
    if ctype == ConfigType.DOUBLE:
        try:
            return float(text.strip())
        except ValueError:
            raise ValueError("Not a number of type DOUBLE") from None
    if ctype == ConfigType.LIST:
        stripped = text.strip()
        return [item.strip() for item in stripped.split(",")] if stripped else []
    return text.strip() if ctype != ConfigType.PASSWORD else text


def render(value: Any) -> str | None:
    """A parsed value as the string Kafka reports in DescribeConfigs."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(value)
    if isinstance(value, float):
        return _java_double(value)
    return str(value)


def _java_double(value: float) -> str:
    """A double as Java's Double.toString writes it (what Kafka puts on the wire): positional between
    1e-3 and 1e7, else "1.7976931348623157E308"."""
    if value != value or value in (math.inf, -math.inf):
        return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return repr(value)      # shortest digits, positional, always with a point in this range
    sign, digits, exponent = Decimal(repr(value)).as_tuple()
    power = len(digits) - 1 + exponent
    shown = "".join(map(str, digits)).rstrip("0") or "0"
    return f"{'-' if sign else ''}{shown[0]}.{shown[1:] or '0'}E{power}"


# ----------------------------------------------------------------------------------------- validators

Validator = Callable[[Any], None]


def at_least(minimum: float) -> Validator:
    def check(value):
        if value is not None and value < minimum:
            raise ValueError(f"Value must be at least {minimum}")
    return check


def between(low: float, high: float) -> Validator:
    """Kafka's Range.between: its messages name the bound that was crossed."""
    def check(value):
        if value is None:
            return
        if value < low:
            raise ValueError(f"Value must be at least {low}")
        if value > high:
            raise ValueError(f"Value must be no more than {high}")
    return check


def gzip_level(value):
    """compression.gzip.level: zlib's levels, or -1 for its default."""
    if value is not None and value != -1 and not 1 <= value <= 9:
        raise ValueError("Value must be between 1 and 9 or equal to -1")


class InvalidItem(ValueError):
    """A list value refused for one of its items, which Kafka's message names instead of the list."""

    def __init__(self, item, message: str):
        super().__init__(message)
        self.item = item


def one_of(*choices: str, case_sensitive: bool = True) -> Validator:
    def check(value):
        if value is None:
            return
        items = value if isinstance(value, list) else [value]
        for item in items:
            candidates = choices if case_sensitive else [c.lower() for c in choices]
            if (item if case_sensitive else item.lower()) not in candidates:
                raise InvalidItem(item, f"String must be one of: {', '.join(choices)}")
    return check


def non_empty_list(value):
    if value is not None and not [v for v in value if v]:
        raise ValueError("list must not be empty")


# ------------------------------------------------------------------------------------- broker catalog

@dataclass(frozen=True)
class ConfigDef:
    name: str
    type: ConfigType
    default: Any = None
    validator: Validator | None = None
    dynamic: bool = False   # updatable cluster-wide at runtime (IncrementalAlterConfigs on a broker)
    sensitive: bool = False


def _defs(*defs: ConfigDef) -> dict[str, ConfigDef]:
    return {d.name: d for d in defs}


COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")


def parse_checked(name: str, ctype: ConfigType, validator: Validator | None, text):
    try:
        value = parse_value(ctype, text)
    except ValueError as exc:
        raise ConfigError(f"Invalid value {text} for configuration {name}: {exc}", name) from None
    try:
        if validator is not None:
            validator(value)
    except ValueError as exc:   # Kafka names the parsed value then ("-5" for "-05", "2.0" for "2")
        shown = exc.item if isinstance(exc, InvalidItem) else render(value)
        raise ConfigError(f"Invalid value {shown} for configuration {name}: {exc}", name) from None
    return value


# ------------------------------------------------------------------------------------ describe model

@dataclass
class DescribedConfig:
    """One DescribeConfigs entry: value, where it came from, and its synonyms in precedence order."""

    name: str
    value: str | None
    source: ConfigSource
    read_only: bool
    sensitive: bool
    type: ConfigType
    synonyms: list[tuple[str, str | None, ConfigSource]] = field(default_factory=list)
