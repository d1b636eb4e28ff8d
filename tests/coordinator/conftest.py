"""Fixtures for the coordinator tests: a group coordinator on a fake clock."""

import struct

from broker.coordinator.clock import FakeClock, Timers
from broker.coordinator.group_coordinator import GroupConfig, GroupCoordinator
from broker.coordinator.log_records import MemoryGroupLog


def subscription(*topics: str) -> bytes:
    """A ConsumerProtocolSubscription v0: version, topics, null user data."""
    out = struct.pack(">hi", 0, len(topics))
    for topic in topics:
        out += struct.pack(">h", len(topic)) + topic.encode()
    return out + struct.pack(">i", -1)


class GroupHarness:
    """A group coordinator on a fake clock; `advance` moves time and fires due timers."""

    def __init__(self, **config):
        config.setdefault("initial_rebalance_delay_ms", 0)
        self.clock = FakeClock()
        self.timers = Timers()
        self.log = MemoryGroupLog()
        self.config = GroupConfig(**config)
        self.coord = GroupCoordinator(self.clock, self.timers, self.log, self.config)

    def advance(self, ms: int) -> None:
        target = self.clock.now_ms() + ms
        while True:
            nxt = self.timers.next_deadline()
            if nxt is None or nxt > target:
                break
            self.clock.advance(max(nxt - self.clock.now_ms(), 0))
            self.timers.run_due(self.clock.now_ms())
        self.clock.advance(target - self.clock.now_ms())

    def join(self, group="g", member_id="", instance_id=None, protocols=None, session=1_000_000, rebalance=30_000,
             require_known=True, client_id="client", protocol_type="consumer", skip_assignment=True):
        protocols = protocols if protocols is not None else [("range", subscription("t"))]
        return self.coord.join_group(group, member_id, instance_id, client_id, "/127.0.0.1", session, rebalance,
                                     protocol_type, protocols, require_known, skip_assignment)

    def join_new(self, group="g", **kw):
        """The KIP-394 handshake: MEMBER_ID_REQUIRED, then the join that counts (returns its Pending)."""
        first = self.join(group, **kw)
        assert first.done and first.result.error.name == "MEMBER_ID_REQUIRED"
        member_id = first.result.member_id
        assert member_id
        kw.pop("member_id", None)
        return member_id, self.join(group, member_id=member_id, **kw)

    def sync(self, group, member_id, generation, assignments=(), instance_id=None):
        return self.coord.sync_group(group, member_id, instance_id, generation, None, None, list(assignments))

    def state(self, group="g") -> str:
        return self.coord.groups[group].state.value


import pytest  # noqa: E402


@pytest.fixture
def h():
    return GroupHarness()


@pytest.fixture
def make_harness():
    return GroupHarness


@pytest.fixture
def sub():
    return subscription
