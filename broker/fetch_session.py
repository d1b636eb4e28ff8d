"""Incremental fetch sessions (KIP-227).

A client opens a session with a full fetch (epoch 0) and then sends only what changed (epoch 1, 2, ...):
new or updated partitions, and partitions to forget. The broker remembers the session's partitions and
answers an incremental fetch with only the partitions that have something new: records, a changed high
watermark or log start offset, or an error. Sessionless fetches (epoch -1) carry everything each time.

``FetchSessionCache.open`` turns one request into a ``FetchContext`` (or a session error code); the
Fetch handler reads the context's partitions and asks ``context.should_include`` per partition result.
"""

from __future__ import annotations

import itertools
import random
from collections import OrderedDict
from dataclasses import dataclass
from typing import Hashable

from protocol import ErrorCode

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
INT32_MAX = 2**31 - 1

PartitionKey = tuple[Hashable, int]   # (topic id for v13+, topic name before; partition index)


@dataclass
class PartitionFetch:
    """What a client asked for on one partition, plus what the session last told it."""

    topic: str | None
    topic_id: object | None
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    log_start_offset: int = -1
    # last values sent in a response (-1 = never sent / resend next time)
    sent_high_watermark: int = -1
    sent_log_start_offset: int = -1

    def update_from(self, other: "PartitionFetch"):
        self.fetch_offset = other.fetch_offset
        self.partition_max_bytes = other.partition_max_bytes
        self.current_leader_epoch = other.current_leader_epoch
        self.last_fetched_epoch = other.last_fetched_epoch
        self.log_start_offset = other.log_start_offset
        if other.topic is not None:
            self.topic = other.topic


class FetchSession:
    def __init__(self, session_id: int, uses_topic_ids: bool):
        self.id = session_id
        self.uses_topic_ids = uses_topic_ids
        self.epoch = 1   # the epoch the next incremental request must carry
        self.partitions: OrderedDict[PartitionKey, PartitionFetch] = OrderedDict()

    def advance_epoch(self):
        self.epoch = 1 if self.epoch >= INT32_MAX else self.epoch + 1


class FetchContext:
    """One fetch request's view of its session."""

    def __init__(self, session: FetchSession | None, incremental: bool,
                 partitions: "OrderedDict[PartitionKey, PartitionFetch]"):
        self.session = session
        self.incremental = incremental
        self.partitions = partitions

    @property
    def session_id(self) -> int:
        return self.session.id if self.session is not None else 0

    def should_include(self, key: PartitionKey, high_watermark: int, log_start_offset: int,
                       has_records: bool, error_code: int) -> bool:
        """Whether a partition goes into the response; remembers what was sent."""
        cached = self.partitions[key]
        changed = (has_records or error_code != 0
                   or cached.sent_high_watermark != high_watermark
                   or cached.sent_log_start_offset != log_start_offset)
        # After an error, forget what was sent so the partition is resent once it recovers.
        cached.sent_high_watermark = -1 if error_code else high_watermark
        cached.sent_log_start_offset = log_start_offset
        return changed or not self.incremental

    def rotate(self, keys_with_records: list[PartitionKey]):
        """Move partitions that returned data to the back, so others get their turn next time."""
        if self.session is None:
            return
        for key in keys_with_records:
            if key in self.session.partitions:
                self.session.partitions.move_to_end(key)


class FetchSessionCache:
    def __init__(self, max_sessions: int = 1000):
        self.max_sessions = max_sessions
        self.sessions: OrderedDict[int, FetchSession] = OrderedDict()   # least recently used first
        self._random = random.Random()

    def _new_id(self) -> int:
        for _ in itertools.count():
            session_id = self._random.randint(1, INT32_MAX)
            if session_id not in self.sessions:
                return session_id
        raise AssertionError("unreachable")

    def open(self, session_id: int, epoch: int,
             requested: "OrderedDict[PartitionKey, PartitionFetch]",
             forgotten: list[PartitionKey], uses_topic_ids: bool) -> FetchContext | ErrorCode:
        if epoch in (FINAL_EPOCH, INITIAL_EPOCH):
            if session_id:
                self.sessions.pop(session_id, None)   # a full fetch closes the old session
            if epoch == FINAL_EPOCH:
                return FetchContext(None, False, requested)   # sessionless
            session = self._create(uses_topic_ids)
            if session is not None:
                session.partitions = requested
            return FetchContext(session, False, requested)

        session = self.sessions.get(session_id)
        if session is None:
            return ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        if session.epoch != epoch:
            return ErrorCode.INVALID_FETCH_SESSION_EPOCH
        if session.uses_topic_ids != uses_topic_ids:
            return ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
        for key in forgotten:
            session.partitions.pop(key, None)
        for key, fetch in requested.items():
            cached = session.partitions.get(key)
            if cached is None:
                session.partitions[key] = fetch
            else:
                cached.update_from(fetch)
        session.advance_epoch()
        self.sessions.move_to_end(session_id)
        return FetchContext(session, True, session.partitions)

    def _create(self, uses_topic_ids: bool) -> FetchSession | None:
        if self.max_sessions <= 0:
            return None
        while len(self.sessions) >= self.max_sessions:
            self.sessions.popitem(last=False)   # evict the least recently used session
        session = FetchSession(self._new_id(), uses_topic_ids)
        self.sessions[session.id] = session
        return session

    def forget_topic(self, topic_id, topic_name: str | None = None):
        """Drop a deleted topic's partitions from every session."""
        for session in self.sessions.values():
            for key in [k for k in session.partitions if k[0] in (topic_id, topic_name)]:
                del session.partitions[key]
