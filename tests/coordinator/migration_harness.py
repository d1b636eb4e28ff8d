"""A fake-clock harness for KIP-848 online migration: the classic and the consumer group coordinators
side by side, classic clients (eager or cooperative, as the Java client's classic protocol) routed
the way the handlers route them, next to the consumer-protocol `Client` of consumer_group_harness."""

from __future__ import annotations

from broker.coordinator.group_coordinator import GroupConfig, GroupCoordinator
from protocol import ErrorCode
from protocol.consumer_protocol import Assignment, Subscription, decode_assignment, decode_subscription, \
    encode_assignment, encode_subscription
from tests.coordinator.consumer_group_harness import GROUP, Harness

E = ErrorCode
SESSION_MS = 10_000


class MixedHarness(Harness):
    def __init__(self, topics: dict[str, int], **config):
        super().__init__(topics, **config)
        self.classic = GroupCoordinator(self.clock, self.timers, self.log, GroupConfig(initial_rebalance_delay_ms=0))
        self.classic.consumer_groups = self.core
        self.core.classic = self.classic

    def advance(self, ms: int) -> None:
        target = self.clock.now_ms() + ms
        while True:
            due = self.timers.next_deadline()
            if due is None or due > target:
                break
            self.clock.advance(max(due - self.clock.now_ms(), 0))
            self.timers.run_due(self.clock.now_ms())
        self.clock.advance(target - self.clock.now_ms())

    def is_consumer_group(self) -> bool:
        return GROUP in self.core.groups


