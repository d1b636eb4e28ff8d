"""The transaction coordinator, as a core without I/O.

Kafka's TransactionCoordinator for clients without transaction version 2: InitProducerId with and
without a transactional id (KIP-360 epoch bumps and producer-id rotation), AddPartitionsToTxn (and
the verify-only check), AddOffsetsToTxn, EndTxn through PrepareCommit/PrepareAbort to
CompleteCommit/CompleteAbort, epoch fencing, aborting transactions that outlive their timeout, and
expiring idle transactional ids. Every transition is written to a `TransactionLog` before it takes
effect; markers go out through a `MarkerWriter` that reports back when they are all written.

While a transactional id's write is in flight (acks=all: waiting for its followers), requests for it
are answered as Kafka answers during its "pending state": from the transaction as it was before the
write (with the epoch a fence already bumped), and CONCURRENT_TRANSACTIONS wherever they would
change it. So no request acts on a transition that has not committed, and a producer cannot write
to a partition whose AddPartitionsToTxn a new coordinator may never see.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Iterable, Optional, Protocol

from protocol import ErrorCode

from .clock import Timers
from .log_records import TransactionLog, TransactionRecord, TransactionSnapshot, TxnPartitions
from .txn_state import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, STATE_BY_NAME, TxnMetadata, TxnState

E = ErrorCode
T = TxnState


@dataclass
class TxnConfig:
    max_timeout_ms: int = 900_000  # transaction.max.timeout.ms
    abort_check_interval_ms: int = 10_000  # transaction.abort.timed.out.transaction.cleanup.interval.ms
    id_expiration_ms: int = 7 * 24 * 3600 * 1000  # transactional.id.expiration.ms
    id_expiry_check_interval_ms: int = 3_600_000  # transaction.remove.expired.transaction.cleanup.interval.ms
    marker_retry_ms: int = 1_000


class ProducerIdSource(Protocol):
    def next_id(self) -> int:
        """A producer id never handed out before (raises if none can be had right now)."""


class MarkerWriter(Protocol):
    def write_markers(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                      partitions: list[tuple[str, int]], done: Callable[[bool], None]) -> None:
        """Write a commit/abort control marker to every partition, then call done(True), or
        done(False) if it failed and should be retried."""


class CounterProducerIds:
    """Producer ids from a counter: for tests and for running without a controller."""

    def __init__(self, start: int = 0):
        self._next = start

    def next_id(self) -> int:
        value, self._next = self._next, self._next + 1
        return value


@dataclass
class InitProducerIdResult:
    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass
class TxnDescription:
    transactional_id: str
    error: ErrorCode = E.NONE
    state: str = ""
    timeout_ms: int = 0
    start_timestamp: int = -1
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    partitions: list[tuple[str, int]] = field(default_factory=list)


@dataclass
class _WritesInFlight:
    view: TxnMetadata       # what requests see until the writes commit (Kafka's committed metadata)
    count: int = 0


class TransactionCoordinator:
    def __init__(self, clock, timers: Timers, log: TransactionLog, producer_ids: ProducerIdSource,
                 markers: MarkerWriter, config: TxnConfig | None = None,
                 offsets_partition_for: Callable[[str], tuple[str, int]] = lambda g: ("__consumer_offsets", 0)):
        self.clock = clock
        self.timers = timers
        self.log = log
        self.producer_ids = producer_ids
        self.markers = markers
        self.config = config or TxnConfig()
        self.offsets_partition_for = offsets_partition_for
        self.txns: dict[str, TxnMetadata] = {}   # as written to the log (the last write may not have committed)
        self._in_flight: dict[str, _WritesInFlight] = {}
        self._schedule(("txn-abort-expired",), self.config.abort_check_interval_ms, self._abort_timed_out)
        self._schedule(("txn-expire-ids",), self.config.id_expiry_check_interval_ms, self._expire_ids)

    # ==== InitProducerId ==============================================================================
    def init_producer_id(self, transactional_id: Optional[str], timeout_ms: int,
                         expected_producer_id: int = NO_PRODUCER_ID,
                         expected_epoch: int = NO_PRODUCER_EPOCH) -> InitProducerIdResult:
        if transactional_id is None:
            # idempotent producer: always a fresh id at epoch 0 (KIP-360 callers included)
            return self._fresh_id()
        if not transactional_id:
            return InitProducerIdResult(E.INVALID_REQUEST)
        if not (0 < timeout_ms <= self.config.max_timeout_ms):
            return InitProducerIdResult(E.INVALID_TRANSACTION_TIMEOUT)
        expected = expected_producer_id if expected_producer_id >= 0 else None
        txn = self.txns.get(transactional_id)
        if txn is None:
            try:
                producer_id = self.producer_ids.next_id()
            except Exception:
                return InitProducerIdResult(E.COORDINATOR_LOAD_IN_PROGRESS)
            txn = TxnMetadata(transactional_id, producer_id, NO_PRODUCER_EPOCH, timeout_ms,
                              last_update_timestamp=self.clock.now_ms())
            self.txns[transactional_id] = txn  # dropped again below if the first write fails
            created = True
        else:
            created = False
        if transactional_id in self._in_flight or txn.markers_in_flight:
            return InitProducerIdResult(E.CONCURRENT_TRANSACTIONS)
        if expected is not None and not (
                txn.producer_epoch == NO_PRODUCER_EPOCH or expected == txn.producer_id
                or (expected == txn.previous_producer_id and expected_epoch >= 32766)):
            return InitProducerIdResult(E.PRODUCER_FENCED)
        if txn.state in (T.PREPARE_ABORT, T.PREPARE_COMMIT):
            return InitProducerIdResult(E.CONCURRENT_TRANSACTIONS)
        if txn.state is T.ONGOING:
            # fence the current producer and abort its transaction; the client retries and gets a
            # second bump once the abort completes
            self._fence_and_abort(txn)
            return InitProducerIdResult(E.CONCURRENT_TRANSACTIONS)
        if txn.state not in (T.EMPTY, T.COMPLETE_ABORT, T.COMPLETE_COMMIT):
            return InitProducerIdResult(E.CONCURRENT_TRANSACTIONS)
        now = self.clock.now_ms()
        # the last transaction's start time stays (DescribeTransactions shows it, as Kafka's)
        new = replace(txn, partitions=set(), last_update_timestamp=now, timeout_ms=timeout_ms,
                      state=T.EMPTY)
        if txn.epoch_exhausted() and (expected is None or expected_epoch == txn.producer_epoch):
            try:
                new_id = self.producer_ids.next_id()
            except Exception:
                return InitProducerIdResult(E.COORDINATOR_LOAD_IN_PROGRESS)
            new.previous_producer_id, new.producer_id = txn.producer_id, new_id
            new.producer_epoch, new.last_producer_epoch = 0, NO_PRODUCER_EPOCH
        elif expected is None:
            new.producer_epoch, new.last_producer_epoch = txn.producer_epoch + 1, NO_PRODUCER_EPOCH
        elif txn.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == txn.producer_epoch:
            new.producer_epoch, new.last_producer_epoch = txn.producer_epoch + 1, txn.producer_epoch
        elif expected_epoch == txn.last_producer_epoch:
            pass  # a retry of a bump that already happened: answer with the current epoch
        else:
            return InitProducerIdResult(E.PRODUCER_FENCED)
        if not self._write(new):
            if created:
                del self.txns[transactional_id]
            return InitProducerIdResult(E.COORDINATOR_NOT_AVAILABLE)
        return InitProducerIdResult(E.NONE, new.producer_id, new.producer_epoch)

    def _fresh_id(self) -> InitProducerIdResult:
        try:
            return InitProducerIdResult(E.NONE, self.producer_ids.next_id(), 0)
        except Exception:
            return InitProducerIdResult(E.COORDINATOR_LOAD_IN_PROGRESS)

    # ==== AddPartitionsToTxn / AddOffsetsToTxn ========================================================
    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: Iterable[tuple[str, int]]) -> ErrorCode:
        partitions = set(partitions)
        txn, error = self._check_client(transactional_id, producer_id, producer_epoch)
        if error is not E.NONE:
            return error
        if txn.state is T.ONGOING and partitions <= txn.partitions:
            return E.NONE
        now = self.clock.now_ms()
        new = replace(txn, state=T.ONGOING, partitions=txn.partitions | partitions, last_update_timestamp=now)
        if txn.state is not T.ONGOING:
            new.start_timestamp = now
        return E.NONE if self._write(new) else E.COORDINATOR_NOT_AVAILABLE

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], ErrorCode]:
        """The verify-only path of AddPartitionsToTxn v4+: are these partitions in the transaction?
        As Kafka, from its committed state without regard to a write in flight: a partition whose
        AddPartitionsToTxn has not committed is not in it yet."""
        txn = self.view(transactional_id) if transactional_id else None
        if not transactional_id:
            error = E.INVALID_REQUEST
        elif txn is None or txn.producer_id != producer_id:
            error = E.INVALID_PRODUCER_ID_MAPPING
        elif txn.producer_epoch != producer_epoch:
            error = E.PRODUCER_FENCED
        elif txn.markers_in_flight or txn.state in (T.PREPARE_COMMIT, T.PREPARE_ABORT):
            error = E.CONCURRENT_TRANSACTIONS
        else:
            return {tp: (E.NONE if tp in txn.partitions else E.TRANSACTION_ABORTABLE) for tp in partitions}
        return {tp: error for tp in partitions}

    def transactional_id_of(self, producer_id: int) -> Optional[str]:
        """The transactional id whose current producer id is `producer_id`, if any (a linear scan:
        only for Produce requests that omit their transactional id)."""
        for transactional_id in self.txns:
            if self.view(transactional_id).producer_id == producer_id:
                return transactional_id
        return None

    def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int,
                    group_id: str) -> ErrorCode:
        return self.add_partitions(transactional_id, producer_id, producer_epoch,
                                   [self.offsets_partition_for(group_id)])

    def _check_client(self, transactional_id: str, producer_id: int, producer_epoch: int
                      ) -> tuple[Optional[TxnMetadata], ErrorCode]:
        if not transactional_id:
            return None, E.INVALID_REQUEST
        txn = self.view(transactional_id)
        if txn is None or txn.producer_id != producer_id:
            return txn, E.INVALID_PRODUCER_ID_MAPPING
        if txn.producer_epoch != producer_epoch:
            return txn, E.PRODUCER_FENCED
        if transactional_id in self._in_flight or txn.markers_in_flight \
                or txn.state in (T.PREPARE_COMMIT, T.PREPARE_ABORT):
            return txn, E.CONCURRENT_TRANSACTIONS
        return txn, E.NONE

    # ==== EndTxn ======================================================================================
    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool) -> ErrorCode:
        if not transactional_id:
            return E.INVALID_REQUEST
        txn = self.view(transactional_id)
        if txn is None or txn.producer_id != producer_id:
            return E.INVALID_PRODUCER_ID_MAPPING
        if producer_epoch != txn.producer_epoch:
            return E.PRODUCER_FENCED
        if transactional_id in self._in_flight or txn.markers_in_flight:
            return E.CONCURRENT_TRANSACTIONS
        state = txn.state
        if state is T.ONGOING:
            return self._prepare_end(txn, commit)
        if state is T.COMPLETE_COMMIT:
            return E.NONE if commit else E.INVALID_TXN_STATE
        if state is T.COMPLETE_ABORT:
            return E.INVALID_TXN_STATE if commit else E.NONE
        if state is T.PREPARE_COMMIT:
            return E.CONCURRENT_TRANSACTIONS if commit else E.INVALID_TXN_STATE
        if state is T.PREPARE_ABORT:
            return E.INVALID_TXN_STATE if commit else E.CONCURRENT_TRANSACTIONS
        return E.INVALID_TXN_STATE

    def _prepare_end(self, txn: TxnMetadata, commit: bool) -> ErrorCode:
        now = self.clock.now_ms()
        prepared = replace(txn, state=T.PREPARE_COMMIT if commit else T.PREPARE_ABORT, last_update_timestamp=now)
        if not self._write(prepared):
            return E.COORDINATOR_NOT_AVAILABLE
        self._send_markers(prepared)
        return E.NONE

    def _fence_and_abort(self, txn: TxnMetadata) -> bool:
        """Bump the epoch so the current producer is fenced, then abort with the new epoch."""
        if txn.producer_epoch >= 32767:
            return False
        bumped = replace(txn, producer_epoch=txn.producer_epoch + 1, last_producer_epoch=NO_PRODUCER_EPOCH,
                         state=T.PREPARE_ABORT, last_update_timestamp=self.clock.now_ms())
        # as Kafka, the fenced producer is fenced at once, not once the abort commits
        if not self._write(bumped, view=replace(txn, producer_epoch=bumped.producer_epoch,
                                                last_producer_epoch=NO_PRODUCER_EPOCH)):
            return False
        self._send_markers(bumped)
        return True

    def _send_markers(self, txn: TxnMetadata) -> None:
        txn = self.txns[txn.transactional_id]
        txn.markers_in_flight = True
        commit = txn.state is T.PREPARE_COMMIT
        epoch, producer_id = txn.producer_epoch, txn.producer_id

        def done(ok: bool) -> None:
            current = self.txns.get(txn.transactional_id)
            if current is not txn or txn.producer_epoch != epoch:
                return
            if not ok:
                self._schedule(("txn-markers", txn.transactional_id), self.config.marker_retry_ms,
                               lambda: self._send_markers(txn))
                return
            complete = replace(txn, state=T.COMPLETE_COMMIT if commit else T.COMPLETE_ABORT, partitions=set(),
                               last_update_timestamp=self.clock.now_ms(), markers_in_flight=False)
            if not self._write(complete):
                self._schedule(("txn-markers", txn.transactional_id), self.config.marker_retry_ms,
                               lambda: done(True))

        self.markers.write_markers(txn.transactional_id, producer_id, epoch, commit, sorted(txn.partitions), done)

    # ==== timeouts ====================================================================================
    def _abort_timed_out(self) -> None:
        now = self.clock.now_ms()
        for txn in list(self.txns.values()):
            if txn.state is T.ONGOING and not txn.markers_in_flight and txn.transactional_id not in self._in_flight \
                    and txn.start_timestamp + txn.timeout_ms < now:
                self._fence_and_abort(txn)
        self._schedule(("txn-abort-expired",), self.config.abort_check_interval_ms, self._abort_timed_out)

    def _expire_ids(self) -> None:
        now = self.clock.now_ms()
        for txn in list(self.txns.values()):
            if txn.state in (T.EMPTY, T.COMPLETE_COMMIT, T.COMPLETE_ABORT) and not txn.markers_in_flight \
                    and txn.transactional_id not in self._in_flight \
                    and txn.last_update_timestamp + self.config.id_expiration_ms <= now:
                try:
                    self.log.append(TransactionRecord(txn.transactional_id, None))
                except Exception:
                    continue
                txn.state = T.DEAD
                del self.txns[txn.transactional_id]
        self._schedule(("txn-expire-ids",), self.config.id_expiry_check_interval_ms, self._expire_ids)

    def _schedule(self, key, delay_ms: int, callback) -> None:
        self.timers.schedule(key, self.clock.now_ms() + delay_ms, callback)

    # ==== admin =======================================================================================
    def describe(self, transactional_id: str) -> TxnDescription:
        txn = self.view(transactional_id)
        if txn is None:
            return TxnDescription(transactional_id, E.TRANSACTIONAL_ID_NOT_FOUND)
        return TxnDescription(transactional_id, E.NONE, txn.state.display_name, txn.timeout_ms,
                              txn.start_timestamp, txn.producer_id, txn.producer_epoch, sorted(txn.partitions))

    def list(self, states: Iterable[str] = (), producer_ids: Iterable[int] = (), min_duration_ms: int = -1
             ) -> tuple[list[tuple[str, int, str]], list[str]]:
        """(transactional id, producer id, state name) matching the filters, and the unknown state names."""
        wanted, unknown = set(), []
        for name in states:
            state = STATE_BY_NAME.get(name)
            if state is None:
                unknown.append(name)
            else:
                wanted.add(state)
        ids = set(producer_ids)
        now = self.clock.now_ms()
        out = []
        for txn in map(self.view, list(self.txns)):
            if (wanted or unknown) and txn.state not in wanted:
                continue
            if ids and txn.producer_id not in ids:
                continue
            if min_duration_ms >= 0 and now - txn.start_timestamp <= min_duration_ms:
                continue  # Kafka's filter: running strictly longer than the duration
            out.append((txn.transactional_id, txn.producer_id, txn.state.display_name))
        return out, unknown

    # ==== persistence =================================================================================
    def view(self, transactional_id: str) -> Optional[TxnMetadata]:
        """The transaction as requests see it: without the writes still in flight."""
        writes = self._in_flight.get(transactional_id)
        return writes.view if writes is not None else self.txns.get(transactional_id)

    def _write(self, new: TxnMetadata, view: Optional[TxnMetadata] = None) -> bool:
        """Log the new metadata, and only once that worked, make it current. Until the write
        commits, requests see `view` (by default the transaction as it was)."""
        transactional_id = new.transactional_id
        try:
            written = self.log.append(TransactionRecord(transactional_id, self.snapshot(new)))
        except Exception:
            return False
        current = self.txns.get(transactional_id)
        writes = self._in_flight.get(transactional_id)
        if writes is None and current is not None:
            writes = self._in_flight[transactional_id] = _WritesInFlight(
                replace(current, partitions=set(current.partitions)))
        if writes is not None:
            if view is not None:
                writes.view = view
            writes.count += 1
        if current is None:
            self.txns[transactional_id] = new
        else:
            current.__dict__.update(new.__dict__)  # keep identity: marker callbacks hold the object
        if writes is not None:
            written.add_callback(lambda _code: self._acknowledged(transactional_id, writes))
        return True

    def _acknowledged(self, transactional_id: str, writes: _WritesInFlight) -> None:
        """A write committed or failed: either way it is no longer in flight (after a failure the
        log still holds it, and answers that rest on it wait for it to commit)."""
        writes.count -= 1
        if writes.count == 0 and self._in_flight.get(transactional_id) is writes:
            del self._in_flight[transactional_id]

    @staticmethod
    def snapshot(txn: TxnMetadata) -> TransactionSnapshot:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(txn.partitions):
            by_topic.setdefault(topic, []).append(partition)
        return TransactionSnapshot(txn.producer_id, txn.previous_producer_id, txn.next_producer_id,
                                   txn.producer_epoch, txn.timeout_ms, int(txn.state),
                                   tuple(TxnPartitions(t, tuple(ps)) for t, ps in by_topic.items()),
                                   txn.last_update_timestamp, txn.start_timestamp)

    def replay(self, record: TransactionRecord) -> None:
        self._in_flight.pop(record.transactional_id, None)
        if record.value is None:
            self.txns.pop(record.transactional_id, None)
            return
        v = record.value
        self.txns[record.transactional_id] = TxnMetadata(
            record.transactional_id, v.producer_id, v.producer_epoch, v.timeout_ms, TxnState(v.state),
            v.previous_producer_id, v.next_producer_id, NO_PRODUCER_EPOCH,
            {(p.topic, i) for p in v.partitions for i in p.partitions}, v.start_timestamp,
            v.last_update_timestamp)

    def loaded(self, transactional_ids: Optional[Iterable[str]] = None) -> None:
        """After replay (of every id, or of `transactional_ids`): finish every commit or abort that
        was decided but not completed."""
        wanted = list(self.txns.values()) if transactional_ids is None else \
            [self.txns[t] for t in transactional_ids if t in self.txns]
        for txn in wanted:
            if txn.state in (T.PREPARE_COMMIT, T.PREPARE_ABORT):
                self._send_markers(txn)

    def unload(self, transactional_ids: Iterable[str]) -> None:
        """This broker stopped coordinating these ids (their `__transaction_state` partition moved).
        Markers still in flight for them report back to nobody: the new coordinator resends them."""
        for transactional_id in list(transactional_ids):
            self._in_flight.pop(transactional_id, None)
            if self.txns.pop(transactional_id, None) is not None:
                self.timers.cancel(("txn-markers", transactional_id))
