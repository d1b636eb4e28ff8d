"""Reading records: a blocking fetcher over assigned partitions and a classic group member.

* :class:`Fetcher` keeps a position per partition, sends Fetch to each leader (full fetches, no
  incremental session), walks the returned batches by their headers, skips what lies before the
  position, and in read_committed mode drops aborted transactions the way the Java consumer does
  (aborted-transaction list + ABORT markers). It resets out-of-range positions per ``reset``.
* :class:`GroupMember` joins a group with the classic protocol (JoinGroup with the
  MEMBER_ID_REQUIRED retry, the range assignor when elected leader, SyncGroup), heartbeats,
  commits offsets and leaves.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

from protocol import messages
from protocol.records import ControlType, RecordBatchError, iter_batches

from broker.admin.client import API, KafkaClient, KafkaError, check
from broker.admin.consumer_protocol import (decode_assignment, decode_subscription,
                                            encode_assignment, encode_subscription, range_assign)
from broker.admin.groups import commit_offsets, committed_offsets
from broker.admin.offsets import EARLIEST, LATEST, list_offsets

OFFSET_OUT_OF_RANGE = 1
REFRESH_ERRORS = {3, 5, 6, 74, 75}  # metadata is stale: refresh and retry


@dataclass
class ConsumedRecord:
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple


class Fetcher:
    """Positions per (topic, partition) and the Fetch loop that advances them."""

    def __init__(self, client: KafkaClient, *, isolation_level: int = 0, reset: str = "latest",
                 max_wait_ms: int = 500, partition_max_bytes: int = 1 << 20):
        self.client = client
        self.isolation_level = isolation_level
        self.reset = reset
        self.max_wait_ms = max_wait_ms
        self.partition_max_bytes = partition_max_bytes
        self.positions: dict[tuple[str, int], int] = {}

    def assign(self, positions: dict[tuple[str, int], int | None]) -> None:
        """Take these partitions; None positions start at the reset policy's offset."""
        self.positions = {}
        missing = [tp for tp, pos in positions.items() if pos is None]
        self.positions.update({tp: pos for tp, pos in positions.items() if pos is not None})
        self._reset(missing)

    def _reset(self, tps: list[tuple[str, int]]) -> None:
        if not tps:
            return
        when = EARLIEST if self.reset == "earliest" else LATEST
        for r in list_offsets(self.client, tps, when, self.isolation_level):
            if r.error:
                raise KafkaError(3, r.error, f"{r.topic}-{r.partition}")
            self.positions[(r.topic, r.partition)] = r.offset

    def poll(self) -> list[ConsumedRecord]:
        """One round of fetches to every leader; the records after the current positions."""
        out: list[ConsumedRecord] = []
        try:
            by_leader = self.client.leaders(sorted(self.positions))
        except KafkaError as exc:
            if exc.code in REFRESH_ERRORS:
                time.sleep(0.2)
                return out
            raise
        for node_id, tps in by_leader.items():
            out.extend(self._fetch(node_id, tps))
        return out

    def _fetch(self, node_id: int, tps: list[tuple[str, int]]) -> list[ConsumedRecord]:
        req = messages.FetchRequest
        by_topic: dict[str, list[int]] = {}
        for topic, partition in tps:
            by_topic.setdefault(topic, []).append(partition)

        def build(version: int):
            return req(replica_id=-1, max_wait_ms=self.max_wait_ms, min_bytes=1,
                       max_bytes=50 * 1024 * 1024, isolation_level=self.isolation_level,
                       session_id=0, session_epoch=-1,
                       topics=[req.FetchTopic(topic=topic, partitions=[
                           req.FetchPartition(partition=p, fetch_offset=self.positions[(topic, p)],
                                              partition_max_bytes=self.partition_max_bytes)
                           for p in parts]) for topic, parts in by_topic.items()])

        # v13+ names topics by id; v12 keeps names and is accepted by every current broker.
        _, resp = self.client.node(node_id).request(API.FETCH, build, max_version=12,
                                                    min_version=4)
        check(getattr(resp, "error_code", 0), context="Fetch")
        out: list[ConsumedRecord] = []
        for t in resp.responses:
            for p in t.partitions:
                tp = (t.topic, p.partition_index)
                if tp not in self.positions:
                    continue
                if p.error_code == OFFSET_OUT_OF_RANGE:
                    self._reset([tp])
                    continue
                if p.error_code in REFRESH_ERRORS:
                    self.client.metadata([t.topic])
                    continue
                check(p.error_code, context=f"{t.topic}-{p.partition_index}")
                out.extend(self._records(tp, p))
        return out

    def _records(self, tp: tuple[str, int], p) -> Iterator[ConsumedRecord]:
        data = p.records
        if not data:
            return
        position = self.positions[tp]
        aborted = sorted((a.first_offset, a.producer_id) for a in (p.aborted_transactions or [])) \
            if self.isolation_level else []
        aborting: set[int] = set()
        progressed = False
        try:
            for batch in iter_batches(data, allow_partial=True):
                progressed = True
                if batch.last_offset < position:
                    continue
                if self.isolation_level:
                    while aborted and aborted[0][0] <= batch.last_offset:
                        aborting.add(aborted.pop(0)[1])
                    if batch.is_control:
                        marker = batch.control_record()
                        if marker.type == ControlType.ABORT:
                            aborting.discard(batch.producer_id)
                        position = batch.next_offset
                        continue
                    if batch.is_transactional and batch.producer_id in aborting:
                        position = batch.next_offset
                        continue
                elif batch.is_control:
                    position = batch.next_offset
                    continue
                batch.ensure_valid()
                for record in batch.records():
                    if record.offset >= position:
                        yield ConsumedRecord(tp[0], tp[1], record.offset, record.timestamp,
                                             record.key, record.value, record.headers)
                position = batch.next_offset
        except RecordBatchError as exc:
            raise KafkaError(exc.error_code, str(exc), f"{tp[0]}-{tp[1]}") from exc
        finally:
            self.positions[tp] = position
        if not progressed and len(data) >= self.partition_max_bytes:
            self.partition_max_bytes *= 2  # a batch larger than the limit (old brokers)


