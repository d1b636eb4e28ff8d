"""Static membership (KIP-345) answered as Apache Kafka 3.9 answers it: raw JoinGroup/SyncGroup/Heartbeat/
OffsetCommit/LeaveGroup requests at every point of a rebalance where a group.instance.id comes back with
no member id (a restarted member), what its old member id hears afterwards, and a static member that
misses a rebalance. `scenario` returns the answers with member ids replaced by labels ("i2#1": the first
id handed to instance i2), recorded from Kafka in KAFKA_3_9_ANSWERS; the slow test asks Kafka again
(it skips without Java or the reference Kafka, tests/apache_kafka.py). Each request that may wait gets
its own connection, as a member's would.
"""

from __future__ import annotations

import select
import time

import pytest

from broker.testing import running_broker
from protocol import messages
from protocol.consumer_protocol import Subscription, encode_subscription
from tests import apache_kafka as oracle
from tests.broker.raw_client import RawClient, raw_client_with_topic

OFFSET_COMMIT, FIND_COORDINATOR, JOIN, HEARTBEAT, LEAVE, SYNC = 8, 10, 11, 12, 13, 14
RETRIABLE = {14, 15, 16}      # the coordinator is loading / not there yet
TOPIC = "static"
SESSION_MS = 30_000
SUB = encode_subscription(Subscription(topics=[TOPIC]), 0)
OTHER_SUB = encode_subscription(Subscription(topics=[TOPIC], user_data=b"changed"), 0)


class Waiting:
    """A request sent on its own connection whose answer may come later."""

    def __init__(self, host, port, api, version, body, settle_s):
        self.client = RawClient(host, port, timeout=60)
        self.api, self.version, self.settle_s = api, version, settle_s
        self.client.send(api, version, body)
        self._answer = None
        self.done()   # the broker has taken it in before the next request goes out

    def done(self, wait=None) -> bool:
        """Answered (within `wait` seconds, by default the settle time)?"""
        wait = self.settle_s if wait is None else wait
        if self._answer is None:
            ready, _, _ = select.select([self.client.sock], [], [], wait)
            if not ready:
                return False
            _, self._answer = self.client.receive(self.api, self.version)
            self.client.close()
        return True

    def answer(self):
        assert self.done(wait=30), "no answer in 30 s"
        return self._answer


