"""Deterministic simulation of the Raft core: one seed drives the network, the clock and every fault.

    python -m broker.controller.simulate --seeds 10000      # runs seeds 0..9999, prints failures
    python -m broker.controller.simulate --seed 1234 -v     # replays one seed exactly

N voters (3 or 5) and maybe an observer exchange messages over a simulated network that drops,
delays (and so reorders), duplicates and partitions; nodes crash in the middle of executing their effects
(losing everything not yet durable, appends torn midway) and restart from what their simulated disk
holds; leaders resign (EndQuorumEpoch); clients propose and nodes take snapshots at random. Chaos alternates with calm periods (network healed, every node up).

Checked after every step: at most one leader per epoch; log matching (an (offset, epoch) pair always
names the same entry with the same predecessor); committed entries never change and every new leader
holds all of them; every node applies the same entry at the same offset (state hashes agree, snapshots
included); and after each calm period starts, a leader is elected and commits within a bounded
simulated time. At the end every live node has applied the same committed prefix.
"""

from __future__ import annotations

import argparse
import heapq
import random
import sys
import time
import zlib
from dataclasses import dataclass, field

from .disklog import Entry, QuorumState, Snapshot
from .raft.core import RaftConfig, RaftNode, Role
from .raft.messages import (
    AppendEntries, Commit, DurableState, LeaderChange, LoadSnapshot, PersistState, SaveSnapshot, Send,
    TruncateFrom, VoteResponse,
)

SIM_CONFIG = RaftConfig(election_timeout=1.0, fetch_timeout=2.0, fetch_interval=0.2,
                        request_timeout=0.5, max_fetch_entries=8, snapshot_chunk=16)
CALM_BOUND = 12.0          # simulated seconds after a heal by which a leader must have committed


class InvariantViolation(Exception):
    pass


@dataclass
class SimDisk:
    """What survives a crash: mirrors DiskLog's semantics without files."""
    quorum_state: QuorumState = QuorumState()
    snapshot: Snapshot | None = None
    log_start: int = 0
    entries: list = field(default_factory=list)

    def durable_state(self) -> DurableState:
        return DurableState(self.quorum_state, self.snapshot, list(self.entries))

    def execute(self, effect) -> None:
        if isinstance(effect, PersistState):
            self.quorum_state = effect.state
        elif isinstance(effect, AppendEntries):
            for entry in effect.entries:
                if entry.offset != self.log_start + len(self.entries):
                    raise InvariantViolation(f"append at {entry.offset} to a log ending at "
                                             f"{self.log_start + len(self.entries)}")
                self.entries.append(entry)
        elif isinstance(effect, TruncateFrom):
            del self.entries[max(0, effect.offset - self.log_start):]
        elif isinstance(effect, SaveSnapshot):
            snap = effect.snapshot
            index = snap.end_offset - 1 - self.log_start
            keeps = 0 <= index < len(self.entries) and self.entries[index].epoch == snap.epoch
            self.entries = self.entries[index + 1:] if keeps else []
            self.snapshot, self.log_start = snap, snap.end_offset


@dataclass
class StateMachine:
    """Applies committed entries into a running hash; its snapshot is `end:hash`."""
    applied: int = 0
    digest: int = 0

    def encode(self) -> bytes:
        return f"{self.applied}:{self.digest}".encode()

    @classmethod
    def decode(cls, data: bytes) -> "StateMachine":
        applied, digest = data.decode().split(":")
        return cls(int(applied), int(digest))


class SimNode:
    def __init__(self, node_id: int):
        self.node_id = node_id
        self.disk = SimDisk()
        self.raft: RaftNode | None = None
        self.sm = StateMachine()
        self.tick_at = float("inf")


