"""The share group coordinator, as a core without I/O: ShareGroupHeartbeat and the views.

A heartbeat records the member's subscription, bumps the group epoch when membership, subscriptions
or the subscribed topics' metadata changed, recomputes the target assignment (`simple_assign`) when
the group epoch moved past it, and moves the member straight to its target at the assignment epoch.
Changes are written as Kafka's records first and applied by replaying them. A member that misses
`group.share.session.timeout.ms` is fenced; `on_member_removed(group, member)` then lets the
share-partitions release whatever records it still holds.
"""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Optional

from protocol import ErrorCode

from ..group_offsets import append_error
from . import records as R
from .model import JOIN_EPOCH, LEAVE_EPOCH, ShareGroup, ShareGroupConfig, ShareMember, simple_assign

E = ErrorCode
TopicsView = Callable[[], Mapping[str, tuple[uuid.UUID, int]]]


@dataclass
class ShareHeartbeat:
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: Optional[str] = None
    subscribed_topic_names: Optional[list[str]] = None
    client_id: str = ""
    client_host: str = ""


@dataclass
class ShareHeartbeatResult:
    error: ErrorCode
    message: Optional[str] = None
    member_id: Optional[str] = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Optional[dict] = None       # None: unchanged since the member last heard


class ShareGroupCoordinator:
    def __init__(self, clock, timers, log, config: ShareGroupConfig | None = None,
                 topics: TopicsView = lambda: {}, other_group: Callable[[str], bool] = lambda g: False,
                 on_member_removed: Callable[[str, str], None] = lambda g, m: None):
        self.clock = clock
        self.timers = timers
        self.log = log
        self.config = config or ShareGroupConfig()
        self.topics = topics
        self.other_group = other_group          # group id -> held by a classic or consumer group
        self.on_member_removed = on_member_removed
        self.groups: dict[str, ShareGroup] = {}

    # ==== ShareGroupHeartbeat ==========================================================================
    def heartbeat(self, req: ShareHeartbeat) -> ShareHeartbeatResult:
        if not req.group_id:
            return ShareHeartbeatResult(E.INVALID_REQUEST, "GroupId can't be empty.")
        if not req.member_id:
            return ShareHeartbeatResult(E.INVALID_REQUEST, "MemberId can't be empty.")
        if req.member_epoch < LEAVE_EPOCH:
            return ShareHeartbeatResult(E.INVALID_REQUEST, f"MemberEpoch is invalid: {req.member_epoch}.")
        if req.member_epoch == JOIN_EPOCH and not req.subscribed_topic_names:
            return ShareHeartbeatResult(E.INVALID_REQUEST, "SubscribedTopicNames must be set in first request.")
        if req.member_epoch == LEAVE_EPOCH:
            return self._leave(req)
        group = self.groups.get(req.group_id)
        if group is None:
            if self.other_group(req.group_id):
                return ShareHeartbeatResult(E.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a share group.")
            if req.member_epoch != JOIN_EPOCH:
                return ShareHeartbeatResult(E.GROUP_ID_NOT_FOUND, f"Share group {req.group_id} not found.")
            group = ShareGroup(req.group_id)
        member = group.members.get(req.member_id)
        if member is None:
            if req.member_epoch != JOIN_EPOCH:
                return ShareHeartbeatResult(E.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member "
                                                                 f"of group {req.group_id}.")
            if len(group.members) >= self.config.max_size:
                return ShareHeartbeatResult(E.GROUP_MAX_SIZE_REACHED, "The share group has reached its maximum "
                                                                      f"capacity of {self.config.max_size} members.")
            member = ShareMember(req.member_id)
        elif req.member_epoch not in (JOIN_EPOCH, member.member_epoch, member.previous_member_epoch):
            return ShareHeartbeatResult(E.FENCED_MEMBER_EPOCH, f"The share group member has epoch "
                                                               f"{req.member_epoch}, the coordinator knows "
                                                               f"{member.member_epoch}.")
        return self._update(group, member, req)

    def _update(self, group: ShareGroup, member: ShareMember, req: ShareHeartbeat) -> ShareHeartbeatResult:
        gid = group.group_id
        is_new = member.member_id not in group.members
        updated = dataclasses.replace(
            member, rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
            client_id=req.client_id, client_host=req.client_host,
            subscribed_topic_names=tuple(req.subscribed_topic_names) if req.subscribed_topic_names is not None
            else member.subscribed_topic_names)
        records = []
        if is_new or _metadata(updated) != _metadata(member):
            records.append(R.member_metadata(gid, updated))
        members = dict(group.members)
        members[updated.member_id] = updated
        topics = self.topics()
        fingerprint = _fingerprint(members.values(), topics)
        epoch = group.group_epoch
        if is_new or updated.subscribed_topic_names != member.subscribed_topic_names \
                or fingerprint != group.subscription_fingerprint:
            epoch += 1
            records.append(R.group_epoch(gid, epoch))
        target, assignment_epoch = group.target, group.assignment_epoch
        if epoch > assignment_epoch:
            subscriptions = {m.member_id: frozenset(topics[n][0] for n in m.subscribed_topic_names if n in topics)
                             for m in members.values()}
            partitions = {topics[n][0]: topics[n][1] for m in members.values()
                          for n in m.subscribed_topic_names if n in topics}
            new_target = simple_assign(subscriptions, partitions)
            for member_id, assignment in new_target.items():
                if member_id not in target or _normal(assignment) != _normal(target[member_id]):
                    records.append(R.target_member(gid, member_id, assignment))
            records.append(R.target_epoch(gid, epoch))
            target, assignment_epoch = new_target, epoch
            state_topics = _merged(group.state_topics, new_target.values())
            if state_topics != group.state_topics:
                records.append(R.state_partitions(gid, state_topics, {i: n for n, (i, _) in topics.items()}))
        reached = dataclasses.replace(updated, assigned=dict(target.get(updated.member_id, {})))
        if reached.member_epoch != assignment_epoch:
            reached.previous_member_epoch, reached.member_epoch = reached.member_epoch, assignment_epoch
        changed = is_new or _normal(reached.assigned) != _normal(member.assigned) or req.member_epoch == JOIN_EPOCH
        if changed or reached.member_epoch != member.member_epoch:
            records.append(R.current_assignment(gid, reached))
        if records:
            try:
                self._write(gid, records)
            except Exception as exc:
                return ShareHeartbeatResult(append_error(exc))
        self.groups[gid].subscription_fingerprint = fingerprint
        self._schedule_session(gid, reached.member_id)
        return ShareHeartbeatResult(E.NONE, None, reached.member_id, reached.member_epoch,
                                    self.config.heartbeat_interval_ms, _normal(reached.assigned) if changed else None)

    # ==== leaving and fencing ==========================================================================
    def _leave(self, req: ShareHeartbeat) -> ShareHeartbeatResult:
        group = self.groups.get(req.group_id)
        if group is None:
            return ShareHeartbeatResult(E.GROUP_ID_NOT_FOUND, f"Share group {req.group_id} not found.")
        if req.member_id not in group.members:
            return ShareHeartbeatResult(E.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of "
                                                             f"group {req.group_id}.")
        return ShareHeartbeatResult(self.fence(req.group_id, req.member_id), None, req.member_id, LEAVE_EPOCH)

    def fence(self, group_id: str, member_id: str) -> ErrorCode:
        group = self.groups.get(group_id)
        if group is None or member_id not in group.members:
            return E.UNKNOWN_MEMBER_ID
        try:
            self._write(group_id, R.member_removal(group_id, member_id) + [R.group_epoch(group_id, group.group_epoch + 1)])
        except Exception as exc:
            return append_error(exc)
        self.timers.cancel(("sg-session", group_id, member_id))
        self.on_member_removed(group_id, member_id)
        return E.NONE

    def _write(self, group_id: str, records: list) -> None:
        self.log.append(group_id, records)
        for record in records:
            R.apply(self.groups, record)

    def _schedule_session(self, group_id: str, member_id: str) -> None:
        def expire() -> None:
            if self.fence(group_id, member_id) not in (E.NONE, E.UNKNOWN_MEMBER_ID):
                self._schedule_session(group_id, member_id)    # the write failed: try again later
        self.timers.schedule(("sg-session", group_id, member_id),
                             self.clock.now_ms() + self.config.session_timeout_ms, expire)

    # ==== views =======================================================================================
    def is_member(self, group_id: str, member_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and member_id in group.members

    def describe(self, group_id: str) -> Optional[ShareGroup]:
        return self.groups.get(group_id)

    def list_groups(self, states: Iterable[str] = (), types: Iterable[str] = ()) -> list[tuple[str, str, str]]:
        wanted_states = {s.lower() for s in states}
        wanted_types = {t.lower() for t in types}
        if wanted_types and "share" not in wanted_types:
            return []
        return [(g.group_id, "share", g.state().value) for g in self.groups.values()
                if not wanted_states or g.state().value.lower() in wanted_states]

    def delete(self, group_id: str) -> ErrorCode:
        group = self.groups.get(group_id)
        if group is None:
            return E.GROUP_ID_NOT_FOUND
        if group.members:
            return E.NON_EMPTY_GROUP
        try:
            self._write(group_id, R.group_removal(group_id))
        except Exception as exc:
            return append_error(exc)
        return E.NONE

    # ==== admin: offsets ================================================================================
    def begin_offsets_change(self, group_id: str, create: bool) -> tuple[ErrorCode, int]:
        """Before AlterShareGroupOffsets (`create`: a missing group is created, as Kafka 4.2 does) or
        DeleteShareGroupOffsets: the group must be an empty share group. Its epoch is bumped, so the new
        share-partition state (written at that state epoch) fences leaders that hold the old one.
        Returns (error, the new group epoch)."""
        group = self.groups.get(group_id)
        if group is None:
            if self.other_group(group_id):
                return E.GROUP_ID_NOT_FOUND, -1
            if not create:
                return E.GROUP_ID_NOT_FOUND, -1
        elif group.members:
            return E.NON_EMPTY_GROUP, -1
        epoch = (0 if group is None else group.group_epoch) + 1
        try:
            self._write(group_id, [R.group_epoch(group_id, epoch)])
        except Exception as exc:
            return append_error(exc), -1
        return E.NONE, epoch

    def change_state_topics(self, group_id: str, partitions: Mapping[uuid.UUID, Iterable[int]], add: bool) -> ErrorCode:
        """Record that share-partitions of the group now may have state (offsets altered), or have
        none any more (offsets deleted)."""
        group = self.groups.get(group_id)
        if group is None:
            return E.GROUP_ID_NOT_FOUND
        if add:
            state_topics = _merged(group.state_topics, [partitions])
        else:
            state_topics = {t: p for t, p in group.state_topics.items() if t not in partitions}
        if state_topics == group.state_topics:
            return E.NONE
        try:
            self._write(group_id, [R.state_partitions(group_id, state_topics,
                                                      {i: n for n, (i, _) in self.topics().items()})])
        except Exception as exc:
            return append_error(exc)
        return E.NONE

    # ==== loading =====================================================================================
    def replay(self, record) -> None:
        R.apply(self.groups, record)

    def loaded(self, group_ids: Iterable[str]) -> None:
        topics = self.topics()
        for group_id in [g for g in group_ids if g in self.groups]:
            group = self.groups[group_id]
            group.subscription_fingerprint = _fingerprint(group.members.values(), topics)
            for member_id in group.members:
                self._schedule_session(group_id, member_id)

    def unload(self, group_ids: Iterable[str]) -> None:
        for group_id in list(group_ids):
            group = self.groups.pop(group_id, None)
            for member_id in (group.members if group is not None else ()):
                self.timers.cancel(("sg-session", group_id, member_id))


def _metadata(m: ShareMember) -> tuple:
    return (m.rack_id, m.client_id, m.client_host, m.subscribed_topic_names)


def _normal(assignment) -> dict:
    return {t: frozenset(p) for t, p in assignment.items() if p}


def _merged(state_topics, assignments) -> dict:
    merged = {t: set(p) for t, p in state_topics.items()}
    for assignment in assignments:
        for topic_id, partitions in assignment.items():
            merged.setdefault(topic_id, set()).update(partitions)
    return {t: frozenset(p) for t, p in merged.items() if p}


def _fingerprint(members: Iterable[ShareMember], topics) -> tuple:
    names = {n for m in members for n in m.subscribed_topic_names if n in topics}
    return tuple(sorted((n, str(topics[n][0]), topics[n][1]) for n in names))
