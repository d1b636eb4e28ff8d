"""Deterministic simulation of the whole control plane: one seed drives network, clock and faults.

    python -m broker.controller.simulate_cluster --seeds 10000    # seeds 0..9999, prints failures
    python -m broker.controller.simulate_cluster --seed 42 -v     # replays one seed, traced

3 or 5 controllers (Raft voters) and 3 to 5 brokers (Raft observers with racks) run the real Raft core
and the real controller decisions (`simcluster_nodes`): brokers register, heartbeat, get fenced when
their session runs out, are unfenced when caught up, propose ISR changes (AlterPartition) for partitions
they lead, and shut down in a controlled way now and then; an operator creates topics, runs preferred
and unclean ElectLeaders, flips `unclean.leader.election.enable` and unregisters fenced brokers. The
network drops, delays, reorders, duplicates and partitions messages; controllers and brokers crash
(cut anywhere in their effects) and restart from their simulated disks. Chaos alternates with calm.

Checked on every step: at most one active controller per Raft epoch; a committed entry is on a
majority of voters when first applied and never changes; on every committed image, no partition is led
by a fenced, unregistered or shutting-down broker, every leader is in its ISR, the ISR is a non-empty
subset of the replicas without duplicates that holds such a broker only as its last, sole member,
leader and partition epochs never go back, a new leader always comes with a new leader epoch and every
change with a new partition epoch. After each calm period: a controller has committed in its term,
every controlled shutdown has completed, every broker is registered and unfenced, and every partition
with a live ISR member has a leader. At
the end every live node has applied the same committed log.
"""

from __future__ import annotations

import argparse
import dataclasses
import heapq
import random
import sys
import time
import uuid

from . import records as r
from . import simcluster_nodes as nodes
from .image import ImageError, MetadataImage
from .raft.core import RaftNode, Role
from .raft.messages import AppendEntries, Commit, LoadSnapshot, Send, TruncateFrom
from .simulate import SIM_CONFIG, InvariantViolation, _grants_vote

# The Raft simulator's timings, with snapshot chunks sized for real metadata snapshots (~1 KB) and
# fetches a little less often (a third fewer events per seed).
CONFIG = dataclasses.replace(SIM_CONFIG, snapshot_chunk=256, fetch_interval=0.3)
HEARTBEAT_INTERVAL = 0.5
SESSION_TIMEOUT = 3.0
CALM_BOUND = 16.0          # after a heal, by then: a commit, every broker unfenced, every partition led


