"""``odradek quotas describe|alter``: client quotas (DescribeClientQuotas, AlterClientQuotas).

The entity flags are kafka-configs' shorthands: ``--user NAME`` / ``--user-defaults``,
``--client NAME`` / ``--client-defaults``, ``--ip ADDR`` / ``--ip-defaults``; values go in with
``--add-config producer_byte_rate=1048576,consumer_byte_rate=2097152`` and out with
``--delete-config request_percentage``. ``describe`` with no entity lists every quota; with one,
only that exact entity (as ``kafka-configs --describe``).
"""

from __future__ import annotations

import argparse

from protocol import messages

from broker.admin.client import KafkaClient, check
from broker.admin.common import runs
from broker.admin.output import emit_json, info, table

DESCRIBE_CLIENT_QUOTAS, ALTER_CLIENT_QUOTAS = 48, 49
MATCH_EXACT, MATCH_DEFAULT = 0, 1
DEFAULT = "<default>"


def describe_quotas(client: KafkaClient, entity: list[tuple[str, str | None]] | None = None,
                    strict: bool | None = None) -> list[dict]:
    """[{"entity": {type: name or None}, "values": {key: value}}], sorted by entity."""
    request = messages.DescribeClientQuotasRequest
    components = [request.ComponentData(entity_type=t, match_type=MATCH_DEFAULT if n is None
                                        else MATCH_EXACT, match=n) for t, n in entity or []]
    _, response = client.any_broker().request(
        DESCRIBE_CLIENT_QUOTAS, request(components=components,
                                        strict=bool(entity) if strict is None else strict),
        max_version=1)
    check(response.error_code, response.error_message, "describe client quotas")
    found = [{"entity": {e.entity_type: e.entity_name for e in entry.entity},
              "values": {v.key: v.value for v in entry.values}} for entry in response.entries or []]
    return sorted(found, key=lambda q: entity_label(q["entity"]))


def alter_quotas(client: KafkaClient, entity: list[tuple[str, str | None]], *,
                 add: dict[str, float] | None = None, delete: list[str] | None = None,
                 validate_only: bool = False) -> None:
    """Set and remove quota values of one entity; raises KafkaError when refused."""
    request = messages.AlterClientQuotasRequest
    ops = [request.OpData(key=k, value=float(v), remove=False) for k, v in (add or {}).items()]
    ops += [request.OpData(key=k, value=0.0, remove=True) for k in delete or []]
    if not entity:
        raise ValueError("give an entity: --user/--user-defaults, --client/--client-defaults "
                         "or --ip/--ip-defaults")
    if not ops:
        raise ValueError("nothing to alter: give --add-config and/or --delete-config")
    entry = request.EntryData(entity=[request.EntityData(entity_type=t, entity_name=n)
                                      for t, n in entity], ops=ops)
    _, response = client.any_broker().request(
        ALTER_CLIENT_QUOTAS, request(entries=[entry], validate_only=validate_only), max_version=1)
    for result in response.entries:
        check(result.error_code, result.error_message, entity_label(dict(entity)))


def entity_label(entity: dict) -> str:
    order = {"user": 0, "client-id": 1, "ip": 2}
    return ", ".join(f"{t}={DEFAULT if n is None else n}"
                     for t, n in sorted(entity.items(), key=lambda kv: order.get(kv[0], 3)))


def _entity(args: argparse.Namespace) -> list[tuple[str, str | None]]:
    entity: list[tuple[str, str | None]] = []
    for entity_type, name, default in (("user", args.user, args.user_defaults),
                                       ("client-id", args.client, args.client_defaults),
                                       ("ip", args.ip, args.ip_defaults)):
        if name is not None and default:
            raise ValueError(f"give either a {entity_type} name or its defaults, not both")
        if name is not None or default:
            entity.append((entity_type, name))
    return entity


def _parse_add(items: list[str] | None) -> dict[str, float]:
    out: dict[str, float] = {}
    for item in items or []:
        for pair in filter(None, (p.strip() for p in item.split(","))):
            key, sep, value = pair.partition("=")
            if not sep or not key:
                raise ValueError(f"quota {pair!r} is not KEY=VALUE")
            try:
                out[key.strip()] = float(value)
            except ValueError:
                raise ValueError(f"quota {key.strip()}: {value!r} is not a number") from None
    return out


def _describe(client: KafkaClient, args: argparse.Namespace) -> int:
    quotas = describe_quotas(client, _entity(args))
    if args.json:
        emit_json({"quotas": quotas})
        return 0
    if not quotas:
        info("no client quotas match")
        return 0
    table(["ENTITY", "QUOTA", "VALUE"],
          [(entity_label(q["entity"]), key, _number(value))
           for q in quotas for key, value in sorted(q["values"].items())])
    return 0


def _alter(client: KafkaClient, args: argparse.Namespace) -> int:
    entity = _entity(args)
    add = _parse_add(args.add_config)
    delete = [k.strip() for item in args.delete_config or [] for k in item.split(",") if k.strip()]
    alter_quotas(client, entity, add=add, delete=delete, validate_only=args.validate_only)
    if args.json:
        emit_json({"entity": {t: n for t, n in entity}, "added": add, "deleted": delete,
                   "validate_only": args.validate_only})
    else:
        verb = "Validated" if args.validate_only else "Altered"
        print(f"{verb} client quotas of {entity_label(dict(entity))}: "
              + ", ".join([f"{k}={_number(v)}" for k, v in add.items()] + [f"-{k}" for k in delete]))
    return 0


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _entity_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--user", metavar="NAME", help="a user (principal name)")
    parser.add_argument("--user-defaults", action="store_true", help="the default user entity")
    parser.add_argument("--client", metavar="CLIENT_ID", help="a client id")
    parser.add_argument("--client-defaults", action="store_true",
                        help="the default client-id entity")
    parser.add_argument("--ip", metavar="ADDRESS", help="a client IP address")
    parser.add_argument("--ip-defaults", action="store_true", help="the default IP entity")


def add_commands(subparsers, common: argparse.ArgumentParser) -> None:
    quotas = subparsers.add_parser("quotas", help="describe or alter client quotas")
    sub = quotas.add_subparsers(dest="quotas_command", required=True)

    describe = sub.add_parser("describe", parents=[common],
                              help="show client quotas (all, or one entity's)")
    _entity_options(describe)
    describe.set_defaults(func=runs(_describe))

    alter = sub.add_parser("alter", parents=[common], help="set or remove client quotas")
    _entity_options(alter)
    alter.add_argument("--add-config", action="append", metavar="KEY=VALUE[,KEY=VALUE]",
                       help="producer_byte_rate, consumer_byte_rate, request_percentage, "
                            "controller_mutation_rate (ip: connection_creation_rate)")
    alter.add_argument("--delete-config", action="append", metavar="KEY[,KEY]",
                       help="remove these quota keys")
    alter.add_argument("--validate-only", action="store_true", help="check without applying")
    alter.set_defaults(func=runs(_alter))


__all__ = ["describe_quotas", "alter_quotas", "add_commands"]
