"""KafkaJS through drivers/kafkajs_driver.js, one node process per session."""

from __future__ import annotations

import json
import os
import shutil

from ..records import from_json, to_json
from .base import Delivery, PollResult, Unsupported
from .driver_process import DriverClient, DriverProcess

HERE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(HERE, "drivers", "kafkajs_driver.js")
CODECS = ("none", "gzip", "snappy")  # lz4 and zstd need native third-party codec packages


def missing() -> str | None:
    if shutil.which("node") is None:
        return "no node (run compat-tests/setup.sh)"
    if not os.path.isdir(os.path.join(HERE, "node_modules", "kafkajs")):
        return "KafkaJS not installed (run compat-tests/setup.sh)"
    return None


class KafkaJsClient(DriverClient):
    name = "kafkajs"
    commit_metadata = False  # admin.setOffsets carries no metadata string
    no_offset_is_latest = True  # fetchTopicOffsetsByTimestamp answers "no such offset" with the latest offset

    def __init__(self, bootstrap: str, security: dict | None = None) -> None:
        """`security`: KafkaJS's own ``ssl`` / ``sasl`` options, e.g.
        {"ssl": {"ca": [pem]}, "sasl": {"mechanism": "scram-sha-256", ...}}."""
        super().__init__(bootstrap)
        argv = ["node", SCRIPT, bootstrap] + ([json.dumps(security)] if security else [])
        self.driver = DriverProcess(self.name, argv, cwd=HERE)

    def produce(self, topic, records, *, acks="all", compression="none", idempotent=None, linger_ms=5, timeout=60):
        if any(v is None for r in records for _, v in r.headers):
            raise Unsupported("KafkaJS cannot send a null header value (its encoder needs a string or Buffer)")
        if compression not in CODECS:
            raise Unsupported(f"KafkaJS has no built-in {compression} codec (only third-party native plugins)")
        answers = self.driver.call("produce", timeout=timeout + 30, topic=topic, acks=acks,
                                   compression=compression, idempotent=bool(idempotent),
                                   records=[to_json(r) for r in records])
        return [Delivery(a.get("partition"), a.get("offset"), a.get("error")) for a in answers]

    def consume(self, topic, *, partitions=None, start=None, isolation="read_uncommitted", timeout=30):
        answer = self.driver.call("consume", timeout=timeout + 30, topic=topic, partitions=partitions,
                                  start=None if start is None else {str(p): o for p, o in start.items()},
                                  isolation=isolation, timeout_ms=int(timeout * 1000))
        return [from_json(r) for r in answer]

    def offsets_for_times(self, topic, partition, timestamps):
        return self.driver.call("offsets_for_times", topic=topic, partition=partition, timestamps=timestamps)

    def list_offsets(self, topic, partitions):
        answer = self.driver.call("list_offsets", topic=topic)
        return {int(p): tuple(v) for p, v in answer.items() if int(p) in partitions}

    def commit(self, group, topic, offsets):
        self.driver.call("commit", group=group, topic=topic,
                         offsets={str(p): [o, m] for p, (o, m) in offsets.items()})

    def committed(self, group, topic, partitions):
        answer = self.driver.call("committed", group=group, topic=topic)
        return {p: (tuple(answer[str(p)]) if answer.get(str(p)) else None) for p in partitions}

    def group_offsets(self, group):
        return {(t, p): o for t, p, o in self.driver.call("group_offsets", group=group)}

    def group_open(self, group, topic, *, instance_id=None, assignor="range", session_timeout_ms=10000):
        if instance_id is not None:
            raise Unsupported("KafkaJS has no static membership (group.instance.id)")
        if assignor != "range":
            raise Unsupported(f"KafkaJS has no {assignor} assignor")
        handle = self.driver.call("group_open", group=group, topic=topic, session_timeout_ms=session_timeout_ms)
        return (handle, topic)

    def group_poll(self, member, timeout_ms=200):
        a = self.driver.call("group_poll", handle=member[0], timeout_ms=timeout_ms)
        return PollResult([from_json(r) for r in a["records"]], a["assignment"],
                          a["assigned_events"], a["revoked_events"])

    def group_commit(self, member):
        self.driver.call("group_commit", handle=member[0], topic=member[1])

    def group_close(self, member):
        self.driver.call("group_close", handle=member[0])

    def txn_produce(self, topic, transactional_id, batches):
        self.driver.call("txn_produce", timeout=120, topic=topic, transactional_id=transactional_id,
                         batches=[{"records": [to_json(r) for r in recs], "commit": commit}
                                  for recs, commit in batches])

    def txn_open(self, topic, transactional_id, records):
        return self.driver.call("txn_open", timeout=90, topic=topic, transactional_id=transactional_id,
                                records=[to_json(r) for r in records])

    def txn_close(self, handle, commit):
        self.driver.call("txn_close", timeout=90, handle=handle, commit=commit)

    def consume_transform_produce(self, in_topic, out_topic, group, transactional_id, count, timeout=60):
        return self.driver.call("consume_transform_produce", timeout=timeout + 30, in_topic=in_topic,
                                out_topic=out_topic, group=group, transactional_id=transactional_id,
                                count=count, timeout_ms=int(timeout * 1000))
