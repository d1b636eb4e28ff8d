"""Dynamic config changes (AlterConfigs and IncrementalAlterConfigs) turned into ConfigRecords."""

from __future__ import annotations

from typing import Callable, Mapping

from broker.config.broker_catalog import BROKER_CONFIGS
from broker.config.topic_catalog import TOPIC_CONFIGS
from broker.config.values import ConfigType, render

from . import records as r
from .errors import ApiError, ErrorCode
from .image import (BROKER_RESOURCE, CLIENT_METRICS_RESOURCE, GROUP_RESOURCE, TOPIC_RESOURCE,
                    MetadataImage)

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

ConfigValidator = Callable[[int, str, Mapping[str, str]], None]


def current_configs(image: MetadataImage, resource_type: int, name: str) -> dict[str, str]:
    table = {TOPIC_RESOURCE: image.topic_configs, GROUP_RESOURCE: image.group_configs,
             CLIENT_METRICS_RESOURCE: image.client_metrics_configs}.get(resource_type,
                                                                        image.broker_configs)
    return dict(table.get(name, {}))


def check_resource(image: MetadataImage, resource_type: int, name: str) -> None:
    if resource_type == TOPIC_RESOURCE:
        if name not in image.topics:
            raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
    elif resource_type == BROKER_RESOURCE:
        if name != "" and not (name.isdigit() and int(name) >= 0):
            raise ApiError(ErrorCode.INVALID_REQUEST, f"Illegal non-integral BROKER resource type name {name}")
    elif resource_type == GROUP_RESOURCE:
        if not name:
            raise ApiError(ErrorCode.INVALID_REQUEST, "Group name must not be empty")
    elif resource_type == CLIENT_METRICS_RESOURCE:
        if not name:
            raise ApiError(ErrorCode.INVALID_REQUEST, "Subscription name can't be empty")
    else:
        raise ApiError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {resource_type}")


def run_validator(validator: ConfigValidator | None, resource_type: int, name: str,
                  configs: Mapping[str, str]) -> None:
    """The broker's validator raises ValueError (→ INVALID_CONFIG) or an ApiError of its choice."""
    if validator is None:
        return
    try:
        validator(resource_type, name, configs)
    except ApiError:
        raise
    except ValueError as exc:
        code = getattr(exc, "error_code", None) or ErrorCode.INVALID_CONFIG
        raise ApiError(code, str(exc) or None) from None


def diff_records(resource_type: int, name: str, before: Mapping[str, str],
                 after: Mapping[str, str]) -> list:
    """ConfigRecords turning `before` into `after` (value None deletes a key)."""
    out = []
    for key in sorted(set(before) | set(after)):
        if before.get(key) != after.get(key):
            out.append(r.ConfigRecord(resource_type=resource_type, resource_name=name, name=key,
                                      value=after.get(key)))
    return out


def config_pairs(configs) -> list[tuple[str, str | None]]:
    """AlterConfigs' (key, value) pairs, as sent (a key may come twice), from pairs or a mapping."""
    return list(configs.items()) if isinstance(configs, Mapping) else list(configs)


def apply_legacy(configs) -> dict[str, str]:
    """AlterConfigs replaces the whole dynamic config set of the resource with `configs`, (key,
    value) pairs or a mapping; a key given twice is INVALID_REQUEST, as Kafka's controller says."""
    pairs = config_pairs(configs)
    if len({key for key, _ in pairs}) != len(pairs):
        raise ApiError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
    for key, value in pairs:
        if value is None:
            raise ApiError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {key}")
    return dict(pairs)


def apply_incremental(resource_type: int, current: Mapping[str, str], ops) -> dict[str, str]:
    """Apply [(key, op, value)] to `current`; raises ApiError for bad or duplicate operations."""
    keys = [key for key, _, _ in ops]
    if len(keys) != len(set(keys)):
        raise ApiError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
    result = dict(current)
    for key, op, value in ops:
        if op == SET:
            if value is None:
                raise ApiError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {key}")
            result[key] = value
        elif op == DELETE:
            result.pop(key, None)
        elif op in (APPEND, SUBTRACT):
            result[key] = _appended(resource_type, key, result.get(key), op, value)
        else:
            raise ApiError(ErrorCode.INVALID_REQUEST, f"Unknown config operation {op} for {key}")
    return result


def _appended(resource_type: int, key: str, current: str | None, op: int, value: str | None) -> str:
    """A LIST config's value after APPEND or SUBTRACT of `value`'s items. Without a value of the
    resource's own it starts from the config's default (APPEND compact to a topic's default
    cleanup.policy gives delete,compact); taking the last item away leaves an empty list, as Kafka does."""
    default = _list_default(resource_type, key)
    if default is None:
        verb = "APPEND" if op == APPEND else "SUBTRACT"
        if resource_type == BROKER_RESOURCE:     # Kafka's broker checks these, its controller the rest
            raise ApiError(ErrorCode.INVALID_CONFIG,
                           f"Config value {verb.lower()} is not allowed for config key: {key}")
        raise ApiError(ErrorCode.INVALID_CONFIG, f"Can't {verb} to key {key} because its type is not LIST.")
    items = [x for x in (default if current is None else current).split(",") if x]
    changes = [x.strip() for x in (value or "").split(",") if x.strip()]
    if op == APPEND:
        items += [x for x in changes if x not in items]
    else:
        items = [x for x in items if x not in changes]
    return ",".join(items)


def _list_default(resource_type: int, key: str) -> str | None:
    """The default of a LIST config of this resource type, as text; None if it is no LIST config."""
    if resource_type == TOPIC_RESOURCE:
        definition = TOPIC_CONFIGS.get(key)
        if definition is None or definition.type != ConfigType.LIST:
            return None
        synonym = definition.synonyms[0].name if definition.synonyms else None
        return render(BROKER_CONFIGS[synonym].default if synonym else definition.default) or ""
    if resource_type == BROKER_RESOURCE:
        definition = BROKER_CONFIGS.get(key)
        if definition is None or definition.type != ConfigType.LIST:
            return None
        return render(definition.default) or ""
    return None
