"""Targeted scenarios for the sans-IO Raft core, driven by hand (no simulator randomness)."""

import random

import pytest

from broker.controller.disklog import Entry, QuorumState, Snapshot
from broker.controller.raft import DurableState, NotLeaderError, RaftConfig, RaftNode, Role
from broker.controller.raft.messages import (
    AppendEntries, Commit, FetchRequest, LoadSnapshot, PersistState,
    SaveSnapshot, Send, TruncateFrom, VoteRequest, VoteResponse,
)

CONFIG = RaftConfig(max_fetch_entries=4, snapshot_chunk=3)


class Cluster:
    """Delivers messages instantly in FIFO order; time advances only when told."""

    def __init__(self, ids=(1, 2, 3), durable=None):
        self.now = 0.0
        self.nodes = {i: RaftNode(i, ids, CONFIG, random.Random(i), (durable or {}).get(i)) for i in ids}
        self.down: set[int] = set()
        self.queue: list = []
        self.effects: dict[int, list] = {i: [] for i in ids}
        for i, node in self.nodes.items():
            self._take(i, node.start(self.now))

    def _take(self, i, effects):
        self.effects[i] += effects
        for e in effects:
            if isinstance(e, Send):
                self.queue.append((i, e.dest, e.message))

    def run(self, until: float, step: float = 0.05):
        while self.now < until:
            while self.queue:
                src, dst, msg = self.queue.pop(0)
                if dst in self.down or src in self.down:
                    continue
                self._take(dst, self.nodes[dst].handle(src, msg, self.now))
            self.now += step
            for i, node in self.nodes.items():
                if i not in self.down:
                    self._take(i, node.tick(self.now))

    def leader(self):
        leaders = [n for i, n in self.nodes.items() if n.role is Role.LEADER and i not in self.down]
        return leaders[0] if len(leaders) == 1 else None

    def committed(self, i):
        return [e for eff in self.effects[i] if isinstance(eff, Commit) for e in eff.entries]


def test_three_nodes_elect_and_replicate():
    c = Cluster()
    c.run(5)
    leader = c.leader()
    assert leader is not None and leader.epoch >= 1
    for k in range(10):
        _, effects = leader.propose(b"x%d" % k, c.now)
        c._take(leader.node_id, effects)
    c.run(c.now + 1)
    data = [[e.data for e in c.committed(i) if not e.control] for i in c.nodes]
    assert data[0] == data[1] == data[2] == [b"x%d" % k for k in range(10)]
    follower = next(n for n in c.nodes.values() if n is not leader)
    with pytest.raises(NotLeaderError):
        follower.propose(b"nope", c.now)


def test_persist_comes_before_sends():
    node = RaftNode(1, [1, 2, 3], CONFIG, random.Random(0))
    node.start(0.0)
    effects = node.tick(10.0)                   # election timeout: pre-vote (no epoch change yet)
    assert all(isinstance(e, Send) and e.message.pre_vote for e in effects)
    effects = node.handle(2, VoteResponse(0, -1, True, pre_vote=True), 10.1)
    kinds = [type(e) for e in effects]
    assert kinds.index(PersistState) < kinds.index(Send)
    assert node.role is Role.CANDIDATE and node.epoch == 1 and node.voted_id == 1


def test_vote_rules():
    node = RaftNode(1, [1, 2, 3], CONFIG, random.Random(0),
                    DurableState(QuorumState(3, -1, -1), None, [Entry(0, 2, b"a"), Entry(1, 3, b"b")]))
    node.start(0.0)
    # stale log: last epoch 2 < 3
    [send] = [e for e in node.handle(2, VoteRequest(4, 2, 2, 5), 0.1) if isinstance(e, Send)]
    assert not send.message.granted and node.epoch == 4
    # up to date: granted, and a second candidate in the same epoch is refused
    effects = node.handle(3, VoteRequest(4, 3, 3, 2), 0.2)
    assert isinstance(effects[0], PersistState) and effects[0].state.voted_id == 3
    assert [e.message.granted for e in effects if isinstance(e, Send)] == [True]
    [send] = [e for e in node.handle(2, VoteRequest(4, 2, 3, 9), 0.3) if isinstance(e, Send)]
    assert not send.message.granted


def test_prevote_refused_while_leader_is_alive():
    c = Cluster()
    c.run(5)
    leader = c.leader()
    follower = next(n for n in c.nodes.values() if n is not leader)
    effects = follower.handle(99, VoteRequest(leader.epoch, 99, 99, 10**6, pre_vote=True), c.now)
    [send] = [e for e in effects if isinstance(e, Send)]
    assert not send.message.granted and follower.epoch == leader.epoch


def test_rejoining_node_does_not_disrupt_leader():
    c = Cluster()
    c.run(5)
    leader = c.leader()
    epoch = leader.epoch
    loner = next(i for i in c.nodes if i != leader.node_id)
    c.down.add(loner)
    c.run(c.now + 20)                          # the isolated node keeps timing out, but only pre-votes
    c.down.clear()
    c.run(c.now + 5)
    assert c.leader() is leader and leader.epoch == epoch