class ClusterSimulation:
    def __init__(self, seed: int, duration: float = 40.0, verbose: bool = False,
                 decider: nodes.Decider | None = None):
        self.seed = seed
        self.rng = random.Random(seed)
        self.verbose = verbose
        self.duration = duration
        rng = self.rng
        unclean_default = rng.random() < 0.3     # some clusters allow unclean election everywhere
        self.decider = decider or nodes.Decider(unclean_default=unclean_default)
        self.session_timeout = SESSION_TIMEOUT
        self.voters = list(range(1, rng.choice((3, 3, 5)) + 1))
        racks = rng.choice((None, ("a", "b"), ("a", "b", "c")))
        broker_ids = list(range(101, 101 + rng.choice((3, 4, 5))))
        self.nodes = {v: nodes.SimNode(v, False) for v in self.voters}
        for i, b in enumerate(broker_ids):
            self.nodes[b] = nodes.SimNode(b, True, racks[i % len(racks)] if racks else None)
        self.brokers = broker_ids
        self.now = 0.0
        self._queue: list = []
        self._seq = 0
        self.groups: dict[int, int] | None = None
        self.drop_rate = self.dup_rate = 0.0
        self.delay = (0.001, 0.05)
        self.book = nodes.Bookkeeping()
        self.calm_until = 0.0
        self.final_calm = duration - CALM_BOUND - 2.0
        self.steps = 0
        self.commit_times: dict[int, float] = {}
        self.stats = {"crashes": 0, "shutdowns": 0, "fences": 0, "unfences": 0, "leader_changes": 0,
                      "offline": 0, "unclean": 0, "isr_changes": 0, "alter_isr_replies": 0,
                      "alter_isr_ok": 0, "admin": 0, "calm_checks": 0, "snapshots": 0}

    # -- event queue ----------------------------------------------------------------------------------

    def _push(self, at: float, kind: str, *data) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (at, self._seq, kind, data))

    def log(self, *parts) -> None:
        if self.verbose:
            print(f"{self.now:9.3f}", *parts)

    def run(self) -> "ClusterSimulation":
        for node in self.nodes.values():
            self._boot(node)
        self._push(1.0, "chaos")
        self._push(0.3, "controller_timer")
        self._push(2.0, "admin")
        self._push(3.0, "snapshot")
        self._push(self.final_calm, "final_calm")
        while self._queue:
            at, _, kind, data = heapq.heappop(self._queue)
            if at > self.duration:
                break
            self.now = at
            self.steps += 1
            if self.steps > 300_000:
                raise InvariantViolation("event storm: more than 300000 steps")
            getattr(self, "_on_" + kind)(*data)
        self._final_check()
        return self

    # -- node lifecycle ---------------------------------------------------------------------------------

    def _boot(self, node: nodes.SimNode) -> None:
        node.raft = RaftNode(node.node_id, self.voters, CONFIG,
                             random.Random(self.rng.getrandbits(32)), node.disk.durable_state())
        node.reset_state()
        node.backlog.clear()
        node.led_epoch = -1
        if node.is_broker:
            node.incarnation = uuid.UUID(int=self.rng.getrandbits(128))
            node.broker_epoch = None
            node.shutting_down = False
            self._push(self.now + self.rng.uniform(0.1, HEARTBEAT_INTERVAL), "broker_timer", node.node_id,
                       node.incarnation)
        self.log(f"boot {node.node_id}")
        self._execute(node, node.raft.start(self.now))

    def _crash(self, node: nodes.SimNode, why: str = "crash") -> None:
        self.log(f"{why} {node.node_id}")
        self.stats["crashes"] += why == "crash"
        node.raft = None
        node.tick_at = float("inf")

    def stop_broker(self, node: nodes.SimNode, why: str) -> None:
        self.stats["shutdowns"] += 1
        self._crash(node, why)
        self._push(self.now + self.rng.uniform(0.2, 2.0), "restart", node.node_id)

    def _execute(self, node: nodes.SimNode, effects: list) -> None:
        """Carry out effects in order; in chaos a crash may cut the list anywhere."""
        chaos = self.now >= self.calm_until
        cut = len(effects)
        if chaos and effects and self.rng.random() < 0.01:
            cut = self.rng.randrange(len(effects))
        for effect in effects[:cut]:
            self._apply_effect(node, effect)
            if node.raft is None:
                return
        if cut == len(effects) and chaos and _grants_vote(effects) and self.rng.random() < 0.2:
            cut = -1                      # a crash right after voting: the vote must have been durable
        if 0 <= cut < len(effects) and isinstance(effects[cut], AppendEntries) and len(effects[cut].entries) > 1:
            node.disk.execute(AppendEntries(effects[cut].entries[:self.rng.randrange(len(effects[cut].entries))]))
        if cut < len(effects):
            self._crash(node)
            self._push(self.now + self.rng.uniform(0.05, 3.0), "restart", node.node_id)
            return
        self._check_leader(node)
        if not node.is_broker and node.ready_leader:
            nodes.drain_backlog(self, node)
        self._schedule_tick(node)

    def _apply_effect(self, node: nodes.SimNode, effect) -> None:
        if isinstance(effect, Send):
            self.send(node.node_id, effect.dest, effect.message)
        elif isinstance(effect, Commit):
            for entry in effect.entries:
                self._apply(node, entry)
        elif isinstance(effect, LoadSnapshot):
            snap = effect.snapshot
            base = MetadataImage(cluster_id=nodes.CLUSTER_ID)
            node.image = base.apply(r.decode_records(snap.data), snap.end_offset - 1) if snap.data else base
            node.applied = snap.end_offset
        elif isinstance(effect, TruncateFrom):
            if effect.offset < node.applied:
                raise InvariantViolation(f"node {node.node_id} truncates applied entries at {effect.offset}")
            node.disk.execute(effect)
        else:
            node.disk.execute(effect)

    def _schedule_tick(self, node: nodes.SimNode) -> None:
        if node.raft is None:
            return
        at = max(node.raft.next_deadline(), self.now)
        if at < node.tick_at or node.tick_at < self.now:
            node.tick_at = at
            self._push(at, "tick", node.node_id, at)

    def _on_tick(self, node_id: int, at: float) -> None:
        node = self.nodes[node_id]
        if node.raft is None or node.tick_at != at:
            return
        node.tick_at = float("inf")
        self._execute(node, node.raft.tick(self.now))

    def _on_restart(self, node_id: int) -> None:
        node = self.nodes[node_id]
        if node.raft is None:
            self._boot(node)

    # -- proposals --------------------------------------------------------------------------------------

    def propose(self, node: nodes.SimNode, records: list, replies: list, expect_offset: int | None = None):
        """Commit `records` through `node` (the ready leader); `replies` go out once committed."""
        if not records:
            for dest, reply in replies:
                self.send(node.node_id, dest, reply)
            return
        (offset, _), effects = node.raft.propose(r.encode_records(records), self.now)
        if expect_offset is not None and offset != expect_offset:
            raise InvariantViolation(f"registration epoch {expect_offset} but record at {offset}")
        if replies:
            node.pending[offset] = replies
        self._count(records)
        self.log(f"controller {node.node_id} proposes at {offset}: "
                 + ", ".join(type(rec).__name__ for rec in records))
        self._execute(node, effects)

    def _count(self, records) -> None:
        stats = self.stats
        for rec in records:
            if isinstance(rec, r.BrokerRegistrationChangeRecord):
                stats["fences"] += rec.fenced == 1
                stats["unfences"] += rec.fenced == -1
            elif isinstance(rec, r.PartitionChangeRecord):
                stats["leader_changes"] += rec.leader >= 0
                stats["offline"] += rec.leader == -1
                stats["unclean"] += rec.leader_recovery_state == 1
                stats["isr_changes"] += rec.isr is not None

    # -- network ----------------------------------------------------------------------------------------

    def _connected(self, a: int, b: int) -> bool:
        return self.groups is None or self.groups.get(a) == self.groups.get(b)

    def send(self, src: int, dst: int, message) -> None:
        rng = self.rng
        if not self._connected(src, dst) or (self.drop_rate and rng.random() < self.drop_rate):
            return
        low, high = self.delay
        self._push(self.now + rng.uniform(low, high), "deliver", src, dst, message)
        if self.dup_rate and rng.random() < self.dup_rate:
            self._push(self.now + rng.uniform(low, high), "deliver", src, dst, message)

    def broadcast(self, src: int, message) -> None:
        for voter in self.voters:
            self.send(src, voter, message)

    def _on_deliver(self, src: int, dst: int, message) -> None:
        node = self.nodes[dst]
        if node.raft is None or not self._connected(src, dst):
            return
        if isinstance(message, nodes.BROKER_MESSAGES):
            nodes.controller_handle(self, node, src, message)
        elif isinstance(message, (nodes.RegisterReply, nodes.HeartbeatReply, nodes.AlterIsrReply)):
            nodes.broker_reply(self, node, message)
        else:
            self._execute(node, node.raft.handle(src, message, self.now))

    # -- periodic work and faults -------------------------------------------------------------------------

    def _on_broker_timer(self, node_id: int, incarnation) -> None:
        node = self.nodes[node_id]
        if node.raft is None or node.incarnation != incarnation:
            return                       # that process is gone; its successor has its own timer
        nodes.broker_timer(self, node, self.rng)
        self._push(self.now + HEARTBEAT_INTERVAL, "broker_timer", node_id, incarnation)

    def _on_controller_timer(self) -> None:
        for voter in self.voters:
            nodes.controller_timer(self, self.nodes[voter], self.rng)
        self._push(self.now + 0.25, "controller_timer")

    def _on_admin(self) -> None:
        if self.now < self.final_calm:
            for voter in self.voters:
                done = nodes.admin_action(self, self.nodes[voter], self.rng)
                if done:
                    self.stats["admin"] += 1
                    self.log(f"admin: {done}")
        self._push(self.now + self.rng.uniform(0.5, 3.0), "admin")

    def _on_snapshot(self) -> None:
        node = self.rng.choice(list(self.nodes.values()))
        if node.raft is not None and node.applied > node.raft.log_start:
            data = r.encode_records(node.image.to_records())
            self._execute(node, node.raft.take_snapshot(node.applied, data))
            self.stats["snapshots"] += 1
        self._push(self.now + self.rng.expovariate(0.3), "snapshot")

    def _on_chaos(self) -> None:
        rng = self.rng
        if self.now >= self.final_calm:
            return
        if self.now >= self.calm_until and rng.random() < 0.12:
            self._start_calm()
            return
        if self.now < self.calm_until:
            self._push(self.calm_until, "chaos")
            return
        action = rng.choice(("crash", "crash_broker", "restart", "partition", "heal", "lossy",
                             "crash_leader", "resign", "shutdown", "shutdown", "isolate_broker"))
        up_brokers = [self.nodes[b] for b in self.brokers if self.nodes[b].up]
        if action == "crash":
            node = self.nodes[rng.choice(list(self.nodes))]
            if node.up:
                self._crash(node)
        elif action == "crash_broker" and up_brokers:
            self._crash(rng.choice(up_brokers))
        elif action == "crash_leader":
            for v in self.voters:
                if self.nodes[v].raft is not None and self.nodes[v].raft.role is Role.LEADER:
                    self._crash(self.nodes[v])
        elif action == "resign":
            for v in self.voters:
                node = self.nodes[v]
                if node.raft is not None and node.raft.role is Role.LEADER:
                    self._execute(node, node.raft.resign(self.now))
        elif action == "restart":
            for node in self.nodes.values():
                if node.raft is None and rng.random() < 0.5:
                    self._boot(node)
        elif action == "partition":
            self.groups = {i: rng.randrange(2) for i in self.nodes}
        elif action == "isolate_broker" and up_brokers:
            victim = rng.choice(up_brokers).node_id
            self.groups = {i: int(i == victim) for i in self.nodes}
        elif action == "heal":
            self.groups = None
        elif action == "lossy":
            self.drop_rate = rng.choice((0.0, 0.05, 0.2))
            self.dup_rate = rng.choice((0.0, 0.05, 0.2))
            self.delay = rng.choice(((0.001, 0.05), (0.01, 0.3)))
        elif action == "shutdown" and up_brokers:
            rng.choice(up_brokers).shutting_down = True
        self.log(f"chaos {action} groups={self.groups} drop={self.drop_rate}")
        self._push(self.now + rng.uniform(0.5, 3.0), "chaos")

    def _on_final_calm(self) -> None:
        self._start_calm()
        self.calm_until = float("inf")

    def _start_calm(self) -> None:
        self.log("calm")
        self.groups, self.drop_rate, self.dup_rate, self.delay = None, 0.0, 0.0, (0.001, 0.05)
        for node in self.nodes.values():
            if node.raft is None:
                self._boot(node)
        self.calm_until = self.now + CALM_BOUND
        self._push(self.now + CALM_BOUND, "calm_check", self.now)

    def _on_calm_check(self, started: float) -> None:
        self.stats["calm_checks"] += 1
        leader = next((n for n in map(self.nodes.get, self.voters) if n.raft is not None and n.raft.is_leader
                       and n.applied > n.raft._epoch_start), None)     # it has committed in its term
        if leader is None:
            raise InvariantViolation(f"calm since {started:.3f}: no active controller with its log "
                                     f"committed at {self.now:.3f}")
        image = leader.image
        stuck = [b for b in self.brokers if self.nodes[b].up and self.nodes[b].shutting_down]
        if stuck:
            raise InvariantViolation(f"calm since {started:.3f}: controlled shutdown of {stuck} not done")
        for b in self.brokers:
            node, reg = self.nodes[b], image.brokers.get(b)
            if node.up and not node.shutting_down and (reg is None or reg.fenced):
                raise InvariantViolation(f"calm since {started:.3f}: broker {b} is "
                                         f"{'not registered' if reg is None else 'still fenced'}")
        for name, topic in image.topics.items():
            for p, part in topic.partitions.items():
                alive = [b for b in part.isr if self.nodes[b].up and not self.nodes[b].shutting_down]
                if part.leader == -1 and alive:
                    raise InvariantViolation(f"calm since {started:.3f}: {name}-{p} has no leader "
                                             f"though ISR members {alive} are up")
        if self.now < self.final_calm:
            self._push(self.now, "chaos")

    # -- invariants -------------------------------------------------------------------------------------

    def _check_leader(self, node: nodes.SimNode) -> None:
        raft = node.raft
        if raft is None or raft.role is not Role.LEADER:
            return
        known = self.book.leaders.setdefault(raft.epoch, node.node_id)
        if known != node.node_id:
            raise InvariantViolation(f"two active controllers in epoch {raft.epoch}: {known} and {node.node_id}")

    def _apply(self, node: nodes.SimNode, entry) -> None:
        if entry.offset != node.applied:
            raise InvariantViolation(f"node {node.node_id} applies {entry.offset}, expected {node.applied}")
        book = self.book
        known = book.committed.setdefault(entry.offset, entry)
        if known is entry:
            self._check_majority(entry)
            self.commit_times[entry.offset] = self.now
        elif known != entry:
            raise InvariantViolation(f"committed entry {entry.offset} changed")
        if not entry.control:
            try:
                node.image = node.image.apply(r.decode_records(entry.data), entry.offset)
            except ImageError as exc:
                raise InvariantViolation(f"node {node.node_id} cannot apply entry {entry.offset}: {exc}")
        node.applied = entry.offset + 1
        if entry.offset == book.checked_end:
            check_image(book.last_image, node.image, entry.offset)
            book.last_image, book.checked_end = node.image, entry.offset + 1
        for dest, reply in node.pending.pop(entry.offset, ()):
            self.send(node.node_id, dest, reply)

    def _check_majority(self, entry) -> None:
        holders = 0
        for v in self.voters:
            disk = self.nodes[v].disk
            if disk.snapshot is not None and disk.snapshot.end_offset > entry.offset:
                holders += 1
                continue
            index = entry.offset - disk.log_start
            if 0 <= index < len(disk.entries) and disk.entries[index] == entry:
                holders += 1
        if holders * 2 <= len(self.voters):
            raise InvariantViolation(f"entry {entry.offset} committed on only {holders} of "
                                     f"{len(self.voters)} voters")

    def _final_check(self) -> None:
        """Every live node has applied whatever was committed up to 3 s (an observer fetch timeout and
        then some) before the end."""
        settled = sum(1 for t in self.commit_times.values() if t <= self.now - 3.0)
        behind = {n.node_id: n.applied for n in self.nodes.values() if n.up and n.applied < settled}
        if behind:
            raise InvariantViolation(f"nodes did not converge: {behind} applied, {settled} committed")


