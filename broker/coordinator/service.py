"""The coordinators inside a running broker: internal topics, durable writes, timers, loading.

`await CoordinatorService.of(broker)` returns the broker's service, creating it on first use: it
replays `__consumer_offsets` and `__transaction_state` (when they exist) into the cores, then runs
their timers on the event loop. Handlers call the cores, then `await service.settle()` so that the
internal-topic records the call wrote are acknowledged (high watermark advanced; fsynced first with
`log.flush.before.acknowledge`) before the client hears back.

Writes to the internal topics are synchronous page-cache appends on the event loop (a few hundred
bytes each); waiting for the disk happens in `settle`, off the loop.
"""

from __future__ import annotations

import logging
from typing import Optional

import trio

from protocol import ErrorCode
from protocol.records import ControlType, SimpleRecord, build_batch, build_control_batch, parse_control_record

from .clock import SystemClock, Timers
from .group_coordinator import GroupConfig, GroupCoordinator
from .log_records import TransactionRecord
from .serde import (SerdeError, decode_group_record, decode_txn_record, encode_group_record, encode_txn_record,
                    partition_for)
from .txn_coordinator import TransactionCoordinator, TxnConfig

log = logging.getLogger("odradek.coordinator")

OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_TOPIC = "__transaction_state"
E = ErrorCode


class CoordinatorError(Exception):
    def __init__(self, code: ErrorCode):
        super().__init__(code.name)
        self.code = code


