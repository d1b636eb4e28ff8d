"""``odradek topics create|list|describe|delete|alter-configs|add-partitions``."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

from protocol import messages

from broker.admin.client import API, KafkaClient, KafkaError, TopicInfo, check, error_name
from broker.admin.common import parse_pairs, runs
from broker.admin.configs import TOPIC, alter_configs, describe_configs
from broker.admin.output import CommandFailed, emit_json, error, table


@dataclass
class TopicResult:
    """The outcome for one topic of a create/delete/add-partitions call."""

    name: str
    error_code: int = 0
    error_message: str | None = None
    topic_id: str | None = None
    extra: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.error_code == 0

    def describe_error(self) -> str:
        text = error_name(self.error_code)
        return f"{text}: {self.error_message}" if self.error_message else text


def create_topics(client: KafkaClient, names: list[str], *, partitions: int = -1,
                  replication_factor: int = -1, configs: dict[str, str] | None = None,
                  validate_only: bool = False, timeout_ms: int = 30000) -> list[TopicResult]:
    req = messages.CreateTopicsRequest

    def build(version: int):
        if version < 4 and (partitions < 1 or replication_factor < 1):
            raise KafkaError(35, "this broker needs explicit --partitions and "
                                 "--replication-factor (CreateTopics v4+ has defaults)")
        topics = [req.CreatableTopic(
            name=name, num_partitions=partitions, replication_factor=replication_factor,
            configs=[req.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])
            for name in names]
        return req(topics=topics, timeout_ms=timeout_ms, validate_only=validate_only)

    version, resp = client.controller().request(API.CREATE_TOPICS, build, max_version=7,
                                                min_version=1 if validate_only else 0)
    results = []
    for t in resp.topics:
        topic_id = getattr(t, "topic_id", None)
        results.append(TopicResult(t.name, t.error_code, getattr(t, "error_message", None),
                                   str(topic_id) if topic_id and topic_id.int else None,
                                   {"partitions": getattr(t, "num_partitions", partitions),
                                    "replication_factor": getattr(t, "replication_factor",
                                                                  replication_factor)}))
    return results


def delete_topics(client: KafkaClient, names: list[str], timeout_ms: int = 30000
                  ) -> list[TopicResult]:
    req = messages.DeleteTopicsRequest

    def build(version: int):
        if version >= 6:
            return req(topics=[req.DeleteTopicState(name=n) for n in names], timeout_ms=timeout_ms)
        return req(topic_names=names, timeout_ms=timeout_ms)

    _, resp = client.controller().request(API.DELETE_TOPICS, build, max_version=6)
    return [TopicResult(r.name, r.error_code, getattr(r, "error_message", None))
            for r in resp.responses]


def add_partitions(client: KafkaClient, name: str, total: int, validate_only: bool = False,
                   timeout_ms: int = 30000) -> TopicResult:
    req = messages.CreatePartitionsRequest
    body = req(topics=[req.CreatePartitionsTopic(name=name, count=total, assignments=None)],
               timeout_ms=timeout_ms, validate_only=validate_only)
    _, resp = client.controller().request(API.CREATE_PARTITIONS, body, max_version=3)
    (r,) = resp.results
    return TopicResult(r.name, r.error_code, r.error_message)


def list_topics(client: KafkaClient, include_internal: bool = True) -> list[str]:
    meta = client.metadata(None)
    return sorted(t.name for t in meta.topics.values()
                  if t.error_code == 0 and (include_internal or not t.internal))


def topic_document(info: TopicInfo, configs: dict[str, str]) -> dict:
    parts = sorted(info.partitions.values(), key=lambda p: p.partition)
    return {
        "name": info.name,
        "topic_id": str(info.topic_id) if info.topic_id is not None else None,
        "internal": info.internal,
        "partition_count": len(parts),
        "replication_factor": len(parts[0].replicas) if parts else 0,
        "configs": configs,
        "partitions": [{"partition": p.partition, "leader": p.leader,
                        "leader_epoch": p.leader_epoch, "replicas": p.replicas, "isr": p.isr,
                        "offline": p.offline,
                        "error": error_name(p.error_code) if p.error_code else None}
                       for p in parts],
    }


def describe_topics(client: KafkaClient, names: list[str] | None) -> list[dict]:
    """Topic documents with partitions and dynamic (non-default) configs; raises on a bad topic."""
    meta = client.metadata(names or None)
    docs = []
    for name in names or sorted(meta.topics):
        info = meta.topics.get(name)
        if info is None:
            raise KafkaError(3, context=f"topic {name}")
        check(info.error_code, context=f"topic {name}")
        try:
            configs = {e.name: e.value for e in describe_configs(client, TOPIC, name)
                       if e.source == "DYNAMIC_TOPIC_CONFIG"}
        except KafkaError as exc:
            if exc.code != 35:  # a broker without DescribeConfigs still gets its topics shown
                raise
            configs = {}
        docs.append(topic_document(info, configs))
    return docs


# --------------------------------------------------------------------------- commands


def _report(results: list[TopicResult], verb: str, args, ignore: set[int] = frozenset()) -> int:
    failed = [r for r in results if not r.ok and r.error_code not in ignore]
    if args.json:
        emit_json([{"name": r.name, "error": None if r.ok else error_name(r.error_code),
                    "error_message": r.error_message, "topic_id": r.topic_id, **r.extra}
                   for r in results])
    else:
        for r in results:
            if r.ok:
                print(f"{verb} topic {r.name}.")
            elif r.error_code in ignore:
                print(f"Topic {r.name}: {error_name(r.error_code)} (ignored).")
    for r in failed:
        error(f"topic {r.name}: {r.describe_error()}")
    return 1 if failed else 0


def _create(client: KafkaClient, args) -> int:
    results = create_topics(client, args.topics, partitions=args.partitions,
                            replication_factor=args.replication_factor,
                            configs=parse_pairs(args.config), validate_only=args.validate_only)
    ignore = {36} if args.if_not_exists else set()  # TOPIC_ALREADY_EXISTS
    return _report(results, "Validated" if args.validate_only else "Created", args, ignore)


def _delete(client: KafkaClient, args) -> int:
    ignore = {3} if args.if_exists else set()  # UNKNOWN_TOPIC_OR_PARTITION
    return _report(delete_topics(client, args.topics), "Deleted", args, ignore)


def _add_partitions(client: KafkaClient, args) -> int:
    result = add_partitions(client, args.topic, args.total, args.validate_only)
    result.extra["partitions"] = args.total
    return _report([result], "Validated" if args.validate_only else "Added partitions to", args)


def _list(client: KafkaClient, args) -> int:
    names = list_topics(client, include_internal=not args.exclude_internal)
    if args.json:
        emit_json(names)
    else:
        for name in names:
            print(name)
    return 0


def _describe(client: KafkaClient, args) -> int:
    docs = describe_topics(client, args.topics)
    if args.json:
        emit_json(docs)
        return 0
    for doc in docs:
        configs = ",".join(f"{k}={v}" for k, v in sorted(doc["configs"].items()))
        print(f"Topic: {doc['name']}  TopicId: {doc['topic_id']}  "
              f"PartitionCount: {doc['partition_count']}  "
              f"ReplicationFactor: {doc['replication_factor']}  Configs: {configs}")
        table(["PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "OFFLINE"],
              [(p["partition"], p["leader"], p["leader_epoch"],
                ",".join(map(str, p["replicas"])), ",".join(map(str, p["isr"])),
                ",".join(map(str, p["offline"])) or "-") for p in doc["partitions"]])
    return 0


def _alter_configs(client: KafkaClient, args) -> int:
    sets = parse_pairs(args.set)
    alter_configs(client, TOPIC, args.topic, set_=sets, delete=args.delete,
                  validate_only=args.validate_only)
    if args.json:
        emit_json({"topic": args.topic, "set": sets, "deleted": args.delete or []})
    else:
        print(f"Altered configs of topic {args.topic}.")
    return 0


def add_commands(subparsers, common: argparse.ArgumentParser) -> None:
    topics = subparsers.add_parser("topics", help="create, list, describe, delete topics")
    sub = topics.add_subparsers(dest="topics_command", required=True)

    create = sub.add_parser("create", parents=[common], help="create topics")
    create.add_argument("topics", nargs="+", metavar="TOPIC")
    create.add_argument("--partitions", "-p", type=int, default=-1,
                        help="partition count (default: the broker's num.partitions)")
    create.add_argument("--replication-factor", "-r", type=int, default=-1,
                        help="replicas per partition (default: default.replication.factor)")
    create.add_argument("--config", "-c", action="append", metavar="KEY=VALUE",
                        help="a topic config; repeatable")
    create.add_argument("--if-not-exists", action="store_true",
                        help="succeed when the topic already exists")
    create.add_argument("--validate-only", action="store_true", help="check without creating")
    create.set_defaults(func=runs(_create))

    lst = sub.add_parser("list", parents=[common], help="list topic names")
    lst.add_argument("--exclude-internal", action="store_true", help="hide internal topics")
    lst.set_defaults(func=runs(_list))

    describe = sub.add_parser("describe", parents=[common],
                              help="partitions, leaders, replicas, ISR and config overrides")
    describe.add_argument("topics", nargs="*", metavar="TOPIC", help="default: every topic")
    describe.set_defaults(func=runs(_describe))

    delete = sub.add_parser("delete", parents=[common], help="delete topics")
    delete.add_argument("topics", nargs="+", metavar="TOPIC")
    delete.add_argument("--if-exists", action="store_true", help="succeed when already gone")
    delete.set_defaults(func=runs(_delete))

    alter = sub.add_parser("alter-configs", parents=[common], help="set or delete topic configs")
    alter.add_argument("topic", metavar="TOPIC")
    alter.add_argument("--set", action="append", metavar="KEY=VALUE", help="set a config")
    alter.add_argument("--delete", action="append", metavar="KEY", help="remove an override")
    alter.add_argument("--validate-only", action="store_true", help="check without applying")
    alter.set_defaults(func=runs(_alter_configs))

    grow = sub.add_parser("add-partitions", parents=[common],
                          help="raise a topic's partition count")
    grow.add_argument("topic", metavar="TOPIC")
    grow.add_argument("--total", type=int, required=True, help="the new partition count")
    grow.add_argument("--validate-only", action="store_true", help="check without applying")
    grow.set_defaults(func=runs(_add_partitions))


__all__ = ["TopicResult", "create_topics", "delete_topics", "add_partitions", "list_topics",
           "describe_topics", "add_commands", "CommandFailed"]
