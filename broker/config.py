"""Broker and topic configuration with Kafka's names, types, defaults and validation.

Two catalogs:

- ``BROKER_CONFIGS``: the server.properties keys this broker understands. ``BrokerConfig.load`` reads a
  properties file plus ``--override`` pairs on top of ``EMBEDDED_PROPERTIES`` (our equivalent of Kafka's
  shipped ``config/server.properties``: a single node that is broker and controller, data in ./data) and
  fails at start-up with ``ConfigError`` on an unknown key or a bad value.
- ``TOPIC_CONFIGS``: the per-topic keys, each with the broker configs it falls back to (Kafka's
  "synonyms", in precedence order). ``validate_topic_configs`` is the validator CreateTopics /
  AlterConfigs hand to the controller; ``BrokerConfig.topic_defaults()`` resolves every topic key against
  the broker configuration; ``describe_topic_config`` / ``BrokerConfig.describe`` produce DescribeConfigs
  entries with sources and synonyms.

Values are parsed to Python types (int, float, bool, str, list[str]); ``render`` turns them back into the
strings Kafka puts on the wire.
"""

from __future__ import annotations

import enum
import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1


class ConfigError(ValueError):
    """A configuration key or value that Kafka would reject (INVALID_CONFIG on the wire)."""

    def __init__(self, message: str, name: str | None = None):
        super().__init__(message)
        self.name = name


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
        raise ValueError("expected true or false")
    if ctype in _INT_RANGES:
        try:
            value = int(text.strip(), 10)
        except ValueError:
            raise ValueError("not a number") from None
        low, high = _INT_RANGES[ctype]
        if not low <= value <= high:
            raise ValueError(f"out of range for {ctype.name.lower()}")
        return value
    if ctype == ConfigType.DOUBLE:
        try:
            return float(text.strip())
        except ValueError:
            raise ValueError("not a number") from None
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
        return repr(value)
    return str(value)


# ----------------------------------------------------------------------------------------- validators

Validator = Callable[[Any], None]


def at_least(minimum: float) -> Validator:
    def check(value):
        if value is not None and value < minimum:
            raise ValueError(f"value must be at least {minimum}")
    return check


def between(low: float, high: float) -> Validator:
    def check(value):
        if value is not None and not low <= value <= high:
            raise ValueError(f"value must be between {low} and {high}")
    return check


def one_of(*choices: str, case_sensitive: bool = True) -> Validator:
    def check(value):
        if value is None:
            return
        items = value if isinstance(value, list) else [value]
        for item in items:
            candidates = choices if case_sensitive else [c.lower() for c in choices]
            if (item if case_sensitive else item.lower()) not in candidates:
                raise ValueError(f"String must be one of: {', '.join(choices)}")
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


T = ConfigType
_COMPRESSION = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
_TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")

