"""Configs: DescribeConfigs (32) v0–v4 (v0: sarama 1.x), AlterConfigs (33) v0–v2, IncrementalAlterConfigs (44) v0–v1.

Descriptions come from ``broker.config`` (values, sources, synonyms); changes go through the controller,
which stores them in the metadata log and validates them with the broker's validator.
"""

from __future__ import annotations

import logging

from protocol import ErrorCode, messages

from broker.config.group_configs import describe_group_configs
from broker.config.values import ConfigSource
from broker.controller.errors import ApiError
from broker.handlers import common
from broker.security import access
from broker.security.acls import AclOperation, ResourceType

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
# Kafka's default text for INVALID_REQUEST, which it answers when the request carries no message
_INVALID_REQUEST_MESSAGE = ("This most likely occurs because of a request being malformed by the "
                            "client library or the message was sent to an incompatible broker. "
                            "See the broker logs for more details.")

# Which ACL resource guards a config resource, and the error a denial answers.
_GUARDED_BY = {TOPIC: ResourceType.TOPIC, GROUP: ResourceType.GROUP, BROKER: ResourceType.CLUSTER,
               BROKER_LOGGER: ResourceType.CLUSTER, CLIENT_METRICS: ResourceType.CLUSTER}


def _denied(ctx, operation: AclOperation, resource_type: int, name: str) -> int | None:
    """The *_AUTHORIZATION_FAILED code when `operation` on the config resource is denied."""
    guard = _GUARDED_BY.get(resource_type)
    if guard is None:
        return None   # an unknown type: INVALID_REQUEST, answered by the caller
    allowed = (access.cluster_allowed(ctx, operation) if guard == ResourceType.CLUSTER
               else access.allowed(ctx, operation, guard, name))
    return None if allowed else access.DENIED_ERROR[guard]


def _described_entries(ctx, resource_type: int, name: str, keys, include_synonyms: bool, version):
    """(error code, message, entries) for one DescribeConfigs resource."""
    config = ctx.config
    if resource_type == TOPIC:
        error = common.topic_name_error(name)
        if error is not None:
            return ErrorCode.INVALID_TOPIC_EXCEPTION, error, []
        image = ctx.image
        if name not in image.topics:
            # Kafka answers the code with an empty message; sarama (which reads only the message)
            # then reports no configs rather than an error
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "", []
        described = config.describe_topic(dict(image.topic_configs.get(name, {})), keys)
    elif resource_type == BROKER:
        if name == "":
            described = config.describe_dynamic_defaults()
            if keys is not None:
                described = [d for d in described if d.name in keys]
        elif name == str(ctx.node_id):
            described = config.describe(keys)
        else:
            return ErrorCode.INVALID_REQUEST, (f"Unexpected broker id, expected {ctx.node_id} or "
                                               f"empty string, but received {name}"), []
    elif resource_type == BROKER_LOGGER:
        if name != str(ctx.node_id):
            return ErrorCode.INVALID_REQUEST, f"Unexpected broker id {name}", []
        return ErrorCode.NONE, "", _logger_entries(keys)
    elif resource_type == GROUP:
        if not name:
            return ErrorCode.INVALID_REQUEST, "Group name must not be empty", []
        described = describe_group_configs(dict(ctx.image.group_configs.get(name, {})), keys)
    elif resource_type == CLIENT_METRICS:
        if not name:
            return ErrorCode.INVALID_REQUEST, "Client metrics subscription name must not be empty", []
        return ErrorCode.NONE, "", _client_metrics_entries(ctx.image, name, version)
    else:
        return ErrorCode.INVALID_REQUEST, f"Unsupported resource type {resource_type}", []

    Entry = messages.DescribeConfigsResponse.DescribeConfigsResourceResult
    Synonym = messages.DescribeConfigsResponse.DescribeConfigsSynonym
    entries = []
    for d in described:
        entry = Entry(name=d.name, value=d.value, read_only=d.read_only,
                      config_source=int(d.source), is_sensitive=d.sensitive,
                      synonyms=[Synonym(name=n, value=v, source=int(s)) for n, v, s in d.synonyms]
                      if include_synonyms else [])
        if version >= 3:
            entry.config_type = int(d.type)
            entry.documentation = None
        entries.append(entry)
    return ErrorCode.NONE, "", entries     # as Kafka: an empty message on success, never null


