"""Deterministic simulation of partition replication: one seed drives the network, clock and faults.

    python -m broker.replication.simulate --seeds 10000     # seeds 0..9999, prints failures
    python -m broker.replication.simulate --seed 42 -v      # replays one seed and tells its story

One partition, three brokers (replication factor 3, min.insync.replicas 2) and a controller. The
brokers run the replication logic the real broker runs (``LeaderState`` for the high watermark and ISR
proposals, ``divergence`` for DivergingEpoch and truncation, ``acks_all_outcome`` for acks=all) over
in-memory logs with Kafka's leader-epoch cache. The controller does what KRaft's does for one
partition: fences a broker whose heartbeats stop (it leaves the ISR; a fenced leader is replaced by an
ISR member, never an out-of-sync one), unfences it when it is back, and commits or refuses
AlterPartition by leader epoch and partition epoch. Metadata reaches brokers late.

Faults: messages dropped, delayed (so reordered), duplicated (AlterPartition and its answers are lost
or delayed but, as on Kafka's TCP connection to the controller, neither reordered nor duplicated:
INELIGIBLE_REPLICA then means "not applied", which the leader relies on); links cut both ways for a while;
brokers killed (their logs survive, as after kill -9; everything in memory is lost) and restarted.
Chaos alternates with calm periods in which the network heals and every broker is up.

Checked after every step:
- every record acknowledged to an acks=all producer is, at its offset, in the log of every replica in
  the controller's ISR (so it survives as long as one ISR member does);
- any two replicas hold the same records below the smaller of their high watermarks;
- a leader's high watermark never goes back within its leader epoch.
And at the end of the run, after a final calm period: the leader holds every acknowledged record and
every replica has caught up with it, byte for byte.
"""

from __future__ import annotations

import argparse
import heapq
import random
import sys
import time
from dataclasses import dataclass, field

from .divergence import diverging_epoch
from .leader import LeaderState
from .sim_nodes import (
    BROKERS, AlterPartition, AlterPartitionResponse, Broker, Controller, Fetch, FetchResponse,
    InvariantViolation, PartitionState, Produce, Registered,
)

STEPS = 400


# ----------------------------------------------------------------------------------- simulation
@dataclass
class Outcome:
    steps: int
    acknowledged: int
    leaders: int
    truncations: int
    final_log: tuple = ()
    trace: list = field(default_factory=list)


