"""The classic consumer-group coordinator, as a core without I/O.

Requests come in as method calls, answers go out as values or `Pending` results, time comes from an
injected clock and advances through `Timers`, and everything durable goes to a `GroupLog`. The rules
are Kafka's (GroupMetadataManager's classic-group half): the KIP-394 member id handshake, protocol
selection by vote, the initial rebalance delay, rebalance and session timeouts, static membership
(KIP-345) and the pending-sync timeout, offsets with KIP-211 retention and transactional offsets.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Iterable, Optional

from protocol import ErrorCode

from .clock import Timers
from .group import Group, GroupState, Member
from .group_admin import AdminMixin, GroupDescription, MemberDescription
from .group_offsets import FetchedOffset, OffsetCommitItem, OffsetsMixin, append_error
from .group_migration import MigrationMixin
from .group_persistence import PersistenceMixin
from .log_records import GroupLog
from .pending import Pending

__all__ = ["GroupCoordinator", "GroupConfig", "JoinResult", "SyncResult", "OffsetCommitItem", "FetchedOffset",
           "MemberDescription", "GroupDescription", "append_error", "UNKNOWN_MEMBER_ID"]

E = ErrorCode
UNKNOWN_MEMBER_ID = ""
S = GroupState


@dataclass
class GroupConfig:
    """Kafka's broker settings for groups (names in comments), with Kafka's defaults."""
    min_session_timeout_ms: int = 6_000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms
    initial_rebalance_delay_ms: int = 3_000  # group.initial.rebalance.delay.ms
    max_size: int = 2**31 - 1  # group.max.size
    new_member_join_timeout_ms: int = 300_000  # fixed in Kafka (5 minutes)
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000  # offsets.retention.minutes
    offsets_retention_check_interval_ms: int = 600_000  # offsets.retention.check.interval.ms
    offset_metadata_max_bytes: int = 4096  # offset.metadata.max.bytes


@dataclass
class JoinResult:
    error: ErrorCode
    member_id: str = UNKNOWN_MEMBER_ID
    generation_id: int = -1
    protocol_type: Optional[str] = None
    protocol_name: Optional[str] = None
    leader: str = ""
    members: list = field(default_factory=list)  # (member id, instance id, metadata) for the leader
    skip_assignment: bool = False


@dataclass
class SyncResult:
    error: ErrorCode
    protocol_type: Optional[str] = None
    protocol_name: Optional[str] = None
    assignment: bytes = b""


class GroupCoordinator(OffsetsMixin, AdminMixin, PersistenceMixin, MigrationMixin):
    def __init__(self, clock, timers: Timers, log: GroupLog, config: GroupConfig | None = None):
        self.clock = clock
        self.timers = timers
        self.log = log
        self.config = config or GroupConfig()
        self.groups: dict[str, Group] = {}
        self._next_offset_write = 0   # numbers plain commits' writes, in append order
        self._schedule_offset_expiry()

    # ==== JoinGroup ===================================================================================
    def join_group(self, group_id: str, member_id: str, group_instance_id: Optional[str], client_id: str,
                   client_host: str, session_timeout_ms: int, rebalance_timeout_ms: int, protocol_type: str,
                   protocols: list[tuple[str, bytes]], require_known_member_id: bool,
                   supports_skip_assignment: bool = False) -> Pending[JoinResult]:
        """JoinGroup. `require_known_member_id`: v4+ (KIP-394); `supports_skip_assignment`: v9+ (KIP-814)."""
        if not group_id:
            return _done(JoinResult(E.INVALID_GROUP_ID, member_id))
        if not (self.config.min_session_timeout_ms <= session_timeout_ms <= self.config.max_session_timeout_ms):
            return _done(JoinResult(E.INVALID_SESSION_TIMEOUT, member_id))
        group = self.groups.get(group_id)
        if group is None:
            if member_id != UNKNOWN_MEMBER_ID:
                return _done(JoinResult(E.UNKNOWN_MEMBER_ID, member_id))
            group = self._new_group(group_id)
        if not self._accept_joining_member(group, member_id):
            return _done(JoinResult(E.GROUP_MAX_SIZE_REACHED, member_id))
        pending: Pending[JoinResult] = Pending()
        request = _JoinRequest(member_id, group_instance_id, client_id, client_host, session_timeout_ms,
                               rebalance_timeout_ms, protocol_type, protocols, require_known_member_id,
                               supports_skip_assignment, pending)
        if member_id == UNKNOWN_MEMBER_ID:
            self._join_new_member(group, request)
        else:
            self._join_existing_member(group, request)
        if group.state is S.EMPTY and not (group.members or group.pending_members or group.has_offsets()
                                           or group.generation_id):
            self.groups.pop(group.group_id, None)  # a join that failed at once leaves no trace
        return pending

    def _accept_joining_member(self, group: Group, member_id: str) -> bool:
        max_size = self.config.max_size
        if group.is_in(S.EMPTY, S.DEAD):
            return True
        member = group.members.get(member_id)
        if group.state is S.PREPARING_REBALANCE:
            return (member is not None and member.awaiting_join is not None) or \
                group.awaiting_join_count() < max_size
        return member is not None or len(group.members) < max_size

    def _join_new_member(self, group: Group, req: "_JoinRequest") -> None:
        if group.state is S.DEAD:
            req.pending.complete(JoinResult(E.COORDINATOR_NOT_AVAILABLE, req.member_id))
            return
        if not group.supports_protocols(req.protocol_type, req.protocols):
            req.pending.complete(JoinResult(E.INCONSISTENT_GROUP_PROTOCOL, req.member_id))
            return
        prefix = req.group_instance_id if req.group_instance_id is not None else req.client_id
        new_member_id = f"{prefix}-{uuid.uuid4()}"
        if req.group_instance_id is not None:
            existing = group.static_member_id(req.group_instance_id)
            if existing is not None:
                self._update_static_member(group, req, existing, new_member_id)
            else:
                self._add_member_and_rebalance(group, req, new_member_id)
        elif req.require_known_member_id:
            # KIP-394: hand out the id first; the member joins with it, so a retried join is not a new member
            group.pending_members.add(new_member_id)
            self._schedule_heartbeat(group, new_member_id, req.session_timeout_ms)
            req.pending.complete(JoinResult(E.MEMBER_ID_REQUIRED, new_member_id))
        else:
            self._add_member_and_rebalance(group, req, new_member_id)

    def _join_existing_member(self, group: Group, req: "_JoinRequest") -> None:
        member_id = req.member_id
        if group.state is S.DEAD:
            req.pending.complete(JoinResult(E.COORDINATOR_NOT_AVAILABLE, member_id))
            return
        if not group.supports_protocols(req.protocol_type, req.protocols):
            req.pending.complete(JoinResult(E.INCONSISTENT_GROUP_PROTOCOL, member_id))
            return
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self._add_member_and_rebalance(group, req, member_id)
            return
        error = self._validate_member(group, member_id, req.group_instance_id)
        if error is not E.NONE:
            req.pending.complete(JoinResult(error, member_id))
            return
        member = group.members[member_id]
        if group.state is S.PREPARING_REBALANCE:
            self._update_member_and_rebalance(group, member, req)
        elif group.state is S.COMPLETING_REBALANCE:
            if member.matches(req.protocols):
                # it probably missed the JoinGroup response: replay this generation's answer
                req.pending.complete(self._join_answer(group, member_id))
            else:
                self._update_member_and_rebalance(group, member, req)
        elif group.state is S.STABLE:
            if group.is_leader(member_id) or not member.matches(req.protocols):
                # a leader's join forces a rebalance (topic metadata may have changed under it)
                self._update_member_and_rebalance(group, member, req)
            else:
                req.pending.complete(self._join_answer(group, member_id, for_leader=False))
        else:
            req.pending.complete(JoinResult(E.UNKNOWN_MEMBER_ID, member_id))

    def _join_answer(self, group: Group, member_id: str, *, for_leader: bool = True,
                     skip_assignment: bool = False) -> JoinResult:
        leader = group.is_leader(member_id) and for_leader
        return JoinResult(E.NONE, member_id, group.generation_id, group.protocol_type, group.protocol_name,
                          group.leader_id or "", group.member_summaries() if leader else [], skip_assignment)

    def _add_member_and_rebalance(self, group: Group, req: "_JoinRequest", member_id: str) -> None:
        member = Member(member_id, req.group_instance_id, req.client_id, req.client_host,
                        req.rebalance_timeout_ms, req.session_timeout_ms, req.protocol_type,
                        list(req.protocols), is_new=True)
        member.awaiting_join = req.pending
        if group.state is S.PREPARING_REBALANCE and group.previous_state is S.EMPTY:
            group.new_member_added = True
        group.add(member)
        # a new member cannot heartbeat yet; bound how long its JoinGroup may linger instead
        self._schedule_heartbeat(group, member_id, self.config.new_member_join_timeout_ms)
        self._maybe_prepare_rebalance(group)

    def _update_member_and_rebalance(self, group: Group, member: Member, req: "_JoinRequest") -> None:
        self._set_member_protocols(member, req)
        if member.awaiting_join is not None and member.awaiting_join is not req.pending:
            member.awaiting_join.complete(JoinResult(E.REBALANCE_IN_PROGRESS, member.member_id))
        member.awaiting_join = req.pending
        self._maybe_prepare_rebalance(group)

    @staticmethod
    def _set_member_protocols(member: Member, req: "_JoinRequest") -> None:
        member.protocols = list(req.protocols)
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.session_timeout_ms = req.session_timeout_ms
        member.client_id, member.client_host = req.client_id, req.client_host

    def _update_static_member(self, group: Group, req: "_JoinRequest", old_member_id: str,
                              new_member_id: str) -> None:
        """A known group.instance.id rejoined with no member id: it replaces (fences) the old id."""
        old_leader = group.leader_id
        member = group.members[old_member_id]
        old_state = (member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms,
                     member.client_id, member.client_host)
        for waiting in (member.awaiting_join, member.awaiting_sync):
            if waiting is not None:
                waiting.complete(JoinResult(E.FENCED_INSTANCE_ID, old_member_id)
                                 if waiting is member.awaiting_join else SyncResult(E.FENCED_INSTANCE_ID))
        member.awaiting_join = member.awaiting_sync = None
        self.timers.cancel(("heartbeat", group.group_id, old_member_id))
        group.replace_static_member(req.group_instance_id, old_member_id, new_member_id)
        self._schedule_heartbeat(group, new_member_id, member.session_timeout_ms)
        self._set_member_protocols(member, req)
        member.awaiting_join = req.pending
        if group.state is S.STABLE:
            if group.select_protocol() == group.protocol_name:
                # same protocol next generation: no rebalance, just remember the new member id
                member.awaiting_join = None

                def revert(error: ErrorCode) -> None:
                    if group.static_members.get(req.group_instance_id) == new_member_id:
                        group.replace_static_member(req.group_instance_id, new_member_id, old_member_id)
                        (member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms,
                         member.client_id, member.client_host) = old_state
                        self.timers.cancel(("heartbeat", group.group_id, new_member_id))
                        self._schedule_heartbeat(group, old_member_id, member.session_timeout_ms)
                    req.pending.complete(JoinResult(error, UNKNOWN_MEMBER_ID))

                def answer() -> None:
                    if req.supports_skip_assignment:
                        # KIP-814: a rejoining leader learns it leads but keeps the current assignment
                        is_leader = group.is_leader(new_member_id)
                        req.pending.complete(self._join_answer(group, new_member_id, skip_assignment=is_leader))
                    else:
                        # older clients are told the old leader id, so a rejoining leader does not reassign
                        req.pending.complete(JoinResult(E.NONE, new_member_id, group.generation_id,
                                                        group.protocol_type, group.protocol_name, old_leader or ""))
                try:
                    written = self._store_group(group)
                except Exception as exc:
                    revert(append_error(exc))
                    return
                # the new member id is answered once the group record holding it commits (as Kafka)
                written.add_callback(lambda code: answer() if code is E.NONE
                                     else revert(append_error(code, group_metadata=True)))
            else:
                self._maybe_prepare_rebalance(group)
        elif group.state is S.COMPLETING_REBALANCE:
            # the leader may already be assigning to the old member id: start over
            self._prepare_rebalance(group)
        else:
            # PreparingRebalance: the new id may be the last join the phase was waiting for
            self._maybe_complete_join(group)

    # ==== rebalance ===================================================================================
    def _maybe_prepare_rebalance(self, group: Group) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group)
        else:
            self._maybe_complete_join(group)

    def _prepare_rebalance(self, group: Group) -> None:
        if group.state is S.COMPLETING_REBALANCE:
            self._reset_and_propagate_assignment(group, E.REBALANCE_IN_PROGRESS)
        self.timers.cancel(("sync", group.group_id))
        initial = group.state is S.EMPTY
        group.transition(S.PREPARING_REBALANCE, self.clock.now_ms())
        if initial:
            delay = self.config.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self._schedule_initial_join(group, delay, remaining)
        else:
            self.timers.schedule(("join", group.group_id), self.clock.now_ms() + group.rebalance_timeout_ms(),
                                 lambda: self._complete_join(group))
            self._maybe_complete_join(group)

    def _schedule_initial_join(self, group: Group, delay: int, remaining: int) -> None:
        def expire() -> None:
            if group.new_member_added and remaining > 0:
                group.new_member_added = False
                self._schedule_initial_join(group, min(self.config.initial_rebalance_delay_ms, remaining),
                                            max(remaining - delay, 0))
            else:
                self._complete_join(group)
        self.timers.schedule(("join", group.group_id), self.clock.now_ms() + delay, expire)

    def _maybe_complete_join(self, group: Group) -> None:
        # during the initial delay nobody completes the join early: more members are expected
        if group.state is S.PREPARING_REBALANCE and group.has_all_members_joined() \
                and group.previous_state is not S.EMPTY:
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        self.timers.cancel(("join", group.group_id))
        if group.state is not S.PREPARING_REBALANCE:
            return
        # a static member that has not rejoined keeps its place (KIP-345): only dynamic ones are dropped
        for member in [m for m in group.members.values() if m.awaiting_join is None and m.group_instance_id is None]:
            self._remove_member(group, member.member_id)
        if group.members and not self._elect_joined_leader(group):
            # nobody rejoined, only absent static members are left: wait another rebalance timeout
            self.timers.schedule(("join", group.group_id), self.clock.now_ms() + group.rebalance_timeout_ms(),
                                 lambda: self._complete_join(group))
            return
        now = self.clock.now_ms()
        group.generation_id += 1
        if group.members:
            group.protocol_name = group.select_protocol()
            group.transition(S.COMPLETING_REBALANCE, now)
        else:
            group.protocol_name = None
            group.transition(S.EMPTY, now)
        if group.state is S.EMPTY:
            try:
                self._store_group(group)
            except Exception:
                pass  # Kafka logs and carries on: the group stays Empty in memory
            return
        group.pending_sync = set(group.members)
        for member in list(group.members.values()):
            waiting, member.awaiting_join = member.awaiting_join, None
            member.is_new = False
            self._schedule_heartbeat(group, member.member_id, member.session_timeout_ms)
            if waiting is not None:   # an absent static member learns of the generation by rejoining
                waiting.complete(self._join_answer(group, member.member_id))
        generation = group.generation_id
        self.timers.schedule(("sync", group.group_id), now + group.rebalance_timeout_ms(),
                             lambda: self._expire_pending_sync(group, generation))

    @staticmethod
    def _elect_joined_leader(group: Group) -> bool:
        """Keep a leader that rejoined, else hand the lead to any member that did; False if none did."""
        leader = group.members.get(group.leader_id or "")
        if leader is None or leader.awaiting_join is None:
            joined = next((m.member_id for m in group.members.values() if m.awaiting_join is not None), None)
            if joined is None:
                return False
            group.leader_id = joined
        return True

    def _expire_pending_sync(self, group: Group, generation: int) -> None:
        if generation != group.generation_id or not group.is_in(S.COMPLETING_REBALANCE, S.STABLE):
            return
        if group.pending_sync:
            for member_id in list(group.pending_sync):
                self._remove_member(group, member_id)
            self._prepare_rebalance(group)

    def _reset_and_propagate_assignment(self, group: Group, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: Group, error: ErrorCode) -> None:
        for member in group.members.values():
            waiting, member.awaiting_sync = member.awaiting_sync, None
            if waiting is not None:
                waiting.complete(SyncResult(error, group.protocol_type, group.protocol_name,
                                            member.assignment if error is E.NONE else b""))
                self._schedule_heartbeat(group, member.member_id, member.session_timeout_ms)

    # ==== SyncGroup ===================================================================================
    def sync_group(self, group_id: str, member_id: str, group_instance_id: Optional[str], generation_id: int,
                   protocol_type: Optional[str], protocol_name: Optional[str],
                   assignments: Iterable[tuple[str, bytes]]) -> Pending[SyncResult]:
        group = self.groups.get(group_id)
        if not group_id:
            return _done(SyncResult(E.INVALID_GROUP_ID))
        if group is None:
            return _done(SyncResult(E.UNKNOWN_MEMBER_ID))
        if group.state is S.DEAD:
            return _done(SyncResult(E.COORDINATOR_NOT_AVAILABLE))
        error = self._validate_member(group, member_id, group_instance_id)
        if error is not E.NONE:
            return _done(SyncResult(error))
        if generation_id != group.generation_id:
            return _done(SyncResult(E.ILLEGAL_GENERATION))
        if (protocol_type is not None and protocol_type != group.protocol_type) or \
                (protocol_name is not None and protocol_name != group.protocol_name):
            return _done(SyncResult(E.INCONSISTENT_GROUP_PROTOCOL))
        if group.state is S.EMPTY:
            return _done(SyncResult(E.UNKNOWN_MEMBER_ID))
        if group.state is S.PREPARING_REBALANCE:
            return _done(SyncResult(E.REBALANCE_IN_PROGRESS))
        member = group.members[member_id]
        group.pending_sync.discard(member_id)
        if group.state is S.STABLE:
            self._schedule_heartbeat(group, member_id, member.session_timeout_ms)
            return _done(SyncResult(E.NONE, group.protocol_type, group.protocol_name, member.assignment))
        pending: Pending[SyncResult] = Pending()
        if member.awaiting_sync is not None:
            member.awaiting_sync.complete(SyncResult(E.REBALANCE_IN_PROGRESS))
        member.awaiting_sync = pending
        if group.is_leader(member_id):
            given = {mid: bytes(data) for mid, data in assignments}
            # members the leader left out get an empty assignment, never an error
            for m in group.members.values():
                m.assignment = given.get(m.member_id, b"")
            try:
                written = self._store_group(group)
            except Exception as exc:
                self._reset_and_propagate_assignment(group, append_error(exc))
                self._maybe_prepare_rebalance(group)
                return pending
            # the members hear their assignments once the group's record commits (as in Kafka)
            generation = group.generation_id
            written.add_callback(lambda code: self._assignment_written(group, generation, code))
        return pending

    def _assignment_written(self, group: Group, generation: int, code: ErrorCode) -> None:
        if group.state is not S.COMPLETING_REBALANCE or group.generation_id != generation:
            return   # a rebalance or the group's removal overtook the write: its members were answered
        if code is not E.NONE:
            self._reset_and_propagate_assignment(group, append_error(code, group_metadata=True))
            self._maybe_prepare_rebalance(group)
            return
        self._propagate_assignment(group, E.NONE)
        group.transition(S.STABLE, self.clock.now_ms())

    # ==== Heartbeat ===================================================================================
    def heartbeat(self, group_id: str, member_id: str, group_instance_id: Optional[str],
                  generation_id: int) -> ErrorCode:
        group = self.groups.get(group_id)
        if not group_id:
            return E.INVALID_GROUP_ID
        if group is None:
            return E.UNKNOWN_MEMBER_ID
        if group.state is S.DEAD:
            return E.COORDINATOR_NOT_AVAILABLE
        error = self._validate_member(group, member_id, group_instance_id)
        if error is not E.NONE:
            return error
        if generation_id != group.generation_id:
            return E.ILLEGAL_GENERATION
        if group.state is S.EMPTY:
            return E.UNKNOWN_MEMBER_ID
        member = group.members[member_id]
        self._schedule_heartbeat(group, member_id, member.session_timeout_ms)
        if group.state is S.PREPARING_REBALANCE:
            return E.REBALANCE_IN_PROGRESS
        return E.NONE

    def _schedule_heartbeat(self, group: Group, member_id: str, timeout_ms: int) -> None:
        self.timers.schedule(("heartbeat", group.group_id, member_id), self.clock.now_ms() + timeout_ms,
                             lambda: self._expire_heartbeat(group, member_id))

    def _expire_heartbeat(self, group: Group, member_id: str) -> None:
        if group.state is S.DEAD:
            return
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self._maybe_complete_join(group)
            return
        member = group.members.get(member_id)
        if member is None:
            return
        if not member.is_new and (member.awaiting_join is not None or member.awaiting_sync is not None):
            return  # members in a rebalance are answered by the rebalance's own timeouts
        self._remove_member_and_update_group(group, member_id)

    # ==== LeaveGroup ==================================================================================
    def leave_group(self, group_id: str, members: list[tuple[str, Optional[str]]]
                    ) -> tuple[ErrorCode, list[tuple[str, Optional[str], ErrorCode]]]:
        """Remove a batch of (member id, instance id); answers (top-level error, per-member errors)."""
        group = self.groups.get(group_id)
        if not group_id:
            return E.INVALID_GROUP_ID, []
        if group is None:
            return E.NONE, [(mid, iid, E.UNKNOWN_MEMBER_ID) for mid, iid in members]
        if group.state is S.DEAD:
            return E.COORDINATOR_NOT_AVAILABLE, []
        results, removed_any = [], False
        for member_id, instance_id in members:
            if instance_id is None:
                if member_id in group.pending_members:
                    group.pending_members.discard(member_id)
                    self.timers.cancel(("heartbeat", group_id, member_id))
                    results.append((member_id, None, E.NONE))
                    removed_any = True
                elif member_id not in group.members:
                    results.append((member_id, None, E.UNKNOWN_MEMBER_ID))
                else:
                    self._remove_member(group, member_id)
                    results.append((member_id, None, E.NONE))
                    removed_any = True
            else:
                existing = group.static_member_id(instance_id)
                if existing is None:
                    results.append((member_id, instance_id, E.UNKNOWN_MEMBER_ID))
                elif member_id != UNKNOWN_MEMBER_ID and member_id != existing:
                    results.append((member_id, instance_id, E.FENCED_INSTANCE_ID))
                else:
                    self._remove_member(group, existing)
                    results.append((member_id, instance_id, E.NONE))
                    removed_any = True
        if removed_any:
            self._after_member_removal(group)
        return E.NONE, results

    def _remove_member(self, group: Group, member_id: str) -> None:
        member = group.remove(member_id)
        self.timers.cancel(("heartbeat", group.group_id, member_id))
        if member is None:
            return
        # nobody may be left hanging: a removed member's outstanding requests are answered now
        if member.awaiting_join is not None:
            member.awaiting_join.complete(JoinResult(E.UNKNOWN_MEMBER_ID, member_id))
        if member.awaiting_sync is not None:
            member.awaiting_sync.complete(SyncResult(E.UNKNOWN_MEMBER_ID))
        member.awaiting_join = member.awaiting_sync = None

    def _remove_member_and_update_group(self, group: Group, member_id: str) -> None:
        self._remove_member(group, member_id)
        self._after_member_removal(group)

    def _after_member_removal(self, group: Group) -> None:
        if group.is_in(S.STABLE, S.COMPLETING_REBALANCE):
            self._prepare_rebalance(group)
        elif group.state is S.PREPARING_REBALANCE:
            self._maybe_complete_join(group)

    def _validate_member(self, group: Group, member_id: str, instance_id: Optional[str]) -> ErrorCode:
        if instance_id is not None:
            existing = group.static_member_id(instance_id)
            if existing is None:
                return E.UNKNOWN_MEMBER_ID
            if existing != member_id:
                return E.FENCED_INSTANCE_ID
            return E.NONE
        return E.NONE if member_id in group.members else E.UNKNOWN_MEMBER_ID

    # ==== leaving a partition ========================================================================
    def unload(self, group_ids: Iterable[str]) -> None:
        """This broker stopped coordinating these groups (their offsets partition moved): forget them,
        answering their waiting joins and syncs with NOT_COORDINATOR so the members look again."""
        for group_id in list(group_ids):
            group = self.groups.pop(group_id, None)
            if group is None:
                continue
            self._stop_members(group, E.NOT_COORDINATOR)
            group.state = S.DEAD

    def answer_waiting_members(self) -> None:
        """The broker is shutting down: answer every waiting join and sync with NOT_COORDINATOR, as
        `unload` does, so draining does not wait out a rebalance (the members look again elsewhere)."""
        for group in self.groups.values():
            self._stop_members(group, E.NOT_COORDINATOR)

    def _stop_members(self, group: Group, error: E) -> None:
        """Stop the group's timers and answer every waiting join and sync with `error`."""
        for key in (("join", group.group_id), ("sync", group.group_id)):
            self.timers.cancel(key)
        for member_id in list(group.members) + list(group.pending_members):
            self.timers.cancel(("heartbeat", group.group_id, member_id))
        for member in group.members.values():
            waiting_join, waiting_sync = member.awaiting_join, member.awaiting_sync
            member.awaiting_join = member.awaiting_sync = None
            if waiting_join is not None:
                waiting_join.complete(JoinResult(error, member.member_id))
            if waiting_sync is not None:
                waiting_sync.complete(SyncResult(error))


@dataclass
class _JoinRequest:
    member_id: str
    group_instance_id: Optional[str]
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list
    require_known_member_id: bool
    supports_skip_assignment: bool
    pending: Pending


def _done(result) -> Pending:
    return Pending.completed(result)