class Wire:
    """Group requests in the versions kafka-python 3.0 sends (JoinGroup v7, SyncGroup v5, Heartbeat v4)."""

    def __init__(self, bootstrap: str, client: RawClient, settle_s: float):
        host, port = bootstrap.rsplit(":", 1)
        self.host, self.port, self.client, self.settle_s = host, int(port), client, settle_s
        self.labels: dict[str, str] = {}

    def label(self, member_id: str, instance: str | None = None) -> str:
        if not member_id:
            return ""
        if member_id not in self.labels:
            prefix = instance or member_id.split("-", 1)[0]
            count = sum(1 for name in self.labels.values() if name.startswith(prefix + "#")) + 1
            self.labels[member_id] = f"{prefix}#{count}"
        return self.labels[member_id]

    def call(self, api, version, body):
        deadline = time.monotonic() + 60
        while True:
            response = self.client.request(api, version, body)
            if getattr(response, "error_code", 0) not in RETRIABLE or time.monotonic() > deadline:
                return response
            time.sleep(0.5)

    def join(self, group, instance, member_id="", sub=SUB, rebalance_ms=30_000, version=7) -> Waiting:
        J = messages.JoinGroupRequest
        return Waiting(self.host, self.port, JOIN, version, J(
            group_id=group, session_timeout_ms=SESSION_MS, rebalance_timeout_ms=rebalance_ms, member_id=member_id,
            group_instance_id=instance, protocol_type="consumer",
            protocols=[J.JoinGroupRequestProtocol(name="range", metadata=sub)]), self.settle_s)

    def joined(self, waiting: Waiting, instance: str, base: int) -> tuple:
        """A JoinGroup answer: (error, generation - base, member, leader, members the leader is told of)."""
        r = waiting.answer()
        return (r.error_code, r.generation_id - base if r.error_code == 0 else None, self.label(r.member_id, instance),
                self.label(r.leader), sorted(self.label(m.member_id, m.group_instance_id) for m in r.members))

    def sync(self, group, instance, member_id, generation, assignments=()) -> Waiting:
        S = messages.SyncGroupRequest
        return Waiting(self.host, self.port, SYNC, 5, S(
            group_id=group, generation_id=generation, member_id=member_id, group_instance_id=instance,
            protocol_type="consumer", protocol_name="range",
            assignments=[S.SyncGroupRequestAssignment(member_id=m, assignment=a) for m, a in assignments]),
            self.settle_s)

    @staticmethod
    def synced(waiting: Waiting) -> tuple:
        r = waiting.answer()
        return r.error_code, bytes(r.assignment)

    def heartbeat(self, group, instance, member_id, generation) -> int:
        return self.call(HEARTBEAT, 4, messages.HeartbeatRequest(
            group_id=group, generation_id=generation, member_id=member_id, group_instance_id=instance)).error_code

    def commit(self, group, instance, member_id, generation) -> int:
        C = messages.OffsetCommitRequest
        r = self.call(OFFSET_COMMIT, 8, C(
            group_id=group, generation_id_or_member_epoch=generation, member_id=member_id, group_instance_id=instance,
            topics=[C.OffsetCommitRequestTopic(name=TOPIC, partitions=[
                C.OffsetCommitRequestPartition(partition_index=0, committed_offset=0)])]))
        return r.topics[0].partitions[0].error_code

    def leave(self, group, instance, member_id) -> int:
        L = messages.LeaveGroupRequest
        r = self.call(LEAVE, 4, L(group_id=group, members=[L.MemberIdentity(member_id=member_id,
                                                                            group_instance_id=instance)]))
        return r.members[0].error_code

    def form(self, group, rebalance_ms=30_000) -> tuple[dict, int]:
        """A Stable group of static members i1 (leader) and i2, each given its own name as assignment."""
        self.call(FIND_COORDINATOR, 3, messages.FindCoordinatorRequest(key=group, key_type=0))
        deadline = time.monotonic() + 60
        first = self.join(group, "i1", rebalance_ms=rebalance_ms).answer()
        while first.error_code in RETRIABLE and time.monotonic() < deadline:   # Kafka just started
            time.sleep(0.5)
            first = self.join(group, "i1", rebalance_ms=rebalance_ms).answer()
        ids = {"i1": first.member_id}
        assert first.error_code == 0, first
        self.synced(self.sync(group, "i1", ids["i1"], first.generation_id, [(ids["i1"], b"i1")]))
        second = self.join(group, "i2", rebalance_ms=rebalance_ms)
        again = self.join(group, "i1", ids["i1"], rebalance_ms=rebalance_ms).answer()
        ids["i2"] = second.answer().member_id
        generation = again.generation_id
        follower = self.sync(group, "i2", ids["i2"], generation)
        leader = self.sync(group, "i1", ids["i1"], generation, [(ids["i1"], b"i1"), (ids["i2"], b"i2")])
        assert self.synced(leader)[0] == 0 and self.synced(follower)[0] == 0
        for instance, member_id in ids.items():
            self.label(member_id, instance)
        return ids, generation


def scenario(bootstrap: str, settle_s: float) -> list:
    """`settle_s`: how long a request that should wait is given to be answered anyway."""
    seen: list = []
    with raw_client_with_topic(bootstrap, TOPIC, partitions=4) as client:
        w = Wire(bootstrap, client, settle_s)
        seen += preparing_rebalance(w)
        seen += completing_rebalance_before_leader_sync(w)
        seen += completing_rebalance_leader_replaced(w)
        seen += stable_with_follower_not_synced(w)
        seen += stable_leader_replaced(w)
        seen += static_member_missing_the_join(w)
    return seen


