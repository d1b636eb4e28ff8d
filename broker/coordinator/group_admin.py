"""Admin views of the classic group coordinator: ListGroups, DescribeGroups, DeleteGroups.

`AdminMixin` is part of `GroupCoordinator` (which supplies `groups` and `_tombstone_group`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional

from protocol import ErrorCode

from .group import GroupState
from .group_offsets import append_error

E = ErrorCode
S = GroupState


@dataclass
class MemberDescription:
    member_id: str
    group_instance_id: Optional[str]
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol_name: str
    members: list[MemberDescription]
    error: ErrorCode = E.NONE


class AdminMixin:
    # ==== admin =======================================================================================
    def list_groups(self, states: Iterable[str] = (), types: Iterable[str] = ()
                    ) -> list[tuple[str, str, str]]:
        """(group id, protocol type, state) for live groups, filtered by state names (case-insensitive)
        and group types ('classic' is the only type this coordinator has)."""
        wanted_states = {s.lower() for s in states}
        wanted_types = {t.lower() for t in types}
        if wanted_types and "classic" not in wanted_types:
            return []
        return [(g.group_id, g.protocol_type or "", g.state.value) for g in self.groups.values()
                if g.state is not S.DEAD and (not wanted_states or g.state.value.lower() in wanted_states)]

    def describe_group(self, group_id: str) -> GroupDescription:
        if group_id is None:
            return GroupDescription(group_id, "", "", "", [], E.INVALID_GROUP_ID)
        group = self.groups.get(group_id)
        if group is None or group.state is S.DEAD:
            return GroupDescription(group_id, S.DEAD.value, "", "", [], E.GROUP_ID_NOT_FOUND)
        stable = group.state is S.STABLE
        members = [MemberDescription(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                     m.metadata_for(group.protocol_name or "") if stable else b"",
                                     m.assignment if stable else b"")
                   for m in group.members.values()]
        protocol = group.protocol_name or "" if stable else ""
        return GroupDescription(group_id, group.state.value, group.protocol_type or "", protocol, members)

    def delete_groups(self, group_ids: list[str]) -> dict[str, ErrorCode]:
        results = {}
        for group_id in group_ids:
            group = self.groups.get(group_id)
            if group_id is None:
                results[group_id] = E.INVALID_GROUP_ID
            elif group is None or group.state is S.DEAD:
                results[group_id] = E.GROUP_ID_NOT_FOUND
            elif group.state is not S.EMPTY:
                results[group_id] = E.NON_EMPTY_GROUP
            else:
                try:
                    self._tombstone_group(group, group.offset_keys())
                except Exception as exc:
                    results[group_id] = append_error(exc)
                    continue
                results[group_id] = E.NONE
        return results
