"""Nemeses: the faults a trial injects while its workload runs.

Each is a function ``(env, topic, rng) -> str`` that injects its fault, holds it, undoes what it can
while the workload still runs (a killed node restarts, a paused one resumes, a partition heals) and
returns a description of what it did. `FaultEnv.recover()` then undoes anything left.
"""

from __future__ import annotations

import random
import signal
import subprocess
import time

from tests.faults import torn_writes
from tests.faults.env import SESSION_TIMEOUT_S, FaultEnv


def _span(env: FaultEnv, rng: random.Random, low: float, high: float) -> float:
    """How long to hold a fault: random in [low, high]; the low end in a quick (CI) environment."""
    return low if env.quick else rng.uniform(low, high)


def _leader(env: FaultEnv, topic: str, rng: random.Random) -> int:
    state = env.partitions(topic)
    leaders = [leader for leader, _ in state.values() if leader >= 0]
    return rng.choice(leaders) if leaders else rng.choice(list(env.cluster.nodes))


def _controller(env: FaultEnv, rng: random.Random) -> int:
    controller = env.active_controller()
    return controller if controller in env.cluster.nodes else rng.choice(list(env.cluster.nodes))


def _kill_and_restart(env: FaultEnv, nodes: list[int], down_s: float) -> None:
    for node_id in nodes:
        env.cluster.nodes[node_id].signal(signal.SIGKILL)
    for node_id in nodes:
        env.cluster.nodes[node_id].wait(10)
    time.sleep(down_s)
    for node_id in nodes:
        env.cluster.start(node_id)


def kill_random(env, topic, rng):
    victim = rng.choice(list(env.cluster.nodes))
    down = _span(env, rng, 1, 6)
    _kill_and_restart(env, [victim], down)
    return f"kill -9 node {victim}, restart after {down:.1f}s"


def kill_leader(env, topic, rng):
    victim = _leader(env, topic, rng)
    down = _span(env, rng, 1, 6)
    _kill_and_restart(env, [victim], down)
    return f"kill -9 partition leader {victim}, restart after {down:.1f}s"


def kill_controller(env, topic, rng):
    victim = _controller(env, rng)
    down = _span(env, rng, 1, 6)
    _kill_and_restart(env, [victim], down)
    return f"kill -9 active controller {victim}, restart after {down:.1f}s"


def kill_majority(env, topic, rng):
    victims = rng.sample(list(env.cluster.nodes), 2)
    down = _span(env, rng, 1, 4)
    _kill_and_restart(env, victims, down)
    return f"kill -9 nodes {sorted(victims)} together, restart after {down:.1f}s"


def _pause(env, victim, what, rng):
    """Longer than the session timeout: the node is fenced while it sleeps, then wakes up."""
    held = SESSION_TIMEOUT_S + _span(env, rng, 1.5, 6)
    env.pause(victim)
    time.sleep(held)
    env.resume(victim)
    return f"SIGSTOP {what} {victim} for {held:.1f}s (session timeout {SESSION_TIMEOUT_S:.0f}s)"


def pause_leader(env, topic, rng):
    return _pause(env, _leader(env, topic, rng), "partition leader", rng)


def pause_controller(env, topic, rng):
    return _pause(env, _controller(env, rng), "active controller", rng)


def _nodes(env):
    return [f"n{i}" for i in env.cluster.nodes]


def partition_leader(env, topic, rng):
    """The leader of a partition loses the other nodes (the clients still reach it)."""
    victim = _leader(env, topic, rng)
    held = _span(env, rng, 8, 12)
    others = [n for n in _nodes(env) if n != f"n{victim}"]
    env.lab.partition([f"n{victim}"], others)
    time.sleep(held)
    env.lab.heal()
    return f"isolate partition leader {victim} from the other nodes for {held:.1f}s"


