"""The share-partitions this broker leads (Kafka's SharePartitionManager), between the handlers, the
logs and the share coordinator.

A share-partition comes to life on the first ShareFetch of its group: its state is read from the
share coordinator (`persister`); without one it is initialized at the group's `share.auto.offset.reset`
(a group config; Kafka's default, latest: the high watermark then). Every change that must survive a restart
(acknowledgements, releases, expired locks, and acquisitions, which count deliveries) is written back
as the share-partition's state; the handler then waits for the coordinator's writes to settle before
it answers, so an acknowledged acknowledgement is durable. Acquisition locks run on the coordinators'
`Timers`; whenever records become available again, fetches waiting for records are woken.
"""

from __future__ import annotations

import logging
import uuid
from typing import Optional

import trio

from protocol import ErrorCode

from broker.config.group_configs import group_config
from broker.coordinator.share_group.model import ShareGroupConfig

from .partition import SharePartition
from .persister import Persister
from .session import ShareSessionCache
from .state_store import Key

log = logging.getLogger("odradek.share")
E = ErrorCode


class SharePartitionManager:
    def __init__(self, service, config: ShareGroupConfig):
        self.service = service
        self.config = config
        self.partitions: dict[Key, SharePartition] = {}
        self.leader_epochs: dict[Key, int] = {}
        self.state_epochs: dict[Key, int] = {}
        self.sessions = ShareSessionCache()
        self.persister = Persister(service)
        self._available = trio.Event()      # set (and replaced) when released records can be fetched

    # ---- share-partitions -------------------------------------------------------------------------------
    async def load(self, group_id: str, topic_id: uuid.UUID, index: int, partition) -> SharePartition | ErrorCode:
        """The share-partition of `group_id` over `partition` (a leader `broker.partitions` entry),
        its state read from (or initialized at) the share coordinator the first time."""
        key = (group_id, topic_id, index)
        share = self.partitions.get(key)
        if share is None:
            await self.persister.drain()          # the state read below must see this broker's last writes
            log_ = partition.log

            def initial_start() -> int:
                earliest = group_config(self.service.broker.image, group_id, "share.auto.offset.reset") == "earliest"
                return log_.log_start_offset if earliest else log_.high_watermark
            state = await self.persister.read_or_initialize(key, initial_start)
            if isinstance(state, ErrorCode):
                return state
            share = self.partitions.get(key)          # another request may have loaded it meanwhile
            if share is None:
                share = SharePartition(0, delivery_count_limit=self.config.delivery_count_limit,
                                       lock_duration_ms=self.lock_duration_ms(group_id),
                                       max_in_flight=self.config.partition_max_record_locks)
                share.restore(state.start_offset, state.batches)
                self.partitions[key] = share
                self.state_epochs[key] = state.state_epoch
        share.lock_duration_ms = self.lock_duration_ms(group_id)     # the group config may have changed
        # records of a log that has been truncated at the front are gone for the share group too
        share.reset_start(partition.log.log_start_offset)
        self.leader_epochs[key] = partition.leader_epoch
        return share

    def lock_duration_ms(self, group_id: str) -> int:
        """The group's `share.record.lock.duration.ms`, else the broker's group.share.record.lock.duration.ms."""
        override = dict(self.service.broker.image.group_configs.get(group_id, {})).get("share.record.lock.duration.ms")
        return int(override) if override is not None else self.config.record_lock_duration_ms

    def get(self, key: Key) -> Optional[SharePartition]:
        """A share-partition `load` brought here."""
        return self.partitions.get(key)

    def persist(self, key: Key) -> ErrorCode:
        """Write the share-partition's state to its share coordinator: acknowledged by the service's
        `settle` when that is this broker, sent by `persister.flush` otherwise."""
        share = self.partitions.get(key)
        if share is None:
            return E.NONE
        code = self.persister.write(key, self.state_epochs.get(key, 0), self.leader_epochs.get(key, -1),
                                    share.start_offset, share.snapshot())
        if code is E.FENCED_STATE_EPOCH:
            self.fence([key])
            return code
        self._schedule_locks(key)
        return code

    async def flush(self) -> ErrorCode:
        """Before answering: every write of this request reached its share coordinator."""
        if not self.persister.has_pending():
            return E.NONE
        code = await self.persister.flush()
        self.fence(self.persister.take_fenced())
        return code

    def _flush_soon(self) -> None:
        if self.persister.has_pending():
            self.service.spawn(self.flush)

    # ---- members going away -------------------------------------------------------------------------------
    def release_member(self, group_id: str, member_id: str, keys=None) -> None:
        """Whatever `member_id` holds (in `keys`, default everywhere in the group) becomes available."""
        for key, share in list(self.partitions.items()):
            if key[0] == group_id and (keys is None or key[1:] in keys) and share.release_member(member_id):
                self.persist(key)
                self.wake()
        self._flush_soon()

    def member_removed(self, group_id: str, member_id: str) -> None:
        """The group coordinator removed the member (left or fenced): its session and locks end."""
        self.sessions.drop_member(group_id, member_id)
        self.release_member(group_id, member_id)
        self._drop_idle(group_id)

    def session_closed(self, group_id: str, member_id: str, keys) -> None:
        """The member closed its share session (epoch -1, already out of the cache): its records go back."""
        self.release_member(group_id, member_id, keys)
        self._drop_idle(group_id)

    def _drop_idle(self, group_id: str) -> None:
        """No share session of the group is left on this broker: its share-partitions without acquired
        records are forgotten (their state is at the share coordinator), so the next session reads it
        afresh, with any offsets altered or deleted meanwhile (the group was empty)."""
        if any(g == group_id for g, _ in self.sessions.sessions):
            return
        self.forget([k for k, share in self.partitions.items()
                     if k[0] == group_id and share.next_lock_deadline() is None])

    def connection_closed(self, group_id: str, member_id: str, connection) -> None:
        """The connection that opened the member's share session closed (the consumer crashed or went
        away): as Kafka, the session ends and the records the member acquired through it are released
        now, not when their locks run out."""
        session = self.sessions.sessions.get((group_id, member_id))
        if session is not None and session.connection is connection:
            self.sessions.drop_member(group_id, member_id)
            log.info("share session of %s in %s ended with its connection", member_id, group_id)
            self.release_member(group_id, member_id, set(session.partitions))
            self._drop_idle(group_id)

    # ---- waiting for records ------------------------------------------------------------------------------
    def wake(self) -> None:
        self._available.set()
        self._available = trio.Event()

    async def wait_available(self, timeout: float) -> None:
        with trio.move_on_after(timeout):
            await self._available.wait()

    # ---- acquisition locks --------------------------------------------------------------------------------
    def _schedule_locks(self, key: Key) -> None:
        share = self.partitions.get(key)
        deadline = None if share is None else share.next_lock_deadline()
        timer = ("share-locks", key)
        if deadline is None:
            self.service.timers.cancel(timer)
        elif self.service.timers.deadline(timer) != deadline:
            self.service.timers.schedule(timer, deadline, lambda: self._expire(key))

    def _expire(self, key: Key) -> None:
        share = self.partitions.get(key)
        if share is None:
            return
        if share.expire_locks(self.service.clock.now_ms()):
            log.debug("acquisition locks expired in %s", key)
            self.persist(key)
            self._flush_soon()
            self.wake()
        else:
            self._schedule_locks(key)

    async def delete_group(self, group_id: str) -> ErrorCode:
        """DeleteGroups of an empty share group: the state of each of its share-partitions is deleted at
        that share-partition's share coordinator (this broker's store, or DeleteShareGroupState to the
        broker that is, one request per share coordinator), and forgotten here. Which share-partitions
        may have state the group keeps (ShareGroupStatePartitionMetadata: every partition it was ever
        assigned or had altered); a key without state costs no write."""
        image = self.service.broker.image
        keys = {k for k in self.service.share_states.states if k[0] == group_id}
        keys |= {k for k in self.partitions if k[0] == group_id}
        group = self.service.share_groups.describe(group_id)
        if group is not None and group.state_topics:
            keys |= {(group_id, t, p) for t, partitions in group.state_topics.items() for p in partitions}
        else:       # a group kept before its state topics were recorded: every partition is asked about
            keys |= {(group_id, topic.topic_id, index) for name, topic in image.topics.items()
                     if not name.startswith("__") for index in topic.partitions}
        code = await self.persister.delete(sorted(keys, key=lambda k: (str(k[1]), k[2])))
        if code is E.NONE:
            self.forget(keys)
        return code

    def fence(self, keys) -> None:
        """The share coordinator refused this broker's state of `keys` (a newer state epoch: the offsets
        were altered or deleted): drop it, the next fetch reads the share coordinator's."""
        for key in list(keys):
            log.info("share-partition %s fenced by its share coordinator: reloading", key)
        self.forget(keys)

    def forget(self, keys) -> None:
        for key in list(keys):
            self.partitions.pop(key, None)
            self.leader_epochs.pop(key, None)
            self.state_epochs.pop(key, None)
            self.service.timers.cancel(("share-locks", key))


