"""``odradek acls create|list|delete``: ACLs with kafka-acls' options (CreateAcls, DescribeAcls,
DeleteAcls).

    odradek acls create --allow-principal User:alice --operation Read --operation Describe \\
        --topic orders [--resource-pattern-type prefixed] [--allow-host 10.0.0.1]
    odradek acls list [--topic orders] [--principal User:alice] [--resource-pattern-type match]
    odradek acls delete --allow-principal User:alice --operation Read --topic orders
    odradek acls create --allow-principal User:svc --producer --idempotent --topic orders
    odradek acls create --allow-principal User:svc --consumer --topic orders --group billing

Resources: ``--topic``, ``--group``, ``--transactional-id`` (repeatable), ``--cluster``,
``--delegation-token``, ``--user-principal``. Operations and pattern types are Kafka's names in
any case (``Read``, ``IdempotentWrite`` or ``IDEMPOTENT_WRITE``). ``create`` stores one ACL per
principal × host × operation × resource; ``list`` and ``delete`` take the same options as a filter
(anything left out matches everything).
"""

from __future__ import annotations

import argparse

from protocol import messages

from broker.admin.client import KafkaClient, check
from broker.admin.common import runs
from broker.admin.output import emit_json, info, table
from broker.security.acls import (
    CLUSTER_NAME, AclOperation, AclPermissionType, PatternType, ResourceType,
)

DESCRIBE, CREATE, DELETE = 29, 30, 31


def _enum_value(kind, text: str):
    key = text.replace("-", "_").upper()
    compact = {member.name.replace("_", ""): member for member in kind}
    if key in kind.__members__:
        return kind[key]
    if key.replace("_", "") in compact:
        return compact[key.replace("_", "")]
    raise ValueError(f"unknown {kind.__name__} {text!r}: one of "
                     f"{', '.join(m.name for m in kind if m.name != 'UNKNOWN')}")


def _resources(args) -> list[tuple[ResourceType, str]]:
    out = [(ResourceType.TOPIC, t) for t in args.topic or []]
    out += [(ResourceType.GROUP, g) for g in args.group or []]
    out += [(ResourceType.TRANSACTIONAL_ID, t) for t in args.transactional_id or []]
    out += [(ResourceType.DELEGATION_TOKEN, t) for t in args.delegation_token or []]
    out += [(ResourceType.USER, u) for u in args.user_principal or []]
    if args.cluster:
        out.append((ResourceType.CLUSTER, CLUSTER_NAME))
    return out


def _entries(args, hosts_default):
    """(principal, host, permission) for every --allow/--deny principal and host."""
    out = []
    for principals, hosts, permission in (
            (args.allow_principal, args.allow_host, AclPermissionType.ALLOW),
            (args.deny_principal, args.deny_host, AclPermissionType.DENY)):
        for principal in principals or []:
            for host in (hosts or args.host or hosts_default):
                out.append((principal, host, permission))
    return out


def _operations(args, default):
    return [_enum_value(AclOperation, op) for op in args.operation] if args.operation else default


def _planned(args, default_operations) -> list[tuple[ResourceType, str, AclOperation]]:
    """(resource type, name, operation) to create or delete: the named resources × --operation,
    or kafka-acls' --producer / --consumer sets."""
    if not (args.producer or args.consumer):
        return [(rtype, name, op) for rtype, name in _resources(args)
                for op in _operations(args, default_operations)]
    if args.operation:
        raise ValueError("--producer/--consumer choose the operations; leave out --operation")
    topics = args.topic or []
    if not topics:
        raise ValueError("--producer and --consumer need --topic")
    out = []
    if args.producer:
        out += [(ResourceType.TOPIC, t, op) for t in topics
                for op in (AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE)]
        out += [(ResourceType.TRANSACTIONAL_ID, t, op) for t in args.transactional_id or []
                for op in (AclOperation.WRITE, AclOperation.DESCRIBE)]
        if args.idempotent:
            out.append((ResourceType.CLUSTER, CLUSTER_NAME, AclOperation.IDEMPOTENT_WRITE))
    if args.consumer:
        if not args.group:
            raise ValueError("--consumer needs --group")
        out += [(ResourceType.TOPIC, t, op) for t in topics
                for op in (AclOperation.READ, AclOperation.DESCRIBE)]
        out += [(ResourceType.GROUP, g, AclOperation.READ) for g in args.group]
    return list(dict.fromkeys(out))


def _pattern(args, default: PatternType) -> PatternType:
    return _enum_value(PatternType, args.resource_pattern_type) if args.resource_pattern_type \
        else default


def _row(resource_type, name, pattern_type, principal, host, operation, permission) -> dict:
    return {"resource_type": ResourceType(resource_type).name, "resource_name": name,
            "pattern_type": PatternType(pattern_type).name, "principal": principal,
            "host": host, "operation": AclOperation(operation).name,
            "permission": AclPermissionType(permission).name}


def _print(rows: list[dict], args) -> None:
    if args.json:
        emit_json(rows)
        return
    table(["PRINCIPAL", "HOST", "OPERATION", "PERMISSION", "RESOURCE_TYPE", "RESOURCE", "PATTERN"],
          [(r["principal"], r["host"], r["operation"], r["permission"], r["resource_type"],
            r["resource_name"], r["pattern_type"]) for r in rows])


