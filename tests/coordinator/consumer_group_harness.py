"""A fake-clock harness around the KIP-848 consumer group core: members that heartbeat like a client."""

from __future__ import annotations

import uuid
from typing import Optional

from broker.coordinator.clock import FakeClock, Timers
from broker.coordinator.consumer_group.coordinator import ConsumerGroupCoordinator, HeartbeatRequest
from broker.coordinator.consumer_group.model import ConsumerGroupConfig
from broker.coordinator.log_records import MemoryGroupLog
from protocol import ErrorCode

E = ErrorCode
GROUP = "g"


class Harness:
    def __init__(self, topics: dict[str, int], **config):
        self.clock = FakeClock()
        self.timers = Timers()
        self.log = MemoryGroupLog()
        self.topic_ids = {name: uuid.uuid5(uuid.NAMESPACE_DNS, name) for name in topics}
        self.partitions = dict(topics)
        self.racks: dict = {}   # (topic name, partition) -> racks of its replicas
        self.core = ConsumerGroupCoordinator(self.clock, self.timers, self.log, ConsumerGroupConfig(**config),
                                             topics=self.view, partition_racks=self.partition_racks)

    def view(self):
        return {n: (self.topic_ids[n], c) for n, c in self.partitions.items()}

    def partition_racks(self, topic_ids):
        names = {self.topic_ids[n]: n for n in self.topic_ids}
        return {(t, p): frozenset(self.racks.get((names[t], p), ())) for t in topic_ids
                for p in range(self.partitions[names[t]])}

    def add_topic(self, name: str, partitions: int) -> None:
        self.topic_ids[name] = uuid.uuid5(uuid.NAMESPACE_DNS, name)
        self.partitions[name] = partitions

    def advance(self, ms: int) -> None:
        self.timers.run_due(self.clock.advance(ms))

    def group(self):
        return self.core.groups.get(GROUP)


class Client:
    """What a KIP-848 consumer does: join, heartbeat with its epoch, revoke what it is told to give up
    (reporting owned partitions), and leave."""

    def __init__(self, h: Harness, member_id: str, topics=(), regex: Optional[str] = None,
                 instance_id: Optional[str] = None, assignor: Optional[str] = None, rack: Optional[str] = None):
        self.h, self.member_id, self.topics, self.regex = h, member_id, list(topics), regex
        self.instance_id, self.assignor, self.rack = instance_id, assignor, rack
        self.epoch = 0
        self.owned: dict = {}
        self.last = None

    def heartbeat(self, *, owned="auto", epoch=None, **overrides):
        joining = self.epoch == 0
        req = HeartbeatRequest(
            GROUP, self.member_id, self.epoch if epoch is None else epoch, instance_id=self.instance_id,
            rack_id=self.rack if joining else None,
            rebalance_timeout_ms=30_000 if joining else -1,
            subscribed_topic_names=self.topics if joining and self.regex is None else None,
            subscribed_topic_regex=self.regex if joining else None,
            server_assignor=self.assignor if joining else None,
            owned=({} if joining else dict(self.owned)) if owned == "auto" else owned)
        for k, v in overrides.items():
            setattr(req, k, v)
        result = self.h.core.heartbeat(req)
        self.last = result
        if result.error is E.NONE:
            self.epoch = result.member_epoch
            if result.assignment is not None:
                # a client drops revoked partitions at once and takes the new ones
                self.owned = {t: frozenset(p) for t, p in result.assignment.items()}
        elif result.error in (E.FENCED_MEMBER_EPOCH, E.UNKNOWN_MEMBER_ID, E.GROUP_ID_NOT_FOUND):
            self.epoch, self.owned = 0, {}
        return result

    def leave(self, epoch=-1):
        result = self.h.core.heartbeat(HeartbeatRequest(GROUP, self.member_id, epoch, instance_id=self.instance_id))
        self.epoch, self.owned = 0, {}
        return result

    def partitions(self, topic: str) -> set[int]:
        return set(self.owned.get(self.h.topic_ids[topic], ()))


def assert_single_owner(h: Harness) -> None:
    """The KIP-848 invariant: no partition is owned by two members (assigned or pending revocation)."""
    group = h.group()
    if group is None:
        return
    seen: dict = {}
    for member in group.members.values():
        for topic_id, partitions in member.owns().items():
            for p in partitions:
                assert (topic_id, p) not in seen, f"{topic_id}-{p} owned by {seen[(topic_id, p)]} and {member.member_id}"
                seen[(topic_id, p)] = member.member_id


def assert_clients_disjoint(clients) -> None:
    """What the clients themselves consume never overlaps."""
    seen: dict = {}
    for c in clients:
        for topic_id, partitions in c.owned.items():
            for p in partitions:
                assert (topic_id, p) not in seen, f"{p} consumed by {seen[(topic_id, p)]} and {c.member_id}"
                seen[(topic_id, p)] = c.member_id
