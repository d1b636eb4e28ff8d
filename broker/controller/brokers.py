"""Broker lifecycle decisions: registration, heartbeats, fencing, controlled shutdown (pure, sans-IO).

The active controller keeps, outside the log, when it last heard from each broker and how far each
broker's metadata has got (`BrokerSessions`, Kafka's BrokerHeartbeatManager); everything else comes from
the image. A heartbeat moves a broker between Kafka's states:

    FENCED               --caught up, not wanting fence-->        UNFENCED
    UNFENCED             --WantShutDown-->                        CONTROLLED_SHUTDOWN (leaderships and ISR
                                                                  memberships move away at once)
    CONTROLLED_SHUTDOWN  --leads nothing and every other active
                           broker has seen that change-->         SHUTDOWN_NOW (fenced; ShouldShutDown)
    FENCED               --WantShutDown-->                        SHUTDOWN_NOW
    SHUTDOWN_NOW         --anything-->                            stays fenced until it registers again
    any                  --WantFence / session expired-->         FENCED

Times are seconds on whatever clock the caller uses (trio's, or the simulator's).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Sequence

from . import election
from . import records as r
from .errors import ApiError, ErrorCode

FENCE, UNFENCE = 1, -1             # BrokerRegistrationChangeRecord.fenced
IN_CONTROLLED_SHUTDOWN = 1         # BrokerRegistrationChangeRecord.in_controlled_shutdown


@dataclass
class HeartbeatResult:
    is_caught_up: bool
    is_fenced: bool
    should_shut_down: bool


@dataclass
class BrokerSessions:
    """Liveness the active controller tracks in memory; a new active controller starts it afresh."""
    timeout: float                                          # broker.session.timeout.ms, in seconds
    last_seen: dict[int, float] = field(default_factory=dict)
    metadata_offset: dict[int, int] = field(default_factory=dict)
    shutdown_offset: dict[int, int] = field(default_factory=dict)   # where controlled shutdown began

    def touch(self, broker_id: int, now: float, metadata_offset: int | None = None) -> None:
        self.last_seen[broker_id] = now
        if metadata_offset is not None:
            self.metadata_offset[broker_id] = metadata_offset

    def alive(self, broker_id: int, now: float) -> bool:
        last = self.last_seen.get(broker_id)
        return last is not None and now - last < self.timeout

    def start(self, image, now: float) -> None:
        """Give every registered broker a full session (after a restart or a change of controller)."""
        self.last_seen = {b: now for b in image.brokers}
        self.metadata_offset.clear()
        self.shutdown_offset.clear()

    def expired(self, image, now: float) -> list[int]:
        """Unfenced brokers whose session has run out."""
        for b in image.brokers:
            self.last_seen.setdefault(b, now)
        return [b.broker_id for b in image.unfenced_brokers() if not self.alive(b.broker_id, now)]


@dataclass
class Policy:
    """What the controller's decisions depend on besides the image."""
    unclean_default: bool = False               # unclean.leader.election.enable (static)
    node_id: int | None = None                  # the controller's node id, for its dynamic configs
    change_class: type = election.PartitionChange


def check_broker_epoch(image, broker_id: int, broker_epoch: int):
    broker = image.brokers.get(broker_id)
    if broker is None:
        raise ApiError(ErrorCode.BROKER_ID_NOT_REGISTERED, f"Broker {broker_id} is not registered.")
    if broker.epoch != broker_epoch:
        raise ApiError(ErrorCode.STALE_BROKER_EPOCH,
                       f"Expected broker epoch {broker.epoch}, but got broker epoch {broker_epoch}")
    return broker


def fence_records(image, broker_id: int, policy: Policy) -> list:
    """Move leaderships and ISR memberships away from `broker_id`, then fence it."""
    broker = image.brokers[broker_id]
    out = election.remove_broker(image, broker_id, policy.unclean_default, policy.node_id,
                                 policy.change_class)
    out.append(r.BrokerRegistrationChangeRecord(broker_id=broker_id, broker_epoch=broker.epoch,
                                                fenced=FENCE))
    return out


def unfence_records(image, broker_id: int, policy: Policy) -> list:
    broker = image.brokers[broker_id]
    out: list = [r.BrokerRegistrationChangeRecord(broker_id=broker_id, broker_epoch=broker.epoch,
                                                  fenced=UNFENCE)]
    return out + election.add_broker(image, broker_id, policy.unclean_default, policy.node_id,
                                     policy.change_class)