def preparing_rebalance(w: Wire) -> list:
    g = "preparing"
    ids, gen = w.form(g)
    seen = []
    lead = w.join(g, "i1", ids["i1"], sub=OTHER_SUB)             # the leader's join starts a rebalance
    seen.append(("leader's join answered at once", lead.done()))
    i2 = w.join(g, "i2")          # i2 restarted: no member id; the last join the rebalance waited for
    seen.append(("i2's join answered at once", i2.done()))
    seen.append(("leader's join", w.joined(lead, "i1", gen)))
    first = i2.answer()
    seen.append(("new i2's join", w.joined(i2, "i2", gen)))
    gen2 = first.generation_id
    # the old id is fenced everywhere it names the instance, unknown where it does not
    old = ids["i2"]
    seen.append(("old id heartbeat", w.heartbeat(g, "i2", old, gen2), w.heartbeat(g, None, old, gen2)))
    seen.append(("old id sync", w.synced(w.sync(g, "i2", old, gen2)), w.synced(w.sync(g, None, old, gen2))))
    seen.append(("old id commit", w.commit(g, "i2", old, gen2), w.commit(g, None, old, gen2)))
    seen.append(("old id join", w.joined(w.join(g, "i2", old), "i2", gen)))
    seen.append(("old id leave", w.leave(g, "i2", old)))
    # a new id's join still waiting when the instance comes back once more is fenced, not answered later
    rejoin = w.join(g, "i2", first.member_id, sub=OTHER_SUB)
    seen.append(("replaced id's rejoin answered at once", rejoin.done()))
    third = w.join(g, "i2")
    seen.append(("waiting join of the replaced id", w.joined(rejoin, "i2", gen)))
    seen.append(("third i2 answered before the leader joins", third.done()))
    lead = w.join(g, "i1", ids["i1"])
    seen.append(("leader's join", w.joined(lead, "i1", gen)))
    seen.append(("third i2's join", w.joined(third, "i2", gen)))
    return seen


def rebalanced(w: Wire, g: str):
    """A formed group {i1, i2} rebalanced by its leader's changed subscription: (member ids, the first
    generation, the new one, what was seen so far)."""
    ids, gen = w.form(g)
    lead, follow = w.join(g, "i1", ids["i1"], sub=OTHER_SUB), w.join(g, "i2", ids["i2"])
    seen = [("rebalanced", w.joined(lead, "i1", gen), w.joined(follow, "i2", gen))]
    return ids, gen, lead.answer().generation_id, seen


def completing_rebalance_before_leader_sync(w: Wire) -> list:
    g = "completing"
    ids, gen, gen2, seen = rebalanced(w, g)
    waiting_sync = w.sync(g, "i2", ids["i2"], gen2)
    seen.append(("follower sync answered before the leader's", waiting_sync.done()))
    seen.append(("heartbeat while completing", w.heartbeat(g, "i2", ids["i2"], gen2)))
    i2 = w.join(g, "i2")                                          # restarted before the leader assigned
    seen.append(("old id's waiting sync", w.synced(waiting_sync)))
    seen.append(("new i2 answered before the leader rejoins", i2.done()))
    seen.append(("leader sync of the abandoned generation",
                 w.synced(w.sync(g, "i1", ids["i1"], gen2, [(ids["i1"], b"x"), (ids["i2"], b"y")]))))
    seen.append(("leader heartbeat", w.heartbeat(g, "i1", ids["i1"], gen2)))
    lead = w.join(g, "i1", ids["i1"])
    seen.append(("leader's join", w.joined(lead, "i1", gen)))
    seen.append(("new i2's join", w.joined(i2, "i2", gen)))
    gen3 = i2.answer().generation_id
    new = i2.answer().member_id
    seen.append(("stale generation sync", w.synced(w.sync(g, "i2", new, gen2))))
    seen.append(("stale generation heartbeat", w.heartbeat(g, "i2", new, gen2)))
    follower = w.sync(g, "i2", new, gen3)
    seen.append(("leader assigns", w.synced(w.sync(g, "i1", ids["i1"], gen3, [(ids["i1"], b"1"), (new, b"2")]))))
    seen.append(("new i2 gets its share", w.synced(follower)))
    seen.append(("old id sync after", w.synced(w.sync(g, "i2", ids["i2"], gen3))))
    return seen


