"""One share-partition's record states (KIP-932, Kafka's SharePartition), without I/O or a clock.

The records of a topic partition that a share group has not finished with lie between the
share-partition start offset (SPSO) and the end offset (SPEO, one past the highest record ever
acquired). Below the SPSO every record is done; from the SPEO on, none was delivered yet. In between,
each record is in one of Kafka's states:

    AVAILABLE --acquire--> ACQUIRED --accept--> ACKNOWLEDGED
        ^                     |  --reject/gap--> ARCHIVED
        |                     |  --release or lock timeout--> AVAILABLE,
        +---------------------+     or ARCHIVED once delivered `delivery_count_limit` times

An acquisition hands a record to one member for `lock_duration_ms` (time is passed in as `now_ms`)
and counts a delivery. Whenever the records at the SPSO are ACKNOWLEDGED or ARCHIVED, the SPSO moves
past them and they are forgotten. `snapshot()` / `restore()` are the durable form (Kafka's state
batches: first offset, last offset, delivery state, delivery count) the share coordinator keeps.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Iterable, Optional, Sequence

from protocol import ErrorCode

E = ErrorCode


class RecordState(enum.IntEnum):
    """Kafka's RecordState ids (also the DeliveryState of a persisted state batch)."""
    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AckType(enum.IntEnum):
    """ShareFetch/ShareAcknowledge's AcknowledgeTypes."""
    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


@dataclass
class InFlight:
    state: RecordState
    delivery_count: int
    member_id: Optional[str] = None
    lock_deadline_ms: int = 0


@dataclass(frozen=True)
class Acquired:
    """A run of acquired offsets with one delivery count (ShareFetch's AcquiredRecords)."""
    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True)
class StateBatch:
    """The durable form of a run of in-flight records (ShareSnapshot's StateBatches)."""
    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