def share_group_config(config) -> ShareGroupConfig:
    """The group.share.* broker settings, bounded by their min/max as Kafka bounds them."""
    def bounded(name, low, high):
        return min(max(config[name], config[low]), config[high])
    return ShareGroupConfig(
        session_timeout_ms=bounded("group.share.session.timeout.ms", "group.share.min.session.timeout.ms",
                                   "group.share.max.session.timeout.ms"),
        heartbeat_interval_ms=bounded("group.share.heartbeat.interval.ms", "group.share.min.heartbeat.interval.ms",
                                      "group.share.max.heartbeat.interval.ms"),
        max_size=config["group.share.max.size"],
        record_lock_duration_ms=bounded("group.share.record.lock.duration.ms",
                                        "group.share.min.record.lock.duration.ms",
                                        "group.share.max.record.lock.duration.ms"),
        delivery_count_limit=config["group.share.delivery.count.limit"],
        partition_max_record_locks=config["group.share.partition.max.record.locks"])


def enabled(config, finalized_features: Optional[dict] = None) -> bool:
    """Share groups are on as in Kafka 4.x: the `share.version` feature finalized at 1 or more, or the
    early-access switches (`group.share.enable=true`, `share` in group.coordinator.rebalance.protocols)."""
    if (finalized_features or {}).get("share.version", 0) >= 1:
        return True
    return bool(config["group.share.enable"]) or "share" in config["group.coordinator.rebalance.protocols"]
