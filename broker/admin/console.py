"""``odradek produce`` and ``odradek consume``: console tools in the spirit of
kafka-console-producer/consumer and kcat."""

from __future__ import annotations

import argparse
import itertools
import json
import signal
import sys
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass

from protocol import messages
from protocol.records import Compression, Header, SimpleRecord, build_batch

from broker.admin.client import API, KafkaClient, KafkaError, RETRIABLE, error_name
from broker.admin.common import parse_pairs, runs
from broker.admin.consumer import ConsumedRecord, Fetcher, GroupMember
from broker.admin.consumer_protocol import murmur2_partition
from broker.admin.offsets import EARLIEST, LATEST, list_offsets, partitions_of
from broker.admin.output import Progress, emit_json, info

COMPRESSIONS = {"none": Compression.NONE, "gzip": Compression.GZIP,
                "snappy": Compression.SNAPPY, "lz4": Compression.LZ4, "zstd": Compression.ZSTD}


@dataclass
class ProducedRange:
    topic: str
    partition: int
    base_offset: int
    count: int
    error: str | None = None


# --------------------------------------------------------------------------- producing


def produce(client: KafkaClient, topic: str, records: Iterable[SimpleRecord], *,
            partition: int | None = None, acks: int = -1, compression: str = "none",
            batch_records: int = 500, timeout_ms: int = 30000,
            progress: Progress | None = None) -> list[ProducedRange]:
    """Send records in batches of up to ``batch_records`` per partition; keyed records go where
    Kafka's default partitioner puts them, unkeyed ones round-robin batch by batch."""
    info_ = client.topic(topic, allow_auto_create=True)  # as Kafka's producers do
    count = len(info_.partitions)
    if partition is not None and partition not in info_.partitions:
        raise KafkaError(3, f"partition {partition} does not exist", f"topic {topic}")
    round_robin = itertools.cycle(sorted(info_.partitions))
    sticky = next(round_robin)
    pending: dict[int, list[SimpleRecord]] = {}
    results: list[ProducedRange] = []
    sent = 0
    for record in records:
        if partition is not None:
            p = partition
        elif record.key is not None:
            p = murmur2_partition(record.key, count)
        else:
            p = sticky
        batch = pending.setdefault(p, [])
        batch.append(record)
        if len(batch) >= batch_records:
            results.append(_send(client, topic, p, pending.pop(p), acks, compression, timeout_ms))
            sent += results[-1].count
            if progress:
                progress.update(sent)
            if p == sticky and partition is None:
                sticky = next(round_robin)
    for p, batch in sorted(pending.items()):
        results.append(_send(client, topic, p, batch, acks, compression, timeout_ms))
    return results


def _send(client: KafkaClient, topic: str, partition: int, records: list[SimpleRecord],
          acks: int, compression: str, timeout_ms: int) -> ProducedRange:
    data = build_batch(records, compression_type=COMPRESSIONS[compression])
    req = messages.ProduceRequest
    body = req(acks=acks, timeout_ms=timeout_ms, transactional_id=None, topic_data=[
        req.TopicProduceData(name=topic, partition_data=[
            req.PartitionProduceData(index=partition, records=data)])])
    for attempt in range(5):
        conn = client.leader(topic, partition)
        _, resp = conn.request(API.PRODUCE, body, max_version=11, min_version=3,
                               expect_response=acks != 0)
        if resp is None:
            return ProducedRange(topic, partition, -1, len(records))
        (t,) = resp.responses
        (p,) = t.partition_responses
        if p.error_code in RETRIABLE and attempt < 4:
            client.metadata([topic])
            time.sleep(0.1 * (attempt + 1))
            continue
        if p.error_code:
            message = getattr(p, "error_message", None)
            return ProducedRange(topic, partition, -1, len(records),
                                 error_name(p.error_code) + (f": {message}" if message else ""))
        return ProducedRange(topic, partition, p.base_offset, len(records))
    raise AssertionError("unreachable")


def _decode_escapes(text: str) -> str:
    return text.encode("utf-8").decode("unicode_escape")


def _json_record(line: str, headers: tuple, key: bytes | None, timestamp: int) -> SimpleRecord:
    """One JSON-lines input record: {"key", "value", "headers": {k: v}, "timestamp"}; every
    field optional (null value: a tombstone)."""
    try:
        doc = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"input line is not JSON: {exc}: {line[:80]!r}") from None
    if not isinstance(doc, dict):
        raise ValueError(f"input line is not a JSON object: {line[:80]!r}")

    def raw(value) -> bytes | None:
        if value is None:
            return None
        return (value if isinstance(value, str) else json.dumps(value)).encode()

    record_headers = headers + tuple(Header(str(k), raw(v))
                                     for k, v in (doc.get("headers") or {}).items())
    return SimpleRecord(value=raw(doc.get("value")),
                        key=raw(doc["key"]) if "key" in doc else key, headers=record_headers,
                        timestamp=int(doc.get("timestamp", timestamp)))


