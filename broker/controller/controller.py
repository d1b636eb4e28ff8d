"""The async controller: admin requests in, validated metadata records committed to the quorum out.

Split by job: `topic_ops` (CreateTopics, DeleteTopics, CreatePartitions), `broker_ops` (registration,
heartbeats, fencing, controlled shutdown), `leadership_ops` (ElectLeaders, AlterPartition, automatic
leader rebalance), `feature_ops` (metadata.version on a fresh log, UpdateFeatures); the pure decisions
they commit live in `placement`, `election`, `brokers`, `alter_partition` and `features`. This module
holds the core (quorum, image, listeners), configs and producer ids.
"""

from __future__ import annotations

import base64
import logging
import os
import random
import uuid
from contextlib import asynccontextmanager
from typing import Callable, Mapping, Sequence

import trio

from . import acls
from . import configs as cfg
from . import election
from . import records as r
from . import scram
from .broker_ops import BrokerOps
from .brokers import BrokerSessions, HeartbeatResult, check_broker_epoch
from .disklog import Entry, Snapshot
from .errors import ApiError, ErrorCode
from .feature_ops import FeatureOps
from .image import ImageChange, MetadataImage
from .leadership_ops import LeadershipOps
from .reassignment_ops import ReassignmentOps
from .quorum import RaftQuorum
from .raft import RaftConfig
from .specs import (  # noqa: F401  (re-exported: callers import the request types from here)
    MAX_RECORDS_PER_USER_OP, PRODUCER_ID_BLOCK_SIZE, BatchTooLarge, ConfigResult, ControllerSettings,
    CreatePartitionsResult, CreatePartitionsSpec, CreateTopicResult, CreateTopicSpec, DeleteTopicResult,
    ProducerIdBlock, error_of,
)
from .token_ops import TokenOps
from .topic_ops import TopicOps

log = logging.getLogger(__name__)

# Bulk changes are worked out in a worker thread rather than on the event loop: a batch of this many
# records is encoded there (~4 µs a record), an entry of this many bytes decoded and applied there
# (~10 µs a record, ~50 bytes each). Below that, inline is cheaper than the thread trip.
OFF_LOOP_RECORDS = 500
OFF_LOOP_ENTRY_BYTES = 16 * 1024

__all__ = [
    "BatchTooLarge", "ConfigResult", "Controller", "ControllerSettings", "CreatePartitionsResult",
    "CreatePartitionsSpec", "CreateTopicResult", "CreateTopicSpec", "DeleteTopicResult", "HeartbeatResult",
    "MAX_RECORDS_PER_USER_OP", "PRODUCER_ID_BLOCK_SIZE", "ProducerIdBlock",
]