BROKER_CONFIGS: dict[str, ConfigDef] = _defs(
    # identity and roles (KRaft)
    ConfigDef("node.id", T.INT, -1, at_least(-1)),
    ConfigDef("broker.id", T.INT, -1, at_least(-1)),
    ConfigDef("process.roles", T.LIST, [], one_of("broker", "controller")),
    ConfigDef("controller.quorum.voters", T.LIST, []),
    ConfigDef("controller.quorum.bootstrap.servers", T.LIST, []),
    ConfigDef("controller.quorum.election.timeout.ms", T.INT, 1000),
    ConfigDef("controller.quorum.fetch.timeout.ms", T.INT, 2000),
    ConfigDef("controller.quorum.election.backoff.max.ms", T.INT, 1000),
    ConfigDef("controller.quorum.request.timeout.ms", T.INT, 2000),
    ConfigDef("controller.listener.names", T.STRING, None),
    ConfigDef("broker.heartbeat.interval.ms", T.INT, 2000),
    ConfigDef("broker.session.timeout.ms", T.INT, 9000),
    ConfigDef("broker.rack", T.STRING, None),
    ConfigDef("metadata.log.dir", T.STRING, None),
    ConfigDef("metadata.log.segment.bytes", T.INT, 1073741824, at_least(12)),
    ConfigDef("metadata.log.max.record.bytes.between.snapshots", T.LONG, 20971520, at_least(1)),
    ConfigDef("metadata.max.retention.ms", T.LONG, 604800000),
    # network
    ConfigDef("listeners", T.STRING, "PLAINTEXT://:9092"),
    ConfigDef("advertised.listeners", T.STRING, None),
    ConfigDef("listener.security.protocol.map", T.STRING,
              "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT"),
    ConfigDef("inter.broker.listener.name", T.STRING, None),
    ConfigDef("security.inter.broker.protocol", T.STRING, "PLAINTEXT",
              one_of("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")),
    ConfigDef("socket.request.max.bytes", T.INT, 104857600, at_least(1)),
    ConfigDef("socket.send.buffer.bytes", T.INT, 102400),
    ConfigDef("socket.receive.buffer.bytes", T.INT, 102400),
    ConfigDef("socket.listen.backlog.size", T.INT, 50, at_least(1)),
    ConfigDef("connections.max.idle.ms", T.LONG, 600000),
    ConfigDef("max.connections", T.INT, INT_MAX, at_least(0), dynamic=True),
    ConfigDef("max.connections.per.ip", T.INT, INT_MAX, at_least(0), dynamic=True),
    ConfigDef("num.network.threads", T.INT, 3, at_least(1), dynamic=True),
    ConfigDef("num.io.threads", T.INT, 8, at_least(1), dynamic=True),
    ConfigDef("queued.max.requests", T.INT, 500, at_least(1)),
    ConfigDef("queued.max.request.bytes", T.LONG, -1),
    ConfigDef("request.timeout.ms", T.INT, 30000, at_least(0)),
    ConfigDef("fetch.max.bytes", T.INT, 57671680, at_least(1024)),
    # topics
    ConfigDef("num.partitions", T.INT, 1, at_least(1)),
    ConfigDef("default.replication.factor", T.INT, 1, at_least(1)),
    ConfigDef("auto.create.topics.enable", T.BOOLEAN, True),
    ConfigDef("delete.topic.enable", T.BOOLEAN, True),
    ConfigDef("auto.leader.rebalance.enable", T.BOOLEAN, True),
    ConfigDef("message.max.bytes", T.INT, 1048588, at_least(0), dynamic=True),
    ConfigDef("compression.type", T.STRING, "producer", one_of(*_COMPRESSION), dynamic=True),
    ConfigDef("compression.gzip.level", T.INT, -1, between(-1, 9), dynamic=True),
    ConfigDef("compression.lz4.level", T.INT, 9, between(1, 17), dynamic=True),
    ConfigDef("compression.zstd.level", T.INT, 3, between(-131072, 22), dynamic=True),
    ConfigDef("min.insync.replicas", T.INT, 1, at_least(1), dynamic=True),
    ConfigDef("unclean.leader.election.enable", T.BOOLEAN, False, dynamic=True),
    ConfigDef("replica.lag.time.max.ms", T.LONG, 30000),
    ConfigDef("replica.fetch.max.bytes", T.INT, 1048576, at_least(0)),
    ConfigDef("replica.fetch.response.max.bytes", T.INT, 10485760, at_least(0)),
    ConfigDef("replica.fetch.wait.max.ms", T.INT, 500),
    ConfigDef("num.replica.fetchers", T.INT, 1, dynamic=True),
    # log
    ConfigDef("log.dir", T.STRING, "/tmp/kafka-logs"),
    ConfigDef("log.dirs", T.STRING, None),
    ConfigDef("log.segment.bytes", T.INT, 1073741824, at_least(1048576), dynamic=True),
    ConfigDef("log.roll.ms", T.LONG, None, at_least(1), dynamic=True),
    ConfigDef("log.roll.hours", T.INT, 168, at_least(1)),
    ConfigDef("log.roll.jitter.ms", T.LONG, None, dynamic=True),
    ConfigDef("log.roll.jitter.hours", T.INT, 0, at_least(0)),
    ConfigDef("log.retention.ms", T.LONG, None, dynamic=True),
    ConfigDef("log.retention.minutes", T.INT, None),
    ConfigDef("log.retention.hours", T.INT, 168),
    ConfigDef("log.retention.bytes", T.LONG, -1, dynamic=True),
    ConfigDef("log.retention.check.interval.ms", T.LONG, 300000, at_least(1)),
    ConfigDef("log.local.retention.ms", T.LONG, -2, at_least(-2), dynamic=True),
    ConfigDef("log.local.retention.bytes", T.LONG, -2, at_least(-2), dynamic=True),
    ConfigDef("log.cleanup.policy", T.LIST, ["delete"], one_of("compact", "delete"), dynamic=True),
    ConfigDef("log.cleaner.enable", T.BOOLEAN, True),
    ConfigDef("log.cleaner.threads", T.INT, 1, at_least(0), dynamic=True),
    ConfigDef("log.cleaner.backoff.ms", T.LONG, 15000, at_least(0), dynamic=True),
    ConfigDef("log.cleaner.dedupe.buffer.size", T.LONG, 134217728, dynamic=True),
    ConfigDef("log.cleaner.delete.retention.ms", T.LONG, 86400000, at_least(0), dynamic=True),
    ConfigDef("log.cleaner.min.cleanable.ratio", T.DOUBLE, 0.5, between(0, 1), dynamic=True),
    ConfigDef("log.cleaner.min.compaction.lag.ms", T.LONG, 0, at_least(0), dynamic=True),
    ConfigDef("log.cleaner.max.compaction.lag.ms", T.LONG, LONG_MAX, at_least(1), dynamic=True),
    ConfigDef("log.index.interval.bytes", T.INT, 4096, at_least(0), dynamic=True),
    ConfigDef("log.index.size.max.bytes", T.INT, 10485760, at_least(4), dynamic=True),
    ConfigDef("log.flush.interval.messages", T.LONG, LONG_MAX, at_least(1), dynamic=True),
    ConfigDef("log.flush.interval.ms", T.LONG, None, dynamic=True),
    ConfigDef("log.flush.scheduler.interval.ms", T.LONG, LONG_MAX),
    ConfigDef("log.flush.offset.checkpoint.interval.ms", T.INT, 60000, at_least(0)),
    ConfigDef("log.flush.start.offset.checkpoint.interval.ms", T.INT, 60000, at_least(0)),
    ConfigDef("log.flush.recovery.point.checkpoint.interval.ms", T.INT, 60000, at_least(0)),
    ConfigDef("log.segment.delete.delay.ms", T.LONG, 60000, at_least(0), dynamic=True),
    ConfigDef("log.preallocate", T.BOOLEAN, False, dynamic=True),
    ConfigDef("log.message.timestamp.type", T.STRING, "CreateTime", one_of(*_TIMESTAMP_TYPES),
              dynamic=True),
    ConfigDef("log.message.timestamp.before.max.ms", T.LONG, LONG_MAX, at_least(0), dynamic=True),
    ConfigDef("log.message.timestamp.after.max.ms", T.LONG, 3600000, at_least(0), dynamic=True),
    ConfigDef("num.recovery.threads.per.data.dir", T.INT, 1, at_least(1), dynamic=True),
    # Odradek: fsync appended batches before acknowledging them (group commit); Kafka leaves it to the OS.
    ConfigDef("metrics.port", T.INT, -1, between(-1, 65535)),   # Odradek: /metrics, /healthz; -1 off
    ConfigDef("log.flush.before.acknowledge", T.BOOLEAN, False),
    # internal topics and coordinators
    ConfigDef("offsets.topic.num.partitions", T.INT, 50, at_least(1)),
    ConfigDef("offsets.topic.replication.factor", T.SHORT, 3, at_least(1)),
    ConfigDef("offsets.topic.segment.bytes", T.INT, 104857600, at_least(1)),
    ConfigDef("offsets.topic.compression.codec", T.INT, 0),
    ConfigDef("offsets.load.buffer.size", T.INT, 5242880, at_least(1)),
    ConfigDef("offsets.retention.minutes", T.INT, 10080, at_least(1)),
    ConfigDef("offsets.retention.check.interval.ms", T.LONG, 600000, at_least(1)),
    ConfigDef("offsets.commit.timeout.ms", T.INT, 5000, at_least(1)),
    ConfigDef("offset.metadata.max.bytes", T.INT, 4096),
    ConfigDef("group.initial.rebalance.delay.ms", T.INT, 3000),
    ConfigDef("group.min.session.timeout.ms", T.INT, 6000),
    ConfigDef("group.max.session.timeout.ms", T.INT, 1800000),
    ConfigDef("group.max.size", T.INT, INT_MAX, at_least(1)),
    ConfigDef("group.coordinator.rebalance.protocols", T.LIST, ["classic", "consumer"]),
    ConfigDef("transaction.state.log.num.partitions", T.INT, 50, at_least(1)),
    ConfigDef("transaction.state.log.replication.factor", T.SHORT, 3, at_least(1)),
    ConfigDef("transaction.state.log.min.isr", T.INT, 2, at_least(1)),
    ConfigDef("transaction.state.log.segment.bytes", T.INT, 104857600, at_least(1)),
    ConfigDef("transaction.state.log.load.buffer.size", T.INT, 5242880, at_least(1)),
    ConfigDef("transaction.max.timeout.ms", T.INT, 900000, at_least(1)),
    ConfigDef("transactional.id.expiration.ms", T.INT, 604800000, at_least(1)),
    ConfigDef("transaction.abort.timed.out.transaction.cleanup.interval.ms", T.INT, 10000,
              at_least(1)),
    ConfigDef("transaction.remove.expired.transaction.cleanup.interval.ms", T.INT, 3600000,
              at_least(1)),
    ConfigDef("transaction.partition.verification.enable", T.BOOLEAN, True, dynamic=True),
    ConfigDef("producer.id.expiration.ms", T.INT, 86400000, at_least(1), dynamic=True),
    ConfigDef("producer.id.expiration.check.interval.ms", T.INT, 600000, at_least(1)),
    ConfigDef("share.coordinator.state.topic.num.partitions", T.INT, 50, at_least(1)),
    ConfigDef("share.coordinator.state.topic.replication.factor", T.SHORT, 3, at_least(1)),
    ConfigDef("share.coordinator.state.topic.min.isr", T.SHORT, 2, at_least(1)),
    ConfigDef("unstable.api.versions.enable", T.BOOLEAN, False),
    ConfigDef("unstable.feature.versions.enable", T.BOOLEAN, False),
)