class CoordinatorService:
    def __init__(self, broker):
        self.broker = broker
        config = broker.config
        self.clock = SystemClock()
        self.timers = Timers()
        self.offsets_partitions = config["offsets.topic.num.partitions"]
        self.txn_partitions = config["transaction.state.log.num.partitions"]
        self._unacked: list = []
        self.groups = GroupCoordinator(self.clock, self.timers, _GroupLog(self), GroupConfig(
            min_session_timeout_ms=config["group.min.session.timeout.ms"],
            max_session_timeout_ms=config["group.max.session.timeout.ms"],
            initial_rebalance_delay_ms=config["group.initial.rebalance.delay.ms"],
            max_size=config["group.max.size"],
            offsets_retention_ms=config["offsets.retention.minutes"] * 60_000,
            offsets_retention_check_interval_ms=config["offsets.retention.check.interval.ms"],
            offset_metadata_max_bytes=config["offset.metadata.max.bytes"]))
        self.producer_ids = _BlockProducerIds(broker)
        self.txns = TransactionCoordinator(
            self.clock, self.timers, _TxnLog(self), self.producer_ids, _MarkerWriter(self), TxnConfig(
                max_timeout_ms=config["transaction.max.timeout.ms"],
                abort_check_interval_ms=config["transaction.abort.timed.out.transaction.cleanup.interval.ms"],
                id_expiration_ms=config["transactional.id.expiration.ms"],
                id_expiry_check_interval_ms=config["transaction.remove.expired.transaction.cleanup.interval.ms"]),
            offsets_partition_for=lambda group: (OFFSETS_TOPIC, self.offsets_partition(group)))
        self._ready = trio.Event()
        self._loading = False
        self._topic_lock = trio.Lock()
        self._ack_lock = trio.Lock()
        self._timers_running = False
        self._wake = trio.Event()
        self._sleep_until: Optional[int] = None
        self.timers.on_change = self._maybe_wake
        broker.controller.add_listener(self._on_image_change)

    # ---- access ------------------------------------------------------------------------------------
    @classmethod
    async def of(cls, broker) -> "CoordinatorService":
        service = broker.coordinators.get("service")
        if service is None:
            service = cls(broker)
            broker.coordinators.update(service=service, group=service.groups, transaction=service.txns)
        await service._ensure_loaded()
        return service

    def offsets_partition(self, group_id: str) -> int:
        return partition_for(group_id, self.offsets_partitions)

    def txn_partition(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.txn_partitions)

    # ---- internal topics ---------------------------------------------------------------------------
    async def ensure_topic(self, name: str) -> None:
        """Create an internal topic on first use, as Kafka does on FindCoordinator."""
        if name in self.broker.image.topics:
            return
        from broker.controller.controller import CreateTopicSpec

        async with self._topic_lock:
            if name in self.broker.image.topics:
                return
            config = self.broker.config
            if name == OFFSETS_TOPIC:
                partitions = self.offsets_partitions
                wanted_rf = config["offsets.topic.replication.factor"]
                configs = {"cleanup.policy": "compact", "compression.type": "producer",
                           "segment.bytes": str(config["offsets.topic.segment.bytes"])}
            else:
                partitions = self.txn_partitions
                wanted_rf = config["transaction.state.log.replication.factor"]
                configs = {"cleanup.policy": "compact", "compression.type": "uncompressed",
                           "min.insync.replicas": str(min(config["transaction.state.log.min.isr"], wanted_rf)),
                           "segment.bytes": str(config["transaction.state.log.segment.bytes"])}
            # As Kafka: the full replication factor or nothing (INVALID_REPLICATION_FACTOR until enough
            # brokers are registered; the coordinator lookup answers COORDINATOR_NOT_AVAILABLE meanwhile).
            rf = wanted_rf
            try:
                results = await self.broker.controller.create_topics(
                    [CreateTopicSpec(name, partitions, rf, configs=configs)])
            except Exception as exc:  # e.g. the controller is not the leader right now
                log.warning("creating %s failed: %s", name, exc)
                raise CoordinatorError(E.COORDINATOR_NOT_AVAILABLE) from None
            code = results[0].error_code
            if code not in (E.NONE, E.TOPIC_ALREADY_EXISTS):
                log.warning("creating %s failed: %s %s", name, ErrorCode(code).name, results[0].error_message)
                raise CoordinatorError(E.COORDINATOR_NOT_AVAILABLE)

    def coordinator_error(self, topic: str, partition: int) -> ErrorCode:
        """NONE if this broker coordinates keys of `topic`-`partition`; else the error to answer."""
        if not self._ready.is_set():
            return E.COORDINATOR_LOAD_IN_PROGRESS
        part = self.broker.partitions.get(topic, partition)
        if part is None:
            return E.COORDINATOR_NOT_AVAILABLE
        if part.leader != self.broker.node_id:
            return E.NOT_COORDINATOR
        return E.NONE

    async def group_coordinator_error(self, group_id: str) -> ErrorCode:
        try:
            await self.ensure_topic(OFFSETS_TOPIC)
        except CoordinatorError as exc:
            return exc.code
        return self.coordinator_error(OFFSETS_TOPIC, self.offsets_partition(group_id))

    async def txn_coordinator_error(self, transactional_id: str) -> ErrorCode:
        try:
            await self.ensure_topic(TRANSACTION_TOPIC)
        except CoordinatorError as exc:
            return exc.code
        return self.coordinator_error(TRANSACTION_TOPIC, self.txn_partition(transactional_id))

    # ---- durable writes ----------------------------------------------------------------------------
    def append(self, topic: str, partition_index: int, batch: bytes) -> None:
        """Append to a local partition now; its acknowledgement waits for `settle`."""
        from storage.log import AppendOrigin

        from broker.partitions import PartitionError

        try:
            partition = self.broker.partitions.leader(topic, partition_index)
        except PartitionError as exc:
            raise CoordinatorError(E.NOT_COORDINATOR if topic in (OFFSETS_TOPIC, TRANSACTION_TOPIC)
                                   else ErrorCode(exc.code)) from None
        result = partition.log.append(batch, leader_epoch=partition.leader_epoch, origin=AppendOrigin.COORDINATOR)
        self._unacked.append((partition, result))

    async def settle(self) -> None:
        """Return once everything appended so far is acknowledged (durable first, if so configured).

        One settler at a time: an append another request's settle is still acknowledging is
        waited for too, so no answer overtakes the write it depends on."""
        async with self._ack_lock:
            while self._unacked:
                pending, self._unacked = self._unacked, []
                for partition, result in pending:
                    try:
                        await self.broker.partitions.acknowledge(partition, result)
                    except Exception:
                        log.exception("acknowledging an internal append to %s-%d failed",
                                      partition.topic, partition.index)

    # ---- loading and timers ------------------------------------------------------------------------
    @classmethod
    async def startup_hook(cls, broker, nursery) -> None:
        """For `broker.startup_hooks`: load at start-up (so decided transactions complete and loaded
        members' sessions run without waiting for a first coordinator request), timers in `nursery`."""
        service = broker.coordinators.get("service")
        if service is None:
            service = cls(broker)
            broker.coordinators.update(service=service, group=service.groups, transaction=service.txns)
        service._timers_running = True
        nursery.start_soon(service._run_timers)
        await service._ensure_loaded()

    async def _ensure_loaded(self) -> None:
        if self._ready.is_set():
            return
        if self._loading:
            await self._ready.wait()
            return
        self._loading = True
        try:
            await self._load()
        finally:
            self._ready.set()
        if not self._timers_running:
            # no start-up hook registered us: run the timers beside the broker's tasks
            self._timers_running = True
            trio.lowlevel.spawn_system_task(self._run_timers, name="odradek-coordinator-timers")

    async def _load(self) -> None:
        image = self.broker.image
        for topic, replay in ((OFFSETS_TOPIC, self._replay_offsets), (TRANSACTION_TOPIC, self._replay_txns)):
            topic_image = image.topics.get(topic)
            if topic_image is None:
                continue
            for index in sorted(topic_image.partitions):
                partition = self.broker.partitions.get(topic, index)
                if partition is None or partition.leader != self.broker.node_id:
                    continue
                batches = await self.broker.run_blocking(_read_all, partition.log)
                replay(index, batches)
        self.groups.loaded()
        self.txns.loaded()
        await self.settle()

    def _replay_offsets(self, partition_index: int, batches) -> None:
        for batch in batches:
            if batch["control"] is not None:
                commit = batch["control"] == ControlType.COMMIT
                for group_id in self.groups.groups_with_pending_offsets(batch["producer_id"]):
                    if self.offsets_partition(group_id) == partition_index:
                        self.groups.complete_transaction(group_id, batch["producer_id"], commit)
                continue
            producer_id = batch["producer_id"] if batch["transactional"] else -1
            for key, value in batch["records"]:
                try:
                    self.groups.replay(decode_group_record(key, value), producer_id)
                except SerdeError as exc:
                    log.warning("skipping unreadable %s-%d record: %s", OFFSETS_TOPIC, partition_index, exc)

    def _replay_txns(self, partition_index: int, batches) -> None:
        for batch in batches:
            for key, value in batch["records"]:
                try:
                    self.txns.replay(decode_txn_record(key, value))
                except SerdeError as exc:
                    log.warning("skipping unreadable %s-%d record: %s", TRANSACTION_TOPIC, partition_index, exc)

    def _on_image_change(self, change) -> None:
        """Controller listener (on the event loop): offsets of deleted topics go too."""
        deleted = {t.name for t in change.deleted_topics}
        if deleted and self._ready.is_set():
            self.groups.forget_topics(deleted)
            self._wake.set()  # the timer task acknowledges the tombstones

    def _maybe_wake(self) -> None:
        deadline = self.timers.next_deadline()
        if deadline is not None and (self._sleep_until is None or deadline < self._sleep_until):
            self._wake.set()

    async def _run_timers(self) -> None:
        while not self.broker.draining:
            try:
                self.timers.run_due(self.clock.now_ms())
                await self.settle()
            except Exception:
                log.exception("coordinator timer failed")
            deadline = self.timers.next_deadline()
            self._sleep_until = deadline
            self._wake = trio.Event()
            delay = 60.0 if deadline is None else max(deadline - self.clock.now_ms(), 0) / 1000
            with trio.move_on_after(delay):
                await self._wake.wait()