def completing_rebalance_leader_replaced(w: Wire) -> list:
    g = "leader-replaced"
    ids, gen, gen2, seen = rebalanced(w, g)
    waiting_sync = w.sync(g, "i2", ids["i2"], gen2)
    i1 = w.join(g, "i1")                                          # the leader restarted before assigning
    seen.append(("follower's waiting sync", w.synced(waiting_sync)))
    seen.append(("new leader answered before the follower rejoins", i1.done()))
    seen.append(("old leader's sync", w.synced(w.sync(g, "i1", ids["i1"], gen2, [(ids["i1"], b"x")]))))
    follow = w.join(g, "i2", ids["i2"])
    seen.append(("new i1's join", w.joined(i1, "i1", gen)))
    seen.append(("follower's join", w.joined(follow, "i2", gen)))
    return seen


def stable_with_follower_not_synced(w: Wire) -> list:
    g = "stable-unsynced"
    ids, gen, gen2, seen = rebalanced(w, g)
    seen.append(("leader assigns", w.synced(w.sync(g, "i1", ids["i1"], gen2, [(ids["i1"], b"a"), (ids["i2"], b"b")]))))
    i2 = w.join(g, "i2")                         # i2 restarted before its SyncGroup: no rebalance
    seen.append(("new i2's join", w.joined(i2, "i2", gen)))
    new = i2.answer().member_id
    seen.append(("new i2's sync", w.synced(w.sync(g, "i2", new, gen2))))
    seen.append(("old id's sync", w.synced(w.sync(g, "i2", ids["i2"], gen2))))
    seen.append(("heartbeats", w.heartbeat(g, "i1", ids["i1"], gen2), w.heartbeat(g, "i2", new, gen2)))
    seen.append(("commits", w.commit(g, "i2", new, gen2), w.commit(g, "i2", ids["i2"], gen2)))
    return seen


def stable_leader_replaced(w: Wire) -> list:
    g = "stable-leader"
    ids, gen = w.form(g)
    seen = []
    old_style = w.join(g, "i1")                      # JoinGroup v7: told the old leader id, so it does not assign
    seen.append(("leader rejoins (v7)", w.joined(old_style, "i1", gen)))
    new = old_style.answer().member_id
    seen.append(("its sync", w.synced(w.sync(g, "i1", new, gen))))
    kip814 = w.join(g, "i1", version=9)              # v9: it leads, keeps the assignment (skip_assignment)
    r = kip814.answer()
    seen.append(("leader rejoins (v9)", w.joined(kip814, "i1", gen), r.skip_assignment))
    seen.append(("heartbeats", w.heartbeat(g, "i1", r.member_id, gen), w.heartbeat(g, "i1", new, gen),
                 w.heartbeat(g, "i2", ids["i2"], gen)))
    follow = w.join(g, "i2", ids["i2"])              # a follower's unchanged join: this generation again
    seen.append(("follower rejoins", w.joined(follow, "i2", gen)))
    return seen


def static_member_missing_the_join(w: Wire) -> list:
    """A static member that does not rejoin in time stays in the group (a dynamic one would be removed)."""
    g = "missing"
    ids, gen = w.form(g, rebalance_ms=2_000)
    seen = []
    lead = w.join(g, "i1", ids["i1"], sub=OTHER_SUB, rebalance_ms=2_000)
    seen.append(("leader's join after the rebalance timeout", w.joined(lead, "i1", gen)))
    gen2 = lead.answer().generation_id
    seen.append(("absent member's heartbeat", w.heartbeat(g, "i2", ids["i2"], gen)))
    follow = w.join(g, "i2", ids["i2"], rebalance_ms=2_000)
    seen.append(("absent member rejoins", w.joined(follow, "i2", gen)))
    seen.append(("leader sync", w.synced(w.sync(g, "i1", ids["i1"], gen2, [(ids["i1"], b"1"), (ids["i2"], b"2")]))))
    return seen