def check_image(before: MetadataImage, after: MetadataImage, offset: int) -> None:
    """The control plane's safety rules on one committed step."""
    for topic in after.topics.values():
        old_topic = before.topics_by_id.get(topic.topic_id)
        for pid, part in topic.partitions.items():
            where = f"at offset {offset}, {topic.name}-{pid}"
            if not part.isr or len(set(part.isr)) != len(part.isr) or not set(part.isr) <= set(part.replicas):
                raise InvariantViolation(f"{where}: ISR {part.isr} is not a non-empty subset of {part.replicas}")
            if len(part.isr) > 1:        # only a last, sole member may be fenced, gone or shutting down
                inactive = [b for b in part.isr if b not in after.brokers or after.brokers[b].fenced
                            or after.brokers[b].in_controlled_shutdown]
                if inactive:
                    raise InvariantViolation(f"{where}: ISR {part.isr} holds inactive brokers {inactive}")
            if part.leader != -1:
                if part.leader not in part.isr:
                    raise InvariantViolation(f"{where}: leader {part.leader} is not in the ISR {part.isr}")
                broker = after.brokers.get(part.leader)
                if broker is None or broker.fenced or broker.in_controlled_shutdown:
                    state = "unregistered" if broker is None else "fenced" if broker.fenced else "shutting down"
                    raise InvariantViolation(f"{where}: led by {state} broker {part.leader}")
            old = old_topic.partitions.get(pid) if old_topic is not None else None
            if old is None or old == part:
                continue
            if part.leader_epoch < old.leader_epoch or part.partition_epoch <= old.partition_epoch:
                raise InvariantViolation(f"{where}: epochs went from ({old.leader_epoch}, "
                                         f"{old.partition_epoch}) to ({part.leader_epoch}, {part.partition_epoch})")
            if part.leader != old.leader and part.leader_epoch <= old.leader_epoch:
                raise InvariantViolation(f"{where}: leader {old.leader} -> {part.leader} without a new "
                                         f"leader epoch ({part.leader_epoch})")


