"""The actors of the replication simulation (``broker.replication.simulate``): in-memory logs, the
messages they exchange, brokers running the real replication logic, and a one-partition controller.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from protocol import ErrorCode
from storage.epochs import LeaderEpochCache

from .acks import acks_all_outcome
from .divergence import truncation_offset
from .leader import LeaderState

if TYPE_CHECKING:
    from .simulate import Simulation

BROKERS = (1, 2, 3)
MIN_ISR = 2
LAG_TIME_MAX = 3.0          # replica.lag.time.max.ms, in simulated seconds
SESSION_TIMEOUT = 2.0       # broker.session.timeout.ms
FETCH_TIMEOUT = 1.0         # a follower resends a fetch not answered by then
PRODUCE_TIMEOUT = 4.0       # the Produce request's timeout
MAX_FETCH_RECORDS = 4


class InvariantViolation(Exception):
    pass


# ----------------------------------------------------------------------------------------- logs
class SimLog:
    """A partition log in memory: records are (epoch, value), one per offset; Kafka's epoch cache."""

    def __init__(self):
        self.records: list[tuple[int, str]] = []
        self.epochs = LeaderEpochCache(None)
        self.high_watermark = 0

    @property
    def log_end_offset(self) -> int:
        return len(self.records)

    @property
    def latest_epoch(self) -> int:
        return self.epochs.latest

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return self.epochs.end_offset_for(epoch, self.log_end_offset)

    def append(self, epoch: int, value: str) -> int:
        self.epochs.assign(epoch, len(self.records))
        self.records.append((epoch, value))
        return len(self.records) - 1

    def append_replicated(self, base: int, records) -> None:
        if base != len(self.records):
            raise InvariantViolation(f"replicated append at {base} to a log ending at {len(self.records)}")
        for epoch, value in records:
            self.append(epoch, value)

    def truncate_to(self, offset: int) -> None:
        offset = min(offset, len(self.records))
        del self.records[offset:]
        self.epochs.truncate_from(offset)   # also an epoch started at the end with no records
        self.high_watermark = min(self.high_watermark, offset)


# ------------------------------------------------------------------------------------- messages
@dataclass
class Fetch:
    replica: int
    fetch_offset: int
    last_fetched_epoch: int
    current_leader_epoch: int
    request_id: int


@dataclass
class FetchResponse:
    error: int
    request_id: int
    leader_epoch: int
    high_watermark: int = 0
    base: int = 0
    records: tuple = ()
    diverging: tuple | None = None


@dataclass
class AlterPartition:
    request_id: int
    leader: int
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple


@dataclass
class AlterPartitionResponse:
    request: AlterPartition
    error: int
    leader_epoch: int
    partition_epoch: int = -1
    isr: tuple = ()


@dataclass(frozen=True)
class PartitionState:
    leader: int
    leader_epoch: int
    partition_epoch: int
    isr: tuple
    replicas: tuple = BROKERS


@dataclass
class Produce:
    value: str


@dataclass
class Registered:
    """The controller saw this incarnation of the broker: metadata from before it does not count
    (as a restarted Kafka broker acts on partitions only once registered and caught up)."""
    incarnation: int
    min_partition_epoch: int


# -------------------------------------------------------------------------------------- brokers
@dataclass
class Waiter:
    required_offset: int
    value: str
    offset: int
    deadline: float


