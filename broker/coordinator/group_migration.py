"""The classic coordinator's side of KIP-848 online migration (`consumer_group/migration.py` decides
and writes the records): giving a group up to the consumer group coordinator on upgrade, and taking
a downgraded group back. A group's committed offsets stay where they are either way: the classic
coordinator keeps every group's offsets.

`MigrationMixin` is part of `GroupCoordinator` (which supplies `groups`, `timers`, `clock`,
`_schedule_heartbeat` and `_prepare_rebalance`).
"""

from __future__ import annotations

from protocol import ErrorCode

from .group import Group, GroupState

E = ErrorCode


class MigrationMixin:
    def hand_over_to_consumer(self, group_id: str) -> None:
        """The group is a consumer group now: members waiting in a rebalance hear REBALANCE_IN_PROGRESS
        (they rejoin the consumer group), timers stop, and only the offsets stay here."""
        group = self.groups.get(group_id)
        if group is None:
            return
        self._stop_members(group, E.REBALANCE_IN_PROGRESS)
        clear_membership(group)

    def take_over_from_consumer(self, downgraded: Group, rebalance: bool = True) -> None:
        """A consumer group came back as this classic group (its record is written): install it with
        the offsets kept here, and start a rebalance so every member rejoins the classic way (unless
        a static member's replacement converted it: nothing changed for the others)."""
        existing = self.groups.get(downgraded.group_id)
        if existing is not None:
            downgraded.offsets = existing.offsets
            downgraded.pending_offsets = existing.pending_offsets
            downgraded.pending_txn_offsets = existing.pending_txn_offsets
        self.groups[downgraded.group_id] = downgraded
        for member in downgraded.members.values():
            self._schedule_heartbeat(downgraded, member.member_id, member.session_timeout_ms)
        if rebalance:
            self._prepare_rebalance(downgraded)


def clear_membership(group: Group) -> None:
    """Forget members and generation, keep offsets (what a group metadata tombstone leaves)."""
    group.members.clear()
    group.pending_members.clear()
    group.pending_sync.clear()
    group.static_members.clear()
    group.leader_id = None
    group.protocol_type = group.protocol_name = None
    group.generation_id = 0
    group.state = group.previous_state = GroupState.EMPTY