def _client_metrics_entries(image, name: str, version: int):
    """A subscription's configs as Kafka 3.9 describes them: only those set (none for an unknown
    name), whatever keys were asked for, without synonyms or a type, documentation "" (not null)."""
    Entry = messages.DescribeConfigsResponse.DescribeConfigsResourceResult
    entries = []
    for key, value in sorted(image.client_metrics_configs.get(name, {}).items()):
        entry = Entry(name=key, value=value, read_only=False,
                      config_source=int(ConfigSource.CLIENT_METRICS_CONFIG), is_sensitive=False,
                      synonyms=[])
        if version >= 3:
            entry.config_type, entry.documentation = 0, ""
        entries.append(entry)
    return entries


def _logger_entries(keys):
    Entry = messages.DescribeConfigsResponse.DescribeConfigsResourceResult
    names = ["root"] + sorted(n for n in logging.root.manager.loggerDict if n.startswith("odradek"))
    entries = []
    for name in names:
        if keys is not None and name not in keys:
            continue
        logger = logging.getLogger() if name == "root" else logging.getLogger(name)
        level = logging.getLevelName(logger.getEffectiveLevel())
        level = {"WARNING": "WARN", "CRITICAL": "FATAL", "NOTSET": "ALL"}.get(level, level)
        entries.append(Entry(name=name, value=level,
                             read_only=False, config_source=6, is_sensitive=False, synonyms=[]))
    return entries


async def handle_describe_configs(ctx, header, body):
    Response = messages.DescribeConfigsResponse
    if any(r.resource_type not in _GUARDED_BY for r in body.resources):
        # as Kafka: one resource of an unknown type fails the whole request
        return Response(throttle_time_ms=0, results=[Response.DescribeConfigsResult(
            error_code=ErrorCode.INVALID_REQUEST, error_message=_INVALID_REQUEST_MESSAGE,
            resource_type=r.resource_type, resource_name=r.resource_name, configs=[])
            for r in body.resources])
    results = []
    for resource in body.resources:
        # null or empty: every config (as Kafka; an empty answer breaks clients)
        keys = list(resource.configuration_keys) if resource.configuration_keys else None
        denied = _denied(ctx, AclOperation.DESCRIBE_CONFIGS, resource.resource_type,
                         resource.resource_name)
        if denied is not None:
            error, message, entries = denied, access.DENIED_MESSAGE[denied], []
        else:
            error, message, entries = _described_entries(
                ctx, resource.resource_type, resource.resource_name, keys, body.include_synonyms,
                header.api_version)
        results.append(Response.DescribeConfigsResult(
            error_code=error, error_message=message, resource_type=resource.resource_type,
            resource_name=resource.resource_name, configs=entries))
    return Response(throttle_time_ms=0, results=results)


def _check_alterable(ctx, resource_type: int, name: str) -> tuple[int, str] | None:
    if resource_type == TOPIC:
        return None   # the controller checks existence
    if resource_type == BROKER:
        if name in ("", str(ctx.node_id)):
            return None
        return ErrorCode.INVALID_REQUEST, f"Unexpected broker id {name}"
    if resource_type in (GROUP, CLIENT_METRICS):
        return None   # the controller checks the names and values (broker.config)
    if resource_type == BROKER_LOGGER:
        return ErrorCode.INVALID_REQUEST, \
            "Broker logger levels can only be changed with IncrementalAlterConfigs"
    return ErrorCode.INVALID_REQUEST, f"Unknown resource type {resource_type}"


