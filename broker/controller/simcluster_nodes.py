"""The nodes of the control-plane simulation (`simulate_cluster`): controllers and brokers.

Both run the real sans-IO Raft core on a simulated disk and apply committed entries (real metadata
record batches) to a real MetadataImage. A controller that leads the quorum and has applied its whole
log decides with the real pure functions (`brokers`, `election`, `alter_partition`, `placement`) and
proposes their records, answering the request once they commit — as the async Controller does under its
lock. A broker is a Raft observer that registers, heartbeats, proposes ISR changes for partitions it
leads, and now and then shuts down in a controlled way (then comes back as a new incarnation).

The broker RPCs travel as the small dataclasses below over the simulated network.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field

from . import brokers, election
from . import records as r
from .alter_partition import IsrProposal, alter_partition, validate
from .errors import ApiError, ErrorCode
from .image import TOPIC_RESOURCE, MetadataImage
from .placement import PlacementError, candidates, place_replicas
from .simulate import SimDisk

CLUSTER_ID = "sim-cluster"


# -- broker <-> controller messages ---------------------------------------------------------------

@dataclass(frozen=True)
class Register:
    broker_id: int
    incarnation: uuid.UUID
    rack: str | None


@dataclass(frozen=True)
class RegisterReply:
    error: int
    epoch: int = -1
    incarnation: uuid.UUID | None = None     # a reply reaches only the process that asked


@dataclass(frozen=True)
class Heartbeat:
    broker_id: int
    epoch: int
    metadata_offset: int
    want_shutdown: bool
    incarnation: uuid.UUID | None = None


@dataclass(frozen=True)
class HeartbeatReply:
    error: int
    fenced: bool = True
    should_shut_down: bool = False
    incarnation: uuid.UUID | None = None


@dataclass(frozen=True)
class AlterIsr:
    broker_id: int
    epoch: int
    proposals: tuple


@dataclass(frozen=True)
class AlterIsrReply:
    error: int
    results: tuple = ()


BROKER_MESSAGES = (Register, Heartbeat, AlterIsr)


@dataclass
class Decider:
    """The pure decision functions a controller uses; broken variants swap parts of it."""
    change_class: type = election.PartitionChange
    validator: object = validate
    unclean_default: bool = False

    def policy(self, node_id: int) -> brokers.Policy:
        return brokers.Policy(unclean_default=self.unclean_default, node_id=node_id,
                              change_class=self.change_class)


class SimNode:
    """A controller (voter) or a broker (observer); `raft is None` while it is down."""

    def __init__(self, node_id: int, is_broker: bool, rack: str | None = None):
        self.node_id = node_id
        self.is_broker = is_broker
        self.rack = rack
        self.disk = SimDisk()
        self.raft = None
        self.tick_at = float("inf")
        self.reset_state()
        # broker
        self.incarnation: uuid.UUID | None = None
        self.broker_epoch: int | None = None
        self.shutting_down = False
        # controller
        self.sessions: brokers.BrokerSessions | None = None
        self.led_epoch = -1
        self.pending: dict[int, list] = {}          # offset -> [(dest, reply)] sent once committed
        self.backlog: list = []                     # requests waiting for the previous commit

    def reset_state(self) -> None:
        self.image = MetadataImage(cluster_id=CLUSTER_ID)
        self.applied = 0                            # offsets below are applied to the image

    @property
    def up(self) -> bool:
        return self.raft is not None

    @property
    def ready_leader(self) -> bool:
        """Leading, with every entry of its log applied: its image is the latest committed state."""
        raft = self.raft
        return raft is not None and raft.is_leader and self.applied == raft.end_offset


# -- the controller side ----------------------------------------------------------------------------

def controller_handle(sim, node: SimNode, src: int, msg) -> None:
    """A broker request reached a voter: decide now if it is the ready leader, queue it if it leads
    with a commit in flight, drop it otherwise (the broker retries)."""
    raft = node.raft
    if raft is None or not raft.is_leader:
        return
    if not node.ready_leader:
        if len(node.backlog) < 64:
            node.backlog.append((src, msg))
        return
    _start_term(sim, node)
    decide(sim, node, src, msg)


def _start_term(sim, node: SimNode) -> None:
    if node.led_epoch != node.raft.epoch:           # a new term: everyone gets a fresh session
        node.led_epoch = node.raft.epoch
        node.sessions = brokers.BrokerSessions(sim.session_timeout)
        node.sessions.start(node.image, sim.now)
        node.pending.clear()


def drain_backlog(sim, node: SimNode) -> None:
    while node.backlog and node.ready_leader:
        _start_term(sim, node)
        src, msg = node.backlog.pop(0)
        decide(sim, node, src, msg)


def decide(sim, node: SimNode, src: int, msg) -> None:
    image, raft, decider = node.image, node.raft, sim.decider
    policy = decider.policy(node.node_id)
    try:
        if isinstance(msg, Register):
            epoch = raft.end_offset
            endpoints = [("PLAINTEXT", f"b{msg.broker_id}", 9092, 0)]
            outcome = brokers.registration_records(image, node.sessions, msg.broker_id, msg.incarnation,
                                                   endpoints, msg.rack, epoch, sim.now, policy)
            if isinstance(outcome, int):
                sim.send(node.node_id, src, RegisterReply(0, outcome, msg.incarnation))
                return
            node.sessions.touch(msg.broker_id, sim.now)
            sim.propose(node, outcome, [(src, RegisterReply(0, epoch, msg.incarnation))], expect_offset=epoch)
        elif isinstance(msg, Heartbeat):
            records, result, entering = brokers.heartbeat(
                image, node.sessions, msg.broker_id, msg.epoch, msg.metadata_offset, False,
                msg.want_shutdown, sim.now, policy)
            reply = HeartbeatReply(0, result.is_fenced, result.should_shut_down, msg.incarnation)
            if entering:
                node.sessions.shutdown_offset[msg.broker_id] = raft.end_offset
            sim.propose(node, records, [(src, reply)])
        elif isinstance(msg, AlterIsr):
            records, results = alter_partition(image, msg.broker_id, msg.epoch, list(msg.proposals),
                                               unclean_default=decider.unclean_default,
                                               node_id=node.node_id, change_class=decider.change_class,
                                               validator=decider.validator)
            sim.propose(node, records, [(src, AlterIsrReply(0, tuple(results)))])
    except ApiError as exc:
        if isinstance(msg, AlterIsr):
            sim.send(node.node_id, src, AlterIsrReply(int(exc.code)))
        else:
            reply = RegisterReply if isinstance(msg, Register) else HeartbeatReply
            sim.send(node.node_id, src, reply(int(exc.code), incarnation=msg.incarnation))


def controller_timer(sim, node: SimNode, rng: random.Random) -> None:
    """The active controller's periodic work: fence expired sessions, balance leaders now and then."""
    if not node.ready_leader:
        return
    _start_term(sim, node)
    policy = sim.decider.policy(node.node_id)
    records = brokers.expire_sessions(node.image, node.sessions, sim.now, policy)
    if not records and rng.random() < 0.1:
        records = election.elect_unclean_where_enabled(node.image, policy.unclean_default, node.node_id,
                                                       policy.change_class)
        records += election.rebalance(node.image.apply(records) if records else node.image, 10,
                                      policy.change_class)
    sim.propose(node, records, [])