def _create(client: KafkaClient, args: argparse.Namespace) -> int:
    planned = _planned(args, [AclOperation.ALL])
    entries = _entries(args, ["*"])
    if not planned:
        raise ValueError("name a resource: --topic, --group, --cluster, --transactional-id, ...")
    if not entries:
        raise ValueError("name a principal: --allow-principal or --deny-principal")
    pattern = _pattern(args, PatternType.LITERAL)
    Request = messages.CreateAclsRequest
    creations = [Request.AclCreation(resource_type=rtype, resource_name=name,
                                     resource_pattern_type=pattern, principal=principal, host=host,
                                     operation=operation, permission_type=permission)
                 for rtype, name, operation in planned for principal, host, permission in entries]
    _, response = client.any_broker().request(CREATE, Request(creations=creations))
    rows = []
    for creation, result in zip(creations, response.results):
        row = _row(creation.resource_type, creation.resource_name, pattern, creation.principal,
                   creation.host, creation.operation, creation.permission_type)
        check(result.error_code, result.error_message,
              f"ACL {row['permission']} {row['principal']} {row['operation']} on "
              f"{row['resource_type']}:{row['resource_name']}")
        rows.append(row)
    if args.json:
        emit_json(rows)
    else:
        info(f"created {len(rows)} ACL(s)")
    return 0


def _filters(args, pattern_default: PatternType) -> list[dict]:
    """Filter fields for every (resource, entry, operation) the options name; unnamed = any."""
    planned = _planned(args, [AclOperation.ANY]) or [(ResourceType.ANY, None, AclOperation.ANY)]
    entries = _entries(args, [None]) or [(args.principal, (args.host or [None])[0],
                                          AclPermissionType.ANY)]
    pattern = _pattern(args, pattern_default if _resources(args) else PatternType.ANY)
    return [dict(resource_type_filter=rtype, resource_name_filter=name,
                 pattern_type_filter=pattern, principal_filter=principal, host_filter=host,
                 operation=operation, permission_type=permission)
            for rtype, name, operation in planned for principal, host, permission in entries]


def _list(client: KafkaClient, args: argparse.Namespace) -> int:
    rows = []
    for fields in _filters(args, PatternType.LITERAL):
        _, response = client.any_broker().request(DESCRIBE, messages.DescribeAclsRequest(**fields))
        check(response.error_code, response.error_message, "describe ACLs")
        for resource in response.resources:
            for acl in resource.acls:
                rows.append(_row(resource.resource_type, resource.resource_name,
                                 resource.pattern_type, acl.principal, acl.host, acl.operation,
                                 acl.permission_type))
    unique = {tuple(sorted(r.items())): r for r in rows}
    _print(sorted(unique.values(), key=lambda r: (r["resource_type"], r["resource_name"],
                                                  r["principal"], r["operation"])), args)
    return 0


def _delete(client: KafkaClient, args: argparse.Namespace) -> int:
    if not (_resources(args) or args.allow_principal or args.deny_principal or args.principal):
        raise ValueError("deleting every ACL needs at least a resource or a principal")
    Request = messages.DeleteAclsRequest
    filters = [Request.DeleteAclsFilter(**fields) for fields in _filters(args, PatternType.LITERAL)]
    _, response = client.any_broker().request(DELETE, Request(filters=filters))
    rows = []
    for result in response.filter_results:
        check(result.error_code, result.error_message, "delete ACLs")
        rows += [_row(a.resource_type, a.resource_name, a.pattern_type, a.principal, a.host,
                      a.operation, a.permission_type) for a in result.matching_acls]
    if args.json:
        emit_json(rows)
    else:
        _print(rows, args)
        info(f"deleted {len(rows)} ACL(s)")
    return 0


def add_commands(subparsers, common: argparse.ArgumentParser) -> None:
    acls = subparsers.add_parser("acls", help="access control lists (kafka-acls)")
    sub = acls.add_subparsers(dest="acls_command", required=True)
    for name, handler, help_text in (("create", _create, "add ACLs"),
                                     ("list", _list, "list ACLs matching the options"),
                                     ("delete", _delete, "remove the ACLs matching the options")):
        parser = sub.add_parser(name, parents=[common], help=help_text)
        resources = parser.add_argument_group("resources")
        resources.add_argument("--topic", action="append", metavar="NAME")
        resources.add_argument("--group", action="append", metavar="NAME")
        resources.add_argument("--transactional-id", action="append", metavar="ID")
        resources.add_argument("--delegation-token", action="append", metavar="ID")
        resources.add_argument("--user-principal", action="append", metavar="PRINCIPAL")
        resources.add_argument("--cluster", action="store_true")
        resources.add_argument("--resource-pattern-type", metavar="TYPE",
                               help="literal (default) or prefixed; list/delete also take "
                                    "any and match")
        parser.add_argument("--allow-principal", action="append", metavar="TYPE:NAME")
        parser.add_argument("--deny-principal", action="append", metavar="TYPE:NAME")
        parser.add_argument("--allow-host", action="append", metavar="HOST")
        parser.add_argument("--deny-host", action="append", metavar="HOST")
        parser.add_argument("--host", action="append", metavar="HOST",
                            help="host for allow and deny entries (default *)")
        parser.add_argument("--operation", action="append", metavar="OP",
                            help="repeatable; Read, Write, Create, Delete, Alter, Describe, "
                                 "ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, "
                                 "All (create's default)")
        parser.add_argument("--principal", metavar="TYPE:NAME",
                            help="list/delete: only ACLs of this principal")
        if name != "list":
            parser.add_argument("--producer", action="store_true",
                                help="WRITE, DESCRIBE, CREATE on --topic (and WRITE, DESCRIBE on "
                                     "--transactional-id)")
            parser.add_argument("--idempotent", action="store_true",
                                help="with --producer: IDEMPOTENT_WRITE on the cluster")
            parser.add_argument("--consumer", action="store_true",
                                help="READ, DESCRIBE on --topic and READ on --group")
        else:
            parser.set_defaults(producer=False, consumer=False, idempotent=False)
        parser.set_defaults(func=runs(handler))