def test_new_leader_after_leader_loss_and_divergent_suffix_truncated():
    c = Cluster()
    c.run(5)
    old = c.leader()
    c.down.add(old.node_id)
    for k in range(3):                          # appended on the old leader only: never committed
        old.propose(b"lost%d" % k, c.now)
    c.run(c.now + 10)
    new = c.leader()
    assert new is not None and new is not old and new.epoch > old.epoch
    _, effects = new.propose(b"kept", c.now)
    c._take(new.node_id, effects)
    c.down.clear()
    c.run(c.now + 5)
    assert old.role is Role.FOLLOWER and old.leader_id == new.node_id
    assert any(isinstance(e, TruncateFrom) for e in c.effects[old.node_id])
    assert [e.data for e in old.entries] == [e.data for e in new.entries]
    assert b"kept" in [e.data for e in c.committed(old.node_id)]


def test_check_quorum_leader_resigns_when_isolated():
    c = Cluster()
    c.run(5)
    leader = c.leader()
    c.down.update(i for i in c.nodes if i != leader.node_id)
    c.run(c.now + 10)
    assert leader.role is not Role.LEADER


def test_snapshot_transfer_to_lagging_follower():
    c = Cluster()
    c.run(5)
    leader = c.leader()
    lagger = next(i for i in c.nodes if i != leader.node_id)
    c.down.add(lagger)
    for k in range(20):
        _, effects = leader.propose(b"v%d" % k, c.now)
        c._take(leader.node_id, effects)
    c.run(c.now + 1)
    end = leader.applied
    c._take(leader.node_id, leader.take_snapshot(end, b"state-at-%d" % end))
    assert leader.log_start == end
    c.down.clear()
    c.run(c.now + 5)
    node = c.nodes[lagger]
    loads = [e for e in c.effects[lagger] if isinstance(e, LoadSnapshot)]
    assert loads and loads[-1].snapshot == Snapshot(end, leader.epoch, b"state-at-%d" % end)
    assert any(isinstance(e, SaveSnapshot) for e in c.effects[lagger])
    assert node.log_start == end and node.end_offset == leader.end_offset


def test_single_voter_elects_itself_and_commits_at_once():
    node = RaftNode(1, [1], CONFIG, random.Random(0))
    effects = node.start(0.0)
    assert node.role is Role.LEADER and node.epoch == 1
    (offset, epoch), effects = node.propose(b"x", 0.0)
    kinds = [type(e) for e in effects]
    assert kinds == [AppendEntries, Commit] and effects[1].entries[-1] == Entry(offset, epoch, b"x")


def test_restart_from_durable_state():
    durable = DurableState(QuorumState(5, 1, 1), Snapshot(3, 4, b"s"), [Entry(3, 5, b"", True), Entry(4, 5, b"y")])
    node = RaftNode(1, [1], CONFIG, random.Random(0), durable)
    effects = node.start(0.0)
    assert isinstance(effects[0], LoadSnapshot)
    assert node.role is Role.LEADER and node.epoch == 6
    committed = [e for eff in effects if isinstance(eff, Commit) for e in eff.entries]
    assert [e.offset for e in committed] == [3, 4, 5]


def test_fetch_validation_reports_divergence_and_snapshot():
    node = RaftNode(1, [1], CONFIG, random.Random(0))
    node.start(0.0)
    for k in range(5):
        node.propose(b"%d" % k, 0.0)           # offsets 1..5 in epoch 1 (0 is the leader marker)
    [send] = node.handle(9, FetchRequest(1, 9, 7, 1), 0.1)
    assert send.message.diverging == (1, 6)
    [send] = node.handle(9, FetchRequest(1, 9, 3, 1), 0.1)
    assert send.message.diverging is None and [e.offset for e in send.message.entries] == [3, 4, 5]
    node.take_snapshot(4, b"s")
    [send] = node.handle(9, FetchRequest(1, 9, 2, 1), 0.1)
    assert send.message.snapshot_id == (4, 1)
    [send] = node.handle(9, FetchRequest(0, 9, 2, 1), 0.1)
    assert send.message.error == "FENCED_LEADER_EPOCH"


def test_resigning_leader_hands_over_quickly():
    c = Cluster()
    c.run(5)
    leader = c.leader()
    c._take(leader.node_id, leader.resign(c.now))
    c.run(c.now + 0.01)
    c.down.add(leader.node_id)
    resigned_at = c.now
    while c.leader() is None and c.now < resigned_at + 10:
        c.run(c.now + 0.05)
    assert c.leader() is not None and c.now - resigned_at < CONFIG.fetch_timeout


def test_caught_up_followers_are_caught_up_as_of_their_last_fetch():
    """Kafka's rule for DescribeQuorum's LastCaughtUpTimestamp: a fetch that reaches the leader's
    log end counts now, so an idle quorum's followers show the time of their latest fetch (they
    showed the last time the high watermark moved)."""
    c = Cluster()
    c.run(5)
    leader = c.leader()
    c._take(leader.node_id, leader.propose(b"x", c.now)[1])
    c.run(c.now + 5)                                # idle: followers keep fetching at the log end
    replicas = leader.describe(c.now)["replicas"]
    for rid in set(c.nodes) - {leader.node_id}:
        state = replicas[rid]
        assert state["log_end_offset"] == leader.end_offset
        assert state["last_caught_up_timestamp"] == state["last_fetch_timestamp"] > c.now - 1
