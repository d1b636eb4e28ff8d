"""``odradek reassign``: move partition replicas, as Kafka's kafka-reassign-partitions.sh.

    odradek reassign --reassignment-json-file plan.json --execute   # start (AlterPartitionReassignments)
    odradek reassign --reassignment-json-file plan.json --verify    # done yet? (ListPartitionReassignments
                                                                    #  + the replicas in the metadata)
    odradek reassign --reassignment-json-file plan.json --cancel    # back to the replicas before

The plan is Kafka's: ``{"version": 1, "partitions": [{"topic": "t", "partition": 0,
"replicas": [2, 3]}, ...]}``. ``--verify`` exits 0 once every partition of the plan has exactly its
replicas and no reassignment is ongoing, 1 while any is still moving (or failed).
"""

from __future__ import annotations

import argparse
import json

from protocol import messages

from broker.admin.client import KafkaClient, KafkaError, error_name
from broker.admin.common import runs
from broker.admin.output import emit_json, error, table

ALTER_PARTITION_REASSIGNMENTS = 45
LIST_PARTITION_REASSIGNMENTS = 46


def read_plan(path: str) -> dict[tuple[str, int], list[int]]:
    """{(topic, partition): replicas} from a Kafka reassignment JSON file; ValueError when malformed."""
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    if not isinstance(doc, dict) or not isinstance(doc.get("partitions"), list):
        raise ValueError(f"{path}: expected {{\"version\": 1, \"partitions\": [...]}}")
    plan = {}
    for entry in doc["partitions"]:
        try:
            key = (str(entry["topic"]), int(entry["partition"]))
            replicas = [int(b) for b in entry["replicas"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{path}: bad partition entry {entry!r}") from exc
        if key in plan:
            raise ValueError(f"{path}: partition {key[0]}-{key[1]} appears twice")
        plan[key] = replicas
    return plan


def _by_topic(keys):
    topics: dict[str, list[int]] = {}
    for topic, partition in keys:
        topics.setdefault(topic, []).append(partition)
    return topics


def alter(client: KafkaClient, plan: dict[tuple[str, int], list[int] | None],
          timeout_ms: int = 30000) -> dict[tuple[str, int], str | None]:
    """Start (or, with None replicas, cancel) reassignments; the error name per partition."""
    R = messages.AlterPartitionReassignmentsRequest
    body = R(timeout_ms=timeout_ms, topics=[
        R.ReassignableTopic(name=topic, partitions=[
            R.ReassignablePartition(partition_index=p, replicas=plan[(topic, p)]) for p in parts])
        for topic, parts in _by_topic(plan).items()])
    _, response = client.any_broker().request(ALTER_PARTITION_REASSIGNMENTS, body, max_version=0)
    if response.error_code:
        raise KafkaError(response.error_code, response.error_message, "AlterPartitionReassignments")
    return {(t.name, p.partition_index): error_name(p.error_code) if p.error_code else None
            for t in response.responses for p in t.partitions}


def ongoing(client: KafkaClient, keys) -> dict[tuple[str, int], tuple[list, list, list]]:
    R = messages.ListPartitionReassignmentsRequest
    body = R(timeout_ms=30000, topics=[R.ListPartitionReassignmentsTopics(name=t, partition_indexes=p)
                                       for t, p in _by_topic(keys).items()])
    _, response = client.any_broker().request(LIST_PARTITION_REASSIGNMENTS, body, max_version=0)
    if response.error_code:
        raise KafkaError(response.error_code, response.error_message, "ListPartitionReassignments")
    return {(t.name, p.partition_index): (list(p.replicas), list(p.adding_replicas),
                                          list(p.removing_replicas))
            for t in response.topics for p in t.partitions}


def verify(client: KafkaClient, plan) -> dict[tuple[str, int], str]:
    """Per partition of the plan: "complete", "in progress" or what is wrong."""
    moving = ongoing(client, plan)
    current = {}
    for name, topic in client.metadata(sorted({t for t, _ in plan})).topics.items():
        for index, partition in topic.partitions.items():
            current[(name, index)] = list(partition.replicas)
    out = {}
    for key, replicas in plan.items():
        if key in moving:
            out[key] = "in progress"
        elif key not in current:
            out[key] = "unknown partition"
        elif current[key] == replicas:
            out[key] = "complete"
        else:
            out[key] = f"replicas are {current[key]}, not {replicas}"
    return out


def _run(client: KafkaClient, args) -> int:
    try:
        plan = read_plan(args.reassignment_json_file)
    except (OSError, ValueError) as exc:
        error(str(exc))
        return 2
    keys = sorted(plan)
    if args.verify:
        status = verify(client, plan)
        rows = [{"topic": t, "partition": p, "replicas": plan[(t, p)], "status": status[(t, p)]}
                for t, p in keys]
        if args.json:
            emit_json(rows)
        else:
            table(["TOPIC", "PARTITION", "TARGET-REPLICAS", "STATUS"],
                  [(r["topic"], r["partition"], ",".join(map(str, r["replicas"])), r["status"])
                   for r in rows])
        return 0 if all(r["status"] == "complete" for r in rows) else 1
    results = alter(client, {k: (None if args.cancel else plan[k]) for k in keys})
    rows = [{"topic": t, "partition": p, "error": results.get((t, p), "UNKNOWN_SERVER_ERROR")}
            for t, p in keys]
    if args.json:
        emit_json(rows)
    else:
        verb = "cancelled" if args.cancel else "started"
        table(["TOPIC", "PARTITION", "RESULT"],
              [(r["topic"], r["partition"], r["error"] or verb) for r in rows])
    failed = [r for r in rows if r["error"]]
    for r in failed:
        error(f"{r['topic']}-{r['partition']}: {r['error']}")
    return 1 if failed else 0


def add_commands(subparsers, common: argparse.ArgumentParser) -> None:
    reassign = subparsers.add_parser("reassign", parents=[common],
                                     help="move partition replicas (a Kafka reassignment plan file)")
    reassign.add_argument("--reassignment-json-file", required=True, metavar="PLAN",
                          help='{"version": 1, "partitions": [{"topic", "partition", "replicas"}]}')
    action = reassign.add_mutually_exclusive_group(required=True)
    action.add_argument("--execute", action="store_true", help="start the reassignment")
    action.add_argument("--verify", action="store_true",
                        help="exit 0 once every partition has its target replicas, else 1")
    action.add_argument("--cancel", action="store_true", help="cancel ongoing reassignments")
    reassign.set_defaults(func=runs(_run))