class Simulation:
    def __init__(self, seed: int, duration: float = 60.0, verbose: bool = False, node_class=RaftNode):
        self.seed = seed
        self.node_class = node_class
        self.rng = random.Random(seed)
        self.verbose = verbose
        self.duration = duration
        n_voters = self.rng.choice((3, 3, 5))
        self.voters = list(range(1, n_voters + 1))
        observers = [n_voters + 1] if self.rng.random() < 0.5 else []
        self.nodes = {i: SimNode(i) for i in self.voters + observers}
        self.now = 0.0
        self._queue: list = []
        self._seq = 0
        # network
        self.groups: dict[int, int] | None = None       # node -> partition group; None = healed
        self.drop_rate = 0.0
        self.dup_rate = 0.0
        self.delay = (0.001, 0.05)
        # invariant bookkeeping
        self.leaders: dict[int, int] = {}                 # epoch -> leader
        self.entry_ids: dict[tuple[int, int], tuple[bytes, int]] = {}
        self.committed: dict[int, Entry] = {}
        self.digests: dict[int, int] = {0: 0}            # applied end offset -> state digest
        self.proposed = 0
        self.calm_until = 0.0
        self.final_calm = duration - CALM_BOUND - 4.0     # then heal all and check convergence
        self.calm_checks = 0
        self.steps = 0
        self.commit_times: dict[int, float] = {}         # offset -> when it was first committed
        self.stats = {"crashes": 0, "truncations": 0, "snapshots_taken": 0, "snapshots_loaded": 0}

    # -- event queue -----------------------------------------------------------------------------------

    def _push(self, at: float, kind: str, *data) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (at, self._seq, kind, data))

    def log(self, *parts) -> None:
        if self.verbose:
            print(f"{self.now:9.3f}", *parts)

    def run(self) -> "Simulation":
        for node in self.nodes.values():
            self._boot(node)
        self._push(0.5, "chaos")
        self._push(0.2, "client")
        self._push(1.0, "snapshot")
        self._push(self.final_calm, "final_calm")
        while self._queue:
            at, _, kind, data = heapq.heappop(self._queue)
            if at > self.duration:
                break
            self.now = at
            self.steps += 1
            if self.steps > 200_000:
                raise InvariantViolation("event storm: more than 200000 steps")
            getattr(self, "_on_" + kind)(*data)
        self._final_check()
        return self

    # -- node lifecycle ----------------------------------------------------------------------------------

    def _boot(self, node: SimNode) -> None:
        node.raft = self.node_class(node.node_id, self.voters, SIM_CONFIG,
                                    random.Random(self.rng.getrandbits(32)), node.disk.durable_state())
        node.sm = StateMachine()
        self.log(f"boot {node.node_id}")
        self._execute(node, node.raft.start(self.now))

    def _crash(self, node: SimNode) -> None:
        self.log(f"crash {node.node_id}")
        self.stats["crashes"] += 1
        node.raft = None
        node.tick_at = float("inf")

    def _execute(self, node: SimNode, effects: list) -> None:
        """Carry out effects in order; a crash may cut the list anywhere (the rest never happens)."""
        chaos = self.now >= self.calm_until
        cut = len(effects)
        if chaos and effects and self.rng.random() < 0.02:
            cut = self.rng.randrange(len(effects))
        for effect in effects[:cut]:
            self._apply_effect(node, effect)
        if cut == len(effects) and chaos and _grants_vote(effects) and self.rng.random() < 0.3:
            cut = -1                     # a crash right after voting: the vote must have been durable
        if 0 <= cut < len(effects) and isinstance(effects[cut], AppendEntries) and len(effects[cut].entries) > 1:
            # A torn append: the disk keeps a prefix of the entries being written.
            torn = effects[cut].entries[:self.rng.randrange(len(effects[cut].entries))]
            self._apply_effect(node, AppendEntries(torn))
        if cut < len(effects):
            self._crash(node)
            pause = self.rng.choice((self.rng.uniform(0.001, 0.3), self.rng.uniform(0.5, 3.0)))
            self._push(self.now + pause, "restart", node.node_id)
            return
        self._check_leader(node)
        self._schedule_tick(node)

    def _apply_effect(self, node: SimNode, effect) -> None:
        if isinstance(effect, Send):
            self._send(node.node_id, effect.dest, effect.message)
        elif isinstance(effect, Commit):
            for entry in effect.entries:
                self._apply(node, entry)
        elif isinstance(effect, LoadSnapshot):
            snap = effect.snapshot
            sm = StateMachine.decode(snap.data)
            if sm.applied != snap.end_offset or self.digests.get(sm.applied, sm.digest) != sm.digest:
                raise InvariantViolation(f"node {node.node_id} loaded a snapshot that disagrees at {sm.applied}")
            node.sm = sm
            self.stats["snapshots_loaded"] += 1
        elif isinstance(effect, AppendEntries):
            self._check_appended(node, effect.entries)
            node.disk.execute(effect)
        elif isinstance(effect, TruncateFrom):
            if effect.offset < node.sm.applied:
                raise InvariantViolation(f"node {node.node_id} truncates applied entries at {effect.offset}")
            self.stats["truncations"] += 1
            node.disk.execute(effect)
        elif isinstance(effect, LeaderChange):
            self.log(f"node {node.node_id} sees epoch {effect.epoch} leader {effect.leader_id}")
        else:
            node.disk.execute(effect)

    def _schedule_tick(self, node: SimNode) -> None:
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

    # -- network -----------------------------------------------------------------------------------------

    def _connected(self, a: int, b: int) -> bool:
        return self.groups is None or self.groups.get(a) == self.groups.get(b)

    def _send(self, src: int, dst: int, message) -> None:
        rng = self.rng
        if not self._connected(src, dst) or (self.drop_rate and rng.random() < self.drop_rate):
            return
        low, high = self.delay
        self._push(self.now + rng.uniform(low, high), "deliver", src, dst, message)
        if self.dup_rate and rng.random() < self.dup_rate:
            self._push(self.now + rng.uniform(low, high), "deliver", src, dst, message)

    def _on_deliver(self, src: int, dst: int, message) -> None:
        node = self.nodes[dst]
        if node.raft is None or not self._connected(src, dst):
            return
        self._execute(node, node.raft.handle(src, message, self.now))

    # -- workload and faults -----------------------------------------------------------------------------

    def _on_client(self) -> None:
        if self.now > self.final_calm + CALM_BOUND:
            return                      # let the cluster settle before the convergence check
        for node in self.nodes.values():
            if node.raft is not None and node.raft.role is Role.LEADER:
                self.proposed += 1
                _, effects = node.raft.propose(f"v{self.proposed}".encode(), self.now)
                self._execute(node, effects)
        self._push(self.now + self.rng.expovariate(5.0), "client")

    def _on_snapshot(self) -> None:
        node = self.rng.choice(list(self.nodes.values()))
        raft = node.raft
        if raft is not None and node.sm.applied > raft.log_start:
            self._execute(node, raft.take_snapshot(node.sm.applied, node.sm.encode()))
            self.stats["snapshots_taken"] += 1
        self._push(self.now + self.rng.expovariate(0.5), "snapshot")

    def _on_chaos(self) -> None:
        rng = self.rng
        if self.now >= self.final_calm:
            return
        if self.now >= self.calm_until and rng.random() < 0.15:
            self._start_calm()
            return
        if self.now < self.calm_until:
            self._push(self.calm_until, "chaos")
            return
        action = rng.choice(("crash", "restart", "partition", "heal", "lossy", "crash_leader", "resign"))
        ids = list(self.nodes)
        if action == "crash":
            node = self.nodes[rng.choice(ids)]
            if node.raft is not None:
                self._crash(node)
        elif action == "crash_leader":
            for node in self.nodes.values():
                if node.raft is not None and node.raft.role is Role.LEADER:
                    self._crash(node)
        elif action == "resign":
            for node in self.nodes.values():
                if node.raft is not None and node.raft.role is Role.LEADER:
                    self._execute(node, node.raft.resign(self.now))
        elif action == "restart":
            for node in self.nodes.values():
                if node.raft is None and rng.random() < 0.5:
                    self._boot(node)
        elif action == "partition":
            self.groups = {i: rng.randrange(2) for i in ids}
        elif action == "heal":
            self.groups = {i: 0 for i in ids}
        elif action == "lossy":
            self.drop_rate = rng.choice((0.0, 0.05, 0.2))
            self.dup_rate = rng.choice((0.0, 0.05, 0.2))
            self.delay = rng.choice(((0.001, 0.05), (0.01, 0.3)))
        self.log(f"chaos {action} groups={self.groups} drop={self.drop_rate}")
        self._push(self.now + rng.uniform(0.5, 4.0), "chaos")

    def _on_final_calm(self) -> None:
        self._start_calm()
        self.calm_until = float("inf")

    def _start_calm(self) -> None:
        """Heal everything, restart everyone; by CALM_BOUND a leader must commit a new entry."""
        self.log("calm")
        self.groups, self.drop_rate, self.dup_rate, self.delay = None, 0.0, 0.0, (0.001, 0.05)
        for node in self.nodes.values():
            if node.raft is None:
                self._boot(node)
        self.calm_until = self.now + CALM_BOUND
        self._push(self.now + CALM_BOUND, "calm_check", self.now)

    def _on_calm_check(self, started: float) -> None:
        self.calm_checks += 1
        # A leader must have committed something since the heal.
        if not any(t > started for t in self.commit_times.values()):
            raise InvariantViolation(f"no leader committed between heal at {started:.3f} and {self.now:.3f}")
        if self.now < self.final_calm:
            self._push(self.now, "chaos")

    # -- invariants ----------------------------------------------------------------------------------------

    def _check_leader(self, node: SimNode) -> None:
        raft = node.raft
        if raft is None or raft.role is not Role.LEADER:
            return
        known = self.leaders.setdefault(raft.epoch, node.node_id)
        if known != node.node_id:
            raise InvariantViolation(f"two leaders in epoch {raft.epoch}: {known} and {node.node_id}")
        if getattr(raft, "_checked_epoch", None) == raft.epoch:
            return
        raft._checked_epoch = raft.epoch
        # Leader completeness: every committed entry is in the new leader's log (or its snapshot).
        for offset, entry in self.committed.items():
            if offset < raft.log_start:
                continue
            index = offset - raft.log_start
            if index >= len(raft.entries) or raft.entries[index] != entry:
                raise InvariantViolation(f"leader {node.node_id} of epoch {raft.epoch} lacks committed "
                                         f"entry {offset}")

    def _check_appended(self, node: SimNode, entries) -> None:
        disk = node.disk
        prev_epoch = (disk.entries[-1].epoch if disk.entries else
                      disk.snapshot.epoch if disk.snapshot else 0)
        for entry in entries:
            key = (entry.offset, entry.epoch)
            ident = (entry.data, entry.control, prev_epoch)
            known = self.entry_ids.setdefault(key, ident)
            if known != ident:
                raise InvariantViolation(f"log matching: ({entry.offset}, {entry.epoch}) differs on node "
                                         f"{node.node_id}")
            prev_epoch = entry.epoch

    def _apply(self, node: SimNode, entry: Entry) -> None:
        sm = node.sm
        if entry.offset != sm.applied:
            raise InvariantViolation(f"node {node.node_id} applies {entry.offset}, expected {sm.applied}")
        known = self.committed.setdefault(entry.offset, entry)
        if known != entry:
            raise InvariantViolation(f"committed entry {entry.offset} changed: {known} vs {entry}")
        self.commit_times.setdefault(entry.offset, self.now)
        sm.digest = zlib.crc32(b"%d:%d:%s" % (entry.offset, entry.epoch, entry.data), sm.digest)
        sm.applied += 1
        if self.digests.setdefault(sm.applied, sm.digest) != sm.digest:
            raise InvariantViolation(f"node {node.node_id} state differs after applying {entry.offset}")

    def _final_check(self) -> None:
        """After the final calm period every node has applied the same, complete, committed log."""
        applied = {n.node_id: n.sm.applied for n in self.nodes.values()}
        if len(set(applied.values())) != 1 or applied[self.voters[0]] != len(self.committed):
            raise InvariantViolation(f"nodes did not converge: applied {applied}, "
                                     f"committed {len(self.committed)}")


