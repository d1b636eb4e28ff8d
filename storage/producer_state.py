"""Producer state for idempotence and transactions, as Kafka's ProducerStateManager keeps it.

Per producer id: the epoch, metadata of the last 5 batches (sequence range,
offsets, timestamp), the coordinator epoch of its last marker and the first
offset of its ongoing transaction.  From this the log gets duplicate detection,
sequence/epoch checks, the ongoing transactions (hence the last stable offset)
and completed transactions (hence the aborted-transaction index).

Snapshots (`<offset>.snapshot`, Kafka's v1 layout: version int16, crc32c uint32,
then entries of pid int64, epoch int16, last sequence int32, last offset int64,
offset delta int32, timestamp int64, coordinator epoch int32, current txn first
offset int64) let a restart skip replaying the whole log.
"""

from __future__ import annotations

import collections
import os
import struct
from typing import NamedTuple

import crc32c

from protocol.records import NO_PRODUCER_EPOCH, NO_SEQUENCE, ControlType, RecordBatch
from storage.errors import (
    ErrorCode, InvalidProducerEpochError, InvalidTxnStateError, OutOfOrderSequenceError, StorageError,
)

NUM_BATCHES_TO_RETAIN = 5
SNAPSHOT_SUFFIX = ".snapshot"
_SNAP_HEADER = struct.Struct(">hIi")
_SNAP_ENTRY = struct.Struct(">qhiqiqiq")
_SNAP_VERSION = 1


# The guard for a batch whose transaction the log already holds: it verifies nothing, so a
# marker closing that transaction before the append makes the append fail.
ALREADY_IN_TRANSACTION = object()


class BatchMetadata(NamedTuple):
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


class CompletedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int  # the marker's offset
    is_aborted: bool


class ProducerEntry:
    __slots__ = ("producer_id", "epoch", "batches", "coordinator_epoch", "current_txn_first_offset",
                 "last_timestamp")

    def __init__(self, producer_id: int, epoch: int = NO_PRODUCER_EPOCH, coordinator_epoch: int = -1,
                 current_txn_first_offset: int | None = None, last_timestamp: int = -1):
        self.producer_id = producer_id
        self.epoch = epoch
        self.batches: collections.deque[BatchMetadata] = collections.deque(maxlen=NUM_BATCHES_TO_RETAIN)
        self.coordinator_epoch = coordinator_epoch
        self.current_txn_first_offset = current_txn_first_offset
        self.last_timestamp = last_timestamp

    def copy(self) -> "ProducerEntry":
        other = ProducerEntry(self.producer_id, self.epoch, self.coordinator_epoch,
                              self.current_txn_first_offset, self.last_timestamp)
        other.batches.extend(self.batches)
        return other

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, batch: RecordBatch) -> BatchMetadata | None:
        # a batch without a sequence (a coordinator's transactional offset commit) is never a retry:
        # matching it against an earlier one would drop the second commit of a producer epoch
        if batch.producer_epoch != self.epoch or batch.base_sequence == NO_SEQUENCE:
            return None
        for meta in self.batches:
            if meta.first_seq == batch.base_sequence and meta.last_seq == batch.last_sequence:
                return meta
        return None


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == 2**31 - 1)


