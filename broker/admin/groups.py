"""``odradek groups list|describe|reset-offsets|delete``: consumer groups, their members,
assignments, committed offsets and lag."""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass, field

from protocol import messages

from broker.admin.client import API, KafkaClient, KafkaError, check, error_name
from broker.admin.common import runs
from broker.admin.consumer_protocol import decode_assignment
from broker.admin.offsets import (EARLIEST, LATEST, list_offsets, parse_time, partitions_of)
from broker.admin.output import CommandFailed, emit_json, error, info, table

INACTIVE_STATES = {"Empty", "Dead"}


@dataclass
class ListedGroup:
    group_id: str
    state: str | None
    protocol_type: str
    coordinator: int
    group_type: str | None = None     # "classic" or "consumer" (KIP-848), from ListGroups v5


@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    assignment: dict[str, list[int]]
    member_epoch: int | None = None            # KIP-848 members only
    target_assignment: dict[str, list[int]] | None = None
    member_type: int | None = None             # ConsumerGroupDescribe v1+: 0 classic, 1 consumer protocol


@dataclass
class PartitionLag:
    topic: str
    partition: int
    committed: int | None
    log_end_offset: int | None
    lag: int | None
    member_id: str | None = None
    client_id: str | None = None
    client_host: str | None = None


@dataclass
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    coordinator: int | None
    members: list[Member] = field(default_factory=list)
    offsets: list[PartitionLag] = field(default_factory=list)
    group_type: str = "classic"
    group_epoch: int | None = None             # KIP-848 consumer groups only
    assignment_epoch: int | None = None


# --------------------------------------------------------------------------- operations


def list_groups(client: KafkaClient, states: list[str] | None = None) -> list[ListedGroup]:
    """Every broker lists the groups it coordinates; merge them."""
    meta = client.metadata([])
    out: dict[str, ListedGroup] = {}
    for node_id in sorted(meta.brokers):
        conn = client.node(node_id)

        def build(version: int):
            return messages.ListGroupsRequest(states_filter=states or []) if version >= 4 \
                else messages.ListGroupsRequest()

        version, resp = conn.request(API.LIST_GROUPS, build, max_version=5,
                                     min_version=4 if states else 0)
        check(resp.error_code, context=f"ListGroups on broker {node_id}")
        for g in resp.groups:
            out[g.group_id] = ListedGroup(g.group_id, g.group_state if version >= 4 else None,
                                          g.protocol_type, node_id, g.group_type if version >= 5 else None)
    return sorted(out.values(), key=lambda g: g.group_id)


def describe_consumer_group(client: KafkaClient, group_id: str) -> GroupDescription | None:
    """ConsumerGroupDescribe (KIP-848) at the coordinator; None when the id is not such a group."""
    conn = client.coordinator(group_id)
    if not conn.supports(API.CONSUMER_GROUP_DESCRIBE):
        return None
    _, resp = conn.request(API.CONSUMER_GROUP_DESCRIBE,
                           messages.ConsumerGroupDescribeRequest(group_ids=[group_id]), max_version=1)
    (g,) = resp.groups
    if g.error_code == 69:   # GROUP_ID_NOT_FOUND: unknown, or a classic group
        return None
    check(g.error_code, context=f"group {group_id}")

    def partitions(assignment) -> dict[str, list[int]]:
        return {tp.topic_name or str(tp.topic_id): sorted(tp.partitions) for tp in assignment.topic_partitions}

    members = [Member(m.member_id, m.instance_id, m.client_id, m.client_host, partitions(m.assignment),
                      m.member_epoch, partitions(m.target_assignment),
                      m.member_type if m.member_type >= 0 else None) for m in g.members]
    return GroupDescription(g.group_id, g.group_state, "consumer", g.assignor_name, conn.node_id, members,
                            group_type="consumer", group_epoch=g.group_epoch, assignment_epoch=g.assignment_epoch)


def describe_share_group(client: KafkaClient, group_id: str) -> GroupDescription | None:
    """ShareGroupDescribe (KIP-932) at the coordinator; None when the id is not a share group."""
    conn = client.coordinator(group_id)
    if not conn.supports(API.SHARE_GROUP_DESCRIBE):
        return None
    _, resp = conn.request(API.SHARE_GROUP_DESCRIBE, messages.ShareGroupDescribeRequest(group_ids=[group_id]),
                           min_version=1, max_version=1)
    (g,) = resp.groups
    if g.error_code == 69:   # GROUP_ID_NOT_FOUND: unknown, or another type of group
        return None
    check(g.error_code, context=f"group {group_id}")
    members = [Member(m.member_id, None, m.client_id, m.client_host,
                      {tp.topic_name or str(tp.topic_id): sorted(tp.partitions) for tp in m.assignment.topic_partitions},
                      m.member_epoch) for m in g.members]
    return GroupDescription(g.group_id, g.group_state, "share", g.assignor_name, conn.node_id, members,
                            group_type="share", group_epoch=g.group_epoch, assignment_epoch=g.assignment_epoch)


