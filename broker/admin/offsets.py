"""``odradek offsets`` (ListOffsets per partition) and ``odradek delete-records`` (DeleteRecords)."""

from __future__ import annotations

import argparse
import datetime as dt
from dataclasses import asdict, dataclass

from protocol import messages

from broker.admin.client import API, KafkaClient, KafkaError, error_name
from broker.admin.common import runs
from broker.admin.output import emit_json, error, table

EARLIEST, LATEST, MAX_TIMESTAMP = -2, -1, -3
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
NAMED_TIMES = {"earliest": EARLIEST, "latest": LATEST, "max-timestamp": MAX_TIMESTAMP}


@dataclass
class PartitionOffset:
    topic: str
    partition: int
    offset: int
    timestamp: int
    error: str | None = None


def parse_time(text: str) -> int:
    """earliest | latest | max-timestamp | epoch milliseconds | an ISO-8601 date-time (UTC if no
    zone) -> a ListOffsets timestamp."""
    text = text.strip()
    if text.lower() in NAMED_TIMES:
        return NAMED_TIMES[text.lower()]
    if text.lstrip("-").isdigit():
        value = int(text)
        if value < 0 and value not in (EARLIEST, LATEST, MAX_TIMESTAMP):
            raise ValueError(f"invalid timestamp {text}")
        return value
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{text!r} is not earliest, latest, max-timestamp, epoch milliseconds "
                         "or an ISO-8601 date-time") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    return int(when.timestamp() * 1000)


def partitions_of(client: KafkaClient, topic: str, partitions: list[int] | None = None
                  ) -> list[tuple[str, int]]:
    info = client.topic(topic)
    if partitions:
        missing = [p for p in partitions if p not in info.partitions]
        if missing:
            raise KafkaError(3, f"partition(s) {missing} do not exist", f"topic {topic}")
        return [(topic, p) for p in partitions]
    return [(topic, p) for p in sorted(info.partitions)]


def list_offsets(client: KafkaClient, topic_partitions: list[tuple[str, int]], timestamp: int,
                 isolation_level: int = READ_UNCOMMITTED) -> list[PartitionOffset]:
    """ListOffsets for each partition at its leader; errors are reported per partition."""
    req = messages.ListOffsetsRequest
    results: dict[tuple[str, int], PartitionOffset] = {}
    min_version = 7 if timestamp == MAX_TIMESTAMP else (2 if isolation_level else 1)
    for node_id, tps in client.leaders(topic_partitions).items():
        by_topic: dict[str, list[int]] = {}
        for topic, partition in tps:
            by_topic.setdefault(topic, []).append(partition)

        def build(version: int):
            return req(replica_id=-1, isolation_level=isolation_level if version >= 2 else 0,
                       topics=[req.ListOffsetsTopic(name=topic, partitions=[
                           req.ListOffsetsPartition(partition_index=p, timestamp=timestamp)
                           for p in parts]) for topic, parts in by_topic.items()])

        _, resp = client.node(node_id).request(API.LIST_OFFSETS, build, max_version=9,
                                               min_version=min_version)
        for t in resp.topics:
            for p in t.partitions:
                results[(t.name, p.partition_index)] = PartitionOffset(
                    t.name, p.partition_index, p.offset, p.timestamp,
                    error_name(p.error_code) if p.error_code else None)
    return [results.get(tp) or PartitionOffset(tp[0], tp[1], -1, -1, "UNKNOWN_SERVER_ERROR")
            for tp in topic_partitions]