def partition_halves(env, topic, rng):
    """A random minority/majority split; the clients land on one side at random."""
    nodes = _nodes(env)
    rng.shuffle(nodes)
    minority, majority = nodes[:1], nodes[1:]
    side = rng.choice(["minority", "majority"])
    (minority if side == "minority" else majority).append("client")
    held = _span(env, rng, 8, 12)
    env.lab.partition(minority, majority)
    time.sleep(held)
    env.lab.heal()
    return f"partition {sorted(minority)} | {sorted(majority)} for {held:.1f}s"


def partition_one_way(env, topic, rng):
    """The leader's packets to the other nodes are dropped; theirs still reach it."""
    victim = _leader(env, topic, rng)
    held = _span(env, rng, 8, 12)
    for other in _nodes(env):
        if other != f"n{victim}":
            env.lab.cut(f"n{victim}", other)
    time.sleep(held)
    env.lab.heal()
    return f"drop what leader {victim} sends to the other nodes for {held:.1f}s"


def packet_loss(env, topic, rng):
    percent = rng.choice([10, 20, 30])
    held = _span(env, rng, 8, 12)
    for name in _nodes(env):
        env.lab.lossy(name, percent)
    time.sleep(held)
    env.lab.heal()
    return f"{percent}% packet loss on every node for {held:.1f}s"


def disk_full(env, topic, rng):
    victim = _leader(env, topic, rng)
    held = _span(env, rng, 3, 8)
    env.fill_disk(victim)
    time.sleep(held)
    env.free_disk(victim)
    node = env.cluster.nodes[victim]
    outcome = "stayed up" if node.running else f"exited with {node.process.returncode}"
    return f"fill partition leader {victim}'s disk for {held:.1f}s ({outcome})"


def clock_skew(env, topic, rng):
    """A partition leader restarts (kill -9) with its wall clock minutes off, runs so for a while,
    then restarts with the right time."""
    victim = _leader(env, topic, rng)
    skew = rng.choice([-1, 1]) * _span(env, rng, 60, 900)
    held = _span(env, rng, 8, 12)
    env.skew_clock(victim, skew)
    time.sleep(held)
    env.unskew_clock(victim)
    return f"restart partition leader {victim} with its clock {skew:+.0f}s off for {held:.1f}s"


def slow_fsync(env, topic, rng):
    """Every fsync of a partition leader takes 200-2000 ms for a while (the node keeps running: the
    shim it was started with reads the delay from a control file). With
    log.flush.before.acknowledge the leader's high watermark, so every acks=all produce it leads,
    waits for its fsyncs."""
    victim = _leader(env, topic, rng)
    low, high = (200, 2000) if not env.quick else (500, 1500)
    held = _span(env, rng, 8, 12)
    before = env.fsyncs_delayed(victim)
    env.slow_fsync(victim, low, high)
    time.sleep(held)
    env.fast_fsync(victim)
    delayed = env.fsyncs_delayed(victim) - before
    return (f"fsync on partition leader {victim} slowed to {low}-{high} ms for {held:.1f}s "
            f"({delayed} fsyncs delayed)")