class ProducerStateManager:
    def __init__(self, directory: str):
        self.directory = directory
        self.producers: dict[int, ProducerEntry] = {}
        # first offset -> producer id, in offset order (transactions begin in log order)
        self.ongoing: dict[int, int] = {}
        # completed transactions whose marker is not yet below the high watermark:
        # first offset -> marker offset (still unstable for read_committed, as in Kafka)
        self.unreplicated: dict[int, int] = {}
        self.map_end_offset = 0  # the offset up to which the state reflects the log
        # Kafka's verification guards (KIP-890): producer id -> the token handed out when its
        # transaction's first batch here was verified with the coordinator. A marker for the
        # producer clears it, so a batch verified before an abort cannot open a new transaction.
        self.verification_guards: dict[int, object] = {}

    # -- queries ------------------------------------------------------------------------
    @property
    def first_unstable_offset(self) -> int | None:
        first = next(iter(self.ongoing), None)
        if self.unreplicated:
            done = min(self.unreplicated)
            first = done if first is None else min(first, done)
        return first

    def on_high_watermark(self, high_watermark: int) -> None:
        """Transactions whose marker is below the high watermark become stable."""
        if self.unreplicated:
            self.unreplicated = {f: m for f, m in self.unreplicated.items() if m >= high_watermark}

    def lso_after(self, completed: CompletedTxn) -> int:
        """The first unstable offset once `completed` is gone, else the marker + 1."""
        for first in self.ongoing:
            if first != completed.first_offset:
                return first
        return completed.last_offset + 1

    # -- transaction verification (KIP-890) ------------------------------------------------
    def start_verification(self, producer_id: int, producer_epoch: int) -> object:
        """Taken before the transaction coordinator is asked whether this partition is in the
        producer's transaction; the append must bring it back (check_verification). A marker for
        the producer voids it, and the ALREADY_IN_TRANSACTION guard given while the log holds that
        transaction: a batch verified before an abort can then not open a transaction no marker
        closes. Concurrent first batches of one transaction share a guard."""
        if self.in_transaction(producer_id, producer_epoch):
            return ALREADY_IN_TRANSACTION
        return self.verification_guards.setdefault(producer_id, object())

    def in_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        """Whether the log holds an open transaction of the producer at this epoch or a later one:
        a batch then needs no verification (as Kafka 3.9; an older epoch's is refused on append,
        INVALID_PRODUCER_EPOCH)."""
        entry = self.producers.get(producer_id)
        return entry is not None and entry.epoch >= producer_epoch and entry.current_txn_first_offset is not None

    def check_verification(self, batches, guard: object) -> None:
        """Kafka's check on append: a transaction's first batch here needs its live guard."""
        for batch in batches:
            if not batch.is_transactional or batch.is_control:
                continue
            if self.in_transaction(batch.producer_id, batch.producer_epoch):
                continue
            if self.verification_guards.get(batch.producer_id) is not guard:
                raise InvalidTxnStateError("Record was not part of an ongoing transaction")

    # -- appends ---------------------------------------------------------------------------
    def prepare(self, placed, *, validate: bool, read_control,
                sequences: bool | None = None) -> "PendingAppend":
        """Check the batches (with their assigned offsets) against the current state.

        `placed` is [(batch, first_offset, last_offset, timestamp)]; `read_control(batch)`
        returns the ControlRecord of a control batch.  Raises the Kafka errors; returns a
        PendingAppend to commit after the write, or one whose `duplicate` is set. `sequences`
        (default: `validate`) also checks sequence numbers and finds retries: as Kafka, only for a
        client's batches, not a coordinator's (its offset commits all start at sequence 0).
        """
        sequences = validate if sequences is None else sequences
        pending = PendingAppend()
        for batch, first, last, timestamp in placed:
            pid = batch.producer_id
            if pid < 0:
                continue
            entry = pending.entries.get(pid)
            if entry is None:
                current = self.producers.get(pid)
                if sequences and current is not None and not batch.is_control:
                    dup = current.find_duplicate(batch)
                    if dup is not None:
                        pending.duplicate = dup
                        return pending
                entry = current.copy() if current is not None else ProducerEntry(pid)
                pending.entries[pid] = entry
            if batch.is_control:
                self._apply_marker(entry, batch, first, timestamp, read_control(batch), validate, pending)
            else:
                self._apply_data(entry, batch, first, last, timestamp, validate, sequences, pending)
        return pending

    def _check_epoch(self, entry: ProducerEntry, epoch: int, validate: bool) -> None:
        if validate and epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"epoch {epoch} of producer {entry.producer_id} is older than the current epoch {entry.epoch}")

    def _apply_data(self, entry, batch, first, last, timestamp, validate, sequences, pending) -> None:
        self._check_epoch(entry, batch.producer_epoch, validate)
        if sequences and batch.base_sequence != NO_SEQUENCE:
            if batch.producer_epoch != entry.epoch:
                if batch.base_sequence != 0 and entry.epoch != NO_PRODUCER_EPOCH:
                    raise OutOfOrderSequenceError(
                        f"invalid sequence {batch.base_sequence} for the new epoch {batch.producer_epoch} "
                        f"of producer {entry.producer_id}")
            elif entry.epoch != NO_PRODUCER_EPOCH and not _in_sequence(entry.last_seq, batch.base_sequence):
                # (no batch kept, e.g. after a marker bumped the epoch: only 0 follows)
                raise OutOfOrderSequenceError(
                    f"out of order sequence for producer {entry.producer_id}: expected "
                    f"{entry.last_seq + 1}, got {batch.base_sequence}")
        if batch.producer_epoch != entry.epoch:
            entry.batches.clear()
            entry.epoch = batch.producer_epoch
        if validate and entry.current_txn_first_offset is not None and not batch.is_transactional:
            raise InvalidTxnStateError(
                f"non-transactional batch from producer {entry.producer_id} inside its ongoing transaction")
        entry.batches.append(BatchMetadata(batch.base_sequence, batch.last_sequence, first, last, timestamp))
        entry.last_timestamp = timestamp
        if batch.is_transactional and entry.current_txn_first_offset is None:
            entry.current_txn_first_offset = first
            pending.started.append((first, entry.producer_id))

    def _apply_marker(self, entry, batch, offset, timestamp, control, validate, pending) -> None:
        if validate and control.coordinator_epoch < entry.coordinator_epoch:
            raise StorageError(
                f"marker for producer {entry.producer_id} has coordinator epoch {control.coordinator_epoch} "
                f"below {entry.coordinator_epoch}", ErrorCode.TRANSACTION_COORDINATOR_FENCED)
        self._check_epoch(entry, batch.producer_epoch, validate)
        if batch.producer_epoch != entry.epoch:
            entry.batches.clear()
            entry.epoch = batch.producer_epoch
        if entry.current_txn_first_offset is not None:
            pending.completed.append(CompletedTxn(entry.producer_id, entry.current_txn_first_offset, offset,
                                                  control.type == ControlType.ABORT))
        entry.current_txn_first_offset = None
        pending.markers.append(entry.producer_id)
        entry.coordinator_epoch = control.coordinator_epoch
        entry.last_timestamp = timestamp

    def commit(self, pending: "PendingAppend", end_offset: int) -> list[CompletedTxn]:
        self.producers.update(pending.entries)
        for first, pid in pending.started:
            self.ongoing[first] = pid
        for pid in pending.markers:
            self.verification_guards.pop(pid, None)
        for txn in pending.completed:
            self.ongoing.pop(txn.first_offset, None)
            self.unreplicated[txn.first_offset] = txn.last_offset
        self.map_end_offset = end_offset
        return pending.completed

    # -- maintenance -------------------------------------------------------------------------
    def expire(self, now_ms: int, expiration_ms: int) -> None:
        """Kafka's producer.id.expiration.ms: forget idle producers without a transaction."""
        for pid in [p for p, e in self.producers.items()
                    if e.current_txn_first_offset is None and now_ms - e.last_timestamp >= expiration_ms]:
            del self.producers[pid]

    def evict_below(self, log_start_offset: int) -> None:
        """Producers whose last write fell below the log start are forgotten."""
        for pid in [p for p, e in self.producers.items()
                    if e.current_txn_first_offset is None and 0 <= e.last_offset < log_start_offset]:
            del self.producers[pid]

    def reset(self, offset: int) -> None:
        self.producers.clear()
        self.ongoing.clear()
        self.unreplicated.clear()
        self.map_end_offset = offset

    # -- snapshots ---------------------------------------------------------------------------
    def snapshot_path(self, offset: int) -> str:
        return os.path.join(self.directory, f"{offset:020d}{SNAPSHOT_SUFFIX}")

    def snapshot_offsets(self) -> list[int]:
        out = []
        for name in os.listdir(self.directory):
            if name.endswith(SNAPSHOT_SUFFIX) and name[:-len(SNAPSHOT_SUFFIX)].isdigit():
                out.append(int(name[:-len(SNAPSHOT_SUFFIX)]))
        return sorted(out)

    def take_snapshot(self, sync: bool = True) -> None:
        offset = self.map_end_offset
        body = bytearray()
        for entry in self.producers.values():
            last = entry.batches[-1] if entry.batches else None
            body += _SNAP_ENTRY.pack(
                entry.producer_id, entry.epoch,
                last.last_seq if last else NO_SEQUENCE,
                last.last_offset if last else -1,
                (last.last_offset - last.first_offset) if last else 0,
                entry.last_timestamp, entry.coordinator_epoch,
                entry.current_txn_first_offset if entry.current_txn_first_offset is not None else -1)
        count = struct.pack(">i", len(self.producers))
        crc = crc32c.crc32c(count + body)
        data = _SNAP_HEADER.pack(_SNAP_VERSION, crc, len(self.producers)) + body
        path = self.snapshot_path(offset)
        tmp = path + ".tmp"
        try:
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                if sync:
                    os.fsync(f.fileno())
            os.replace(tmp, path)
        except OSError:
            try:
                os.remove(tmp)
            except OSError:
                pass
            raise

    def load_snapshot(self, at_or_below: int) -> int | None:
        """Load the latest readable snapshot at or below an offset; returns its offset."""
        for offset in reversed(self.snapshot_offsets()):
            if offset > at_or_below:
                continue
            try:
                self._read_snapshot(self.snapshot_path(offset), offset)
                return offset
            except (ValueError, OSError, struct.error):
                os.remove(self.snapshot_path(offset))  # corrupt: fall back to an older one
        self.reset(0)
        return None

    def _read_snapshot(self, path: str, offset: int) -> None:
        with open(path, "rb") as f:
            data = f.read()
        version, crc, count = _SNAP_HEADER.unpack_from(data, 0)
        if version != _SNAP_VERSION or crc32c.crc32c(data[6:]) != crc:
            raise ValueError(f"bad producer snapshot {path}")
        if len(data) != _SNAP_HEADER.size + count * _SNAP_ENTRY.size:
            raise ValueError(f"truncated producer snapshot {path}")
        self.reset(offset)
        pos = _SNAP_HEADER.size
        for _ in range(count):
            pid, epoch, last_seq, last_offset, delta, ts, coord, txn_first = _SNAP_ENTRY.unpack_from(data, pos)
            pos += _SNAP_ENTRY.size
            entry = ProducerEntry(pid, epoch, coord, None if txn_first < 0 else txn_first, ts)
            if last_offset >= 0:
                first_seq = NO_SEQUENCE if last_seq == NO_SEQUENCE else (last_seq - delta) & 0x7FFFFFFF
                entry.batches.append(BatchMetadata(first_seq, last_seq, last_offset - delta, last_offset, ts))
            self.producers[pid] = entry
            if entry.current_txn_first_offset is not None:
                self.ongoing[entry.current_txn_first_offset] = pid
        self.ongoing = dict(sorted(self.ongoing.items()))

    def delete_snapshots(self, *, above: int | None = None, below: int | None = None) -> None:
        offsets = self.snapshot_offsets()
        keep_latest = offsets[-1] if offsets else None
        for offset in offsets:
            if (above is not None and offset > above) or \
                    (below is not None and offset < below and offset != keep_latest):
                try:
                    os.remove(self.snapshot_path(offset))
                except FileNotFoundError:
                    pass


class PendingAppend:
    __slots__ = ("entries", "started", "completed", "markers", "duplicate")

    def __init__(self):
        self.entries: dict[int, ProducerEntry] = {}
        self.started: list[tuple[int, int]] = []
        self.completed: list[CompletedTxn] = []
        self.markers: list[int] = []          # producer ids whose marker this append writes
        self.duplicate: BatchMetadata | None = None