def describe_group(client: KafkaClient, group_id: str) -> tuple[GroupDescription, int]:
    """ConsumerGroupDescribe for a KIP-848 group, ShareGroupDescribe for a share group, else
    DescribeGroups at the coordinator; returns (description, error code)."""
    for typed in (describe_consumer_group, describe_share_group):
        described = typed(client, group_id)
        if described is not None:
            return described, 0
    conn = client.coordinator(group_id)
    _, resp = conn.request(API.DESCRIBE_GROUPS,
                           messages.DescribeGroupsRequest(groups=[group_id]), max_version=5)
    (g,) = resp.groups
    members = []
    for m in g.members:
        try:
            assignment = decode_assignment(m.member_assignment) \
                if g.protocol_type == "consumer" else {}
        except ValueError:
            assignment = {}
        members.append(Member(m.member_id, getattr(m, "group_instance_id", None), m.client_id,
                              m.client_host, assignment))
    return GroupDescription(g.group_id, g.group_state, g.protocol_type, g.protocol_data,
                            conn.node_id, members), g.error_code


def committed_offsets(client: KafkaClient, group_id: str) -> dict[tuple[str, int], int]:
    """All the group's committed offsets (OffsetFetch with null topics)."""
    req = messages.OffsetFetchRequest

    def build(version: int):
        if version >= 8:
            return req(groups=[req.OffsetFetchRequestGroup(group_id=group_id, topics=None)])
        return req(group_id=group_id, topics=None)

    version, resp = client.coordinator(group_id).request(API.OFFSET_FETCH, build, max_version=8,
                                                         min_version=2)
    if version >= 8:
        (g,) = resp.groups
        check(g.error_code, context=f"group {group_id}")
        topics = g.topics
    else:
        check(resp.error_code, context=f"group {group_id}")
        topics = resp.topics
    out = {}
    for t in topics:
        for p in t.partitions:
            check(p.error_code, context=f"group {group_id} {t.name}-{p.partition_index}")
            if p.committed_offset >= 0:
                out[(t.name, p.partition_index)] = p.committed_offset
    return out


def group_lag(client: KafkaClient, description: GroupDescription,
              committed: dict[tuple[str, int], int]) -> list[PartitionLag]:
    owner: dict[tuple[str, int], Member] = {}
    for m in description.members:
        for topic, partitions in m.assignment.items():
            for p in partitions:
                owner[(topic, p)] = m
    tps = sorted(set(committed) | set(owner))
    ends = {}
    if tps:
        existing = set()
        for topic in {t for t, _ in tps}:
            try:
                info = client.topic(topic, retries=1)
            except KafkaError:
                continue  # a deleted topic still listed in the group's commits
            existing.update((topic, p) for p in info.partitions)
        for r in list_offsets(client, [tp for tp in tps if tp in existing], LATEST):
            if not r.error:
                ends[(r.topic, r.partition)] = r.offset
    rows = []
    for tp in tps:
        c, end, m = committed.get(tp), ends.get(tp), owner.get(tp)
        rows.append(PartitionLag(tp[0], tp[1], c, end,
                                 None if c is None or end is None else max(0, end - c),
                                 m.member_id if m else None, m.client_id if m else None,
                                 m.client_host if m else None))
    return rows


def describe_groups(client: KafkaClient, group_ids: list[str]) -> list[GroupDescription]:
    out = []
    for group_id in group_ids:
        description, code = describe_group(client, group_id)
        check(code, context=f"group {group_id}")
        if description.state == "Dead":
            raise KafkaError(69, "the group does not exist", f"group {group_id}")  # GROUP_ID_NOT_FOUND
        description.offsets = group_lag(client, description, committed_offsets(client, group_id))
        out.append(description)
    return out


def commit_offsets(client: KafkaClient, group_id: str, offsets: dict[tuple[str, int], int], *,
                   generation_id: int = -1, member_id: str = "",
                   group_instance_id: str | None = None) -> dict[tuple[str, int], int]:
    """OffsetCommit at the coordinator; returns the per-partition error codes."""
    req = messages.OffsetCommitRequest
    by_topic: dict[str, list[tuple[int, int]]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        by_topic.setdefault(topic, []).append((partition, offset))

    def build(version: int):
        return req(group_id=group_id, generation_id_or_member_epoch=generation_id,
                   member_id=member_id,
                   group_instance_id=group_instance_id if version >= 7 else None,
                   topics=[req.OffsetCommitRequestTopic(name=topic, partitions=[
                       req.OffsetCommitRequestPartition(partition_index=p, committed_offset=o,
                                                        committed_metadata="")
                       for p, o in parts]) for topic, parts in by_topic.items()])

    _, resp = client.coordinator(group_id).request(API.OFFSET_COMMIT, build, max_version=8,
                                                   min_version=2)
    return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}