_BROKER_PREFIXES = ("listener.name.",)  # per-listener overrides (SSL/SASL settings, later)

# Our equivalent of Kafka's shipped config/server.properties: a one-node cluster that is its own
# controller, with internal topics sized for one node. These count as static (file) settings.
EMBEDDED_PROPERTIES: dict[str, str] = {
    "node.id": "1",
    "process.roles": "broker,controller",
    "log.dirs": "./data",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
}


def _embedded_under(settings: Mapping[str, str]) -> dict[str, str]:
    """The embedded properties a user's settings build on, minus those their keys replace."""
    base = dict(EMBEDDED_PROPERTIES)
    if "log.dir" in settings:           # log.dirs would win over the user's log.dir
        base.pop("log.dirs", None)
    if "broker.id" in settings:         # the legacy name for node.id
        base.pop("node.id", None)
    return base


# -------------------------------------------------------------------------------------- topic catalog

@dataclass(frozen=True)
class Synonym:
    """A broker config a topic config falls back to; ``scale`` converts its unit (hours → ms)."""

    name: str
    scale: int = 1


@dataclass(frozen=True)
class TopicConfigDef:
    name: str
    type: ConfigType
    synonyms: tuple[Synonym, ...]
    validator: Validator | None = None
    default: Any = None  # only for keys with no broker synonym