def _leader_of(env: FaultEnv, topic: str, partition: int, other_than: int, timeout: float) -> int:
    """The partition's leader once it is a running node other than `other_than` (-1 if none came
    within `timeout` s)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        leader = env.partitions(topic).get(partition, (-1, []))[0]
        if leader >= 0 and leader != other_than:
            return leader
        time.sleep(0.2)
    return -1


def kill_leader_twice(env, topic, rng):
    """A partition's leader is killed; once another replica leads it, that one is killed too,
    while the first is still restarting and catching up (not in the ISR): only the third, in-sync
    replica may lead then, and the first must truncate to whatever the cluster kept."""
    partition = rng.choice(sorted(env.partitions(topic)) or [0])
    first = env.leader(topic, partition)
    first = first if first in env.cluster.nodes else rng.choice(list(env.cluster.nodes))
    _kill_and_restart(env, [first], _span(env, rng, 0.5, 2))
    second = _leader_of(env, topic, partition, first, 20)
    if second < 0:
        return f"kill -9 leader {first} of partition {partition}, restart (no other leader came)"
    down = _span(env, rng, 1, 4)
    _kill_and_restart(env, [second], down)
    return (f"kill -9 leader {first} of partition {partition}, restart; then its next leader "
            f"{second}, restart after {down:.1f}s")


def isolate_kill_leader(env, topic, rng):
    """A partition's leader is cut off from the other nodes (not from the clients) long enough for
    them to elect another leader, then killed while still cut off, and restarted after the network
    heals: what it appended alone was never committed and must go (KIP-101 truncation on the way
    back, from epochs it read back from disk)."""
    victim = _leader(env, topic, rng)
    held = _span(env, rng, SESSION_TIMEOUT_S + 2, SESSION_TIMEOUT_S + 6)
    env.lab.partition([f"n{victim}"], [n for n in _nodes(env) if n != f"n{victim}"])
    time.sleep(held)
    env.cluster.nodes[victim].signal(signal.SIGKILL)
    env.cluster.nodes[victim].wait(10)
    env.lab.heal()
    down = _span(env, rng, 1, 4)
    time.sleep(down)
    env.cluster.start(victim)
    return (f"isolate partition leader {victim} for {held:.1f}s, kill -9 it, heal, restart after "
            f"{down:.1f}s")


def stale_survivor(env, topic, rng):
    """One node is cut off from the others until it drops out of every ISR; the two in-sync nodes
    are then killed together and the network heals, so the stale node is the only one running.
    One in-sync node restarts, then the other: with unclean leader election off no partition may
    be led by the stale node before it caught up (it lacks acknowledged records)."""
    nodes = list(env.cluster.nodes)
    stale = rng.choice(nodes)
    in_sync = [n for n in nodes if n != stale]
    held = _span(env, rng, SESSION_TIMEOUT_S + 3, SESSION_TIMEOUT_S + 6)
    cut_at = time.monotonic()
    env.lab.partition([f"n{stale}"], [f"n{n}" for n in in_sync])
    time.sleep(held)
    # a new controller gives every broker a fresh session: allow for one more before the kill
    deadline = time.monotonic() + SESSION_TIMEOUT_S * 2
    while True:
        before = {p: isr for p, (_, isr) in sorted(env.partitions(topic, in_sync).items())}
        if (before and all(stale not in isr for isr in before.values())
                or time.monotonic() > deadline):
            break
        time.sleep(0.5)
    held = time.monotonic() - cut_at
    for node_id in in_sync:
        env.cluster.nodes[node_id].signal(signal.SIGKILL)
    for node_id in in_sync:
        env.cluster.nodes[node_id].wait(10)
    env.lab.heal()
    rng.shuffle(in_sync)
    gaps = [_span(env, rng, 1, 3), _span(env, rng, 2, 5)]
    for node_id, gap in zip(in_sync, gaps):
        time.sleep(gap)
        env.cluster.start(node_id)
    return (f"cut node {stale} off for {held:.1f}s, kill -9 in-sync nodes {sorted(in_sync)}, heal; "
            f"restart {in_sync[0]} after {gaps[0]:.1f}s, {in_sync[1]} {gaps[1]:.1f}s later "
            f"(ISRs before the kill: {before})")


# Kubernetes' default terminationGracePeriodSeconds: a pod not gone by then gets SIGKILL
GRACE_PERIOD_S = 30.0


def _led_by(env: FaultEnv, node_id: int) -> list[str]:
    """The partitions (of every topic) the other nodes' metadata says `node_id` leads."""
    others = [n for n in env.cluster.nodes if n != node_id]
    response = env.metadata(nodes=others)
    if response is None:
        return []
    return [f"{t.name}-{p.partition_index}" for t in response.topics for p in t.partitions
            if p.leader_id == node_id]


