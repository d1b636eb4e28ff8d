"""The coordinators inside a running broker: internal topics, ownership, durable writes, timers.

`await CoordinatorService.of(broker)` returns the broker's service, creating it on first use. The
service coordinates exactly the groups and transactional ids whose `__consumer_offsets` /
`__transaction_state` partitions this broker leads in the metadata image (`ownership.py`): it follows
leadership partition by partition, loading a partition's state when it becomes leader (requests for
its keys meanwhile get COORDINATOR_LOAD_IN_PROGRESS) and unloading it when it stops (NOT_COORDINATOR).

Handlers call the cores, then `await service.settle()` so that the internal-topic records the call
wrote are acknowledged (replicated as acks=all, fsynced first with `log.flush.before.acknowledge`)
before the client hears back. Writes are refused (NOT_COORDINATOR) for partitions this broker does not
coordinate right now, so a coordinator that lost leadership never writes.

Writes to the internal topics are synchronous page-cache appends on the event loop (a few hundred
bytes each); waiting for the disk and the followers happens in `settle`, off the loop.
"""

from __future__ import annotations

import logging
from typing import Optional

import trio

from protocol import ErrorCode
from protocol.records import NO_SEQUENCE, SimpleRecord, build_batch

from .clock import SystemClock, Timers
from .consumer_group.coordinator import ConsumerGroupCoordinator
from .consumer_group.model import ConsumerGroupConfig
from .consumer_group.records import GroupRecord
from .durable_writes import CoordinatorError, DurableWritesMixin
from .group_coordinator import GroupConfig, GroupCoordinator
from .log_records import OffsetCommitRecord, TransactionRecord
from .markers import MarkerSender
from .ownership import (OFFSETS_TOPIC, SHARE_STATE_TOPIC, TRANSACTION_TOPIC, LoadState, Owned, is_commit, plan,
                        read_internal_log)
from .pending import Pending
from .serde import (SHARE_GROUP_KEYS, SerdeError, decode_group_record, decode_txn_record, encode_group_record,
                    encode_txn_record,
                    partition_for)
from .share_group.coordinator import ShareGroupCoordinator
from .txn_coordinator import TransactionCoordinator, TxnConfig

log = logging.getLogger("odradek.coordinator")

__all__ = ["CoordinatorService", "CoordinatorError", "OFFSETS_TOPIC", "TRANSACTION_TOPIC"]
E = ErrorCode
# How long creating an internal topic may wait for this broker to finish loading a partition it leads.
_FRESH_LOAD_WAIT_S = 5.0