def run_seed(seed: int, duration: float = 40.0, verbose: bool = False,
             decider: nodes.Decider | None = None) -> ClusterSimulation:
    return ClusterSimulation(seed, duration, verbose, decider).run()


def check_seed(seed: int, duration: float = 40.0, decider: nodes.Decider | None = None) -> str | None:
    """None if the seed passes, else a one-line description of the failure."""
    try:
        run_seed(seed, duration, decider=decider)
    except (InvariantViolation, AssertionError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m broker.controller.simulate_cluster", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=1000, help="number of seeds to run")
    parser.add_argument("--start", type=int, default=0, help="first seed")
    parser.add_argument("--seed", type=int, help="replay exactly this seed")
    parser.add_argument("--duration", type=float, default=40.0, help="simulated seconds per seed")
    parser.add_argument("-v", "--verbose", action="store_true", help="trace the replayed seed")
    args = parser.parse_args(argv)
    if args.seed is not None:
        try:
            sim = run_seed(args.seed, args.duration, args.verbose)
        except (InvariantViolation, AssertionError) as exc:
            print(f"seed {args.seed} FAILED: {type(exc).__name__}: {exc}")
            return 1
        print(f"seed {args.seed} ok: {sim.steps} steps, {len(sim.book.committed)} committed entries, "
              f"{len(sim.book.leaders)} controller epochs, {sim.stats}")
        return 0
    started = time.monotonic()
    failures = []
    for seed in range(args.start, args.start + args.seeds):
        error = check_seed(seed, args.duration)
        if error is not None:
            failures.append(seed)
            print(f"seed {seed} FAILED: {error}  (replay: python -m broker.controller.simulate_cluster "
                  f"--seed {seed})", flush=True)
    elapsed = time.monotonic() - started
    print(f"{args.seeds - len(failures)}/{args.seeds} seeds passed in {elapsed:.1f}s"
          + (f"; failing seeds: {failures}" if failures else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
