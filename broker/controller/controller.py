"""The async controller: admin requests in, validated metadata records committed to the quorum out."""

from __future__ import annotations

import base64
import logging
import os
import uuid
from collections import Counter
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import trio

from . import configs as cfg
from . import records as r
from .disklog import Entry, Snapshot
from .errors import ApiError, ErrorCode
from .image import TOPIC_RESOURCE, ImageChange, MetadataImage
from .quorum import RaftQuorum
from .raft import RaftConfig
from .topics import collision_key, place_replicas, validate_assignment, validate_topic_name

log = logging.getLogger(__name__)

PRODUCER_ID_BLOCK_SIZE = 1000

# Kafka's controller refuses any single user operation that would write more metadata records than
# this (ReplicationControlManager.MAX_RECORDS_PER_USER_OP): one request must not freeze the broker.
MAX_RECORDS_PER_USER_OP = 10_000


# -- request and result types -----------------------------------------------------------------------

@dataclass
class CreateTopicSpec:
    name: str
    num_partitions: int = -1                 # -1: the `num.partitions` default
    replication_factor: int = -1             # -1: the `default.replication.factor` default
    assignments: Mapping[int, Sequence[int]] = field(default_factory=dict)   # manual placement
    configs: Mapping[str, str | None] = field(default_factory=dict)


@dataclass
class CreateTopicResult:
    name: str
    error_code: int = 0
    error_message: str | None = None
    topic_id: uuid.UUID = r.ZERO_UUID
    num_partitions: int = -1
    replication_factor: int = -1
    configs: Mapping[str, str] = field(default_factory=dict)   # the topic's dynamic (non-default) configs


@dataclass
class DeleteTopicResult:
    name: str | None
    topic_id: uuid.UUID
    error_code: int = 0
    error_message: str | None = None


@dataclass
class CreatePartitionsSpec:
    name: str
    count: int
    assignments: Sequence[Sequence[int]] | None = None   # replicas of each NEW partition


@dataclass
class CreatePartitionsResult:
    name: str
    error_code: int = 0
    error_message: str | None = None


@dataclass
class ConfigResult:
    resource_type: int
    resource_name: str
    error_code: int = 0
    error_message: str | None = None


@dataclass
class ProducerIdBlock:
    first_producer_id: int
    size: int = PRODUCER_ID_BLOCK_SIZE


@dataclass
class HeartbeatResult:
    is_caught_up: bool
    is_fenced: bool
    should_shut_down: bool


@dataclass
class ControllerSettings:
    num_partitions: int = 1                    # num.partitions
    default_replication_factor: int = 1        # default.replication.factor
    delete_topic_enable: bool = True           # delete.topic.enable
    broker_session_timeout_ms: int = 9000      # broker.session.timeout.ms


def _error(exc: ApiError) -> tuple[int, str | None]:
    return int(exc.code), exc.message


class BatchTooLarge(ApiError):
    """The whole operation would exceed MAX_RECORDS_PER_USER_OP; fails every item, like Kafka."""

    def __init__(self):
        super().__init__(ErrorCode.POLICY_VIOLATION, "Unable to perform excessively large batch operation.")


def _check_room(needed: int, used: int) -> None:
    """Raise BatchTooLarge before any work if `needed` more records would overflow the operation."""
    if used + needed > MAX_RECORDS_PER_USER_OP:
        raise BatchTooLarge()