def admin_action(sim, node: SimNode, rng: random.Random) -> str | None:
    """What an operator does through the active controller: create topics, elect, flip configs."""
    if not node.ready_leader:
        return None
    image = node.image
    action = rng.choice(("create", "create", "elect", "unclean", "unregister"))
    if action == "create" and len(image.topics) < 3:
        name = f"t{len(image.topics)}-{rng.randrange(1000)}"
        factor = rng.choice((1, 2, 3))
        try:
            placements = place_replicas(candidates(image), rng.choice((1, 2, 3, 4)), factor, rng)
        except PlacementError:
            return "create refused"
        active = {b.broker_id for b in image.brokers.values()
                  if not b.fenced and not b.in_controlled_shutdown}
        topic_id = uuid.UUID(int=rng.getrandbits(128) | 2)
        batch: list = [r.TopicRecord(name=name, topic_id=topic_id)]
        for p, replicas in enumerate(placements):
            isr = [b for b in replicas if b in active]
            batch.append(r.PartitionRecord(partition_id=p, topic_id=topic_id, replicas=replicas, isr=isr,
                                           leader=isr[0], leader_epoch=0, partition_epoch=0))
        sim.propose(node, batch, [])
        return f"create {name}"
    if action == "elect" and image.topics:
        election_type = rng.choice((election.PREFERRED_ELECTION, election.UNCLEAN_ELECTION))
        wanted = None
        if rng.random() < 0.7:
            name = rng.choice(sorted(image.topics))
            wanted = [(name, sorted(image.topics[name].partitions) + [99])]
        records, _ = election.elect_leaders(image, election_type, wanted, sim.decider.change_class)
        sim.propose(node, records, [])
        return f"elect {election_type}"
    if action == "unclean" and image.topics:
        name = rng.choice(sorted(image.topics))
        value = rng.choice(("true", "true", "false", None))
        sim.propose(node, [r.ConfigRecord(resource_type=TOPIC_RESOURCE, resource_name=name,
                                          name=election.UNCLEAN_KEY, value=value)], [])
        return f"unclean {name}={value}"
    if action == "unregister":
        fenced = [b for b in image.brokers.values() if b.fenced]
        if fenced:
            victim = rng.choice(fenced).broker_id
            sim.propose(node, brokers.unregister_records(image, victim, sim.decider.policy(node.node_id)),
                        [])
            return f"unregister {victim}"
    return None