def delete_groups(client: KafkaClient, group_ids: list[str]) -> dict[str, int]:
    out = {}
    for group_id in group_ids:
        _, resp = client.coordinator(group_id).request(
            API.DELETE_GROUPS, messages.DeleteGroupsRequest(groups_names=[group_id]), max_version=2)
        for r in resp.results:
            out[r.group_id] = r.error_code
    return out


def plan_reset(client: KafkaClient, group_id: str, topics: list[str] | None, *,
               to: str, value: str | None = None) -> dict[tuple[str, int], int]:
    """The new offset per partition for a reset, as kafka-consumer-groups computes it."""
    committed = committed_offsets(client, group_id)
    if topics:
        tps = []
        for spec in topics:
            name, _, parts = spec.partition(":")
            partitions = [int(p) for p in parts.split(",") if p] if parts else None
            tps.extend(partitions_of(client, name, partitions))
    else:
        tps = sorted(committed)
        if not tps:
            raise CommandFailed(f"group {group_id} has no committed offsets; name --topic")
    earliest = {(r.topic, r.partition): r for r in list_offsets(client, tps, EARLIEST)}
    latest = {(r.topic, r.partition): r for r in list_offsets(client, tps, LATEST)}
    for r in (*earliest.values(), *latest.values()):
        if r.error:
            raise KafkaError(3, r.error, f"{r.topic}-{r.partition}")

    def clamp(tp, offset):
        return max(earliest[tp].offset, min(latest[tp].offset, offset))

    if to == "earliest":
        return {tp: earliest[tp].offset for tp in tps}
    if to == "latest":
        return {tp: latest[tp].offset for tp in tps}
    if to == "offset":
        return {tp: clamp(tp, int(value)) for tp in tps}
    if to == "shift-by":
        return {tp: clamp(tp, committed.get(tp, latest[tp].offset) + int(value)) for tp in tps}
    if to == "datetime":
        stamp = parse_time(value)
        found = {(r.topic, r.partition): r for r in list_offsets(client, tps, stamp)}
        return {tp: found[tp].offset if found[tp].offset >= 0 and not found[tp].error
                else latest[tp].offset for tp in tps}
    raise ValueError(f"unknown reset target {to}")


# --------------------------------------------------------------------------- commands


def _list(client: KafkaClient, args) -> int:
    groups = list_groups(client, args.state)
    if args.json:
        emit_json([asdict(g) for g in groups])
    else:
        table(["GROUP", "TYPE", "STATE", "PROTOCOL-TYPE", "COORDINATOR"],
              [(g.group_id, g.group_type or "-", g.state, g.protocol_type or "-", g.coordinator) for g in groups])
    return 0


def _describe(client: KafkaClient, args) -> int:
    groups = describe_groups(client, args.groups)
    if args.json:
        emit_json([asdict(g) for g in groups])
        return 0
    for n, g in enumerate(groups):
        if n:
            print()
        if g.group_type in ("consumer", "share"):
            print(f"Group: {g.group_id}  Type: {g.group_type}  State: {g.state}  Assignor: {g.protocol or '-'}  "
                  f"Epoch: {g.group_epoch} (assignment {g.assignment_epoch})  Members: {len(g.members)}  "
                  f"Coordinator: {g.coordinator}")
        else:
            print(f"Group: {g.group_id}  State: {g.state}  Protocol: {g.protocol_type or '-'}/"
                  f"{g.protocol or '-'}  Members: {len(g.members)}  Coordinator: {g.coordinator}")
        table(["TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
               "HOST", "CLIENT-ID"],
              [(o.topic, o.partition, o.committed, o.log_end_offset, o.lag, o.member_id,
                o.client_host, o.client_id) for o in g.offsets])
        if g.members:
            print()
            columns = ["CONSUMER-ID", "INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"]
            if g.group_type == "consumer":
                columns += ["EPOCH", "TARGET-ASSIGNMENT", "PROTOCOL"]
            table(columns, [(m.member_id, m.group_instance_id, m.client_host, m.client_id,
                             sum(len(p) for p in m.assignment.values()), _assignment_text(m.assignment))
                            + ((m.member_epoch, _assignment_text(m.target_assignment or {}),
                                _MEMBER_PROTOCOLS.get(m.member_type, "-"))
                               if g.group_type == "consumer" else ()) for m in g.members])
    return 0