class Controller:
    """See the package docstring for the contract; build one with `Controller.open`."""

    def __init__(self, quorum, cluster_id: str, settings: ControllerSettings,
                 config_validator: cfg.ConfigValidator | None):
        self._quorum = quorum
        self._settings = settings
        self._config_validator = config_validator
        self._image = MetadataImage(cluster_id=cluster_id)
        self._applied_end = 0                   # every log entry below this offset is applied
        self._listeners: list[Callable[[ImageChange], None]] = []
        self._lock = trio.Lock()                # one mutation at a time: each sees the previous one
        self._last_heartbeat: dict[int, float] = {}
        self._placement_start = 0
        self._applied_event = trio.Event()      # set (and replaced) whenever more log is applied
        quorum.snapshot_state = self._snapshot_state
        quorum.start(self._apply_snapshot, self._apply_entry)

    @classmethod
    @asynccontextmanager
    async def open(cls, log_dir: str, *, node_id: int = 1, cluster_id: str | None = None,
                   settings: ControllerSettings | None = None,
                   config_validator: cfg.ConfigValidator | None = None,
                   voters=None, transport=None, raft_config: RaftConfig | None = None,
                   snapshot_every: int = 1000):
        """Open (or create) the metadata quorum under `log_dir` and run the controller until exit.

        `voters` defaults to {node_id} (a quorum of one); more voters need a `transport`."""
        os.makedirs(log_dir, exist_ok=True)
        cluster_id = cluster_id or _load_or_create_cluster_id(log_dir)
        quorum = RaftQuorum(log_dir, node_id, voters, transport=transport, config=raft_config,
                            snapshot_every=snapshot_every)
        try:
            controller = cls(quorum, cluster_id, settings or ControllerSettings(), config_validator)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(quorum.run)
                nursery.start_soon(controller._fence_expired_brokers)
                try:
                    yield controller
                finally:
                    nursery.cancel_scope.cancel()
        finally:
            quorum.close()

    # -- image and listeners ---------------------------------------------------------------------

    @property
    def image(self) -> MetadataImage:
        return self._image

    @property
    def cluster_id(self) -> str:
        return self._image.cluster_id

    @property
    def node_id(self) -> int:
        return self._quorum.node_id

    def add_listener(self, listener: Callable[[ImageChange], None]) -> None:
        """`listener(change)` runs synchronously after each committed batch, before the mutation returns."""
        self._listeners.append(listener)

    def add_leader_listener(self, listener: Callable[[int, int], None]) -> None:
        """`listener(epoch, leader_id)` runs whenever this replica learns of a new quorum leader."""
        self._quorum.leader_listeners.append(listener)

    def remove_listener(self, listener) -> None:
        self._listeners.remove(listener)

    @property
    def leader_id(self) -> int:
        """The active controller's node id as this replica knows it (-1: unknown)."""
        return self._quorum.leader_id

    @property
    def applied_offset(self) -> int:
        """Every metadata log entry below this offset is applied to `image`."""
        return self._applied_end

    async def wait_applied(self, end_offset: int) -> None:
        """Return once every entry below `end_offset` is applied here."""
        while self._applied_end < end_offset:
            await self._applied_event.wait()

    @property
    def is_active(self) -> bool:
        """Whether this node is the active controller (the quorum leader)."""
        return self._quorum.is_leader

    def describe_quorum(self) -> dict:
        """{node_id, leader_id, epoch, high_watermark, voters, replicas}; on the leader `replicas` maps
        each replica id (itself included) to {log_end_offset, last_fetch_timestamp,
        last_caught_up_timestamp} (wall-clock ms, -1 = never); elsewhere it is empty.
        `wire.describe_quorum_response(view, request)` turns it into DescribeQuorum's answer."""
        return self._quorum.describe()

    async def resign(self) -> None:
        """Before a clean shutdown: if leading, ask the other voters to elect a successor at once."""
        await self._quorum.resign()

    def _snapshot_state(self) -> tuple[int, bytes]:
        return self._applied_end, r.encode_records(self._image.to_records())

    def _apply_snapshot(self, snapshot: Snapshot) -> None:
        base = MetadataImage(cluster_id=self._image.cluster_id)
        self._set_image(base.apply(r.decode_records(snapshot.data), snapshot.end_offset - 1))
        self._applied_end = snapshot.end_offset

    def _apply_entry(self, entry: Entry) -> None:
        self._applied_end = entry.offset + 1
        self._applied_event.set()
        self._applied_event = trio.Event()
        if not entry.control:
            self._set_image(self._image.apply(r.decode_records(entry.data), entry.offset))

    def _set_image(self, new: MetadataImage) -> None:
        change = ImageChange(self._image, new)
        self._image = new
        for listener in list(self._listeners):
            try:
                listener(change)
            except Exception:          # a listener bug must not wedge the metadata log
                log.exception("metadata image listener failed")

    async def _commit(self, batch: list) -> int:
        if not batch:
            return self._image.offset
        return await self._quorum.propose(r.encode_records(batch))

    async def _require_leader(self) -> None:
        await self._quorum.wait_ready()

    # -- topics ----------------------------------------------------------------------------------

    async def create_topics(self, specs: Sequence[CreateTopicSpec],
                            validate_only: bool = False) -> list[CreateTopicResult]:
        """Create topics (one result per spec, in order); the valid ones commit as one atomic batch."""
        await self._require_leader()
        async with self._lock:
            names = Counter(s.name for s in specs)
            batch, results = [], []
            taken = {collision_key(n): n for n in self._image.topics}
            for spec in specs:
                result = CreateTopicResult(name=spec.name)
                results.append(result)
                try:
                    if names[spec.name] > 1:
                        raise ApiError(ErrorCode.INVALID_REQUEST, "Duplicate topic name.")
                    records = self._create_topic_records(spec, result, taken, used=len(batch))
                except BatchTooLarge:
                    raise
                except ApiError as exc:
                    result.error_code, result.error_message = _error(exc)
                    continue
                taken[collision_key(spec.name)] = spec.name
                batch += records
            if not validate_only:
                await self._commit(batch)
            return results

    def _create_topic_records(self, spec: CreateTopicSpec, result: CreateTopicResult,
                              taken: Mapping[str, str], used: int = 0) -> list:
        """The records creating one topic; `used` records of this operation are already planned."""
        validate_topic_name(spec.name)
        if spec.name in self._image.topics:
            raise ApiError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{spec.name}' already exists.")
        other = taken.get(collision_key(spec.name))
        if other is not None:
            raise ApiError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                           f"Topic '{spec.name}' collides with existing topic: {other}")
        usable = [b.broker_id for b in self._image.unfenced_brokers()]
        if spec.assignments:
            if spec.num_partitions != -1:
                raise ApiError(ErrorCode.INVALID_REQUEST, "A manual partition assignment was specified, "
                               "but numPartitions was not set to -1.")
            if spec.replication_factor != -1:
                raise ApiError(ErrorCode.INVALID_REQUEST, "A manual partition assignment was specified, "
                               "but replicationFactor was not set to -1.")
            _check_room(1 + len(spec.configs) + len(spec.assignments), used)
            placements = validate_assignment(spec.assignments, self._image.brokers)
            for p, replicas in enumerate(placements):
                if not any(b in usable for b in replicas):
                    raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                   f"All brokers specified in the manual partition assignment for "
                                   f"partition {p} are fenced or in controlled shutdown.")
        else:
            partitions = self._settings.num_partitions if spec.num_partitions == -1 else spec.num_partitions
            factor = (self._settings.default_replication_factor if spec.replication_factor == -1
                      else spec.replication_factor)
            if partitions <= 0:
                raise ApiError(ErrorCode.INVALID_PARTITIONS,
                               "Number of partitions was set to an invalid non-positive value.")
            if factor <= 0:
                raise ApiError(ErrorCode.INVALID_REPLICATION_FACTOR,
                               "Replication factor must be larger than 0, or -1 to use the default value.")
            _check_room(1 + len(spec.configs) + partitions, used)
            placements = place_replicas(usable, partitions, factor, start=self._placement_start)
            self._placement_start += 1
        configs = {}
        for key, value in spec.configs.items():
            if value is None:
                raise ApiError(ErrorCode.INVALID_CONFIG, f"Null value not supported for topic configs: {key}")
            configs[key] = value
        cfg.run_validator(self._config_validator, TOPIC_RESOURCE, spec.name, configs)

        topic_id = _new_topic_id(self._image)
        result.topic_id = topic_id
        result.num_partitions = len(placements)
        result.replication_factor = len(placements[0])
        result.configs = configs
        batch: list = [r.TopicRecord(name=spec.name, topic_id=topic_id)]
        batch += cfg.diff_records(TOPIC_RESOURCE, spec.name, {}, configs)
        batch += [self._new_partition(topic_id, p, replicas, usable) for p, replicas in enumerate(placements)]
        return batch

    @staticmethod
    def _new_partition(topic_id, partition: int, replicas: Sequence[int], usable) -> r.PartitionRecord:
        isr = [b for b in replicas if b in usable]
        return r.PartitionRecord(partition_id=partition, topic_id=topic_id, replicas=list(replicas),
                                 isr=isr, leader=isr[0], leader_epoch=0, partition_epoch=0)

    async def delete_topics(self, names: Sequence[str] = (),
                            topic_ids: Sequence[uuid.UUID] = ()) -> list[DeleteTopicResult]:
        """Delete by name and/or id; one result per name, then per id, in order."""
        await self._require_leader()
        async with self._lock:
            results, batch, doomed = [], [], set()
            asked = [(n, None) for n in names] + [(None, t) for t in topic_ids]
            wanted = Counter(asked)
            for name, topic_id in asked:
                result = DeleteTopicResult(name=name, topic_id=topic_id or r.ZERO_UUID)
                results.append(result)
                try:
                    topic = self._topic_to_delete(name, topic_id, wanted)
                except ApiError as exc:
                    result.error_code, result.error_message = _error(exc)
                    continue
                result.name, result.topic_id = topic.name, topic.topic_id
                if topic.topic_id not in doomed:
                    doomed.add(topic.topic_id)
                    batch.append(r.RemoveTopicRecord(topic_id=topic.topic_id))
            await self._commit(batch)
            return results

    def _topic_to_delete(self, name, topic_id, wanted):
        if wanted[(name, topic_id)] > 1:
            raise ApiError(ErrorCode.INVALID_REQUEST, "Duplicate topic name or id in request.")
        if not self._settings.delete_topic_enable:
            raise ApiError(ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled.")
        if name is not None:
            topic = self._image.topics.get(name)
            if topic is None:
                raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                               "This server does not host this topic-partition.")
        else:
            topic = self._image.topics_by_id.get(topic_id)
            if topic is None:
                raise ApiError(ErrorCode.UNKNOWN_TOPIC_ID, "This server does not host this topic ID.")
        return topic

    async def create_partitions(self, specs: Sequence[CreatePartitionsSpec],
                                validate_only: bool = False) -> list[CreatePartitionsResult]:
        await self._require_leader()
        async with self._lock:
            names = Counter(s.name for s in specs)
            results, batch = [], []
            for spec in specs:
                result = CreatePartitionsResult(name=spec.name)
                results.append(result)
                try:
                    if names[spec.name] > 1:
                        raise ApiError(ErrorCode.INVALID_REQUEST, "Duplicate topic name.")
                    batch += self._create_partitions_records(spec, used=len(batch))
                except BatchTooLarge:
                    raise
                except ApiError as exc:
                    result.error_code, result.error_message = _error(exc)
            if not validate_only:
                await self._commit(batch)
            return results

    def _create_partitions_records(self, spec: CreatePartitionsSpec, used: int = 0) -> list:
        """The records adding partitions to one topic; `used` records are already planned."""
        topic = self._image.topics.get(spec.name)
        if topic is None:
            raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {spec.name} does not exist.")
        current = len(topic.partitions)
        if spec.count < current:
            raise ApiError(ErrorCode.INVALID_PARTITIONS, f"Topic currently has {current} partitions, "
                           f"which is higher than the requested {spec.count}.")
        if spec.count == current:
            raise ApiError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partitions.")
        added = spec.count - current
        _check_room(added, used)
        usable = [b.broker_id for b in self._image.unfenced_brokers()]
        if spec.assignments is not None:
            if len(spec.assignments) != added:
                raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                               f"Attempted to add {added} additional partition(s), but only "
                               f"{len(spec.assignments)} assignment(s) were specified.")
            placements = validate_assignment(
                {current + i: a for i, a in enumerate(spec.assignments)}, self._image.brokers,
                first_partition=current)
            factor = len(topic.partitions[0].replicas)
            if len(placements[0]) != factor:
                raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                               f"Inconsistent replication factor between partitions, partition 0 has "
                               f"{factor} while the new partitions have {len(placements[0])}.")
            for p, replicas in enumerate(placements, start=current):
                if not any(b in usable for b in replicas):
                    raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                   f"All brokers specified in the manual partition assignment for "
                                   f"partition {p} are fenced or in controlled shutdown.")
        else:
            factor = len(topic.partitions[0].replicas)
            placements = place_replicas(usable, added, factor, first_partition=current,
                                        start=self._placement_start)
        return [self._new_partition(topic.topic_id, p, replicas, usable)
                for p, replicas in enumerate(placements, start=current)]

    # -- configs ---------------------------------------------------------------------------------

    async def alter_configs(self, resources: Sequence[tuple[int, str, Mapping[str, str | None]]],
                            validate_only: bool = False) -> list[ConfigResult]:
        """Legacy AlterConfigs: each (type, name, configs) REPLACES the resource's dynamic configs."""
        return await self._alter(resources, validate_only,
                                 lambda rtype, current, configs: cfg.apply_legacy(configs))

    async def incremental_alter_configs(self, resources: Sequence[tuple[int, str, Sequence[tuple]]],
                                        validate_only: bool = False) -> list[ConfigResult]:
        """(type, name, [(key, op, value)]) with op SET=0, DELETE=1, APPEND=2, SUBTRACT=3."""
        return await self._alter(resources, validate_only, cfg.apply_incremental)

    async def _alter(self, resources, validate_only, compute) -> list[ConfigResult]:
        await self._require_leader()
        async with self._lock:
            keys = [(t, n) for t, n, _ in resources]
            results, batch = [], []
            for rtype, name, changes in resources:
                result = ConfigResult(rtype, name)
                results.append(result)
                try:
                    if keys.count((rtype, name)) > 1:
                        raise ApiError(ErrorCode.INVALID_REQUEST, "Duplicate resource in request.")
                    cfg.check_resource(self._image, rtype, name)
                    before = cfg.current_configs(self._image, rtype, name)
                    after = compute(rtype, before, changes)
                    cfg.run_validator(self._config_validator, rtype, name, after)
                except ApiError as exc:
                    result.error_code, result.error_message = _error(exc)
                    continue
                batch += cfg.diff_records(rtype, name, before, after)
            if not validate_only:
                await self._commit(batch)
            return results

    # -- producer ids ----------------------------------------------------------------------------

    async def allocate_producer_ids(self, broker_id: int, broker_epoch: int = -1) -> ProducerIdBlock:
        """Reserve the next block of 1000 producer ids; blocks are never handed out twice."""
        await self._require_leader()
        async with self._lock:
            if broker_epoch != -1:
                self._check_broker_epoch(broker_id, broker_epoch)
            first = self._image.next_producer_id
            await self._commit([r.ProducerIdsRecord(broker_id=broker_id, broker_epoch=broker_epoch,
                                                    next_producer_id=first + PRODUCER_ID_BLOCK_SIZE)])
            return ProducerIdBlock(first)

    # -- broker lifecycle ------------------------------------------------------------------------

    async def register_broker(self, broker_id: int, incarnation_id: uuid.UUID,
                              endpoints: Sequence[tuple[str, str, int, int]],
                              rack: str | None = None) -> int:
        """Register (or re-register) a broker, fenced until its first heartbeat; returns its epoch.

        `endpoints` are (listener name, host, port, security protocol id). A new incarnation of a
        registered broker first loses its leaderships, exactly as when it is fenced.
        """
        await self._require_leader()
        async with self._lock:
            old = self._image.brokers.get(broker_id)
            if old is not None and old.incarnation_id == incarnation_id:
                return old.epoch              # a retried registration of the same process
            if (old is not None and not old.fenced and self._session_alive(broker_id)
                    and old.incarnation_id != incarnation_id and broker_id != self.node_id):
                raise ApiError(ErrorCode.DUPLICATE_BROKER_REGISTRATION,
                               f"Another broker is registered with that broker id {broker_id}.")
            batch: list = self._leave_partitions(broker_id) if old is not None else []
            epoch = self._quorum.end_offset    # Kafka uses the registration record's offset
            batch.append(r.RegisterBrokerRecord(
                broker_id=broker_id, incarnation_id=incarnation_id, broker_epoch=epoch,
                end_points=[r.BrokerEndpoint(name=n, host=h, port=p, security_protocol=s)
                            for n, h, p, s in endpoints],
                rack=rack, fenced=True))
            offset = await self._commit(batch)
            if offset != epoch:
                raise ApiError(ErrorCode.NOT_CONTROLLER, "The metadata log moved during registration.")
            self._last_heartbeat[broker_id] = trio.current_time()
            return epoch

    async def heartbeat(self, broker_id: int, broker_epoch: int, metadata_offset: int,
                        want_fence: bool = False, want_shutdown: bool = False) -> HeartbeatResult:
        """Keep a broker's session alive; the first heartbeat that does not want fencing unfences it."""
        await self._require_leader()
        async with self._lock:
            broker = self._check_broker_epoch(broker_id, broker_epoch)
            self._last_heartbeat[broker_id] = trio.current_time()
            caught_up = metadata_offset >= broker_epoch
            batch: list = []
            if broker.fenced and not want_fence and caught_up:
                batch.append(r.UnfenceBrokerRecord(id=broker_id, epoch=broker_epoch))
                batch += self._elect_for_unfenced(broker_id)
            elif not broker.fenced and (want_fence or want_shutdown):
                batch += self._leave_partitions(broker_id)
                batch.append(r.FenceBrokerRecord(id=broker_id, epoch=broker_epoch))
            await self._commit(batch)
            fenced = self._image.brokers[broker_id].fenced
            return HeartbeatResult(is_caught_up=caught_up, is_fenced=fenced,
                                   should_shut_down=want_shutdown and fenced)

    async def unregister_broker(self, broker_id: int) -> None:
        """Remove a broker's registration (UnregisterBroker); its partitions lose it first."""
        await self._require_leader()
        async with self._lock:
            broker = self._image.brokers.get(broker_id)
            if broker is None:
                raise ApiError(ErrorCode.BROKER_ID_NOT_REGISTERED,
                               f"Broker {broker_id} is not registered.")
            await self._commit(self._leave_partitions(broker_id) + [
                r.UnregisterBrokerRecord(broker_id=broker_id, broker_epoch=broker.epoch)])
            self._last_heartbeat.pop(broker_id, None)

    def _check_broker_epoch(self, broker_id: int, broker_epoch: int):
        broker = self._image.brokers.get(broker_id)
        if broker is None:
            raise ApiError(ErrorCode.BROKER_ID_NOT_REGISTERED, f"Broker {broker_id} is not registered.")
        if broker.epoch != broker_epoch:
            raise ApiError(ErrorCode.STALE_BROKER_EPOCH,
                           f"Expected broker epoch {broker.epoch}, but got broker epoch {broker_epoch}")
        return broker

    def _session_alive(self, broker_id: int) -> bool:
        last = self._last_heartbeat.get(broker_id)
        timeout = self._settings.broker_session_timeout_ms / 1000
        return last is not None and trio.current_time() - last < timeout

    def _leave_partitions(self, broker_id: int) -> list:
        """PartitionChangeRecords moving leadership and ISR membership away from `broker_id`."""
        out = []
        usable = {b.broker_id for b in self._image.unfenced_brokers()} - {broker_id}
        for topic in (t for _, t in sorted(self._image.topics.items())):
            for part in (p for _, p in sorted(topic.partitions.items())):
                if broker_id not in part.isr and part.leader != broker_id:
                    continue
                # Kafka never empties the ISR: the last member stays as the one to come back.
                isr = [b for b in part.isr if b != broker_id] or list(part.isr)
                leader = part.leader
                if leader == broker_id:
                    leader = next((b for b in part.replicas if b in isr and b in usable), -1)
                change = r.PartitionChangeRecord(partition_id=part.partition_id, topic_id=topic.topic_id)
                if list(isr) != list(part.isr):
                    change.isr = isr
                if leader != part.leader:
                    change.leader = leader
                if change.isr is not None or change.leader != -2:
                    out.append(change)
        return out

    def _elect_for_unfenced(self, broker_id: int) -> list:
        """Leaderless partitions whose ISR holds the returning broker get it back as leader."""
        out = []
        for topic in (t for _, t in sorted(self._image.topics.items())):
            for part in (p for _, p in sorted(topic.partitions.items())):
                if part.leader == -1 and broker_id in part.isr:
                    out.append(r.PartitionChangeRecord(partition_id=part.partition_id,
                                                       topic_id=topic.topic_id, leader=broker_id))
        return out

    async def _fence_expired_brokers(self) -> None:
        for broker_id in self._image.brokers:        # a fresh session for everyone after a restart
            self._last_heartbeat[broker_id] = trio.current_time()
        while True:
            await trio.sleep(min(1.0, self._settings.broker_session_timeout_ms / 4000))
            if not self._quorum.is_leader:
                self._last_heartbeat.clear()     # a new term of leadership starts fresh sessions
                continue
            for broker_id in self._image.brokers:
                self._last_heartbeat.setdefault(broker_id, trio.current_time())
            async with self._lock:
                batch = []
                for broker in self._image.unfenced_brokers():
                    if not self._session_alive(broker.broker_id):
                        batch += self._leave_partitions(broker.broker_id)
                        batch.append(r.FenceBrokerRecord(id=broker.broker_id, epoch=broker.epoch))
                try:
                    await self._commit(batch)
                except ApiError:
                    pass                         # lost leadership meanwhile; the next leader decides


def _new_topic_id(image: MetadataImage) -> uuid.UUID:
    """Random ids as Kafka makes them: never zero, never the metadata topic's id (1), never one whose
    base64 form starts with '-' (command-line tools would read it as an option)."""
    while True:
        candidate = uuid.uuid4()
        if candidate.int in (0, 1) or candidate in image.topics_by_id:
            continue
        if base64.urlsafe_b64encode(candidate.bytes).startswith(b"-"):
            continue
        return candidate


def _load_or_create_cluster_id(log_dir: str) -> str:
    """The cluster id lives in `<log dir>/meta.properties` (`cluster.id=`), as Kafka formats it."""
    path = os.path.join(log_dir, "meta.properties")
    try:
        with open(path) as f:
            for line in f:
                key, _, value = line.strip().partition("=")
                if key == "cluster.id" and value:
                    return value
    except FileNotFoundError:
        pass
    cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(f"version=1\ncluster.id={cluster_id}\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return cluster_id