def _topic(name, ctype, *synonyms, validator=None, default=None) -> TopicConfigDef:
    syns = tuple(s if isinstance(s, Synonym) else Synonym(s) for s in synonyms)
    return TopicConfigDef(name, ctype, syns, validator, default)


TOPIC_CONFIGS: dict[str, TopicConfigDef] = {d.name: d for d in (
    _topic("cleanup.policy", T.LIST, "log.cleanup.policy", validator=one_of("compact", "delete")),
    _topic("compression.type", T.STRING, "compression.type", validator=one_of(*_COMPRESSION)),
    _topic("compression.gzip.level", T.INT, "compression.gzip.level", validator=between(-1, 9)),
    _topic("compression.lz4.level", T.INT, "compression.lz4.level", validator=between(1, 17)),
    _topic("compression.zstd.level", T.INT, "compression.zstd.level",
           validator=between(-131072, 22)),
    _topic("delete.retention.ms", T.LONG, "log.cleaner.delete.retention.ms", validator=at_least(0)),
    _topic("file.delete.delay.ms", T.LONG, "log.segment.delete.delay.ms", validator=at_least(0)),
    _topic("flush.messages", T.LONG, "log.flush.interval.messages", validator=at_least(1)),
    _topic("flush.ms", T.LONG, "log.flush.interval.ms", "log.flush.scheduler.interval.ms",
           validator=at_least(0)),
    _topic("follower.replication.throttled.replicas", T.LIST, default=[]),
    _topic("index.interval.bytes", T.INT, "log.index.interval.bytes", validator=at_least(0)),
    _topic("leader.replication.throttled.replicas", T.LIST, default=[]),
    _topic("local.retention.bytes", T.LONG, "log.local.retention.bytes", validator=at_least(-2)),
    _topic("local.retention.ms", T.LONG, "log.local.retention.ms", validator=at_least(-2)),
    _topic("max.compaction.lag.ms", T.LONG, "log.cleaner.max.compaction.lag.ms",
           validator=at_least(1)),
    _topic("max.message.bytes", T.INT, "message.max.bytes", validator=at_least(0)),
    _topic("message.timestamp.after.max.ms", T.LONG, "log.message.timestamp.after.max.ms",
           validator=at_least(0)),
    _topic("message.timestamp.before.max.ms", T.LONG, "log.message.timestamp.before.max.ms",
           validator=at_least(0)),
    _topic("message.timestamp.type", T.STRING, "log.message.timestamp.type",
           validator=one_of(*_TIMESTAMP_TYPES)),
    _topic("min.cleanable.dirty.ratio", T.DOUBLE, "log.cleaner.min.cleanable.ratio",
           validator=between(0, 1)),
    _topic("min.compaction.lag.ms", T.LONG, "log.cleaner.min.compaction.lag.ms",
           validator=at_least(0)),
    _topic("min.insync.replicas", T.INT, "min.insync.replicas", validator=at_least(1)),
    _topic("preallocate", T.BOOLEAN, "log.preallocate"),
    _topic("remote.storage.enable", T.BOOLEAN, default=False),
    _topic("retention.bytes", T.LONG, "log.retention.bytes"),
    _topic("retention.ms", T.LONG, "log.retention.ms", Synonym("log.retention.minutes", 60_000),
           Synonym("log.retention.hours", 3_600_000), validator=at_least(-1)),
    _topic("segment.bytes", T.INT, "log.segment.bytes", validator=at_least(1048576)),
    _topic("segment.index.bytes", T.INT, "log.index.size.max.bytes", validator=at_least(4)),
    _topic("segment.jitter.ms", T.LONG, "log.roll.jitter.ms",
           Synonym("log.roll.jitter.hours", 3_600_000), validator=at_least(0)),
    _topic("segment.ms", T.LONG, "log.roll.ms", Synonym("log.roll.hours", 3_600_000),
           validator=at_least(1)),
    _topic("unclean.leader.election.enable", T.BOOLEAN, "unclean.leader.election.enable"),
)}