def _read_all(log_) -> list[dict]:
    """Every batch of an internal partition, decoded (runs in a worker thread)."""
    out = []
    for batch in log_.read_batches(log_.log_start_offset):
        entry = {"producer_id": batch.producer_id, "transactional": batch.is_transactional,
                 "control": None, "records": []}
        try:
            records = list(batch.records())
        except Exception as exc:  # a batch we cannot decode: skip it, keep the rest
            log.warning("skipping an unreadable internal batch: %s", exc)
            continue
        if batch.is_control:
            if records:
                try:
                    entry["control"] = parse_control_record(records[0]).type
                except Exception:
                    continue
        else:
            entry["records"] = [(r.key, r.value) for r in records if r.key is not None]
        out.append(entry)
    return out


class _GroupLog:
    def __init__(self, service: CoordinatorService):
        self.service = service

    def append(self, group_id, records, *, producer_id=-1, producer_epoch=-1) -> None:
        now = self.service.clock.now_ms()
        simple = []
        for record in records:
            key, value = encode_group_record(record)
            simple.append(SimpleRecord(value=value, key=key, timestamp=now))
        transactional = producer_id >= 0
        batch = build_batch(simple, producer_id=producer_id, producer_epoch=producer_epoch,
                            transactional=transactional)
        self.service.append(OFFSETS_TOPIC, self.service.offsets_partition(group_id), batch)


