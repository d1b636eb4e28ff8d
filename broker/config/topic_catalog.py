"""Per-topic config keys, each with the broker configs it falls back to (Kafka's synonyms)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from .values import (COMPRESSION_TYPES, TIMESTAMP_TYPES, ConfigError, ConfigType, Validator, at_least,
                     between, gzip_level, one_of, parse_checked)

T = ConfigType


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
    _topic("compression.type", T.STRING, "compression.type", validator=one_of(*COMPRESSION_TYPES)),
    _topic("compression.gzip.level", T.INT, "compression.gzip.level", validator=gzip_level),
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
           validator=one_of(*TIMESTAMP_TYPES)),
    _topic("min.cleanable.dirty.ratio", T.DOUBLE, "log.cleaner.min.cleanable.ratio",
           validator=between(0, 1)),
    _topic("min.compaction.lag.ms", T.LONG, "log.cleaner.min.compaction.lag.ms",
           validator=at_least(0)),
    _topic("min.insync.replicas", T.INT, "min.insync.replicas", validator=at_least(1)),
    _topic("preallocate", T.BOOLEAN, "log.preallocate"),
    _topic("remote.log.copy.disable", T.BOOLEAN, default=False),        # tiered storage: known,
    _topic("remote.log.delete.on.disable", T.BOOLEAN, default=False),   # not acted on
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
        parsed[name] = parse_checked(name, definition.type, definition.validator, text)
    return parsed