def rolling_restart(env, topic, rng):
    """A StatefulSet's rolling update: each node in turn (highest ordinal first) gets SIGTERM and
    its grace period, is started again, and waits until the cluster is fully replicated before the
    next one goes.
    A controlled shutdown moves a node's leaderships away before it exits: one the others' metadata
    still names as a leader once it is gone (after a moment for that metadata to spread) is a
    violation, and so is a node the grace period ran out on."""
    steps = []
    for node_id in sorted(env.cluster.nodes, reverse=True):
        env.wait_until(env.fully_replicated, env.recover_timeout_s,
                       f"every ISR full before node {node_id} stops")
        node = env.cluster.nodes[node_id]
        began = time.monotonic()
        node.signal(signal.SIGTERM)
        try:
            code = node.wait(GRACE_PERIOD_S)
        except subprocess.TimeoutExpired:
            env.cluster.kill(node_id)
            code = "SIGKILL"
            env.violations.append(f"node {node_id} still running {GRACE_PERIOD_S:.0f} s after "
                                  "SIGTERM")
        stopped = time.monotonic() - began
        deadline = time.monotonic() + 2.0
        while (still_led := _led_by(env, node_id)) and time.monotonic() < deadline:
            time.sleep(0.2)
        if still_led:
            env.violations.append(f"node {node_id} exited still leading {still_led[:5]}")
        env.cluster.start(node_id)
        env.wait_until(env.fully_replicated, env.recover_timeout_s,
                       f"node {node_id} back and every ISR full")
        steps.append(f"{node_id} (stopped in {stopped:.1f}s, exit {code}, back in "
                     f"{time.monotonic() - began - stopped:.1f}s)")
    return "rolling restart, SIGTERM and wait for full ISRs: " + ", ".join(steps)


def kill_all(env, topic, rng):
    """Every node killed at the same moment (a power cut to the process, not the page cache) and
    restarted: every acknowledged write must survive, without unclean election."""
    down = _span(env, rng, 0.5, 4)
    _kill_and_restart(env, list(env.cluster.nodes), down)
    return f"kill -9 all nodes together, restart after {down:.1f}s"


def torn_tail(env, topic, rng):
    """Power loss on one node: kill -9, then the last write of every partition's active segment
    torn (torn_writes.py: cut inside the last batch, or garbage or zeros after it), restart. It must
    truncate to its last valid batch, catch up from the leaders and rejoin every ISR."""
    victim = rng.choice(list(env.cluster.nodes))
    env.cluster.nodes[victim].signal(signal.SIGKILL)
    env.cluster.nodes[victim].wait(10)
    torn = torn_writes.tear_tails(env.cluster.nodes[victim].data_dir, rng)
    down = _span(env, rng, 0.5, 3)
    time.sleep(down)
    env.cluster.start(victim)
    counts = ", ".join(f"{count} {variant}" for variant, count in torn.items())
    return f"kill -9 node {victim}, tear its segments' tails ({counts}), restart after {down:.1f}s"


# in priority order; the CI slice takes the first of each family
NEMESES = {
    "kill-leader": kill_leader,
    "kill-controller": kill_controller,
    "kill-random": kill_random,
    "kill-majority": kill_majority,
    "pause-leader": pause_leader,
    "pause-controller": pause_controller,
    "partition-leader": partition_leader,
    "partition-halves": partition_halves,
    "partition-one-way": partition_one_way,
    "packet-loss": packet_loss,
    "disk-full": disk_full,
    "clock-skew": clock_skew,
    "slow-fsync": slow_fsync,
    "kill-leader-twice": kill_leader_twice,
    "isolate-kill-leader": isolate_kill_leader,
    "stale-survivor": stale_survivor,
    "rolling-restart": rolling_restart,
    "kill-all": kill_all,
    "torn-tail": torn_tail,
}
# faults a client must not notice beyond retriable errors: a delivery error its application sees
# fails the trial (the producer workload's)
GRACEFUL = {"rolling-restart"}
# nemeses that may outlast a trial's usual client time (three JVM restarts in a row, ~30 s, take
# minutes on a loaded machine): the seconds a client may run for (the runner's stop file ends it
# once the nemesis is done)
CLIENT_SECONDS = {"rolling-restart": 480}