class _TxnLog:
    def __init__(self, service: CoordinatorService):
        self.service = service

    def append(self, record: TransactionRecord) -> None:
        key, value = encode_txn_record(record)
        batch = build_batch([SimpleRecord(value=value, key=key, timestamp=self.service.clock.now_ms())])
        self.service.append(TRANSACTION_TOPIC, self.service.txn_partition(record.transactional_id), batch)


class _MarkerWriter:
    """Writes commit/abort markers straight into the local partitions (one node leads them all)."""

    def __init__(self, service: CoordinatorService):
        self.service = service

    def write_markers(self, transactional_id, producer_id, producer_epoch, commit, partitions, done) -> None:
        service = self.service
        txn_part = service.broker.partitions.get(TRANSACTION_TOPIC, service.txn_partition(transactional_id))
        coordinator_epoch = max(txn_part.leader_epoch, 0) if txn_part is not None else 0
        control = ControlType.COMMIT if commit else ControlType.ABORT
        batch = build_control_batch(control, producer_id, producer_epoch, coordinator_epoch,
                                    timestamp=service.clock.now_ms())
        try:
            for topic, index in partitions:
                if service.broker.partitions.get(topic, index) is None:
                    continue  # deleted since it joined the transaction: nothing to mark
                service.append(topic, index, batch)
                if topic == OFFSETS_TOPIC:
                    for group_id in service.groups.groups_with_pending_offsets(producer_id):
                        if service.offsets_partition(group_id) == index:
                            service.groups.complete_transaction(group_id, producer_id, commit)
        except Exception:
            log.exception("writing transaction markers for %s failed; will retry", transactional_id)
            done(False)
            return
        done(True)


class _BlockProducerIds:
    """Producer ids from blocks the controller allocates through its log (never reused)."""

    def __init__(self, broker):
        self.broker = broker
        self._next = 0
        self._end = 0
        self._lock = trio.Lock()

    def next_id(self) -> int:
        if self._next >= self._end:
            raise CoordinatorError(E.COORDINATOR_LOAD_IN_PROGRESS)
        value = self._next
        self._next += 1
        return value

    async def ensure(self, count: int = 2) -> None:
        """Make sure `count` ids are available without waiting (a txn init may need two)."""
        if self._end - self._next >= count:
            return
        async with self._lock:
            if self._end - self._next >= count:
                return
            block = await self.broker.controller.allocate_producer_ids(
                self.broker.node_id, getattr(self.broker, "broker_epoch", -1))
            self._next, self._end = block.first_producer_id, block.first_producer_id + block.size