class Broker:
    def __init__(self, sim: "Simulation", node_id: int, leader_class):
        self.sim = sim
        self.node_id = node_id
        self.leader_class = leader_class
        self.log = SimLog()
        self.alive = True
        self.incarnation = 0
        self.restart()

    def restart(self) -> None:
        """Start (again) from what survived: the log; its high watermark as last checkpointed."""
        self.incarnation += 1
        self.min_partition_epoch: int | None = None   # until registered, no metadata counts
        self.state: PartitionState | None = None
        self.leader: LeaderState | None = None
        self.waiters: list[Waiter] = []
        self.fetch_inflight: tuple[int, float] | None = None   # (request id, sent at)
        self.proposal_request_id = -1
        self.log.high_watermark = min(self.log.high_watermark, self.log.log_end_offset)

    # -- metadata -------------------------------------------------------------------------------
    def on_registered(self, msg: Registered) -> None:
        if msg.incarnation == self.incarnation and self.min_partition_epoch is None:
            self.min_partition_epoch = msg.min_partition_epoch

    def on_partition_state(self, state: PartitionState) -> None:
        if self.min_partition_epoch is None or state.partition_epoch < self.min_partition_epoch:
            return  # not registered yet, or metadata from before this incarnation registered
        if self.state is not None and state.partition_epoch <= self.state.partition_epoch:
            return  # stale or duplicate
        old = self.state
        self.state = state
        now = self.sim.now
        if state.leader == self.node_id:
            if self.leader is not None and old is not None and old.leader_epoch == state.leader_epoch:
                self.leader.update_assignment(state.partition_epoch, state.replicas, state.isr, now)
            else:
                self.log.epochs.assign(state.leader_epoch, self.log.log_end_offset)
                self.leader = self.leader_class(
                    self.node_id, state.leader_epoch, state.partition_epoch, state.replicas, state.isr,
                    epoch_start_offset=self.log.log_end_offset,
                    high_watermark=self.log.high_watermark, now_ms=now)
                self.sim.hw_seen[(self.node_id, state.leader_epoch)] = self.log.high_watermark
        else:
            self.leader = None
            self.fetch_inflight = None
            for waiter in self.waiters:   # no longer leader: the producer retries elsewhere
                self.sim.trace(f"b{self.node_id} drops produce {waiter.value}: not leader")
            self.waiters = []
        self._maybe_complete()

    # -- leader ---------------------------------------------------------------------------------
    def on_produce(self, msg: Produce) -> None:
        if self.leader is None:
            return
        if len(self.leader.isr) < MIN_ISR:
            self.sim.trace(f"b{self.node_id} refuses {msg.value}: NOT_ENOUGH_REPLICAS")
            return
        offset = self.log.append(self.leader.leader_epoch, msg.value)
        self.waiters.append(Waiter(offset + 1, msg.value, offset, self.sim.now + PRODUCE_TIMEOUT))
        self._maybe_complete()

    def on_fetch(self, src: int, req: Fetch) -> None:
        leader = self.leader
        if leader is None:
            return self.sim.send(self.node_id, src, FetchResponse(
                ErrorCode.NOT_LEADER_OR_FOLLOWER, req.request_id, -1))
        if req.current_leader_epoch != leader.leader_epoch:
            error = (ErrorCode.FENCED_LEADER_EPOCH if req.current_leader_epoch < leader.leader_epoch
                     else ErrorCode.UNKNOWN_LEADER_EPOCH)
            return self.sim.send(self.node_id, src, FetchResponse(error, req.request_id, leader.leader_epoch))
        log = self.log
        diverging = self.sim.diverging_epoch(log, req.fetch_offset, req.last_fetched_epoch)
        if diverging is not None:
            return self.sim.send(self.node_id, src, FetchResponse(
                ErrorCode.NONE, req.request_id, leader.leader_epoch, log.high_watermark,
                diverging=diverging))
        if req.fetch_offset > log.log_end_offset:
            return self.sim.send(self.node_id, src, FetchResponse(
                ErrorCode.OFFSET_OUT_OF_RANGE, req.request_id, leader.leader_epoch))
        leader.on_follower_fetch(req.replica, req.fetch_offset, log.log_end_offset, self.sim.now)
        self._advance_high_watermark()
        records = tuple(log.records[req.fetch_offset:req.fetch_offset + MAX_FETCH_RECORDS])
        self.sim.send(self.node_id, src, FetchResponse(
            ErrorCode.NONE, req.request_id, leader.leader_epoch, log.high_watermark,
            req.fetch_offset, records))

    def _advance_high_watermark(self) -> None:
        if self.leader.advance_high_watermark(self.log.log_end_offset):
            self.log.high_watermark = self.leader.high_watermark
            key = (self.node_id, self.leader.leader_epoch)
            if self.log.high_watermark < self.sim.hw_seen.get(key, 0):
                raise InvariantViolation(f"b{self.node_id}'s high watermark went back in epoch {key[1]}")
            self.sim.hw_seen[key] = self.log.high_watermark
        self._maybe_complete()

    def _maybe_complete(self) -> None:
        if self.leader is None:
            return
        still = []
        for waiter in self.waiters:
            outcome = acks_all_outcome(waiter.required_offset, self.log.high_watermark,
                                       len(self.leader.isr), MIN_ISR)
            if outcome is None:
                if self.sim.now >= waiter.deadline:
                    self.sim.trace(f"b{self.node_id} times out produce {waiter.value}")
                else:
                    still.append(waiter)
            elif outcome == ErrorCode.NONE:
                self.sim.acknowledge(waiter.offset, (self.leader.leader_epoch, waiter.value))
        self.waiters = still

    def on_alter_partition_response(self, resp: AlterPartitionResponse) -> None:
        if self.leader is None or self.leader.pending is None or \
                resp.request.request_id != self.proposal_request_id:
            return   # the answer to an older request (one is in flight per partition in Kafka)
        self.sim.trace(f"b{self.node_id} AlterPartition answer {resp}")
        if resp.error == ErrorCode.NONE:
            self.leader.proposal_committed(resp.partition_epoch, resp.isr)
            self._advance_high_watermark()
        elif self.leader.proposal_failed(resp.error):
            self._send_proposal(self.leader.pending)

    def _send_proposal(self, proposal) -> None:
        self.sim.trace(f"b{self.node_id} proposes ISR {proposal.new_isr} at partition epoch "
                       f"{proposal.partition_epoch} (follower ends "
                       f"{ {r: p.log_end_offset for r, p in self.leader.followers.items()} }, "
                       f"high watermark {self.log.high_watermark})")
        self.proposal_request_id = self.sim.next_id()
        self.sim.send(self.node_id, 0, AlterPartition(
            self.proposal_request_id, self.node_id, proposal.leader_epoch, proposal.partition_epoch, proposal.new_isr))

    # -- follower -------------------------------------------------------------------------------
    def on_fetch_response(self, src: int, resp: FetchResponse) -> None:
        if self.fetch_inflight is None or self.fetch_inflight[0] != resp.request_id:
            return  # a late or duplicated answer to an older fetch
        self.fetch_inflight = None
        if resp.error or self.leader is not None or self.state is None or \
                self.state.leader != src or resp.leader_epoch != self.state.leader_epoch:
            return
        log = self.log
        if resp.diverging is not None:
            epoch, end = resp.diverging
            cut = truncation_offset(log, epoch, end)
            if cut.offset < log.log_end_offset:
                self.sim.truncations += 1
                self.sim.trace(f"b{self.node_id} truncates {log.log_end_offset} -> {cut.offset}")
            log.truncate_to(cut.offset)
            return
        if resp.records:
            log.append_replicated(resp.base, resp.records)
        log.high_watermark = max(log.high_watermark, min(resp.high_watermark, log.log_end_offset))

    # -- time -----------------------------------------------------------------------------------
    def tick(self) -> None:
        now = self.sim.now
        if self.leader is not None:
            self._maybe_complete()
            proposal = self.leader.propose(now, LAG_TIME_MAX)
            if proposal is not None:
                self._send_proposal(proposal)
            elif self.leader.pending is not None and self.sim.rng.random() < 0.05:
                self._send_proposal(self.leader.pending)   # no answer yet: send it again
        elif self.state is not None and self.state.leader in BROKERS:
            if self.fetch_inflight is None or now - self.fetch_inflight[1] > FETCH_TIMEOUT:
                request_id = self.sim.next_id()
                self.fetch_inflight = (request_id, now)
                self.sim.send(self.node_id, self.state.leader, Fetch(
                    self.node_id, self.log.log_end_offset, self.log.latest_epoch,
                    self.state.leader_epoch, request_id))