def validate_topic_configs(configs: Mapping[str, str | None]) -> dict[str, Any]:
    """Validate topic-level overrides (strings as sent by clients); return them parsed.

    Raises ConfigError naming the offending key, for an unknown name or a bad value. A None value
    (AlterConfigs "delete") is passed through as None.
    """
    parsed: dict[str, Any] = {}
    for name, text in configs.items():
        definition = TOPIC_CONFIGS.get(name)
        if definition is None:
            raise ConfigError(f"Unknown topic config name: {name}", name)
        parsed[name] = _parse_checked(name, definition.type, definition.validator, text)
    return parsed


def _parse_checked(name: str, ctype: ConfigType, validator: Validator | None, text):
    try:
        value = parse_value(ctype, text)
        if validator is not None:
            validator(value)
    except ValueError as exc:
        raise ConfigError(f"Invalid value {text} for configuration {name}: {exc}", name) from None
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


# --------------------------------------------------------------------------------------- listeners

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


# ----------------------------------------------------------------------------------- broker config

class BrokerConfig:
    """The broker's effective configuration: defaults < embedded < file/overrides < dynamic."""

    def __init__(self, static: Mapping[str, str] | None = None, *, embedded: bool = True):
        static = dict(static or {})
        raw = _embedded_under(static) if embedded else {}
        raw.update(static)
        self._static: dict[str, Any] = {}
        self._dynamic: dict[str, Any] = {}      # dynamic broker configs (controller), merged
        self._dynamic_default: dict[str, Any] = {}
        self._dynamic_broker: dict[str, Any] = {}
        for name, text in raw.items():
            self._static[name] = self._parse_broker_key(name, text)
        self._check_consistency()

    # ---- construction
    @classmethod
    def load(cls, path: str | os.PathLike | None = None,
             overrides: Iterable[str] | Mapping[str, str] = ()) -> "BrokerConfig":
        """Read a properties file (optional) and ``key=value`` overrides; raise ConfigError."""
        raw: dict[str, str] = {}
        if path is not None:
            try:
                with open(path, encoding="utf-8") as handle:
                    raw.update(parse_properties(handle.read()))
            except OSError as exc:
                raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
        if isinstance(overrides, Mapping):
            raw.update(overrides)
        else:
            for item in overrides:
                key, sep, value = item.partition("=")
                if not sep or not key.strip():
                    raise ConfigError(f"override must look like key=value, got {item!r}")
                raw[key.strip()] = value.strip()
        return cls(raw)

    @staticmethod
    def _parse_broker_key(name: str, text: str) -> Any:
        definition = BROKER_CONFIGS.get(name)
        if definition is None:
            if name.startswith(_BROKER_PREFIXES):
                return text
            raise ConfigError(f"Unknown configuration {name!r}", name)
        return _parse_checked(name, definition.type, definition.validator, text)

    def _check_consistency(self):
        roles = self.get("process.roles")
        if not roles:
            raise ConfigError("process.roles must be set (broker, controller or both)",
                              "process.roles")
        if len(set(roles)) != len(roles):
            raise ConfigError("process.roles has duplicate entries", "process.roles")
        if self.node_id < 0:
            raise ConfigError("node.id must be set to a non-negative integer", "node.id")
        broker_id = self.get("broker.id")
        if broker_id not in (-1, self.node_id):
            raise ConfigError("broker.id must equal node.id when both are set", "broker.id")
        protocol_map = self.protocol_map
        listeners = self.listeners  # parses and validates
        for listener in listeners:
            if listener.security_protocol != "PLAINTEXT":
                raise ConfigError(f"listener {listener.name}: security protocol "
                                  f"{listener.security_protocol} is not supported yet", "listeners")
        if not self.client_listeners:
            raise ConfigError("no client listener configured (listeners)", "listeners")
        advertised = parse_listeners(self.get("advertised.listeners"), protocol_map,
                                     "advertised.listeners")
        names = {listener.name for listener in listeners}
        for listener in advertised:
            if listener.name not in names:
                raise ConfigError(f"advertised listener {listener.name} is not in listeners",
                                  "advertised.listeners")

    # ---- plain access
    def get(self, name: str) -> Any:
        if name in self._dynamic:
            return self._dynamic[name]
        if name in self._static:
            return self._static[name]
        return BROKER_CONFIGS[name].default

    def __getitem__(self, name: str) -> Any:
        return self.get(name)

    def is_set(self, name: str) -> bool:
        return name in self._dynamic or name in self._static

    def source(self, name: str) -> ConfigSource:
        if name in self._dynamic_broker:
            return ConfigSource.DYNAMIC_BROKER_CONFIG
        if name in self._dynamic_default:
            return ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
        if name in self._static:
            return ConfigSource.STATIC_BROKER_CONFIG
        return ConfigSource.DEFAULT_CONFIG

    # ---- dynamic (cluster-wide) broker configs, as stored by the controller
    def validate_dynamic(self, configs: Mapping[str, str | None]) -> dict[str, Any]:
        """Validate cluster-wide dynamic updates; raise ConfigError for static or unknown keys."""
        parsed = {}
        for name, text in configs.items():
            definition = BROKER_CONFIGS.get(name)
            if definition is None:
                raise ConfigError(f"Unknown broker config {name}", name)
            if not definition.dynamic:
                raise ConfigError(f"Cannot update these configs dynamically: {name}", name)
            parsed[name] = _parse_checked(name, definition.type, definition.validator, text)
        return parsed

    def set_dynamic(self, cluster_defaults: Mapping[str, str | None],
                    per_broker: Mapping[str, str | None] | None = None):
        """Apply the controller's dynamic broker configs: cluster-wide defaults and this broker's
        own overrides (which win). Keys this version does not know, or bad values, are skipped."""
        self._dynamic_default = self._parse_dynamic(cluster_defaults)
        self._dynamic_broker = self._parse_dynamic(per_broker or {})
        self._dynamic = {**self._dynamic_default, **self._dynamic_broker}

    @staticmethod
    def _parse_dynamic(configs: Mapping[str, str | None]) -> dict[str, Any]:
        parsed = {}
        for name, text in configs.items():
            definition = BROKER_CONFIGS.get(name)
            if definition is None or text is None:
                continue
            try:
                parsed[name] = _parse_checked(name, definition.type, definition.validator, text)
            except ConfigError:
                continue
        return parsed

    # ---- derived values
    @property
    def node_id(self) -> int:
        node_id = self.get("node.id")
        return node_id if node_id >= 0 else self.get("broker.id")

    @property
    def roles(self) -> list[str]:
        return list(self.get("process.roles"))

    @property
    def protocol_map(self) -> dict[str, str]:
        mapping = _parse_protocol_map(self.get("listener.security.protocol.map"))
        if not self.is_set("listener.security.protocol.map"):
            for name in self.controller_listener_names:  # as Kafka: the default map covers them
                mapping.setdefault(name, "PLAINTEXT")
        return mapping

    @property
    def listeners(self) -> list[Listener]:
        return parse_listeners(self.get("listeners"), self.protocol_map)

    @property
    def controller_listener_names(self) -> list[str]:
        names = self.get("controller.listener.names")
        return [n.strip().upper() for n in names.split(",")] if names else []

    @property
    def client_listeners(self) -> list[Listener]:
        controller = set(self.controller_listener_names)
        return [l for l in self.listeners if l.name not in controller]

    def advertised_listeners(self, bound_ports: Mapping[str, int] | None = None) -> list[Listener]:
        """Where clients should connect, per client listener.

        Explicit ``advertised.listeners`` win. Otherwise a listener bound to all interfaces is
        advertised as ``localhost`` (what a client on the same machine can always reach, as Kafka's
        shipped server.properties does), and port 0 is replaced by the port actually bound.
        """
        bound_ports = bound_ports or {}
        explicit = {l.name: l for l in parse_listeners(self.get("advertised.listeners"),
                                                       self.protocol_map, "advertised.listeners")}
        result = []
        for listener in self.client_listeners:
            chosen = explicit.get(listener.name)
            if chosen is None:
                host = listener.host
                if host in ("", "0.0.0.0", "::"):
                    host = "localhost"
                chosen = Listener(listener.name, listener.security_protocol, host, listener.port)
            if chosen.port == 0:
                port = bound_ports.get(listener.name, 0)
                chosen = Listener(chosen.name, chosen.security_protocol, chosen.host, port)
            result.append(chosen)
        return result

    @property
    def log_dirs(self) -> list[str]:
        text = self.get("log.dirs") or self.get("log.dir")
        return [d.strip() for d in text.split(",") if d.strip()]

    @property
    def metadata_log_dir(self) -> str:
        return self.get("metadata.log.dir") or self.log_dirs[0]

    def resolve_synonyms(self, synonyms: Iterable[Synonym]) -> tuple[Any, str | None, ConfigSource]:
        """The first set synonym's value scaled to the topic unit, else the last one's default."""
        synonyms = list(synonyms)
        for synonym in synonyms:
            if self.is_set(synonym.name) and self.get(synonym.name) is not None:
                return self._scaled(synonym), synonym.name, self.source(synonym.name)
        for synonym in reversed(synonyms):
            if BROKER_CONFIGS[synonym.name].default is not None:
                return self._scaled(synonym), synonym.name, ConfigSource.DEFAULT_CONFIG
        return None, None, ConfigSource.DEFAULT_CONFIG

    def _scaled(self, synonym: Synonym):
        value = self.get(synonym.name)
        return value * synonym.scale if synonym.scale != 1 and value is not None else value

    def topic_default(self, name: str) -> Any:
        definition = TOPIC_CONFIGS[name]
        if not definition.synonyms:
            return definition.default
        return self.resolve_synonyms(definition.synonyms)[0]

    def topic_defaults(self) -> dict[str, Any]:
        """Every topic config resolved against this broker's configuration (storage defaults)."""
        return {name: self.topic_default(name) for name in TOPIC_CONFIGS}

    def topic_config(self, overrides: Mapping[str, str]) -> dict[str, Any]:
        """A topic's effective configuration given its (string) overrides from the metadata image."""
        effective = self.topic_defaults()
        for name, text in overrides.items():
            definition = TOPIC_CONFIGS.get(name)
            if definition is None or text is None:
                continue
            try:
                effective[name] = _parse_checked(name, definition.type, definition.validator, text)
            except ConfigError:
                continue
        return effective

    # ---- DescribeConfigs
    def _dynamic_synonyms(self, name: str) -> list[tuple[str, str | None, ConfigSource]]:
        out = []
        if name in self._dynamic_broker:
            out.append((name, render(self._dynamic_broker[name]),
                        ConfigSource.DYNAMIC_BROKER_CONFIG))
        if name in self._dynamic_default:
            out.append((name, render(self._dynamic_default[name]),
                        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG))
        return out

    def describe_dynamic_defaults(self) -> list[DescribedConfig]:
        """The broker resource "" (cluster-wide dynamic defaults): only what is set."""
        return [DescribedConfig(name, render(value), ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
                                False, BROKER_CONFIGS[name].sensitive, BROKER_CONFIGS[name].type,
                                [(name, render(value), ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)])
                for name, value in sorted(self._dynamic_default.items())]

    def describe(self, names: Iterable[str] | None = None) -> list[DescribedConfig]:
        """Broker resource entries (all keys when names is None; unknown names are skipped)."""
        selected = BROKER_CONFIGS if names is None else [n for n in names if n in BROKER_CONFIGS]
        entries = []
        for name in selected:
            definition = BROKER_CONFIGS[name]
            synonyms = self._dynamic_synonyms(name)
            if name in self._static:
                synonyms.append((name, render(self._static[name]),
                                 ConfigSource.STATIC_BROKER_CONFIG))
            if definition.default is not None:
                synonyms.append((name, render(definition.default), ConfigSource.DEFAULT_CONFIG))
            value = render(self.get(name))
            entries.append(DescribedConfig(
                name=name,
                value=None if definition.sensitive else value,
                source=self.source(name),
                read_only=not definition.dynamic,
                sensitive=definition.sensitive,
                type=definition.type,
                synonyms=synonyms,
            ))
        return entries

    def describe_topic(self, overrides: Mapping[str, str],
                       names: Iterable[str] | None = None) -> list[DescribedConfig]:
        """Topic resource entries: overrides are DYNAMIC_TOPIC_CONFIG, then broker synonyms."""
        selected = TOPIC_CONFIGS if names is None else [n for n in names if n in TOPIC_CONFIGS]
        entries = []
        for name in selected:
            definition = TOPIC_CONFIGS[name]
            synonyms: list[tuple[str, str | None, ConfigSource]] = []
            if name in overrides:
                synonyms.append((name, overrides[name], ConfigSource.DYNAMIC_TOPIC_CONFIG))
            for synonym in definition.synonyms:
                synonyms += self._dynamic_synonyms(synonym.name)
                if synonym.name in self._static:
                    synonyms.append((synonym.name, render(self._static[synonym.name]),
                                     ConfigSource.STATIC_BROKER_CONFIG))
                default = BROKER_CONFIGS[synonym.name].default
                if default is not None:
                    synonyms.append((synonym.name, render(default), ConfigSource.DEFAULT_CONFIG))
            if name in overrides:
                value, source = overrides[name], ConfigSource.DYNAMIC_TOPIC_CONFIG
            elif definition.synonyms:
                resolved, _, source = self.resolve_synonyms(definition.synonyms)
                value = render(resolved)
            else:
                value, source = render(definition.default), ConfigSource.DEFAULT_CONFIG
            entries.append(DescribedConfig(name, value, source, False, False, definition.type,
                                           synonyms))
        return entries