# -- the broker side -----------------------------------------------------------------------------

def broker_timer(sim, node: SimNode, rng: random.Random) -> None:
    """Every heartbeat interval: register or heartbeat; sometimes propose ISR changes."""
    if node.broker_epoch is None:
        sim.broadcast(node.node_id, Register(node.node_id, node.incarnation, node.rack))
        return
    sim.broadcast(node.node_id, Heartbeat(node.node_id, node.broker_epoch, node.image.offset,
                                          node.shutting_down, node.incarnation))
    if rng.random() < 0.3:
        proposals = _isr_proposals(node, rng)
        if proposals:
            sim.broadcast(node.node_id, AlterIsr(node.node_id, node.broker_epoch, tuple(proposals)))


def _isr_proposals(node: SimNode, rng: random.Random) -> list:
    """For partitions this broker leads (as far as its image knows): drop or add a follower."""
    image = node.image
    me = image.brokers.get(node.node_id)
    if me is None or me.fenced or me.epoch != node.broker_epoch:
        return []
    out = []
    for _, topic in sorted(image.topics.items()):
        for _, part in sorted(topic.partitions.items()):
            if part.leader != node.node_id or rng.random() < 0.5:
                continue
            isr = list(part.isr)
            if rng.random() < 0.5 and len(isr) > 1:
                isr.remove(rng.choice([b for b in isr if b != node.node_id]))
            else:
                joiners = [b for b in part.replicas if b not in isr and b in image.brokers
                           and not image.brokers[b].fenced]
                if not joiners:
                    continue
                isr.append(rng.choice(joiners))
            out.append(IsrProposal(
                partition=part.partition_id, leader_epoch=part.leader_epoch,
                partition_epoch=part.partition_epoch, topic_id=topic.topic_id,
                new_isr=[(b, image.brokers[b].epoch if b in image.brokers else -1) for b in isr]))
    return out


def broker_reply(sim, node: SimNode, msg) -> None:
    if getattr(msg, "incarnation", node.incarnation) != node.incarnation:
        return                                       # an answer to this broker's previous process
    if isinstance(msg, RegisterReply):
        if msg.error == 0 and node.broker_epoch is None:
            node.broker_epoch = msg.epoch
    elif isinstance(msg, HeartbeatReply):
        if msg.error in (ErrorCode.STALE_BROKER_EPOCH, ErrorCode.BROKER_ID_NOT_REGISTERED):
            node.broker_epoch = None                 # registered again under a new epoch
        elif msg.error == 0 and msg.should_shut_down and node.shutting_down:
            sim.stop_broker(node, "controlled shutdown done")
    elif isinstance(msg, AlterIsrReply):
        sim.stats["alter_isr_replies"] += 1
        sim.stats["alter_isr_ok"] += sum(1 for res in msg.results if res.error_code == 0)


@dataclass
class Bookkeeping:
    """What the invariant checker remembers between steps."""
    leaders: dict = field(default_factory=dict)          # raft epoch -> leader id
    committed: dict = field(default_factory=dict)        # offset -> Entry
    checked_end: int = 0                                 # images checked for offsets below this
    last_image: MetadataImage = field(default_factory=lambda: MetadataImage(cluster_id=CLUSTER_ID))