def controlled_shutdown_records(image, broker_id: int, policy: Policy) -> list:
    broker = image.brokers[broker_id]
    out: list = []
    if not broker.in_controlled_shutdown:
        out.append(r.BrokerRegistrationChangeRecord(broker_id=broker_id, broker_epoch=broker.epoch,
                                                    in_controlled_shutdown=IN_CONTROLLED_SHUTDOWN))
    return out + election.remove_broker(image, broker_id, policy.unclean_default, policy.node_id,
                                        policy.change_class)


def unregister_records(image, broker_id: int, policy: Policy) -> list:
    broker = image.brokers.get(broker_id)
    if broker is None:
        raise ApiError(ErrorCode.BROKER_ID_NOT_REGISTERED,
                       f"Broker ID {broker_id} is not currently registered")
    out = election.remove_broker(image, broker_id, policy.unclean_default, policy.node_id,
                                 policy.change_class)
    out.append(r.UnregisterBrokerRecord(broker_id=broker_id, broker_epoch=broker.epoch))
    return out


def leads_anything(image, broker_id: int) -> bool:
    return any(p.leader == broker_id for t in image.topics.values() for p in t.partitions.values())


def heartbeat(image, sessions: BrokerSessions, broker_id: int, broker_epoch: int, metadata_offset: int,
              want_fence: bool, want_shutdown: bool, now: float,
              policy: Policy) -> tuple[list, HeartbeatResult, bool]:
    """(records, result, entering_shutdown) for one BrokerHeartbeat. When `entering_shutdown`, the
    caller sets `sessions.shutdown_offset[broker_id]` to the offset the records were committed at: every
    other active broker's metadata must reach it (and so know the new leaders) before this one is told
    to shut down."""
    broker = check_broker_epoch(image, broker_id, broker_epoch)
    sessions.touch(broker_id, now, metadata_offset)
    caught_up = metadata_offset >= broker.epoch
    records: list = []
    entering_shutdown = False
    shutdown_now = False
    if broker.fenced:
        if want_shutdown:
            shutdown_now = True
        elif broker.in_controlled_shutdown:
            pass                  # released after a controlled shutdown: only a new registration returns
        elif not want_fence and caught_up:
            records = unfence_records(image, broker_id, policy)
    elif want_fence:
        records = fence_records(image, broker_id, policy)
    elif broker.in_controlled_shutdown:
        # Unknown after a change of controller: the last record batch, which every broker's image
        # offset reaches (control entries do not move it).
        started = sessions.shutdown_offset.setdefault(broker_id, image.offset)
        others = [sessions.metadata_offset.get(b.broker_id, -1) for b in image.unfenced_brokers()
                  if b.broker_id != broker_id and not b.in_controlled_shutdown]
        if not leads_anything(image, broker_id) and all(o >= started for o in others):
            records = fence_records(image, broker_id, policy)
            shutdown_now = True
    elif want_shutdown:
        records = controlled_shutdown_records(image, broker_id, policy)
        entering_shutdown = True
    after = image.apply(records) if records else image
    fenced = after.brokers[broker_id].fenced
    return records, HeartbeatResult(is_caught_up=caught_up, is_fenced=fenced,
                                    should_shut_down=shutdown_now), entering_shutdown


def registration_records(image, sessions: BrokerSessions, broker_id: int, incarnation_id: uuid.UUID,
                         endpoints: Sequence[tuple[str, str, int, int]], rack: str | None, epoch: int,
                         now: float, policy: Policy, self_id: int | None = None) -> list | int:
    """The records registering a broker fenced with `epoch` (the offset its record will get), or the
    existing epoch (an int) when this is a retry from the same incarnation."""
    old = image.brokers.get(broker_id)
    if old is not None and old.incarnation_id == incarnation_id:
        return old.epoch
    if (old is not None and not old.fenced and sessions.alive(broker_id, now)
            and broker_id != self_id):
        raise ApiError(ErrorCode.DUPLICATE_BROKER_REGISTRATION,
                       f"Another broker is registered with that broker id {broker_id}.")
    # A new incarnation loses what the old one led first, so no fenced broker ever leads.
    batch = election.remove_broker(image, broker_id, policy.unclean_default, policy.node_id,
                                   policy.change_class) if old is not None else []
    batch.append(r.RegisterBrokerRecord(
        broker_id=broker_id, incarnation_id=incarnation_id, broker_epoch=epoch,
        end_points=[r.BrokerEndpoint(name=n, host=h, port=p, security_protocol=s)
                    for n, h, p, s in endpoints],
        rack=rack, fenced=True))
    return batch


def expire_sessions(image, sessions: BrokerSessions, now: float, policy: Policy) -> list:
    """Fence every broker whose session ran out, one after the other (each sees the previous)."""
    steps = [lambda img, b=b: fence_records(img, b, policy) for b in sessions.expired(image, now)]
    records, _ = election.chain(image, steps)
    return records