# ------------------------------------------------------------------------------ properties parsing

def parse_properties(text: str) -> dict[str, str]:
    """Parse java.util.Properties text: comments (# !), ``=``/``:``/space separators, line
    continuations with a trailing backslash, and backslash escapes (\\t \\n \\uXXXX ...)."""
    result: dict[str, str] = {}
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index].lstrip()
        index += 1
        if not line or line[0] in "#!":
            continue
        while _ends_with_continuation(line) and index < len(lines):
            line = line[:-1] + lines[index].lstrip()
            index += 1
        if _ends_with_continuation(line):
            line = line[:-1]
        key, value = _split_property(line)
        result[_unescape(key)] = _unescape(value)
    return result


def _ends_with_continuation(line: str) -> bool:
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def _split_property(line: str) -> tuple[str, str]:
    position = 0
    while position < len(line):
        char = line[position]
        if char == "\\":
            position += 2
            continue
        if char in "=: \t\f":
            key = line[:position]
            rest = line[position:].lstrip(" \t\f")
            if rest[:1] in ("=", ":") and char in " \t\f":
                rest = rest[1:].lstrip(" \t\f")
            elif char in "=:":
                rest = rest[1:].lstrip(" \t\f")
            return key, rest
        position += 1
    return line, ""


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out = []
    position = 0
    while position < len(text):
        char = text[position]
        if char == "\\" and position + 1 < len(text):
            nxt = text[position + 1]
            if nxt == "u" and position + 6 <= len(text):
                try:
                    out.append(chr(int(text[position + 2:position + 6], 16)))
                    position += 6
                    continue
                except ValueError:
                    pass
            out.append(_ESCAPES.get(nxt, nxt))
            position += 2
            continue
        out.append(char)
        position += 1
    return "".join(out)