def _input_records(args) -> Iterable[SimpleRecord]:
    headers = tuple(Header(k, v.encode()) for k, v in parse_pairs(args.header, "header").items())
    key = args.key.encode() if args.key is not None else None
    timestamp = args.timestamp if args.timestamp is not None else -1
    lines: Iterable[str] = args.value if args.value else (
        line.rstrip("\r\n") for line in sys.stdin)
    if args.input_format == "json":
        for line in lines:
            if line.strip():
                yield _json_record(line, headers, key, timestamp if timestamp >= 0
                                   else int(time.time() * 1000))
        return
    separator = _decode_escapes(args.key_separator) if args.key_separator else None
    for line in lines:
        if not args.value and not line and args.skip_empty:
            continue
        record_key = key
        value: str | None = line
        if separator is not None:
            if separator not in line:
                raise ValueError(f"line {line!r} has no key separator {separator!r}")
            k, value = line.split(separator, 1)
            record_key = k.encode()
        if args.null_value is not None and value == args.null_value:
            value = None
        yield SimpleRecord(value=value.encode() if value is not None else None, key=record_key,
                           headers=headers,
                           timestamp=timestamp if timestamp >= 0 else int(time.time() * 1000))


def _produce(client: KafkaClient, args) -> int:
    results = produce(client, args.topic, _input_records(args), partition=args.partition,
                      acks=args.acks, compression=args.compression,
                      batch_records=args.batch_size, progress=Progress("records sent"))
    failed = [r for r in results if r.error]
    total = sum(r.count for r in results if not r.error)
    if args.json:
        emit_json({"topic": args.topic, "records": total,
                   "batches": [vars(r) for r in results]})
    else:
        for r in results:
            if not r.error:
                where = "" if r.base_offset < 0 else \
                    f" at offsets {r.base_offset}..{r.base_offset + r.count - 1}"
                print(f"Produced {r.count} record(s) to {r.topic}-{r.partition}{where}.")
    for r in failed:
        info(f"odradek: error: {r.topic}-{r.partition}: {r.error} ({r.count} record(s) not "
             "written)")
    return 1 if failed else 0


# --------------------------------------------------------------------------- consuming


def _text(data: bytes | None) -> str | None:
    return None if data is None else bytes(data).decode("utf-8", "backslashreplace")


def format_record(record: ConsumedRecord, args) -> str:
    if args.format == "json":
        return json.dumps({"topic": record.topic, "partition": record.partition,
                           "offset": record.offset, "timestamp": record.timestamp,
                           "key": _text(record.key), "value": _text(record.value),
                           "headers": {h[0]: _text(h[1]) for h in record.headers}})
    sep = _decode_escapes(args.separator)
    parts = []
    if args.print_offset:
        parts.append(f"{record.partition}:{record.offset}")
    if args.print_timestamp:
        parts.append(str(record.timestamp))
    if args.print_headers:
        parts.append(",".join(f"{h[0]}:{_text(h[1])}" for h in record.headers) or "NO_HEADERS")
    if args.print_key:
        parts.append("null" if record.key is None else _text(record.key))
    parts.append("null" if record.value is None else _text(record.value))
    return sep.join(parts)


def _consume(client: KafkaClient, args) -> int:
    isolation = 1 if args.isolation_level == "read_committed" else 0
    if args.json:
        args.format = "json"
    reset = "earliest" if args.from_beginning else "latest"
    fetcher = Fetcher(client, isolation_level=isolation, reset=reset,
                      max_wait_ms=min(500, args.timeout_ms or 500))
    member: GroupMember | None = None
    if args.group:
        if args.partition or args.offset is not None:
            raise ValueError("--group cannot be combined with --partition or --offset "
                             "(the group assigns partitions)")
        member = GroupMember(client, args.group, [args.topic])
        _join(member, fetcher)
    else:
        tps = partitions_of(client, args.topic, args.partition)
        start = _start_offsets(client, tps, args.offset, isolation)
        fetcher.assign(start)

    stop = {"now": False}
    in_main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True)) \
        if in_main_thread else None  # SIGTERM ends a console consumer cleanly (commit, leave)
    consumed = 0
    progress = Progress("records consumed") if not sys.stdout.isatty() else None
    idle_since = time.monotonic()
    last_commit = time.monotonic()
    try:
        while not stop["now"]:
            if args.count is not None and consumed >= args.count:
                break
            records = fetcher.poll()
            for i, record in enumerate(records):
                if args.count is not None and consumed >= args.count:
                    _rewind(fetcher, records[i:])
                    break
                print(format_record(record, args), flush=False)
                consumed += 1
            sys.stdout.flush()
            if progress is not None:
                progress.update(consumed)
            if records:
                idle_since = time.monotonic()
            elif args.timeout_ms is not None and \
                    (time.monotonic() - idle_since) * 1000 >= args.timeout_ms:
                break
            if member is not None:
                if time.monotonic() - last_commit >= 5:
                    member.commit(fetcher.positions)
                    last_commit = time.monotonic()
                if not member.heartbeat_if_due():
                    _join(member, fetcher)
    except KeyboardInterrupt:
        pass
    finally:
        if in_main_thread:
            signal.signal(signal.SIGTERM, previous)
        if member is not None:
            try:
                member.commit(fetcher.positions)
            finally:
                member.leave()
    info(f"Processed a total of {consumed} messages")
    if args.count is not None and consumed < args.count:
        return 1  # asked for N records and the timeout came first
    return 0