class CoordinatorService(DurableWritesMixin):
    def __init__(self, broker):
        self.broker = broker
        config = broker.config
        self.clock = SystemClock()
        self.timers = Timers()
        self.offsets_partitions = config["offsets.topic.num.partitions"]
        self.txn_partitions = config["transaction.state.log.num.partitions"]
        self._unacked: list = []   # (write seq, partition, append result, ack, timeout ms) not yet settled
        self._next_write = 0
        self._outstanding: set[int] = set()     # write seqs appended and not yet acknowledged
        self._acked = trio.Event()              # set (and replaced) whenever acknowledgements finish
        self._write_failures: dict[int, ErrorCode] = {}
        self.groups = GroupCoordinator(self.clock, self.timers, _GroupLog(self), GroupConfig(
            min_session_timeout_ms=config["group.min.session.timeout.ms"],
            max_session_timeout_ms=config["group.max.session.timeout.ms"],
            initial_rebalance_delay_ms=config["group.initial.rebalance.delay.ms"],
            max_size=config["group.max.size"],
            offsets_retention_ms=config["offsets.retention.minutes"] * 60_000,
            offsets_retention_check_interval_ms=config["offsets.retention.check.interval.ms"],
            offset_metadata_max_bytes=config["offset.metadata.max.bytes"]))
        self._topics_cache: tuple = (None, {})
        self.consumer_groups = ConsumerGroupCoordinator(
            self.clock, self.timers, _GroupLog(self), _consumer_group_config(config),
            topics=self._topics_view, partition_racks=self._partition_racks,
            classic_busy=lambda g: self._classic_group_busy(g) or g in self.share_groups.groups)
        self.groups.consumer_groups = self.consumer_groups
        self.consumer_groups.classic = self.groups     # online migration moves groups between the two
        # KIP-932: share groups' membership beside the other group types, their share-partitions'
        # state in __share_group_state (broker/share)
        from broker.share.glue import ShareStateLog
        from broker.share.manager import SharePartitionManager, share_group_config
        from broker.share.state_store import ShareStateStore
        self.share_partitions = SharePartitionManager(self, share_group_config(config))
        self.share_groups = ShareGroupCoordinator(
            self.clock, self.timers, _GroupLog(self), self.share_partitions.config, topics=self._topics_view,
            other_group=lambda g: self._classic_group_busy(g) or g in self.consumer_groups.groups,
            on_member_removed=self.share_partitions.member_removed)
        self.share_state_partitions = config["share.coordinator.state.topic.num.partitions"]
        self.share_states = ShareStateStore(ShareStateLog(self))
        self.producer_ids = _BlockProducerIds(broker)
        self.markers = MarkerSender(self)
        self.txns = TransactionCoordinator(
            self.clock, self.timers, _TxnLog(self), self.producer_ids, self.markers, TxnConfig(
                max_timeout_ms=config["transaction.max.timeout.ms"],
                abort_check_interval_ms=config["transaction.abort.timed.out.transaction.cleanup.interval.ms"],
                id_expiration_ms=config["transactional.id.expiration.ms"],
                id_expiry_check_interval_ms=config["transaction.remove.expired.transaction.cleanup.interval.ms"]),
            offsets_partition_for=lambda group: (OFFSETS_TOPIC, self.offsets_partition(group)))
        # (topic, partition) -> Owned: the internal partitions this broker leads, loading or loaded
        self.owned: dict[tuple[str, int], Owned] = {}
        # (topic, partition, producer id) -> token: KIP-890 verifications a marker has not closed yet
        self.verification_guards: dict[tuple[str, int, int], object] = {}
        self._nursery: Optional[trio.Nursery] = None
        self._peer_client = None
        self._topic_lock = trio.Lock()
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
            service = cls._create(broker)
        return service

    @classmethod
    def _create(cls, broker) -> "CoordinatorService":
        service = cls(broker)
        broker.coordinators.update(service=service, group=service.groups, transaction=service.txns,
                                   consumer_group=service.consumer_groups, share_group=service.share_groups)
        service.follow_leadership()
        service._start_timers()
        return service

    def offsets_partition(self, group_id: str) -> int:
        return partition_for(group_id, self.offsets_partitions)

    def txn_partition(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.txn_partitions)

    def peer_client(self):
        """The client this broker's coordinators use to reach other brokers (created on first use)."""
        if self._peer_client is None:
            from broker.interbroker.client import BrokerClient
            self._peer_client = BrokerClient(self.broker, client_id=f"odradek-coordinator-{self.broker.node_id}")
        return self._peer_client

    def spawn(self, function, *args) -> None:
        """Run a background task of the coordinators (on the broker's nursery once started)."""
        async def guarded():
            try:
                await function(*args)
            except Exception:
                log.exception("coordinator task %s failed", getattr(function, "__name__", function))
        if self._nursery is not None:
            self._nursery.start_soon(guarded)
        else:
            trio.lowlevel.spawn_system_task(guarded, name="odradek-coordinator-task")

    def _topics_view(self) -> dict:
        """What consumer groups may subscribe to: topic name -> (topic id, partition count); built once
        per metadata image (every heartbeat asks)."""
        image = self.broker.image
        if self._topics_cache[0] is not image:
            self._topics_cache = (image, {name: (t.topic_id, len(t.partitions)) for name, t in image.topics.items()})
        return self._topics_cache[1]

    def _partition_racks(self, topic_ids) -> dict:
        """(topic id, partition) -> the racks of its replicas' brokers (rack-aware assignment)."""
        image = self.broker.image
        out = {}
        for topic_id in topic_ids:
            topic = image.topics_by_id.get(topic_id)
            for index, part in (topic.partitions.items() if topic is not None else ()):
                racks = {image.brokers[b].rack for b in part.replicas if b in image.brokers}
                out[(topic_id, index)] = frozenset(r for r in racks if r)
        return out

    def _classic_group_busy(self, group_id: str) -> bool:
        group = self.groups.groups.get(group_id)
        return group is not None and bool(group.members or group.pending_members)

    # ---- internal topics ---------------------------------------------------------------------------
    async def ensure_topic(self, name: str) -> None:
        """Create an internal topic on first use, as Kafka does on FindCoordinator: its configured
        partition count and replication factor, or COORDINATOR_NOT_AVAILABLE while too few brokers
        are alive for that replication factor."""
        if name in self.broker.image.topics:
            return
        from broker.controller.controller import CreateTopicSpec

        async with self._topic_lock:
            if name in self.broker.image.topics:
                return
            config = self.broker.config
            if name == SHARE_STATE_TOPIC:
                from broker.share.glue import share_state_topic_spec
                partitions, replication_factor, configs = share_state_topic_spec(config)
            elif name == OFFSETS_TOPIC:
                partitions = self.offsets_partitions
                replication_factor = config["offsets.topic.replication.factor"]
                configs = {"cleanup.policy": "compact", "compression.type": "producer",
                           "segment.bytes": str(config["offsets.topic.segment.bytes"])}
            else:
                partitions = self.txn_partitions
                replication_factor = config["transaction.state.log.replication.factor"]
                # as Kafka: never an unclean leader here, whatever the broker default
                configs = {"cleanup.policy": "compact", "compression.type": "uncompressed",
                           "min.insync.replicas": str(config["transaction.state.log.min.isr"]),
                           "segment.bytes": str(config["transaction.state.log.segment.bytes"]),
                           "unclean.leader.election.enable": "false"}
            # As Kafka: the full replication factor or nothing, COORDINATOR_NOT_AVAILABLE meanwhile.
            alive = len(self.broker.image.unfenced_brokers())
            if alive < replication_factor:
                log.warning("not creating %s yet: replication factor %d needs %d alive brokers, %d are",
                            name, replication_factor, replication_factor, alive)
                raise CoordinatorError(E.COORDINATOR_NOT_AVAILABLE)
            try:
                results = await self.broker.controller.create_topics(
                    [CreateTopicSpec(name, partitions, replication_factor, configs=configs)])
            except Exception as exc:  # e.g. the controller is not the leader right now
                log.warning("creating %s failed: %s", name, exc)
                raise CoordinatorError(E.COORDINATOR_NOT_AVAILABLE) from None
            code = results[0].error_code
            if code not in (E.NONE, E.TOPIC_ALREADY_EXISTS):
                log.warning("creating %s failed: %s %s", name, ErrorCode(code).name, results[0].error_message)
                raise CoordinatorError(E.COORDINATOR_NOT_AVAILABLE)
        # The image that holds the topic has reached us; let the (empty) partitions we lead load, so
        # the request that created the topic does not bounce off COORDINATOR_LOAD_IN_PROGRESS.
        with trio.move_on_after(_FRESH_LOAD_WAIT_S):
            for owned in [o for o in self.owned.values() if o.topic == name]:
                await owned.done.wait()

    def coordinator_error(self, topic: str, partition: int) -> ErrorCode:
        """NONE if this broker coordinates keys of `topic`-`partition` right now; else the error to answer."""
        part = self.broker.image.partition(topic, partition)
        if part is None or part.leader < 0:
            return E.COORDINATOR_NOT_AVAILABLE
        if part.leader != self.broker.node_id:
            return E.NOT_COORDINATOR
        owned = self.owned.get((topic, partition))
        if owned is None or owned.state is not LoadState.ACTIVE or owned.epoch != part.leader_epoch:
            return E.COORDINATOR_LOAD_IN_PROGRESS
        return E.NONE

    def group_coordinator_error(self, group_id: str) -> ErrorCode:
        return self._existing_coordinator_error(OFFSETS_TOPIC, self.offsets_partition(group_id))

    def txn_coordinator_error(self, transactional_id: str) -> ErrorCode:
        return self._existing_coordinator_error(TRANSACTION_TOPIC, self.txn_partition(transactional_id))

    def _existing_coordinator_error(self, topic: str, partition: int) -> ErrorCode:
        """NONE if this broker coordinates the keys of `topic`-`partition` right now; else the error
        to answer. Only FindCoordinator creates the internal topic: before it exists no broker
        coordinates any key (NOT_COORDINATOR, as Kafka 3.9 answers every group and transaction
        request then)."""
        if topic not in self.broker.image.topics:
            return E.NOT_COORDINATOR
        return self.coordinator_error(topic, partition)

    def txn_owner(self, transactional_id: str) -> Optional[Owned]:
        """The loaded `__transaction_state` partition that makes this broker the id's coordinator."""
        owned = self.owned.get((TRANSACTION_TOPIC, self.txn_partition(transactional_id)))
        return owned if owned is not None and owned.state is LoadState.ACTIVE else None

    def loading(self, topic: str) -> bool:
        """Whether some partition of `topic` led here is still loading."""
        return any(o.topic == topic and o.state is LoadState.LOADING for o in self.owned.values())

    def still_owns(self, owned: Owned) -> bool:
        return self.owned.get((owned.topic, owned.index)) is owned and owned.state is LoadState.ACTIVE

    # ---- transactions meeting groups --------------------------------------------------------------
    def complete_transactional_offsets(self, offsets_partition: int, producer_id: int, commit: bool) -> None:
        """A marker reached `__consumer_offsets`-`offsets_partition`: its groups' pending offsets of
        the producer become committed (or are dropped)."""
        owned = self.owned.get((OFFSETS_TOPIC, offsets_partition))
        if owned is not None and owned.state is LoadState.LOADING:
            owned.markers_while_loading.append((producer_id, commit))   # applied once replayed
            return
        if self.coordinator_error(OFFSETS_TOPIC, offsets_partition) is not E.NONE:
            return  # not coordinated here: whoever loads the partition replays the marker from the log
        self._complete_offsets(offsets_partition, producer_id, commit)

    def _complete_offsets(self, offsets_partition: int, producer_id: int, commit: bool) -> None:
        for group_id in self.groups.groups_with_pending_offsets(producer_id):
            if self.offsets_partition(group_id) == offsets_partition:
                self.groups.complete_transaction(group_id, producer_id, commit)

    def forget_verification(self, topic: str, index: int, producer_id: int) -> None:
        self.verification_guards.pop((topic, index, producer_id), None)

    # ---- following leadership ----------------------------------------------------------------------
    def follow_leadership(self) -> None:
        """Make what this broker coordinates match the partitions it leads in the current image."""
        change = plan(self.broker.image, self.owned, self.broker.node_id)
        for key in change.unload:
            self._unload(*key)
        for topic, index, epoch in change.new_epoch:
            self.owned[(topic, index)].epoch = epoch
        for topic, index, epoch in change.load:
            owned = Owned(topic, index, epoch)
            self.owned[(topic, index)] = owned
            self.spawn(self._load, owned)

    async def _load(self, owned: Owned) -> None:
        try:
            partition = self.broker.partitions.get(owned.topic, owned.index)
            if partition is None:
                log.warning("leading %s-%d without a local log: not loading it", owned.topic, owned.index)
                return
            batches = await self.broker.run_blocking(read_internal_log, partition.log)
            if self.owned.get((owned.topic, owned.index)) is not owned:
                return  # leadership moved on while we read
            if owned.topic == OFFSETS_TOPIC:
                before = set(self.groups.groups)
                self._replay_offsets(owned.index, batches)
                for producer_id, commit in owned.markers_while_loading:
                    self._complete_offsets(owned.index, producer_id, commit)   # a no-op if replayed too
                loaded = [g for g in self.groups.groups if self.offsets_partition(g) == owned.index]
                consumer = [g for g in self.consumer_groups.groups if self.offsets_partition(g) == owned.index]
                share = [g for g in self.share_groups.groups if self.offsets_partition(g) == owned.index]
                owned.state = LoadState.ACTIVE
                self.groups.loaded(loaded)
                self.consumer_groups.loaded(consumer)
                self.share_groups.loaded(share)
                log.info("loaded %s-%d at leader epoch %d: %d groups (%d new)", owned.topic, owned.index,
                         owned.epoch, len(loaded), len(set(loaded) - before))
            elif owned.topic == SHARE_STATE_TOPIC:
                from broker.share.glue import replay_share_states
                count = replay_share_states(self, owned.index, batches)
                owned.state = LoadState.ACTIVE
                log.info("loaded %s-%d at leader epoch %d: %d share-partition states", owned.topic, owned.index,
                         owned.epoch, count)
            else:
                self._replay_txns(owned.index, batches)
                loaded = [t for t in self.txns.txns if self.txn_partition(t) == owned.index]
                owned.state = LoadState.ACTIVE
                self.txns.loaded(loaded)
                log.info("loaded %s-%d at leader epoch %d: %d transactional ids", owned.topic, owned.index,
                         owned.epoch, len(loaded))
            await self.settle()
        finally:
            owned.done.set()

    def _unload(self, topic: str, index: int) -> None:
        owned = self.owned.pop((topic, index), None)
        if owned is None:
            return
        owned.done.set()
        if topic == OFFSETS_TOPIC:
            self.groups.unload([g for g in self.groups.groups if self.offsets_partition(g) == index])
            self.consumer_groups.unload([g for g in self.consumer_groups.groups if self.offsets_partition(g) == index])
            self.share_groups.unload([g for g in self.share_groups.groups if self.offsets_partition(g) == index])
        elif topic == SHARE_STATE_TOPIC:
            from broker.share.glue import unload_share_states
            unload_share_states(self, index)
        else:
            self.txns.unload([t for t in self.txns.txns if self.txn_partition(t) == index])
        log.info("no longer coordinating %s-%d", topic, index)

    def _replay_offsets(self, partition_index: int, batches) -> None:
        for batch in batches:
            if batch["control"] is not None:
                commit = is_commit(batch["control"])
                for group_id in self.groups.groups_with_pending_offsets(batch["producer_id"]):
                    if self.offsets_partition(group_id) == partition_index:
                        self.groups.complete_transaction(group_id, batch["producer_id"], commit)
                continue
            producer_id = batch["producer_id"] if batch["transactional"] else -1
            for key, value in batch["records"]:
                try:
                    record = decode_group_record(key, value)
                    if isinstance(record, GroupRecord) and type(record.key) in SHARE_GROUP_KEYS:
                        self.share_groups.replay(record)
                    elif isinstance(record, GroupRecord):
                        self.consumer_groups.replay(record)
                    else:
                        self.groups.replay(record, producer_id)
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
        """Controller listener (on the event loop): follow leadership; offsets of deleted topics go too."""
        self.follow_leadership()
        deleted = {t.name for t in change.deleted_topics}
        if deleted:
            self.groups.forget_topics(deleted)
            self._wake.set()  # the timer task acknowledges the tombstones

    # ---- start-up and timers -----------------------------------------------------------------------
    @classmethod
    async def startup_hook(cls, broker, nursery) -> None:
        """For `broker.startup_hooks`: take the coordinators' partitions at start-up (so decided
        transactions complete and loaded members' sessions run without waiting for a first coordinator
        request); loads and timers run in `nursery`. Returns once the initial loads are done."""
        service = broker.coordinators.get("service")
        if service is None:
            service = cls(broker)
            broker.coordinators.update(service=service, group=service.groups, transaction=service.txns,
                                       consumer_group=service.consumer_groups, share_group=service.share_groups)
        service._nursery = nursery
        service.follow_leadership()
        service._start_timers()
        nursery.start_soon(service._close_peer_client_on_exit)
        for owned in list(service.owned.values()):
            await owned.done.wait()

    async def _close_peer_client_on_exit(self) -> None:
        try:
            await trio.sleep_forever()
        finally:
            if self._peer_client is not None:
                with trio.CancelScope(shield=True):
                    await self._peer_client.aclose()

    def _start_timers(self) -> None:
        if not self._timers_running:
            self._timers_running = True
            self.spawn(self._run_timers)

    def _maybe_wake(self) -> None:
        deadline = self.timers.next_deadline()
        if deadline is not None and (self._sleep_until is None or deadline < self._sleep_until):
            self._wake.set()

    async def _run_timers(self) -> None:
        while not self.broker.draining:
            try:
                self.timers.run_due(self.clock.now_ms())
                if self._unacked:
                    # acknowledged beside the timers: a slow follower must not hold up session expiry
                    self.spawn(self.settle)
            except Exception:
                log.exception("coordinator timer failed")
            deadline = self.timers.next_deadline()
            self._sleep_until = deadline
            self._wake = trio.Event()
            delay = 60.0 if deadline is None else max(deadline - self.clock.now_ms(), 0) / 1000
            with trio.move_on_after(delay):
                await self._wake.wait()