class SharePartition:
    def __init__(self, start_offset: int, *, delivery_count_limit: int = 5, lock_duration_ms: int = 30_000,
                 max_in_flight: int = 2000):
        self.start_offset = start_offset
        self.end_offset = start_offset
        self.delivery_count_limit = delivery_count_limit
        self.lock_duration_ms = lock_duration_ms
        self.max_in_flight = max_in_flight
        self.records: dict[int, InFlight] = {}      # start_offset <= offset < end_offset, when not plain AVAILABLE-new
        self.version = 0                             # moves whenever the durable form changes

    # ---- acquiring ---------------------------------------------------------------------------------
    def next_fetch_offset(self) -> int:
        """Where a fetch for this share-partition should read from: the first record it could acquire."""
        for offset in range(self.start_offset, self.end_offset):
            record = self.records.get(offset)
            if record is None or record.state is RecordState.AVAILABLE:
                return offset
        return self.end_offset

    def acquire(self, member_id: str, first_offset: int, last_offset: int, max_records: int,
                now_ms: int, skip: Sequence[tuple[int, int]] = ()) -> list[Acquired]:
        """Acquire for `member_id` up to `max_records` AVAILABLE records among the offsets
        `first_offset`..`last_offset` (those a fetch read from the log), lowest first; records never
        delivered only within `max_in_flight` of the SPSO. Offsets inside the `skip` ranges (first,
        last), which are never to be delivered (control records, aborted transactions' records under
        read_committed), are archived on the way instead."""
        acquired: list[Acquired] = []
        budget = max_records
        offset = max(first_offset, self.start_offset)
        deadline = now_ms + self.lock_duration_ms
        archived = False
        while budget > 0 and offset <= last_offset:
            record = self.records.get(offset)
            if offset >= self.end_offset:
                if offset >= self.start_offset + self.max_in_flight:
                    break                    # the in-flight window (Kafka's max record locks) is full
                record = self.records[offset] = InFlight(RecordState.AVAILABLE, 0)
                self.end_offset = offset + 1
            elif record is None:             # an in-range offset never delivered (restored state)
                record = self.records[offset] = InFlight(RecordState.AVAILABLE, 0)
            if record.state is RecordState.AVAILABLE and _inside(skip, offset):
                self._settle(record, RecordState.ARCHIVED)
                archived = True
            elif record.state is RecordState.AVAILABLE:
                record.state, record.member_id, record.lock_deadline_ms = RecordState.ACQUIRED, member_id, deadline
                record.delivery_count += 1
                _extend(acquired, offset, record.delivery_count)
                budget -= 1
            offset += 1
        if acquired or archived:
            self.version += 1
        if archived:
            self._advance_start()
        return acquired

    # ---- acknowledging -----------------------------------------------------------------------------
    def acknowledge(self, member_id: str, first_offset: int, last_offset: int, types: list[int],
                    now_ms: int) -> ErrorCode:
        """One AcknowledgementBatch: a single type for the whole range, or one per offset. All of it
        applies or none (INVALID_RECORD_STATE when some offset is not acquired by this member)."""
        if last_offset < first_offset or not types or (len(types) != 1 and len(types) != last_offset - first_offset + 1):
            return E.INVALID_REQUEST
        if any(t not in AckType._value2member_map_ for t in types):
            return E.INVALID_REQUEST
        plan = []
        for i, offset in enumerate(range(first_offset, last_offset + 1)):
            ack = AckType(types[0] if len(types) == 1 else types[i])
            if offset < self.start_offset:
                return E.INVALID_RECORD_STATE
            record = self.records.get(offset)
            if record is None or record.state is not RecordState.ACQUIRED or record.member_id != member_id:
                return E.INVALID_RECORD_STATE
            plan.append((record, ack))
        for record, ack in plan:
            if ack is AckType.RENEW:
                record.lock_deadline_ms = now_ms + self.lock_duration_ms
            elif ack is AckType.ACCEPT:
                self._settle(record, RecordState.ACKNOWLEDGED)
            elif ack is AckType.RELEASE:
                self._release(record)
            else:                                    # REJECT, or GAP (no record at that offset)
                self._settle(record, RecordState.ARCHIVED)
        self.version += 1
        self._advance_start()
        return E.NONE

    def release_member(self, member_id: str) -> int:
        """A member left or closed its share session: whatever it holds becomes available again."""
        released = 0
        for record in self.records.values():
            if record.state is RecordState.ACQUIRED and record.member_id == member_id:
                self._release(record)
                released += 1
        if released:
            self.version += 1
            self._advance_start()
        return released

    # ---- time --------------------------------------------------------------------------------------
    def expire_locks(self, now_ms: int) -> int:
        """Acquisition locks past their deadline end: the records go back (or to the archive)."""
        expired = 0
        for record in self.records.values():
            if record.state is RecordState.ACQUIRED and record.lock_deadline_ms <= now_ms:
                self._release(record)
                expired += 1
        if expired:
            self.version += 1
            self._advance_start()
        return expired

    def next_lock_deadline(self) -> Optional[int]:
        deadlines = [r.lock_deadline_ms for r in self.records.values() if r.state is RecordState.ACQUIRED]
        return min(deadlines) if deadlines else None

    # ---- durable form ------------------------------------------------------------------------------
    def snapshot(self) -> list[StateBatch]:
        """The in-flight records as runs of one state and delivery count. An acquired record is kept
        as AVAILABLE with its delivery count: locks do not survive a restart, deliveries do."""
        batches: list[StateBatch] = []
        for offset in range(self.start_offset, self.end_offset):
            record = self.records.get(offset) or InFlight(RecordState.AVAILABLE, 0)
            state = RecordState.AVAILABLE if record.state is RecordState.ACQUIRED else record.state
            last = batches[-1] if batches else None
            if last and last.last_offset == offset - 1 and last.delivery_state == state \
                    and last.delivery_count == record.delivery_count:
                batches[-1] = StateBatch(last.first_offset, offset, int(state), record.delivery_count)
            else:
                batches.append(StateBatch(offset, offset, int(state), record.delivery_count))
        return batches

    def restore(self, start_offset: int, batches: Iterable[StateBatch]) -> None:
        self.start_offset = self.end_offset = start_offset
        self.records = {}
        for batch in batches:
            for offset in range(max(batch.first_offset, start_offset), batch.last_offset + 1):
                state = RecordState(batch.delivery_state)
                if state is RecordState.ACQUIRED:
                    state = RecordState.AVAILABLE
                self.records[offset] = InFlight(state, batch.delivery_count)
                self.end_offset = max(self.end_offset, offset + 1)
        self._advance_start()

    def reset_start(self, offset: int) -> None:
        """Move the SPSO (the log start moved past it, or an admin reset): everything below is done."""
        if offset <= self.start_offset:
            return
        for o in [o for o in self.records if o < offset]:
            del self.records[o]
        self.start_offset = offset
        self.end_offset = max(self.end_offset, offset)
        self.version += 1

    # ---- inside --------------------------------------------------------------------------------------
    def _release(self, record: InFlight) -> None:
        # a record that has had its last delivery goes to the archive instead of back to AVAILABLE
        if record.delivery_count >= self.delivery_count_limit:
            self._settle(record, RecordState.ARCHIVED)
        else:
            self._settle(record, RecordState.AVAILABLE)

    @staticmethod
    def _settle(record: InFlight, state: RecordState) -> None:
        record.state, record.member_id, record.lock_deadline_ms = state, None, 0

    def _advance_start(self) -> None:
        offset = self.start_offset
        while offset < self.end_offset:
            record = self.records.get(offset)
            if record is None or record.state not in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED):
                break
            del self.records[offset]
            offset += 1
        self.start_offset = offset


def _inside(ranges: Sequence[tuple[int, int]], offset: int) -> bool:
    return any(first <= offset <= last for first, last in ranges)


def _extend(runs: list[Acquired], offset: int, delivery_count: int) -> None:
    last = runs[-1] if runs else None
    if last and last.last_offset == offset - 1 and last.delivery_count == delivery_count:
        runs[-1] = Acquired(last.first_offset, offset, delivery_count)
    else:
        runs.append(Acquired(offset, offset, delivery_count))
