"""The partitions this broker hosts: their logs, leadership, high watermarks and long-poll wake-ups.

``PartitionManager`` follows the metadata image (``on_image_change``): it opens a log for every partition
placed on this node, deletes the logs of deleted topics, applies topic config changes and records
leader epochs. Handlers reach partitions through it:

- ``leader(topic, index)`` -> ``Partition`` or raises ``PartitionError(code)``;
- ``await append(partition, records, origin=...)`` -> storage ``AppendResult`` (small appends inline,
  big ones, or any that may fsync or recompress, in a worker thread);
- ``await acknowledge(partition, result)``: with ``log.flush.before.acknowledge`` waits for the fsync
  (group commit), then advances the high watermark and wakes waiting fetches;
- ``await wait_for_data(seen, timeout)``: long polling without polling (and without missing an
  append that lands between the caller's read and its wait).

Replication (``broker.replication``): ``self.replication`` makes this broker leader or follower of each
partition from the image; as leader the high watermark is the smallest log end offset over the ISR
(with one replica, the log end offset, or the flushed offset when acknowledged records must be
durable); acks=all produces wait there for it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import trio

from protocol import ErrorCode

from storage.errors import StorageError
from storage.validation import AppendOrigin

from broker.log_maintenance import run_log_maintenance
from broker.security.dynamic import reload_listener_security

log = logging.getLogger("odradek.partitions")


class PartitionError(Exception):
    def __init__(self, code: int, message: str | None = None, log_start_offset: int = -1):
        super().__init__(message or ErrorCode(code).name)
        self.code = code
        self.message = message
        self.log_start_offset = log_start_offset   # what a Produce answer reports with it (-1: none)


@dataclass(eq=False)
class Partition:
    topic: str
    index: int
    topic_id: object
    log: object
    leader: int
    leader_epoch: int
    isr: tuple = ()
    min_insync_replicas: int = 1
    waiters: set = field(default_factory=set)
    replica_waiters: set = field(default_factory=set)   # followers' long polls: new data, not HW
    replica_state: object = None      # broker.replication.leader.LeaderState while leading
    replica_io: bool = False          # a follower append/truncation is running in a worker thread
    deferred_epoch_start: bool = False  # became leader meanwhile: start the epoch once it is done

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    def wake(self) -> None:
        if self.waiters:   # (every append comes here: no fresh set when nobody waits)
            waiters, self.waiters = self.waiters, set()
            for event in waiters:
                event.set()
        if self.replica_waiters:
            self.wake_replicas()

    def wake_replicas(self) -> None:
        """New records a follower may fetch (consumers wait for the high watermark to move)."""
        if not self.replica_waiters:
            return
        waiters, self.replica_waiters = self.replica_waiters, set()
        for event in waiters:
            event.set()


# Appends up to this many record bytes run on the event loop: a page-cache write that small costs
# less than the trip to a worker thread (PROFILE.md finding 2). Bigger ones would stall the loop.
INLINE_APPEND_BYTES = 64 * 1024
# ... and up to this many partitions: each may have to reopen its segment (files and index mappings,
# when more partitions are written than the open-files budget keeps open), so a request writing
# hundreds of partitions goes to the worker thread however small its records.
INLINE_APPEND_PARTITIONS = 32
# The byte of a batch header holding the compression codec (attributes & 7).
_ATTRIBUTES_LOW_BYTE = 22
# A flush.messages below this could make an append fsync, which must never run on the loop.
_FLUSH_MESSAGES_NEVER = 1 << 62


def _appends_inline(items) -> bool:
    """Whether these (partition, records) appends are cheap enough to run on the event loop."""
    if len(items) > INLINE_APPEND_PARTITIONS:
        return False
    total = 0
    for partition, records, *_ in items:
        total += len(records)
        config = partition.log.config
        if config.flush_messages < _FLUSH_MESSAGES_NEVER or config.compression_type != "producer":
            return False   # may fsync or recompress: CPU or disk time the loop must not spend
        if len(records) > _ATTRIBUTES_LOW_BYTE and records[_ATTRIBUTES_LOW_BYTE] & 0x07:
            return False   # compressed: validation decompresses it (the codecs release the GIL)
    return total <= INLINE_APPEND_BYTES


INLINE_OPENS = 64    # new local partitions per image change whose logs are opened on the loop
OPEN_CHUNK = 64      # logs opened per worker trip, then installed on the loop, past INLINE_OPENS
INSTALL_SLICE = 16   # opened logs installed on the loop between two checkpoints


class PartitionManager:
    def __init__(self, broker):
        self.broker = broker
        self.node_id = broker.node_id
        self.logs = broker.logs
        self.durable_acks = broker.config["log.flush.before.acknowledge"]
        self._partitions: dict[tuple[str, int], Partition] = {}
        self._closed = False
        # New local partitions past INLINE_OPENS in one image change: their logs are opened off
        # the loop (`_open_queued`), installed in chunks; meanwhile a Produce
        # for one waits for it (`broker.open_queue`), other requests get NOT_LEADER_OR_FOLLOWER.
        self._opening: set[tuple[str, int]] = set()
        from broker.open_queue import OpenQueue
        self._open_queue = OpenQueue(self._opening)
        self._open_wanted = trio.Event()
        self._opener_running = False
        # Logs of deleted partitions, detached at once, closed and renamed off the loop by the same
        # task (before any open, so a recreated partition never meets its old directory).
        self._retire_queue: list[tuple[tuple[str, int], object]] = []
        self._retiring: set[tuple[str, int]] = set()
        from broker.collector import CollectorSteward
        self.collector = CollectorSteward()
        from broker.replication.manager import ReplicaManager
        self.replication = ReplicaManager(broker, self)
        from broker.log_dir_moves import LogDirMoves
        self.dir_moves = LogDirMoves(broker, self)

    # -------------------------------------------------------------------------------- lookups
    def get(self, topic: str, index: int) -> Partition | None:
        return self._partitions.get((topic, index))

    def opening(self, topic: str, index: int) -> bool:
        """Whether this partition's log is queued to be opened here (see `broker.open_queue`)."""
        return (topic, index) in self._opening

    async def wait_opened(self, keys: list, timeout_s: float) -> None:
        await self._open_queue.wait_opened(keys, timeout_s)

    def leader(self, topic: str, index: int, current_leader_epoch: int = -1) -> Partition:
        """The partition if this broker leads it; else the PartitionError Kafka would answer."""
        partition = self._partitions.get((topic, index))
        if partition is None:
            image = self.broker.image
            topic_image = image.topics.get(topic)
            if topic_image is None or index not in topic_image.partitions:
                raise PartitionError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            raise PartitionError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if partition.leader != self.node_id or partition.replica_state is None:
            raise PartitionError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if current_leader_epoch >= 0:
            if current_leader_epoch < partition.leader_epoch:
                raise PartitionError(ErrorCode.FENCED_LEADER_EPOCH)
            if current_leader_epoch > partition.leader_epoch:
                raise PartitionError(ErrorCode.UNKNOWN_LEADER_EPOCH)
        return partition

    def is_current(self, partition: Partition) -> bool:
        """Whether `partition` is still this broker's replica of its topic partition."""
        return self._partitions.get((partition.topic, partition.index)) is partition

    def readable(self, topic: str, index: int, current_leader_epoch: int = -1) -> Partition:
        """For a consumer that may read from followers (KIP-392, Fetch v11+): the partition if any
        replica of it is here (a follower serves up to its own high watermark), with the same
        leader epoch checks as ``leader``."""
        partition = self._partitions.get((topic, index))
        if partition is None or partition.replica_state is not None or partition.leader < 0:
            return self.leader(topic, index, current_leader_epoch)
        if current_leader_epoch >= 0:
            if current_leader_epoch < partition.leader_epoch:
                raise PartitionError(ErrorCode.FENCED_LEADER_EPOCH)
            if current_leader_epoch > partition.leader_epoch:
                raise PartitionError(ErrorCode.UNKNOWN_LEADER_EPOCH)
        return partition

    def all(self) -> list[Partition]:
        return list(self._partitions.values())

    # ------------------------------------------------------------------------- image changes
    def _min_insync_replicas(self, topic: str, index: int) -> int:
        """min.insync.replicas as acks=all applies it: never more than the partition's replicas
        (Kafka's effective minimum ISR: a one-replica topic takes acks=all writes at any setting)."""
        image = self.broker.image
        configured = self.broker.config.topic_config(image.topic_configs.get(topic, {}))["min.insync.replicas"]
        placed = image.partition(topic, index)
        return min(configured, len(placed.replicas)) if placed is not None and placed.replicas else configured

    async def load_image(self, image, *, delete_orphans: bool = True) -> None:
        """Open every log the image places here (at start-up; recovery runs off the loop).

        A cluster node's image at start-up is only what it knew committed before it stopped;
        it deletes orphans later (`delete_orphans`), once registered and caught up."""
        wanted = []
        for topic in image.topics.values():
            for partition in topic.partitions.values():
                if self.node_id in partition.replicas:
                    wanted.append((topic, partition))
        opened = await self.broker.run_blocking(
            lambda: [(t, p, self._open_log(t, p, image)) for t, p in wanted])
        for topic, partition, opened_log in opened:
            self._install(topic, partition, opened_log)
        self.collector.note_opened(len(opened))
        self.collector.settle()
        if delete_orphans:
            await self.delete_orphans(image)

    async def delete_orphans(self, image) -> None:
        await self.broker.run_blocking(self._delete_orphans, image)

    def _open_log(self, topic, partition, image):
        overrides = dict(image.topic_configs.get(topic.name, {}))
        return self.logs.get_or_create_log(topic.name, partition.partition_id, overrides)

    def _install(self, topic, partition, opened_log) -> Partition:
        state = Partition(topic=topic.name, index=partition.partition_id, topic_id=topic.topic_id,
                          log=opened_log, leader=partition.leader,
                          leader_epoch=partition.leader_epoch, isr=tuple(partition.isr))
        self._partitions[(topic.name, partition.partition_id)] = state
        state.min_insync_replicas = self._min_insync_replicas(topic.name, partition.partition_id)
        self.replication.on_partition(state, partition)
        return state

    def _delete_orphans(self, image) -> None:
        """Logs on disk for topics the metadata no longer has (deleted while we were down).

        An empty metadata log next to existing partition logs means the metadata was lost, not
        that every topic was deleted: then nothing is removed.
        """
        if image.offset < 0:
            if self.logs.logs():
                log.warning("the metadata log is empty but partition logs exist in %s: keeping "
                            "them on disk, unserved, until their topics exist again",
                            ", ".join(self.broker.config.log_dirs))
            return
        for topic, index in list(self.logs.logs()):
            topic_image = image.topics.get(topic)
            if topic_image is None or index not in topic_image.partitions:
                log.info("deleting orphaned log %s-%d", topic, index)
                self.logs.delete_log(topic, index)

    def on_image_change(self, change) -> None:
        """Controller listener (synchronous, on the event loop)."""
        if self._closed:
            return
        new = change.new
        retired = []
        for topic in change.deleted_topics:
            self.broker.fetch_sessions.forget_topic(topic.topic_id, topic.name)
            for index in list(topic.partitions):
                state = self._partitions.pop((topic.name, index), None)
                if state is not None:
                    self.replication.on_partition_removed(state)
                    state.wake()
                detached = self.logs.detach_log(topic.name, index)
                if detached is not None:
                    retired.append(((topic.name, index), detached))
        if len(retired) > INLINE_OPENS and self._opener_running:
            self._retire_queue.extend(retired)
            self._retiring.update(key for key, _ in retired)
            self._open_wanted.set()
        elif retired:
            self._retire_logs(retired)
        fresh = []   # partitions new to this broker
        for topic, partition in change.changed_partitions:
            key = (topic.name, partition.partition_id)
            if key in self._opening:
                continue   # its log is being opened: installed from the image of that moment
            state = self._partitions.get(key)
            if self.node_id not in partition.replicas:
                if state is not None and state.topic_id == topic.topic_id:
                    self._drop_replica(state)   # reassigned away from this broker
                continue
            if state is None or state.topic_id != topic.topic_id:
                fresh.append((topic, partition))
            else:
                state.leader = partition.leader
                state.leader_epoch = partition.leader_epoch
                state.isr = tuple(partition.isr)
                state.min_insync_replicas = self._min_insync_replicas(topic.name, partition.partition_id)
                self.replication.on_partition(state, partition)
                state.wake()
        if (len(fresh) > INLINE_OPENS or self._retiring) and self._opener_running:
            for topic, partition in fresh:
                key = (topic.name, partition.partition_id)
                self._opening.add(key)
                self._open_queue.append(key)
            self._open_wanted.set()
            # The image just grew by thousands of partitions: frozen now (O(1)), so the automatic
            # full collections the opens would trigger do not walk it (0.5-0.7 s each at 50,000).
            self.collector.note_opened(len(fresh))
            if self.collector.due_after_openings_alone:
                self.collector.settle()
        else:
            for topic, partition in fresh:
                self._install(topic, partition, self._open_log(topic, partition, new))
            self.collector.note_opened(len(fresh))
        if change.old.broker_configs != new.broker_configs:
            mine = ("", str(self.node_id))
            before = [change.old.broker_configs.get(r, {}) for r in mine]
            after = [new.broker_configs.get(r, {}) for r in mine]
            self.broker.config.set_dynamic(*after)
            reload_listener_security(self.broker, {n for b, a in zip(before, after)
                                                   for n in {*b, *a} if b.get(n) != a.get(n)})
            self.logs.set_defaults(self.broker.config.topic_defaults())
            for state in self._partitions.values():
                state.min_insync_replicas = self._min_insync_replicas(state.topic, state.index)
        for name in change.changed_topic_configs:
            if name in new.topics:
                self.logs.set_topic_config(name, dict(new.topic_configs.get(name, {})))
            for state in self._partitions.values():
                if state.topic == name:
                    state.min_insync_replicas = self._min_insync_replicas(name, state.index)

    async def _open_queued(self) -> None:
        """Open the logs of partitions queued by a large image change (a CreateTopics of
        thousands, a reassignment) in a worker thread, OPEN_CHUNK at a time, and install each
        chunk on the loop: creating thousands of logs (directories, files) must not hold it."""
        self._opener_running = True
        try:
            while True:
                await self._open_wanted.wait()
                self._open_wanted = trio.Event()
                while self._retire_queue and not self._closed:
                    chunk = self._retire_queue[:OPEN_CHUNK]
                    del self._retire_queue[:OPEN_CHUNK]
                    await self.broker.run_blocking(self._retire_logs, chunk)
                    self._retiring.difference_update(key for key, _ in chunk)
                while self._open_queue and not self._closed and not self._retire_queue:
                    wanted = self._placed_here(self._open_queue.next_chunk(OPEN_CHUNK))
                    image = self.broker.image
                    opened = await self.broker.run_blocking(self._open_logs, wanted, image)
                    for first in range(0, len(opened), INSTALL_SLICE):
                        # installing one (leadership, epochs, a log line) is ~0.1 ms: a few per step
                        self._install_opened(opened[first:first + INSTALL_SLICE])
                        await trio.lowlevel.checkpoint()
                    self._open_queue.chunk_installed()
                    self.collector.note_opened(len(opened))
                    if self.collector.due_after_openings_alone:
                        self.collector.settle()
                if self._retire_queue or self._open_queue:
                    self._open_wanted.set()   # deletions came in meanwhile: those first
                elif self.collector.due and not self._closed:
                    self.collector.settle()
        finally:
            self._opener_running = False

    def _retire_logs(self, retired) -> None:
        """Close and rename detached logs of deleted partitions (in a worker thread when many)."""
        try:
            self.logs.retire_logs([detached for _, detached in retired])
        except (StorageError, OSError):
            log.exception("deleting the logs of %d partitions failed", len(retired))
        self.collector.note_deleted(len(retired))

    def _placed_here(self, keys) -> list:
        """(topic, partition) images of `keys` the current image still places on this broker."""
        image = self.broker.image
        placed = []
        for name, index in keys:
            topic = image.topics.get(name)
            partition = topic.partitions.get(index) if topic is not None else None
            if partition is not None and self.node_id in partition.replicas:
                placed.append((topic, partition))
            else:
                self._opening.discard((name, index))   # deleted or moved before we got to it
        return placed

    def _open_logs(self, wanted, image) -> list:
        """(topic, partition, log) for each of `wanted` (a worker thread); a log that cannot be
        opened is left out (its partition is unserved here, as when its log dir failed)."""
        opened = []
        for topic, partition in wanted:
            try:
                opened.append((topic, partition, self._open_log(topic, partition, image)))
            except (StorageError, OSError):
                log.exception("opening the log of %s-%d failed", topic.name, partition.partition_id)
                self._opening.discard((topic.name, partition.partition_id))
        return opened

    def _install_opened(self, opened) -> None:
        if self._closed:
            return
        image = self.broker.image
        for topic, partition, opened_log in opened:
            key = (topic.name, partition.partition_id)
            self._opening.discard(key)
            current_topic = image.topics.get(topic.name)
            current = current_topic.partitions.get(key[1]) if current_topic is not None else None
            if current is None or current_topic.topic_id != topic.topic_id \
                    or self.node_id not in current.replicas:
                # Changed while its log was opened: deleted (or recreated under a new id).
                try:
                    self.logs.delete_log(*key)
                except StorageError:
                    log.exception("deleting log %s-%d failed", *key)
                if current is not None and self.node_id in current.replicas:
                    self._opening.add(key)
                    self._open_queue.append(key)
                    self._open_wanted.set()
                continue
            self._install(current_topic, current, opened_log)

    def _drop_replica(self, state: Partition) -> None:
        """This broker is no longer a replica (a completed reassignment): stop and delete the log."""
        log.info("%s-%d: no longer a replica here: deleting its log", state.topic, state.index)
        self._partitions.pop((state.topic, state.index), None)
        self.replication.on_partition_removed(state)
        state.wake()
        try:
            self.logs.delete_log(state.topic, state.index)
        except StorageError:
            log.exception("deleting log %s-%d failed", state.topic, state.index)

    # -------------------------------------------------------------------------------- writing
    async def append(self, partition: Partition, records, *, origin=None):
        """Append one partition's batches (off the event loop); raises StorageError."""
        [outcome] = await self.append_many([(partition, records)], origin=origin)
        if isinstance(outcome, StorageError):
            raise outcome
        return outcome

    async def append_many(self, items, *, origin=None) -> list:
        """Append to several partitions, in order: inline when small, else in one worker trip.

        Returns, per (partition, records[, verification guard]) item, the storage AppendResult
        or the StorageError.
        """
        if _appends_inline(items):
            return self.append_now(items, origin=origin)
        return await self.broker.run_blocking(self.append_now, items, origin)

    # Whether append_now() of these items may run on the event loop (small, no fsync).
    appends_inline = staticmethod(_appends_inline)

    def append_now(self, items, origin=None) -> list:
        """append_many() in the calling thread. Items: (partition, records[, verification
        guard[, the records' one batch header, parsed by the caller]]); fields past those
        are the caller's own (the Produce handler's answer) and ignored here."""
        origin = origin or AppendOrigin.CLIENT
        outcomes = []
        for partition, records, *extra in items:
            log_ = partition.log
            try:
                outcomes.append(log_.append(
                    records, leader_epoch=partition.leader_epoch, origin=origin,
                    verification_guard=extra[0] if extra else None,
                    batch=extra[1] if len(extra) > 1 else None))
            except StorageError as exc:
                if partition.log is log_:
                    outcomes.append(exc)
                else:   # moved to another log dir meanwhile (as log_dir_moves.append_following_moves,
                        # inline here: this is every Produce's path)
                    outcomes.extend(self.append_now([(partition, records, *extra)], origin))
        return outcomes

    async def acknowledge(self, partition: Partition, result) -> None:
        """Make an append visible (and, if configured, durable) before it is acknowledged."""
        await self.acknowledge_many([(partition, result)])

    async def acknowledge_many(self, appended) -> None:
        """acknowledge() for several (partition, AppendResult) pairs: one fsync trip for all."""
        if self.durable_acks:
            def wait_all():
                for partition, result in appended:
                    partition.log.wait_flushed(result.last_offset + 1)

            await self.broker.run_blocking(wait_all)
        self.acknowledge_now(appended)

    def acknowledge_now(self, appended) -> None:
        """acknowledge_many() without durable acks: the high watermark moves, waiters wake."""
        on_local_append = self.replication.on_local_append
        for item in appended:   # (partition, AppendResult, ...)
            on_local_append(item[0])

    async def delete_records(self, topic: str, index: int, offset: int) -> tuple[int, int, object]:
        """DeleteRecords on the leader's log: (its new log start offset, error code, partition)."""
        try:
            partition = self.leader(topic, index)
        except PartitionError as exc:
            return -1, exc.code, None
        high_watermark = partition.log.high_watermark
        if offset == -1:
            offset = high_watermark
        if offset < 0 or offset > high_watermark:
            return -1, ErrorCode.OFFSET_OUT_OF_RANGE, None
        try:
            await self.broker.run_blocking(partition.log.delete_records, offset)
        except StorageError as exc:
            return -1, exc.error_code, None
        partition.wake()
        return partition.log.log_start_offset, ErrorCode.NONE, partition

    # -------------------------------------------------------------------------------- waiting
    async def wait_for_data(self, seen: list[tuple[Partition, int, int]], timeout: float,
                            replica: bool = False) -> None:
        """Sleep until one of the partitions gets new data (or changes leader), or `timeout`.

        `seen` holds (partition, high watermark, leader epoch) as the caller's read saw them: a
        change that landed between that read and this call (the read may have left the event
        loop) ends the wait at once instead of going unnoticed until the next append. For a
        follower's fetch (`replica`) the position is the log end offset instead.
        """
        if timeout <= 0 or not seen:
            if timeout > 0:
                await trio.sleep(timeout)
            return
        event = trio.Event()
        partitions = [partition for partition, _, _ in seen]
        for partition in partitions:
            (partition.replica_waiters if replica else partition.waiters).add(event)
        # Registered first, then checked: nothing can slip between the two (no await).
        for partition, position, leader_epoch in seen:
            now = partition.log.log_end_offset if replica else partition.log.high_watermark
            if (now != position
                    or partition.leader_epoch != leader_epoch
                    or self._partitions.get((partition.topic, partition.index)) is not partition):
                event.set()
        try:
            with trio.move_on_after(timeout):
                await event.wait()
        finally:
            for partition in partitions:
                (partition.replica_waiters if replica else partition.waiters).discard(event)

    def wake_all_fetchers(self) -> None:
        for partition in self._partitions.values():
            partition.wake()

    # ---------------------------------------------------------------------------- background
    def start_background(self, nursery: trio.Nursery) -> None:
        self.broker.replication_nursery = nursery
        self.replication.start(nursery)
        nursery.start_soon(run_log_maintenance, self)
        nursery.start_soon(self._open_queued)
        self.dir_moves.start(nursery)

    def close(self) -> None:
        """Stop following the image (in a worker thread); the LogManager flushes and checkpoints on
        its close. Logs of deleted partitions still queued are retired now."""
        self._closed = True
        retired, self._retire_queue = self._retire_queue, []
        if retired:
            self._retire_logs(retired)