def _rewind(fetcher: Fetcher, unprinted: list[ConsumedRecord]) -> None:
    """Positions go back to the first record not printed, so a group commit does not skip it."""
    seen = set()
    for record in unprinted:
        tp = (record.topic, record.partition)
        if tp not in seen:
            seen.add(tp)
            fetcher.positions[tp] = record.offset


def _join(member: GroupMember, fetcher: Fetcher) -> None:
    assignment = member.join()
    committed = member.committed()
    fetcher.assign({(t, p): committed.get((t, p)) for t, ps in assignment.items() for p in ps})


def _start_offsets(client: KafkaClient, tps, offset: str | None, isolation: int
                   ) -> dict[tuple[str, int], int | None]:
    if offset is None:
        return {tp: None for tp in tps}
    if offset in ("earliest", "beginning"):
        return {(r.topic, r.partition): r.offset for r in list_offsets(client, tps, EARLIEST,
                                                                       isolation)}
    if offset in ("latest", "end"):
        return {(r.topic, r.partition): r.offset for r in list_offsets(client, tps, LATEST,
                                                                       isolation)}
    try:
        value = int(offset)
    except ValueError:
        raise ValueError(f"--offset {offset!r} is not earliest, latest, or a number") from None
    if value < 0:  # -N: N records before the end of each partition
        ends = list_offsets(client, tps, LATEST, isolation)
        starts = {(r.topic, r.partition): r.offset for r in list_offsets(client, tps, EARLIEST,
                                                                         isolation)}
        return {(r.topic, r.partition): max(starts[(r.topic, r.partition)], r.offset + value)
                for r in ends}
    return {tp: value for tp in tps}


def add_commands(subparsers, common: argparse.ArgumentParser) -> None:
    prod = subparsers.add_parser("produce", parents=[common],
                                 help="send records from arguments or stdin (one per line)")
    prod.add_argument("topic", metavar="TOPIC")
    prod.add_argument("--value", "-v", action="append",
                      help="a record value; repeatable (default: read lines from stdin)")
    prod.add_argument("--key", "-k", help="the key of every record")
    prod.add_argument("--key-separator", "-K", metavar="SEP",
                      help="split each line into KEY SEP VALUE (escapes like \\t allowed)")
    prod.add_argument("--header", "-H", action="append", metavar="KEY=VALUE",
                      help="a header on every record; repeatable")
    prod.add_argument("--partition", "-p", type=int,
                      help="target partition (default: by key hash, else round-robin)")
    prod.add_argument("--acks", type=int, choices=[-1, 0, 1], default=-1)
    prod.add_argument("--compression", choices=sorted(COMPRESSIONS), default="none")
    prod.add_argument("--timestamp", type=int, metavar="MS", help="record timestamp (epoch ms)")
    prod.add_argument("--null-value", metavar="TEXT", help="send this value as a null (tombstone)")
    prod.add_argument("--batch-size", type=int, default=500, help="records per batch")
    prod.add_argument("--skip-empty", action="store_true", help="ignore empty stdin lines")
    prod.add_argument("--input-format", choices=["text", "json"], default="text",
                      help='json: one {"key", "value", "headers", "timestamp"} object per line')
    prod.set_defaults(func=runs(_produce))

    cons = subparsers.add_parser("consume", parents=[common],
                                 help="print records from a topic")
    cons.add_argument("topic", metavar="TOPIC")
    cons.add_argument("--group", "-g", help="consume as a member of this group (commits offsets)")
    cons.add_argument("--partition", "-p", type=int, action="append",
                      help="assign this partition; repeatable (default: all)")
    cons.add_argument("--offset", "-o",
                      help="start at earliest, latest, N, or -N (N before the end); no group")
    cons.add_argument("--from-beginning", action="store_true",
                      help="start at the earliest offset when there is no position")
    cons.add_argument("--count", "-c", type=int, help="exit after this many records")
    cons.add_argument("--timeout-ms", type=int,
                      help="exit after this long without records (default: wait forever)")
    cons.add_argument("--isolation-level", choices=["read_uncommitted", "read_committed"],
                      default="read_uncommitted")
    cons.add_argument("--format", choices=["text", "json"], default="text")
    cons.add_argument("--print-key", action="store_true")
    cons.add_argument("--print-headers", action="store_true")
    cons.add_argument("--print-offset", action="store_true")
    cons.add_argument("--print-timestamp", action="store_true")
    cons.add_argument("--separator", default="\\t", help="between printed fields (default tab)")
    cons.set_defaults(func=runs(_consume))