def _consumer_group_config(config) -> ConsumerGroupConfig:
    session = min(max(config["group.consumer.session.timeout.ms"], config["group.consumer.min.session.timeout.ms"]),
                  config["group.consumer.max.session.timeout.ms"])
    heartbeat = min(max(config["group.consumer.heartbeat.interval.ms"],
                        config["group.consumer.min.heartbeat.interval.ms"]),
                    config["group.consumer.max.heartbeat.interval.ms"])
    return ConsumerGroupConfig(session_timeout_ms=session, heartbeat_interval_ms=heartbeat,
                               max_size=config["group.consumer.max.size"],
                               assignors=tuple(config["group.consumer.assignors"]) or ("uniform", "range"),
                               migration_policy=config["group.consumer.migration.policy"].lower(),
                               classic_max_size=config["group.max.size"])


class _GroupLog:
    def __init__(self, service: CoordinatorService):
        self.service = service

    def append(self, group_id, records, *, producer_id=-1, producer_epoch=-1) -> Pending[ErrorCode]:
        now = self.service.clock.now_ms()
        simple = []
        for record in records:
            key, value = encode_group_record(record)
            simple.append(SimpleRecord(value=value, key=key, timestamp=now))
        transactional = producer_id >= 0
        # Kafka writes an offset commit (plain or transactional) at base sequence 0, its other
        # group writes (metadata, tombstones) without a sequence
        commit = all(isinstance(r, OffsetCommitRecord) and r.value is not None for r in records)
        batch = build_batch(simple, producer_id=producer_id, producer_epoch=producer_epoch,
                            base_sequence=0 if commit else NO_SEQUENCE, transactional=transactional)
        return self.service.append(OFFSETS_TOPIC, self.service.offsets_partition(group_id), batch)


class _TxnLog:
    def __init__(self, service: CoordinatorService):
        self.service = service

    def append(self, record: TransactionRecord) -> Pending[ErrorCode]:
        key, value = encode_txn_record(record)
        batch = build_batch([SimpleRecord(value=value, key=key, timestamp=self.service.clock.now_ms())])
        # as Kafka, a transaction's write may take the transaction's timeout to commit
        timeout_ms = record.value.timeout_ms if record.value is not None else None
        return self.service.append(TRANSACTION_TOPIC, self.service.txn_partition(record.transactional_id), batch,
                                   timeout_ms=timeout_ms)


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