class Simulation:
    def __init__(self, seed: int, leader_class=LeaderState, steps: int = STEPS, verbose: bool = False,
                 diverging=diverging_epoch):
        self.rng = random.Random(seed)
        self.diverging_epoch = diverging
        self.now = 0.0
        self.steps = steps
        self.verbose = verbose
        self.log_lines: list[str] = []
        self.queue: list = []
        self._seq = 0
        self._ids = 0
        self.cut: set[frozenset] = set()
        self._last_ordered: dict[tuple[int, int], float] = {}
        self.restarted_at: dict[int, float] = {}
        self.hw_seen: dict[tuple[int, int], int] = {}
        self.acknowledged: dict[int, tuple[int, str]] = {}
        self.produced = 0
        self.truncations = 0
        self.brokers = {b: Broker(self, b, leader_class) for b in BROKERS}
        for broker in self.brokers.values():
            broker.min_partition_epoch = 0   # registered at formation
        self.controller = Controller(self)
        self.chaos = True
        self.controller.publish(self.controller.state)

    def trace(self, line: str) -> None:
        if self.verbose:
            self.log_lines.append(f"{self.now:7.2f} {line}")

    def next_id(self) -> int:
        self._ids += 1
        return self._ids

    def connected(self, a: int, b: int) -> bool:
        return frozenset((a, b)) not in self.cut

    def send(self, src: int, dst: int, msg, metadata: bool = False) -> None:
        rng = self.rng
        if self.chaos and rng.random() < (0.02 if metadata else 0.08):
            return  # dropped
        # AlterPartition and its answers travel as on Kafka's one TCP connection to the controller:
        # in order and never twice (lost when it drops). Everything else may also be duplicated.
        ordered = isinstance(msg, (AlterPartition, AlterPartitionResponse))
        copies = 2 if self.chaos and not ordered and rng.random() < 0.03 else 1
        for _ in range(copies):
            due = self.now + rng.uniform(0.01, 0.3 if self.chaos else 0.05)
            if ordered:
                due = max(due, self._last_ordered.get((src, dst), 0.0) + 0.001)
                self._last_ordered[(src, dst)] = due
            self._seq += 1
            heapq.heappush(self.queue, (due, self._seq, src, dst, msg))

    def acknowledge(self, offset: int, record: tuple[int, str]) -> None:
        previous = self.acknowledged.get(offset)
        if previous is not None and previous != record:
            raise InvariantViolation(f"offset {offset} acknowledged twice: {previous} and {record}")
        self.acknowledged[offset] = record
        self.trace(f"ack {record[1]} at {offset}")

    # -- the run ---------------------------------------------------------------------------------
    def run(self) -> Outcome:
        rng = self.rng
        for step in range(self.steps):
            self.now += 0.1
            calm = (step // 60) % 3 == 2 or step >= self.steps - 150
            if calm and self.chaos:
                self._heal()
            self.chaos = not calm
            if self.chaos:
                self._inject_faults()
            if rng.random() < 0.6 and step < self.steps - 60:
                self._produce()
            self._deliver_until(self.now)
            self.controller.tick()
            for broker in self.brokers.values():
                if broker.alive:
                    broker.tick()
            self.check()
        self.check_final()
        leader = self.brokers[self.controller.state.leader]
        return Outcome(self.steps, len(self.acknowledged), self.controller.state.leader_epoch + 1,
                       self.truncations, tuple(leader.log.records), self.log_lines)

    def _deliver_until(self, t: float) -> None:
        while self.queue and self.queue[0][0] <= t:
            _, _, src, dst, msg = heapq.heappop(self.queue)
            if not self.connected(src, dst):
                continue
            if dst == 0:
                if isinstance(msg, AlterPartition):
                    self.controller.on_alter_partition(src, msg)
                continue
            broker = self.brokers[dst]
            if not broker.alive:
                continue
            if isinstance(msg, PartitionState):
                broker.on_partition_state(msg)
            elif isinstance(msg, Registered):
                broker.on_registered(msg)
            elif isinstance(msg, Produce):
                broker.on_produce(msg)
            elif isinstance(msg, Fetch):
                broker.on_fetch(src, msg)
            elif isinstance(msg, FetchResponse):
                broker.on_fetch_response(src, msg)
            elif isinstance(msg, AlterPartitionResponse):
                broker.on_alter_partition_response(msg)

    def _produce(self) -> None:
        leader = self.controller.state.leader
        if leader in self.brokers:
            self.produced += 1
            self.send(-1, leader, Produce(f"v{self.produced}"))

    def _inject_faults(self) -> None:
        rng = self.rng
        roll = rng.random()
        if roll < 0.025:
            victim = rng.choice(BROKERS)
            broker = self.brokers[victim]
            if broker.alive and sum(b.alive for b in self.brokers.values()) > 1:
                broker.alive = False
                self.trace(f"kill b{victim}")
        elif roll < 0.05:
            dead = [b for b in self.brokers.values() if not b.alive]
            if dead:
                broker = rng.choice(dead)
                broker.alive = True
                broker.restart()
                self.restarted_at[broker.node_id] = self.now
                self.trace(f"restart b{broker.node_id}")
        elif roll < 0.07:
            a, b = rng.sample((0,) + BROKERS, 2)
            self.cut.add(frozenset((a, b)))
            self.trace(f"cut {a}<->{b}")
        elif roll < 0.10 and self.cut:
            self.cut.discard(rng.choice(sorted(self.cut, key=sorted)))

    def _heal(self) -> None:
        self.cut.clear()
        for broker in self.brokers.values():
            if not broker.alive:
                broker.alive = True
                broker.restart()
                self.restarted_at[broker.node_id] = self.now
        self.trace("heal")

    # -- invariants ------------------------------------------------------------------------------
    def check(self) -> None:
        isr = self.controller.state.isr
        for offset, record in self.acknowledged.items():
            for r in isr:
                records = self.brokers[r].log.records
                if offset >= len(records) or records[offset] != record:
                    raise InvariantViolation(
                        f"acknowledged {record} at {offset} missing from ISR member b{r} "
                        f"(it holds {records[offset] if offset < len(records) else 'nothing'})")
        logs = [b.log for b in self.brokers.values()]
        for i, a in enumerate(logs):
            for b in logs[i + 1:]:
                below = min(a.high_watermark, b.high_watermark)
                if a.records[:below] != b.records[:below]:
                    raise InvariantViolation(f"replicas disagree below the high watermark {below}")

    def check_final(self) -> None:
        state = self.controller.state
        if state.leader not in self.brokers:
            raise InvariantViolation(f"no leader after the final calm period: {state}")
        leader = self.brokers[state.leader].log
        for broker in self.brokers.values():
            if broker.log.records != leader.records:
                raise InvariantViolation(
                    f"b{broker.node_id} has not caught up with the leader after the calm period")
        if len(state.isr) != len(BROKERS):
            raise InvariantViolation(f"the ISR did not expand back after the calm period: {state}")


def run_seed(seed: int, leader_class=LeaderState, verbose: bool = False,
             diverging=diverging_epoch) -> Outcome:
    return Simulation(seed, leader_class, verbose=verbose, diverging=diverging).run()


def check_seed(seed: int, leader_class=LeaderState, diverging=diverging_epoch) -> str | None:
    """None if the seed holds every invariant, else what broke."""
    try:
        run_seed(seed, leader_class, diverging=diverging)
    except InvariantViolation as exc:
        return str(exc)
    return None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m broker.replication.simulate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=1000, help="number of seeds to run")
    parser.add_argument("--start", type=int, default=0, help="first seed")
    parser.add_argument("--seed", type=int, help="run this one seed only")
    parser.add_argument("-v", "--verbose", action="store_true", help="print the seed's story")
    args = parser.parse_args(argv)
    if args.seed is not None:
        sim = Simulation(args.seed, verbose=args.verbose)
        try:
            outcome = sim.run()
        except InvariantViolation as exc:
            print("\n".join(sim.log_lines))
            print(f"seed {args.seed}: FAILED: {exc}")
            return 1
        print("\n".join(outcome.trace))
        print(f"seed {args.seed}: ok, {outcome.acknowledged} records acknowledged, "
              f"{outcome.leaders} leader epochs, {outcome.truncations} truncations")
        return 0
    started = time.monotonic()
    failures = []
    for seed in range(args.start, args.start + args.seeds):
        error = check_seed(seed)
        if error is not None:
            failures.append(seed)
            print(f"seed {seed}: {error}", file=sys.stderr)
    elapsed = time.monotonic() - started
    print(f"{args.seeds - len(failures)}/{args.seeds} seeds passed in {elapsed:.1f}s"
          + (f"; failing seeds: {failures}" if failures else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