class Controller(TopicOps, BrokerOps, ReassignmentOps, LeadershipOps, FeatureOps, TokenOps):
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
        self._sessions = BrokerSessions(settings.broker_session_timeout_ms / 1000)
        self._rng = random.Random(settings.placement_seed)
        self._applied_event = trio.Event()      # set (and replaced) whenever more log is applied
        self._prepared: dict[int, tuple[MetadataImage, MetadataImage]] = {}   # see _prepare_entries
        quorum.snapshot_state = self._snapshot_state
        quorum.start(self._apply_snapshot, self._apply_entry, self._prepare_entries)

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
                nursery.start_soon(controller._balance_leaders)
                nursery.start_soon(controller._finalize_bootstrap_features)
                nursery.start_soon(controller._sweep_expired_tokens)
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

    def in_touch(self) -> bool:
        """Whether this replica leads the quorum or hears from its leader (its image is current)."""
        return self._quorum.in_touch()

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

    async def _prepare_entries(self, entries) -> None:
        """Work out the images after large committed entries in a worker thread, so that decoding
        and applying thousands of records (one CreateTopics of 9,000 partitions: ~100 ms) does not
        hold the event loop; `_apply_entry` then only publishes them. Small entries (the usual
        ISR change or registration) are applied inline, without the thread trip."""
        if all(entry.control or len(entry.data) < OFF_LOOP_ENTRY_BYTES for entry in entries):
            return
        self._prepared = await trio.to_thread.run_sync(_images_after, self._image, entries)

    def _apply_entry(self, entry: Entry) -> None:
        self._applied_end = entry.offset + 1
        self._applied_event.set()
        self._applied_event = trio.Event()
        if not entry.control:
            base, image = self._prepared.pop(entry.offset, (None, None))
            if base is not self._image:   # not prepared (or, never expected, prepared on another)
                image = self._image.apply(r.decode_records(entry.data), entry.offset)
            self._set_image(image)

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
        if len(batch) >= OFF_LOOP_RECORDS:   # thousands of partitions: encoded off the event loop
            data = await trio.to_thread.run_sync(r.encode_records, batch)
        else:
            data = r.encode_records(batch)
        return await self._quorum.propose(data)

    async def _require_leader(self) -> None:
        await self._quorum.wait_ready()

    # -- configs ---------------------------------------------------------------------------------

    async def alter_configs(self, resources: Sequence[tuple[int, str, Sequence | Mapping[str, str | None]]],
                            validate_only: bool = False) -> list[ConfigResult]:
        """Legacy AlterConfigs: each (type, name, configs) REPLACES the resource's dynamic configs;
        configs are (key, value) pairs as the request lists them, or a mapping."""
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
                    result.error_code, result.error_message = error_of(exc)
                    continue
                batch += cfg.diff_records(rtype, name, before, after)
            if not validate_only:
                await self._commit(batch)
                if any(getattr(rec, "name", None) == election.UNCLEAN_KEY for rec in batch):
                    # Allowed just now: offline partitions take any live replica at once.
                    await self._commit(election.elect_unclean_where_enabled(
                        self._image, self._settings.unclean_leader_election_enable, self.node_id))
            return results

    # -- ACLs --------------------------------------------------------------------------------------

    async def create_acls(self, bindings) -> list:
        """Store AclBindings -> [acls.AclCreateResult] (INVALID_REQUEST for a binding Kafka refuses)."""
        return await self._plan_and_commit(acls.plan_create, bindings)

    async def delete_acls(self, filters) -> list:
        """Remove the ACLs each AclBindingFilter matches -> [acls.AclDeleteResult(deleted=[...])]."""
        return await self._plan_and_commit(acls.plan_delete, filters)

    async def _plan_and_commit(self, plan, items) -> list:
        await self._require_leader()
        async with self._lock:
            batch, results = plan(self._image, items)
            await self._commit(batch)
            return results

    # -- SCRAM credentials -----------------------------------------------------------------------

    async def alter_user_scram_credentials(self, deletions, upsertions) -> dict:
        """{user: (error code, message)}; see `scram.alteration_records` for the checks."""
        await self._require_leader()
        async with self._lock:
            batch, results = scram.alteration_records(self._image, deletions, upsertions)
            await self._commit(batch)
            return results

    # -- controller registration -----------------------------------------------------------------

    async def register_controller(self, controller_id: int, incarnation_id: uuid.UUID,
                                  endpoints: Sequence[tuple[str, str, int, int]]) -> None:
        """ControllerRegistration: record where a controller listens (DescribeCluster for
        controllers answers from it); a retry of the same incarnation writes nothing."""
        await self._require_leader()
        async with self._lock:
            known = self._image.controllers.get(controller_id)
            if known is not None and known.incarnation_id == incarnation_id:
                return
            await self._commit([r.RegisterControllerRecord(
                controller_id=controller_id, incarnation_id=incarnation_id,
                end_points=[r.RegisterControllerRecord.ControllerEndpoint(
                    name=n, host=h, port=p, security_protocol=s) for n, h, p, s in endpoints])])

    # -- producer ids ----------------------------------------------------------------------------

    async def allocate_producer_ids(self, broker_id: int, broker_epoch: int = -1) -> ProducerIdBlock:
        """Reserve the next block of 1000 producer ids; blocks are never handed out twice."""
        await self._require_leader()
        async with self._lock:
            if broker_epoch != -1:
                check_broker_epoch(self._image, broker_id, broker_epoch)
            first = self._image.next_producer_id
            await self._commit([r.ProducerIdsRecord(broker_id=broker_id, broker_epoch=broker_epoch,
                                                    next_producer_id=first + PRODUCER_ID_BLOCK_SIZE)])
            return ProducerIdBlock(first)


def _images_after(image: MetadataImage, entries) -> dict[int, tuple[MetadataImage, MetadataImage]]:
    """{offset: (image before, image after)} for the committed `entries` in order. It stops at an
    entry that fails to decode or apply: `_apply_entry` meets it inline then, and fails there as
    it would have without this."""
    prepared = {}
    for entry in entries:
        if entry.control:
            continue
        try:
            after = image.apply(r.decode_records(entry.data), entry.offset)
        except Exception:
            break
        prepared[entry.offset] = (image, after)
        image = after
    return prepared


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
