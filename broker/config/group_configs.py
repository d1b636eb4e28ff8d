"""Kafka's group configs (ConfigResource type GROUP, KIP-848/KIP-932): per-group overrides set with
IncrementalAlterConfigs and stored in the metadata log. Of these, the share-group ones act
(`share.auto.offset.reset`, `share.record.lock.duration.ms`); the rest are stored and described."""

from __future__ import annotations

from typing import Mapping


class GroupConfigError(ValueError):
    """An unknown group config name or a bad value (INVALID_CONFIG)."""


def _positive_int(value: str) -> int:
    number = int(value)
    if number <= 0:
        raise ValueError
    return number


def _one_of(*choices):
    def check(value: str) -> str:
        if value not in choices:
            raise ValueError
        return value
    return check


# name -> (Kafka's default, parser)
GROUP_CONFIGS = {
    "consumer.session.timeout.ms": ("45000", _positive_int),
    "consumer.heartbeat.interval.ms": ("5000", _positive_int),
    "share.session.timeout.ms": ("45000", _positive_int),
    "share.heartbeat.interval.ms": ("5000", _positive_int),
    "share.record.lock.duration.ms": ("30000", _positive_int),
    "share.auto.offset.reset": ("latest", _one_of("latest", "earliest")),
    "share.isolation.level": ("read_uncommitted", _one_of("read_uncommitted", "read_committed")),
}


def validate_group_configs(configs: Mapping[str, str]) -> None:
    for name, value in configs.items():
        if name not in GROUP_CONFIGS:
            raise GroupConfigError(f"Unknown group config name: {name}")
        try:
            GROUP_CONFIGS[name][1](value)
        except ValueError:
            raise GroupConfigError(f"Invalid value {value} for configuration {name}") from None


def describe_group_configs(overrides: Mapping[str, str], names=None) -> list:
    """DescribeConfigs entries of a GROUP resource: its overrides (GROUP_CONFIG), else Kafka's defaults."""
    from .values import ConfigSource, ConfigType, DescribedConfig
    out = []
    for name in (n for n in GROUP_CONFIGS if names is None or n in names):
        default, parse = GROUP_CONFIGS[name]
        kind = ConfigType.INT if parse is _positive_int else ConfigType.STRING
        synonyms = [(name, default, ConfigSource.DEFAULT_CONFIG)]
        if name in overrides:
            synonyms.insert(0, (name, overrides[name], ConfigSource.GROUP_CONFIG))
        value, source = synonyms[0][1], synonyms[0][2]
        out.append(DescribedConfig(name, value, source, False, False, kind, synonyms))
    return out


def group_config(image, group_id: str, name: str) -> str:
    """The group's value of `name`: its override in the metadata image, else Kafka's default."""
    return dict(getattr(image, "group_configs", {}).get(group_id, {})).get(name, GROUP_CONFIGS[name][0])