async def _alter(ctx, resources, validate_only, call, response_class):
    Entry = response_class.AlterConfigsResourceResponse
    answers: list = [None] * len(resources)
    forwarded, positions = [], []
    for index, (resource_type, name, changes) in enumerate(resources):
        denied = _denied(ctx, AclOperation.ALTER_CONFIGS, resource_type, name)
        problem = (denied, access.DENIED_MESSAGE[denied]) if denied is not None \
            else _check_alterable(ctx, resource_type, name)
        if problem is not None:
            answers[index] = Entry(error_code=problem[0], error_message=problem[1],
                                   resource_type=resource_type, resource_name=name)
        else:
            forwarded.append((resource_type, name, changes))
            positions.append(index)
    if forwarded:
        try:
            results = await call(forwarded, validate_only=validate_only)
        except ApiError as exc:
            results = None
            for index in positions:
                resource_type, name, _ = resources[index]
                answers[index] = Entry(error_code=exc.code, error_message=exc.message,
                                       resource_type=resource_type, resource_name=name)
        if results is not None:
            for index, result in zip(positions, results):
                answers[index] = Entry(error_code=result.error_code,
                                       error_message=result.error_message,
                                       resource_type=result.resource_type,
                                       resource_name=result.resource_name)
    return response_class(throttle_time_ms=0, responses=answers)


async def handle_alter_configs(ctx, header, body):
    resources = [(r.resource_type, r.resource_name, [(c.name, c.value) for c in r.configs])
                 for r in body.resources]
    return await _alter(ctx, resources, body.validate_only, ctx.controller.alter_configs,
                        messages.AlterConfigsResponse)


_LOG_LEVELS = {"OFF": logging.CRITICAL + 10, "FATAL": logging.CRITICAL, "ERROR": logging.ERROR,
               "WARN": logging.WARNING, "INFO": logging.INFO, "DEBUG": logging.DEBUG,
               "TRACE": logging.DEBUG, "ALL": logging.NOTSET}


def _alter_loggers(ctx, resource, validate_only: bool):
    """BROKER_LOGGER: set (op 0) or reset (op 1) this process's log levels, as Kafka does."""
    Entry = messages.IncrementalAlterConfigsResponse.AlterConfigsResourceResponse

    def answer(code=ErrorCode.NONE, message=None):
        return Entry(error_code=code, error_message=message, resource_type=BROKER_LOGGER,
                     resource_name=resource.resource_name)

    denied = _denied(ctx, AclOperation.ALTER_CONFIGS, BROKER_LOGGER, resource.resource_name)
    if denied is not None:
        return answer(denied, access.DENIED_MESSAGE[denied])
    if resource.resource_name != str(ctx.node_id):
        return answer(ErrorCode.INVALID_REQUEST, f"Unexpected broker id {resource.resource_name}")
    changes = []
    for config in resource.configs:
        if config.config_operation == 0:
            level = _LOG_LEVELS.get((config.value or "").upper())
            if level is None:
                return answer(ErrorCode.INVALID_CONFIG,
                              f"Cannot set the log level of {config.name} to {config.value}")
        elif config.config_operation == 1:
            if config.name == "root":
                return answer(ErrorCode.INVALID_CONFIG, "Removing the log level of the root "
                              "logger is not allowed")
            level = logging.NOTSET
        else:
            return answer(ErrorCode.INVALID_CONFIG, "APPEND and SUBTRACT do not apply to loggers")
        changes.append((config.name, level))
    if not validate_only:
        for name, level in changes:
            (logging.getLogger() if name == "root" else logging.getLogger(name)).setLevel(level)
    return answer()


async def handle_incremental_alter_configs(ctx, header, body):
    Response = messages.IncrementalAlterConfigsResponse
    others = [r for r in body.resources if r.resource_type != BROKER_LOGGER]
    resources = [(r.resource_type, r.resource_name,
                  [(c.name, c.config_operation, c.value) for c in r.configs])
                 for r in others]
    altered = await _alter(ctx, resources, body.validate_only,
                           ctx.controller.incremental_alter_configs, Response)
    answers = iter(altered.responses)
    altered.responses = [_alter_loggers(ctx, r, body.validate_only)
                         if r.resource_type == BROKER_LOGGER else next(answers)
                         for r in body.resources]
    return altered


HANDLERS = {
    32: (0, 4, handle_describe_configs),
    33: (0, 2, handle_alter_configs),
    44: (0, 1, handle_incremental_alter_configs),
}