class ClassicClient:
    """What a classic consumer does: join (an eager one revokes everything first, a cooperative one
    reports what it owns), lead with the range assignor when told so, sync, heartbeat, rejoin when
    told to, and after a sync a cooperative one gives up what it lost and rejoins."""

    def __init__(self, h: MixedHarness, name: str, topics=("t",), cooperative: bool = False):
        self.h, self.name, self.topics, self.cooperative = h, name, list(topics), cooperative
        self.member_id, self.generation, self.protocol = "", -1, None
        self.owned: set = set()       # (topic name, partition)
        self.phase = "join"
        self.pending = None
        self.leader_of: list = []

    # ---- the state machine -------------------------------------------------------------------------
    def step(self) -> None:
        if self.phase == "join":
            self._join()
        elif self.phase == "joining" and self.pending.done:
            self._joined(self.pending.result)
        elif self.phase == "sync":
            self._sync()
        elif self.phase == "syncing" and self.pending.done:
            self._synced(self.pending.result)
        elif self.phase == "stable":
            self.heartbeat()

    def _join(self) -> None:
        if not self.cooperative:
            self.owned = set()       # eager: everything is revoked before joining
        owned = [Subscription.TopicPartition(topic=t, partitions=sorted(p for tt, p in self.owned if tt == t))
                 for t in sorted({t for t, _ in self.owned})]
        metadata = encode_subscription(Subscription(topics=self.topics, owned_partitions=owned,
                                                    generation_id=self.generation), 1)
        # as the Java client's defaults: an eager one also offers cooperative-sticky (its assignor list
        # is [range, cooperative-sticky]), so both kinds can share a classic group
        protocols = [("cooperative-sticky", metadata)] if self.cooperative else \
            [("range", metadata), ("cooperative-sticky", metadata)]
        if self.h.core.hosts_classic_requests(GROUP, joining=True):
            self._joined(self.h.core.classic_join(GROUP, self.member_id, None, self.name, "/h", SESSION_MS, 30_000,
                                                  "consumer", protocols, True))
        elif not self.h.core.yield_to_classic(GROUP):      # as the JoinGroup handler: an empty one goes
            self.phase = "join"
        else:
            self.pending = self.h.classic.join_group(GROUP, self.member_id, None, self.name, "/h", SESSION_MS,
                                                     30_000, "consumer", protocols, True, True)
            self.phase = "joining"
            if self.pending.done:
                self._joined(self.pending.result)

    def _joined(self, r) -> None:
        if r.error is E.MEMBER_ID_REQUIRED:
            self.member_id, self.phase = r.member_id, "join"
        elif r.error is E.NONE:
            self.member_id, self.generation, self.protocol = r.member_id, r.generation_id, r.protocol_name
            self.leader_of = r.members if r.leader == self.member_id else []
            self.phase = "sync"
        elif r.error in (E.UNKNOWN_MEMBER_ID, E.ILLEGAL_GENERATION, E.FENCED_INSTANCE_ID):
            self._lost()
        else:
            self.phase = "join"

    def _sync(self) -> None:
        if self.h.core.hosts_classic_requests(GROUP):
            self._synced(self.h.core.classic_sync(GROUP, self.member_id, None, self.generation, "consumer",
                                                  self.protocol))
            return
        self.pending = self.h.classic.sync_group(GROUP, self.member_id, None, self.generation, "consumer",
                                                 self.protocol, self._lead())
        self.phase = "syncing"
        if self.pending.done:
            self._synced(self.pending.result)

    def _lead(self) -> list:
        """The range assignor over the members' subscriptions (only the leader has any); a cooperative
        leader holds back a partition another member still owns (it moves next round)."""
        if not self.leader_of:
            return []
        members = sorted(m for m, _, _ in self.leader_of)
        owned = {m: {(tp.topic, p) for tp in decode_subscription(meta)[1].owned_partitions or ()
                     for p in tp.partitions} for m, _, meta in self.leader_of}
        out = {m: [] for m in members}
        for topic in self.topics:
            count = self.h.partitions[topic]
            per, extra = divmod(count, len(members))
            start = 0
            for i, m in enumerate(members):
                size = per + (1 if i < extra else 0)
                for p in range(start, start + size):
                    if not any((topic, p) in owned[o] for o in members if o != m):
                        out[m].append((topic, p))
                start += size
        return [(m, encode_assignment(Assignment(assigned_partitions=[
            Assignment.TopicPartition(topic=t, partitions=sorted(p for tt, p in tps if tt == t))
            for t in sorted({t for t, _ in tps})]))) for m, tps in out.items()]

    def _synced(self, r) -> None:
        if r.error is E.NONE:
            given = {(tp.topic, p) for tp in decode_assignment(r.assignment)[1].assigned_partitions
                     for p in tp.partitions} if r.assignment else set()
            lost = self.owned - given
            self.owned = given
            # cooperative: having given partitions up, it rejoins at once to take part in the next round
            self.phase = "join" if self.cooperative and lost else "stable"
        elif r.error in (E.UNKNOWN_MEMBER_ID, E.ILLEGAL_GENERATION):
            self._lost()
        else:
            self.phase = "join"

    def heartbeat(self) -> ErrorCode:
        if self.h.core.hosts_classic_requests(GROUP):
            code = self.h.core.classic_heartbeat(GROUP, self.member_id, None, self.generation)
        else:
            code = self.h.classic.heartbeat(GROUP, self.member_id, None, self.generation)
        if code is E.REBALANCE_IN_PROGRESS:
            self.phase = "join"
        elif code in (E.UNKNOWN_MEMBER_ID, E.ILLEGAL_GENERATION):
            self._lost()
        return code

    def _lost(self) -> None:
        self.owned, self.generation, self.phase = set(), -1, "join"
        self.member_id = ""

    def leave(self) -> None:
        if self.h.core.hosts_classic_requests(GROUP):
            self.h.core.classic_leave(GROUP, [(self.member_id, None)])
        else:
            self.h.classic.leave_group(GROUP, [(self.member_id, None)])
        self.owned, self.phase = set(), "gone"


def owned_by_clients(h: MixedHarness, classic_clients, consumer_clients) -> dict:
    """(topic name, partition) -> client name, asserting no partition is consumed by two clients."""
    names = {topic_id: name for name, topic_id in h.topic_ids.items()}
    seen: dict = {}
    everyone = [(c.name, c.owned) for c in classic_clients] + \
        [(c.member_id, {(names[t], p) for t, ps in c.owned.items() for p in ps}) for c in consumer_clients]
    for who, owned in everyone:
        for tp in owned:
            assert tp not in seen, f"{tp} consumed by {seen[tp]} and {who} at once"
            seen[tp] = who
    return seen


def fixed_assignment(owned: set) -> bytes:
    return encode_assignment(Assignment(assigned_partitions=[
        Assignment.TopicPartition(topic=t, partitions=sorted(p for tt, p in owned if tt == t))
        for t in sorted({t for t, _ in owned})]))