# ----------------------------------------------------------------------------------- controller
class Controller:
    """KRaft's part for one partition: fencing, election from the ISR, AlterPartition."""

    def __init__(self, sim: "Simulation"):
        self.sim = sim
        self.state = PartitionState(leader=1, leader_epoch=0, partition_epoch=0, isr=BROKERS)
        self.fenced: set[int] = set()
        self.last_heartbeat = {b: 0.0 for b in BROKERS}
        self.incarnations = {b: 1 for b in BROKERS}

    def publish(self, state: PartitionState) -> None:
        self.state = state
        self.sim.trace(f"controller: {state}")
        for b in BROKERS:
            self.sim.send(0, b, state, metadata=True)

    def tick(self) -> None:
        now = self.sim.now
        for b in BROKERS:
            broker = self.sim.brokers[b]
            if broker.alive and self.sim.connected(0, b):
                self.last_heartbeat[b] = now
                if self.incarnations[b] != broker.incarnation:
                    # A new incarnation registers: its old one is fenced first (KRaft bumps the
                    # broker epoch; partitions it led get a new leader).
                    self.incarnations[b] = broker.incarnation
                    if b not in self.fenced:
                        self.fenced.add(b)
                        self.sim.trace(f"controller fences b{b}'s old incarnation")
                        self._on_fenced(b)
                    self.sim.send(0, b, Registered(broker.incarnation, self.state.partition_epoch),
                                  metadata=True)
                elif broker.min_partition_epoch is None and self.sim.rng.random() < 0.3:
                    self.sim.send(0, b, Registered(broker.incarnation, self.state.partition_epoch),
                                  metadata=True)
                if b in self.fenced and now > self.sim.restarted_at.get(b, 0) + 0.5:
                    self.fenced.discard(b)
                    self.sim.trace(f"controller unfences b{b}")
                    if self.state.leader == -1 and b in self.state.isr:
                        self._elect()
            elif b not in self.fenced and now - self.last_heartbeat[b] > SESSION_TIMEOUT:
                self.fenced.add(b)
                self.sim.trace(f"controller fences b{b}")
                self._on_fenced(b)
        if self.sim.rng.random() < 0.1:   # metadata is re-sent: late brokers catch up
            for b in BROKERS:
                self.sim.send(0, b, self.state, metadata=True)

    def _on_fenced(self, broker: int) -> None:
        state = self.state
        isr = state.isr
        if broker in isr and len(isr) > 1:
            isr = tuple(r for r in isr if r != broker)
        if state.leader == broker:
            self._elect(isr)
        elif isr != state.isr:
            self.publish(PartitionState(state.leader, state.leader_epoch, state.partition_epoch + 1, isr))

    def _elect(self, isr=None) -> None:
        state = self.state
        isr = state.isr if isr is None else isr
        candidates = [r for r in isr if r not in self.fenced]
        leader = self.sim.rng.choice(candidates) if candidates else -1   # clean election only
        self.publish(PartitionState(leader, state.leader_epoch + 1, state.partition_epoch + 1, isr))

    def on_alter_partition(self, src: int, req: AlterPartition) -> None:
        state = self.state
        if req.leader_epoch != state.leader_epoch or req.leader != state.leader:
            error = ErrorCode.FENCED_LEADER_EPOCH
        elif req.partition_epoch != state.partition_epoch:
            error = ErrorCode.INVALID_UPDATE_VERSION
        elif any(r in self.fenced for r in req.new_isr if r not in state.isr):
            error = ErrorCode.INELIGIBLE_REPLICA
        elif req.leader not in req.new_isr:
            error = ErrorCode.INVALID_REQUEST
        else:
            self.publish(PartitionState(state.leader, state.leader_epoch, state.partition_epoch + 1,
                                        tuple(sorted(req.new_isr))))
            return self.sim.send(0, src, AlterPartitionResponse(
                req, ErrorCode.NONE, state.leader_epoch, self.state.partition_epoch, self.state.isr))
        self.sim.send(0, src, AlterPartitionResponse(req, error, req.leader_epoch))
