"""The classic group coordinator's persistence: the group snapshot it writes to `__consumer_offsets`,
rebuilding groups from those records when a partition loads, and the tombstones of a group that is gone.

`PersistenceMixin` is part of `GroupCoordinator` (which supplies `groups`, `log`, `clock`, `timers`
and `_schedule_heartbeat`); kept apart so each module has one job.
"""

from __future__ import annotations

from typing import Iterable, Optional

from .group import Group, GroupState, Member
from .group_migration import clear_membership
from .log_records import GroupMetadataRecord, GroupSnapshot, MemberSnapshot, OffsetCommitRecord

S = GroupState


class PersistenceMixin:
    def _tombstone_group(self, group: Group, offsets: list[tuple[str, int]]) -> None:
        records = [OffsetCommitRecord(group.group_id, t, p, None) for t, p in offsets]
        records.append(GroupMetadataRecord(group.group_id, None))
        self.log.append(group.group_id, records)
        group.transition(S.DEAD, self.clock.now_ms())
        self.groups.pop(group.group_id, None)
        for key in [("join", group.group_id), ("sync", group.group_id)]:
            self.timers.cancel(key)

    # ==== persistence =================================================================================
    def _new_group(self, group_id: str) -> Group:
        group = Group(group_id, state_timestamp=self.clock.now_ms())
        self.groups[group_id] = group
        return group

    def _store_group(self, group: Group):
        """Write the group's snapshot; answers the write's acknowledgement."""
        return self.log.append(group.group_id, [GroupMetadataRecord(group.group_id, self.snapshot(group))])

    @staticmethod
    def snapshot(group: Group) -> GroupSnapshot:
        protocol = group.protocol_name or ""
        members = tuple(MemberSnapshot(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                       m.rebalance_timeout_ms, m.session_timeout_ms, m.metadata_for(protocol),
                                       m.assignment)
                        for m in group.members.values())
        return GroupSnapshot(group.protocol_type or "", group.generation_id, group.protocol_name,
                             group.leader_id, group.state_timestamp, members)

    def load(self, records: Iterable) -> None:
        """Rebuild from `__consumer_offsets` records (replayed in log order); the latest record per key
        wins and tombstones delete. Call `loaded()` after the last one."""
        for record in records:
            self.replay(record)

    def replay(self, record, producer_id: int = -1) -> None:
        if isinstance(record, OffsetCommitRecord):
            group = self.groups.get(record.group_id) or self._new_group(record.group_id)
            key = (record.topic, record.partition)
            if producer_id >= 0:
                if record.value is not None:
                    group.pending_txn_offsets.setdefault(producer_id, {})[key] = record.value
            elif record.value is None:
                group.offsets.pop(key, None)
            else:
                group.offsets[key] = record.value
        elif isinstance(record, GroupMetadataRecord):
            if record.value is None:
                group = self.groups.get(record.group_id)
                if group is not None and group.members:
                    # only an empty group is deleted: one with members became a consumer group (KIP-848
                    # online upgrade), its membership goes and its offsets stay
                    clear_membership(group)
                else:
                    self.groups.pop(record.group_id, None)
                return
            group = self.groups.get(record.group_id) or self._new_group(record.group_id)
            self._restore(group, record.value)

    def _restore(self, group: Group, snap: GroupSnapshot) -> None:
        group.members.clear()
        group.static_members.clear()
        group.leader_id = None
        group.generation_id = snap.generation_id
        group.protocol_type = snap.protocol_type or None
        group.protocol_name = snap.protocol_name
        group.state_timestamp = snap.state_timestamp
        for m in snap.members:
            member = Member(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                            m.rebalance_timeout_ms, m.session_timeout_ms, snap.protocol_type,
                            [(snap.protocol_name or "", m.subscription)], m.assignment)
            group.add(member)
        group.leader_id = snap.leader_id if snap.leader_id in group.members else group.leader_id
        group.protocol_type = snap.protocol_type or None
        group.state = S.STABLE if group.members else S.EMPTY
        group.previous_state = group.state

    def loaded(self, group_ids: Optional[Iterable[str]] = None) -> None:
        """After replay (of every group, or of `group_ids`): loaded members must heartbeat within
        their session timeout or be removed."""
        wanted = self.groups.values() if group_ids is None else \
            [self.groups[g] for g in group_ids if g in self.groups]
        for group in wanted:
            for member in group.members.values():
                self._schedule_heartbeat(group, member.member_id, member.session_timeout_ms)