def delete_records(client: KafkaClient, before: dict[tuple[str, int], int],
                   timeout_ms: int = 30000) -> list[PartitionOffset]:
    """Move each partition's log start offset up to ``before[tp]`` (-1: the high watermark).
    Returns the new low watermarks (``offset``) per partition."""
    req = messages.DeleteRecordsRequest
    results: dict[tuple[str, int], PartitionOffset] = {}
    for node_id, tps in client.leaders(before).items():
        by_topic: dict[str, list[int]] = {}
        for topic, partition in tps:
            by_topic.setdefault(topic, []).append(partition)
        body = req(timeout_ms=timeout_ms, topics=[req.DeleteRecordsTopic(name=topic, partitions=[
            req.DeleteRecordsPartition(partition_index=p, offset=before[(topic, p)])
            for p in parts]) for topic, parts in by_topic.items()])
        _, resp = client.node(node_id).request(API.DELETE_RECORDS, body, max_version=2)
        for t in resp.topics:
            for p in t.partitions:
                results[(t.name, p.partition_index)] = PartitionOffset(
                    t.name, p.partition_index, p.low_watermark, -1,
                    error_name(p.error_code) if p.error_code else None)
    return [results.get(tp) or PartitionOffset(tp[0], tp[1], -1, -1, "UNKNOWN_SERVER_ERROR")
            for tp in before]


# --------------------------------------------------------------------------- commands


def _offsets(client: KafkaClient, args) -> int:
    tps = partitions_of(client, args.topic, args.partition)
    isolation = READ_COMMITTED if args.isolation_level == "read_committed" else READ_UNCOMMITTED
    if args.time is None:
        earliest = list_offsets(client, tps, EARLIEST, isolation)
        latest = list_offsets(client, tps, LATEST, isolation)
        rows = [{"topic": e.topic, "partition": e.partition, "earliest": e.offset,
                 "latest": l.offset, "error": e.error or l.error}
                for e, l in zip(earliest, latest)]
        if args.json:
            emit_json(rows)
        else:
            table(["TOPIC", "PARTITION", "EARLIEST", "LATEST"],
                  [(r["topic"], r["partition"], r["earliest"] if not r["error"] else r["error"],
                    r["latest"] if not r["error"] else "-") for r in rows])
    else:
        found = list_offsets(client, tps, parse_time(args.time), isolation)
        rows = [asdict(r) for r in found]
        if args.json:
            emit_json(rows)
        else:
            table(["TOPIC", "PARTITION", "OFFSET", "TIMESTAMP"],
                  [(r["topic"], r["partition"], r["error"] or r["offset"],
                    r["timestamp"] if r["timestamp"] >= 0 else "-") for r in rows])
    failed = [r for r in rows if r["error"]]
    for r in failed:
        error(f"{r['topic']}-{r['partition']}: {r['error']}")
    return 1 if failed else 0


def _delete_records(client: KafkaClient, args) -> int:
    tps = partitions_of(client, args.topic, args.partition)
    results = delete_records(client, {tp: args.before_offset for tp in tps})
    if args.json:
        emit_json([{"topic": r.topic, "partition": r.partition, "low_watermark": r.offset,
                    "error": r.error} for r in results])
    else:
        table(["TOPIC", "PARTITION", "LOW-WATERMARK"],
              [(r.topic, r.partition, r.error or r.offset) for r in results])
    failed = [r for r in results if r.error]
    for r in failed:
        error(f"{r.topic}-{r.partition}: {r.error}")
    return 1 if failed else 0


def add_commands(subparsers, common: argparse.ArgumentParser) -> None:
    offsets = subparsers.add_parser("offsets", parents=[common],
                                    help="earliest/latest/by-time offsets per partition")
    offsets.add_argument("topic", metavar="TOPIC")
    offsets.add_argument("--partition", "-p", type=int, action="append",
                         help="only this partition; repeatable")
    offsets.add_argument("--time", metavar="WHEN",
                         help="earliest, latest, max-timestamp, epoch ms or ISO date-time "
                              "(default: show earliest and latest)")
    offsets.add_argument("--isolation-level", choices=["read_uncommitted", "read_committed"],
                         default="read_uncommitted")
    offsets.set_defaults(func=runs(_offsets))

    delete = subparsers.add_parser("delete-records", parents=[common],
                                   help="delete records before an offset (DeleteRecords)")
    delete.add_argument("topic", metavar="TOPIC")
    delete.add_argument("--partition", "-p", type=int, action="append",
                        help="only this partition; repeatable (default: all)")
    delete.add_argument("--before-offset", "--offset", type=int, required=True,
                        help="new log start offset; -1 = the high watermark (delete everything)")
    delete.set_defaults(func=runs(_delete_records))