# ConsumerGroupDescribe's MemberType: the protocol a member of a consumer group speaks (KIP-848 migration)
_MEMBER_PROTOCOLS = {0: "classic", 1: "consumer"}


def _assignment_text(assignment: dict[str, list[int]]) -> str:
    return ";".join(f"{t}:{','.join(map(str, ps))}" for t, ps in sorted(assignment.items())) or "-"


def _reset(client: KafkaClient, args) -> int:
    if not args.topic and not args.all_topics:
        raise ValueError("name --topic TOPIC[:P,P] (repeatable) or --all-topics")
    reset_target_required(args)
    description, code = describe_group(client, args.group)
    check(code, context=f"group {args.group}")
    if description.state not in INACTIVE_STATES:
        raise CommandFailed(f"group {args.group}: assignments can only be reset while the group "
                            f"is inactive, but its state is {description.state}")
    to, value = args.to
    plan = plan_reset(client, args.group, None if args.all_topics else args.topic, to=to,
                      value=value)
    errors: dict[tuple[str, int], int] = {}
    if args.execute:
        errors = commit_offsets(client, args.group, plan)
    rows = [{"group": args.group, "topic": t, "partition": p, "new_offset": o,
             "error": error_name(errors[(t, p)]) if errors.get((t, p)) else None}
            for (t, p), o in sorted(plan.items())]
    if args.json:
        emit_json({"executed": args.execute, "offsets": rows})
    else:
        table(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
              [(r["group"], r["topic"], r["partition"], r["error"] or r["new_offset"])
               for r in rows])
        if not args.execute:
            info("Dry run: nothing was changed; add --execute to commit these offsets.")
    failed = [r for r in rows if r["error"]]
    for r in failed:
        error(f"{r['topic']}-{r['partition']}: {r['error']}")
    return 1 if failed else 0


def _delete(client: KafkaClient, args) -> int:
    results = delete_groups(client, args.groups)
    if args.json:
        emit_json([{"group": g, "error": error_name(c) if c else None}
                   for g, c in results.items()])
    else:
        for g, c in results.items():
            if not c:
                print(f"Deleted group {g}.")
    failed = {g: c for g, c in results.items() if c}
    for g, c in failed.items():
        error(f"group {g}: {error_name(c)}")
    return 1 if failed else 0


class _ResetTarget(argparse.Action):
    def __call__(self, parser, namespace, values, option_string=None):
        if getattr(namespace, "to", None) is not None:
            parser.error("give exactly one --to-* / --shift-by option")
        namespace.to = (self.const, values)


def add_commands(subparsers, common: argparse.ArgumentParser) -> None:
    groups = subparsers.add_parser("groups", help="list, describe, reset and delete groups")
    sub = groups.add_subparsers(dest="groups_command", required=True)

    lst = sub.add_parser("list", parents=[common], help="list groups")
    lst.add_argument("--state", action="append", help="only groups in this state; repeatable")
    lst.set_defaults(func=runs(_list))

    describe = sub.add_parser("describe", parents=[common],
                              help="members, assignments, committed offsets and lag")
    describe.add_argument("groups", nargs="+", metavar="GROUP")
    describe.set_defaults(func=runs(_describe))

    reset = sub.add_parser("reset-offsets", parents=[common],
                           help="move committed offsets (dry run unless --execute)")
    reset.add_argument("group", metavar="GROUP")
    reset.add_argument("--topic", "-t", action="append", metavar="TOPIC[:P,P]",
                       help="a topic, optionally with partitions; repeatable")
    reset.add_argument("--all-topics", action="store_true",
                       help="every partition the group has committed offsets for")
    reset.add_argument("--to-earliest", action=_ResetTarget, const="earliest", nargs=0)
    reset.add_argument("--to-latest", action=_ResetTarget, const="latest", nargs=0)
    reset.add_argument("--to-offset", action=_ResetTarget, const="offset", metavar="OFFSET")
    reset.add_argument("--to-datetime", action=_ResetTarget, const="datetime",
                       metavar="ISO-8601", help="first offset at or after this time")
    reset.add_argument("--shift-by", action=_ResetTarget, const="shift-by", metavar="N")
    mode = reset.add_mutually_exclusive_group()
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    mode.add_argument("--dry-run", action="store_true", help="only show them (the default)")
    reset.set_defaults(func=runs(_reset), to=None)

    delete = sub.add_parser("delete", parents=[common], help="delete inactive groups")
    delete.add_argument("groups", nargs="+", metavar="GROUP")
    delete.set_defaults(func=runs(_delete))


def reset_target_required(args) -> None:
    if args.to is None:
        raise ValueError("give one of --to-earliest, --to-latest, --to-offset, --to-datetime, "
                         "--shift-by")