class GroupMember:
    """One member of a classic consumer group, driven synchronously."""

    def __init__(self, client: KafkaClient, group_id: str, topics: list[str], *,
                 session_timeout_ms: int = 10000, rebalance_timeout_ms: int = 30000):
        self.client = client
        self.group_id = group_id
        self.topics = sorted(set(topics))
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.member_id = ""
        self.generation_id = -1
        self.assignment: dict[str, list[int]] = {}
        self._last_heartbeat = 0.0

    @property
    def _conn(self):
        return self.client.coordinator(self.group_id)

    def join(self) -> dict[str, list[int]]:
        """Join (or rejoin) and return this member's assignment."""
        for _ in range(10):
            code = self._join_once()
            if code == 0:
                return self.assignment
            if code in (25, 22):  # UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION: start over
                self.member_id, self.generation_id = "", -1
            elif code == 27:  # REBALANCE_IN_PROGRESS during sync: join again
                continue
            elif code in (14, 15, 16):
                self.client.forget_coordinator(self.group_id)
                time.sleep(0.2)
            else:
                raise KafkaError(code, context=f"group {self.group_id}")
        raise KafkaError(27, "could not complete a rebalance", f"group {self.group_id}")

    def _join_once(self) -> int:
        req = messages.JoinGroupRequest
        subscription = encode_subscription(self.topics)

        def build(version: int):
            return req(group_id=self.group_id, session_timeout_ms=self.session_timeout_ms,
                       rebalance_timeout_ms=self.rebalance_timeout_ms, member_id=self.member_id,
                       protocol_type="consumer",
                       protocols=[req.JoinGroupRequestProtocol(name="range",
                                                               metadata=subscription)])

        conn = self._conn
        wait = self.rebalance_timeout_ms / 1000 + 5  # the broker holds JoinGroup during a rebalance
        _, resp = conn.request(API.JOIN_GROUP, build, max_version=7, timeout=wait)
        if resp.error_code == 79:  # MEMBER_ID_REQUIRED: rejoin with the id we were given
            self.member_id = resp.member_id
            _, resp = conn.request(API.JOIN_GROUP, build, max_version=7, timeout=wait)
        if resp.error_code:
            return resp.error_code
        self.member_id, self.generation_id = resp.member_id, resp.generation_id
        assignments = []
        if resp.leader == resp.member_id:
            assignments = self._assign(resp.members)
        return self._sync(resp.protocol_name or "range", assignments)

    def _assign(self, members) -> list:
        subs = {m.member_id: decode_subscription(m.metadata) for m in members}
        topics = sorted({t for ts in subs.values() for t in ts})
        counts = {}
        for topic in topics:
            try:
                counts[topic] = len(self.client.topic(topic).partitions)
            except KafkaError:
                counts[topic] = 0
        plan = range_assign(subs, counts)
        req = messages.SyncGroupRequest
        return [req.SyncGroupRequestAssignment(member_id=m, assignment=encode_assignment(a))
                for m, a in plan.items()]

    def _sync(self, protocol_name: str, assignments: list) -> int:
        req = messages.SyncGroupRequest

        def build(version: int):
            extra = {"protocol_type": "consumer", "protocol_name": protocol_name} \
                if version >= 5 else {}
            return req(group_id=self.group_id, generation_id=self.generation_id,
                       member_id=self.member_id, assignments=assignments, **extra)

        _, resp = self._conn.request(API.SYNC_GROUP, build, max_version=5,
                                     timeout=self.rebalance_timeout_ms / 1000 + 5)
        if resp.error_code:
            return resp.error_code
        self.assignment = decode_assignment(resp.assignment)
        self._last_heartbeat = time.monotonic()
        return 0

    def heartbeat_if_due(self) -> bool:
        """Heartbeat every third of the session timeout; False when a rebalance is needed."""
        if time.monotonic() - self._last_heartbeat < self.session_timeout_ms / 3000:
            return True
        _, resp = self._conn.request(
            API.HEARTBEAT, messages.HeartbeatRequest(group_id=self.group_id,
                                                     generation_id=self.generation_id,
                                                     member_id=self.member_id), max_version=4)
        self._last_heartbeat = time.monotonic()
        if resp.error_code in (27, 25, 22):
            if resp.error_code != 27:
                self.member_id, self.generation_id = "", -1
            return False
        check(resp.error_code, context=f"heartbeat to group {self.group_id}")
        return True

    def committed(self) -> dict[tuple[str, int], int]:
        return committed_offsets(self.client, self.group_id)

    def commit(self, positions: dict[tuple[str, int], int]) -> None:
        if not positions:
            return
        errors = commit_offsets(self.client, self.group_id, positions,
                                generation_id=self.generation_id, member_id=self.member_id)
        for (topic, partition), code in errors.items():
            check(code, context=f"commit {topic}-{partition} for group {self.group_id}")

    def leave(self) -> None:
        if not self.member_id:
            return
        req = messages.LeaveGroupRequest

        def build(version: int):
            if version >= 3:
                return req(group_id=self.group_id,
                           members=[req.MemberIdentity(member_id=self.member_id)])
            return req(group_id=self.group_id, member_id=self.member_id)

        try:
            self._conn.request(API.LEAVE_GROUP, build, max_version=4)
        except KafkaError:
            pass  # leaving is best effort: the session timeout evicts us anyway
        self.member_id, self.generation_id = "", -1
