"""``odradek configs describe|alter``: broker and topic configuration (DescribeConfigs,
IncrementalAlterConfigs)."""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass

from protocol import messages

from broker.admin.client import API, KafkaClient, KafkaError, check
from broker.admin.common import parse_pairs, runs
from broker.admin.output import emit_json, info, table

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
RESOURCE_NAMES = {TOPIC: "topic", BROKER: "broker", BROKER_LOGGER: "broker-logger"}
SOURCES = {0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
           3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG",
           6: "DYNAMIC_BROKER_LOGGER_CONFIG", 7: "CLIENT_METRICS_CONFIG", 8: "GROUP_CONFIG"}
DYNAMIC_SOURCES = {"DYNAMIC_TOPIC_CONFIG", "DYNAMIC_BROKER_CONFIG", "DYNAMIC_DEFAULT_BROKER_CONFIG"}
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


@dataclass
class ConfigEntry:
    name: str
    value: str | None
    source: str
    read_only: bool
    sensitive: bool


def describe_configs(client: KafkaClient, resource_type: int, name: str,
                     keys: list[str] | None = None) -> list[ConfigEntry]:
    """One resource's configs; broker (and broker-logger) resources go to that broker
    ("" = the cluster-wide broker defaults)."""
    per_broker = resource_type in (BROKER, BROKER_LOGGER) and name
    conn = client.node(int(name)) if per_broker else client.any_broker()

    def build(version: int):
        resource = messages.DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=resource_type, resource_name=name, configuration_keys=keys)
        return messages.DescribeConfigsRequest(resources=[resource], include_synonyms=False)

    version, resp = conn.request(API.DESCRIBE_CONFIGS, build, max_version=4)
    (result,) = resp.results
    check(result.error_code, result.error_message,
          f"{RESOURCE_NAMES.get(resource_type, resource_type)} {name or '<default>'}")
    entries = []
    for c in result.configs:
        if version >= 1:
            source = SOURCES.get(c.config_source, str(c.config_source))
        else:
            source = "DEFAULT_CONFIG" if c.is_default else "UNKNOWN"
        entries.append(ConfigEntry(c.name, c.value, source, c.read_only, c.is_sensitive))
    return sorted(entries, key=lambda e: e.name)


def alter_configs(client: KafkaClient, resource_type: int, name: str, *,
                  set_: dict[str, str] | None = None, delete: list[str] | None = None,
                  validate_only: bool = False) -> None:
    """Incrementally set and delete configs of one resource; raises KafkaError on rejection."""
    ops = [(k, SET, v) for k, v in (set_ or {}).items()] + [(k, DELETE, None) for k in delete or []]
    if not ops:
        raise ValueError("nothing to alter: give --set KEY=VALUE and/or --delete KEY")
    per_broker = resource_type in (BROKER, BROKER_LOGGER) and name
    conn = client.node(int(name)) if per_broker else client.any_broker()
    req = messages.IncrementalAlterConfigsRequest
    resource = req.AlterConfigsResource(
        resource_type=resource_type, resource_name=name,
        configs=[req.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops])
    _, resp = conn.request(API.INCREMENTAL_ALTER_CONFIGS,
                           req(resources=[resource], validate_only=validate_only), max_version=1)
    for r in resp.responses:
        check(r.error_code, r.error_message,
              f"{RESOURCE_NAMES.get(resource_type, resource_type)} {name or '<default>'}")


def _resource(args: argparse.Namespace) -> tuple[int, str]:
    if args.topic:
        return TOPIC, args.topic
    if args.broker_logger is not None:
        return BROKER_LOGGER, str(args.broker_logger)
    if args.broker_defaults:
        return BROKER, ""
    return BROKER, str(args.broker)


def _describe(client: KafkaClient, args: argparse.Namespace) -> int:
    rtype, name = _resource(args)
    entries = describe_configs(client, rtype, name, args.key or None)
    if not args.all and not args.key and rtype != BROKER_LOGGER:  # logger levels: all of them
        entries = [e for e in entries if e.source in DYNAMIC_SOURCES]
    if args.json:
        emit_json({"resource_type": RESOURCE_NAMES[rtype], "resource_name": name,
                   "configs": [asdict(e) for e in entries]})
        return 0
    if not entries:
        info(f"no dynamic configs on {RESOURCE_NAMES[rtype]} {name or '<default>'} "
             "(use --all for every config)")
        return 0
    table(["NAME", "VALUE", "SOURCE", "READ-ONLY", "SENSITIVE"],
          [(e.name, "******" if e.sensitive else e.value, e.source, str(e.read_only).lower(),
            str(e.sensitive).lower()) for e in entries])
    return 0


def _alter(client: KafkaClient, args: argparse.Namespace) -> int:
    rtype, name = _resource(args)
    sets = parse_pairs(args.set)
    alter_configs(client, rtype, name, set_=sets, delete=args.delete,
                  validate_only=args.validate_only)
    what = f"{RESOURCE_NAMES[rtype]} {name or '<default>'}"
    if args.json:
        emit_json({"resource_type": RESOURCE_NAMES[rtype], "resource_name": name,
                   "set": sets, "deleted": args.delete or [], "validate_only": args.validate_only})
    else:
        verb = "Validated" if args.validate_only else "Altered"
        print(f"{verb} configs of {what}: "
              + ", ".join([f"{k}={v}" for k, v in sets.items()]
                          + [f"-{k}" for k in args.delete or []]))
    return 0


def _target(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--topic", "-t", help="a topic")
    group.add_argument("--broker", type=int, metavar="ID", help="a broker by node id")
    group.add_argument("--broker-defaults", action="store_true",
                       help="the cluster-wide dynamic broker defaults")
    group.add_argument("--broker-logger", type=int, metavar="ID",
                       help="a broker's log levels (Kafka's broker-loggers)")


def add_commands(subparsers, common: argparse.ArgumentParser) -> None:
    configs = subparsers.add_parser("configs", help="describe or alter broker and topic configs")
    sub = configs.add_subparsers(dest="configs_command", required=True)

    describe = sub.add_parser("describe", parents=[common], help="show configs")
    _target(describe)
    describe.add_argument("--all", action="store_true",
                          help="every config, not only dynamic overrides")
    describe.add_argument("--key", action="append", metavar="NAME", help="only these configs")
    describe.set_defaults(func=runs(_describe))

    alter = sub.add_parser("alter", parents=[common], help="set or delete dynamic configs")
    _target(alter)
    alter.add_argument("--set", action="append", metavar="KEY=VALUE", help="set a config")
    alter.add_argument("--delete", action="append", metavar="KEY", help="remove an override")
    alter.add_argument("--validate-only", action="store_true", help="check without applying")
    alter.set_defaults(func=runs(_alter))


__all__ = ["ConfigEntry", "describe_configs", "alter_configs", "add_commands", "KafkaError"]