def _grants_vote(effects) -> bool:
    return any(isinstance(e, Send) and isinstance(e.message, VoteResponse) and e.message.granted
               and not e.message.pre_vote for e in effects)


def run_seed(seed: int, duration: float = 60.0, verbose: bool = False, node_class=RaftNode) -> Simulation:
    return Simulation(seed, duration, verbose, node_class).run()


def check_seed(seed: int, duration: float = 60.0, node_class=RaftNode) -> str | None:
    """None if the seed passes, else a one-line description of the failure."""
    try:
        run_seed(seed, duration, node_class=node_class)
    except (InvariantViolation, AssertionError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m broker.controller.simulate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=1000, help="number of seeds to run")
    parser.add_argument("--start", type=int, default=0, help="first seed")
    parser.add_argument("--seed", type=int, help="replay exactly this seed")
    parser.add_argument("--duration", type=float, default=60.0, help="simulated seconds per seed")
    parser.add_argument("-v", "--verbose", action="store_true", help="trace the replayed seed")
    args = parser.parse_args(argv)
    if args.seed is not None:
        try:
            sim = run_seed(args.seed, args.duration, args.verbose)
        except (InvariantViolation, AssertionError) as exc:
            print(f"seed {args.seed} FAILED: {type(exc).__name__}: {exc}")
            return 1
        print(f"seed {args.seed} ok: {sim.steps} steps, {len(sim.committed)} committed entries, "
              f"{len(sim.leaders)} epochs with a leader, {sim.calm_checks} calm checks, {sim.stats}")
        return 0
    started = time.monotonic()
    failures = []
    for seed in range(args.start, args.start + args.seeds):
        error = check_seed(seed, args.duration)
        if error is not None:
            failures.append(seed)
            print(f"seed {seed} FAILED: {error}  (replay: python -m broker.controller.simulate --seed {seed})",
                  flush=True)
    elapsed = time.monotonic() - started
    print(f"{args.seeds - len(failures)}/{args.seeds} seeds passed in {elapsed:.1f}s"
          + (f"; failing seeds: {failures}" if failures else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