# What Apache Kafka 3.9.0 answered to `scenario` (recorded with the slow test below, which checks it again)
KAFKA_3_9_ANSWERS = [
    ("leader's join answered at once", False),
    ("i2's join answered at once", True),
    ("leader's join", (0, 1, "i1#1", "i1#1", ["i1#1", "i2#2"])),
    ("new i2's join", (0, 1, "i2#2", "i1#1", [])),
    ("old id heartbeat", 82, 25),
    ("old id sync", (82, b""), (25, b"")),
    ("old id commit", 82, 25),
    ("old id join", (82, None, "i2#1", "", [])),
    ("old id leave", 82),
    ("replaced id's rejoin answered at once", False),
    ("waiting join of the replaced id", (82, None, "i2#2", "", [])),
    ("third i2 answered before the leader joins", False),
    ("leader's join", (0, 2, "i1#1", "i1#1", ["i1#1", "i2#3"])),
    ("third i2's join", (0, 2, "i2#3", "i1#1", [])),
    ("rebalanced", (0, 1, "i1#2", "i1#2", ["i1#2", "i2#4"]), (0, 1, "i2#4", "i1#2", [])),
    ("follower sync answered before the leader's", False),
    ("heartbeat while completing", 0),
    ("old id's waiting sync", (82, b"")),
    ("new i2 answered before the leader rejoins", False),
    ("leader sync of the abandoned generation", (27, b"")),
    ("leader heartbeat", 27),
    ("leader's join", (0, 2, "i1#2", "i1#2", ["i1#2", "i2#5"])),
    ("new i2's join", (0, 2, "i2#5", "i1#2", [])),
    ("stale generation sync", (22, b"")),
    ("stale generation heartbeat", 22),
    ("leader assigns", (0, b"1")),
    ("new i2 gets its share", (0, b"2")),
    ("old id sync after", (82, b"")),
    ("rebalanced", (0, 1, "i1#3", "i1#3", ["i1#3", "i2#6"]), (0, 1, "i2#6", "i1#3", [])),
    ("follower's waiting sync", (27, b"")),
    ("new leader answered before the follower rejoins", False),
    ("old leader's sync", (82, b"")),
    ("new i1's join", (0, 2, "i1#4", "i1#4", ["i1#4", "i2#6"])),
    ("follower's join", (0, 2, "i2#6", "i1#4", [])),
    ("rebalanced", (0, 1, "i1#5", "i1#5", ["i1#5", "i2#7"]), (0, 1, "i2#7", "i1#5", [])),
    ("leader assigns", (0, b"a")),
    ("new i2's join", (0, 1, "i2#8", "i1#5", [])),
    ("new i2's sync", (0, b"b")),
    ("old id's sync", (82, b"")),
    ("heartbeats", 0, 0),
    ("commits", 0, 82),
    ("leader rejoins (v7)", (0, 0, "i1#7", "i1#6", [])),
    ("its sync", (0, b"i1")),
    ("leader rejoins (v9)", (0, 0, "i1#8", "i1#8", ["i1#8", "i2#9"]), True),
    ("heartbeats", 0, 82, 0),
    ("follower rejoins", (0, 0, "i2#9", "i1#8", [])),
    ("leader's join after the rebalance timeout", (0, 1, "i1#9", "i1#9", ["i1#9", "i2#10"])),
    ("absent member's heartbeat", 22),
    ("absent member rejoins", (0, 1, "i2#10", "i1#9", [])),
    ("leader sync", (0, b"1")),
]


@pytest.mark.timeout(120)
def test_static_membership_answers_as_kafka_did(tmp_path):
    with running_broker(tmp_path / "odradek") as broker:
        assert scenario(broker.bootstrap, settle_s=0.1) == KAFKA_3_9_ANSWERS


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_kafka_still_answers_so(tmp_path):
    reason = oracle.skip_reason()
    if reason:
        pytest.skip(reason)
    (tmp_path / "kafka").mkdir()
    kafka = oracle.ApacheKafka(tmp_path / "kafka")
    kafka.start()
    try:
        assert scenario(kafka.bootstrap, settle_s=0.5) == KAFKA_3_9_ANSWERS
    finally:
        kafka.stop()
