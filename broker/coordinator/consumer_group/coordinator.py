"""The KIP-848 consumer group coordinator, as a core without I/O (Kafka's GroupMetadataManager, its
consumer-group half).

A heartbeat updates the member's subscription, bumps the group epoch when membership, subscriptions
or the subscribed topics' metadata changed, recomputes the target assignment with the server-side
assignor when the group epoch moved past it, and moves the member one step towards its target
(`reconcile.py`). Every change is written as Kafka's records (`records.py`) and only then applied, by
replaying those records. Sessions (`group.consumer.session.timeout.ms`) and revocations (the member's
rebalance timeout) run on the injected `Timers`; a member that misses either is fenced.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import re
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Optional

from protocol import ErrorCode

from ..group_offsets import append_error
from . import records as R
from .assignors import ASSIGNORS, Racks
from .classic_members import ClassicMembersMixin
from .migration import MigrationMixin, downgrade_allowed
from .model import (JOIN_EPOCH, LEAVE_EPOCH, STATIC_LEAVE_EPOCH, Assignment, ConsumerGroup, ConsumerGroupConfig,
                    ConsumerMember, MemberState, Refused, is_subset, normalize)
from .re2j import INVALID_PERL_OP, Re2jError, compile_re2j
from .reconcile import next_state

E = ErrorCode
# topic name -> (topic id, partition count), from the metadata image
TopicsView = Callable[[], Mapping[str, tuple[uuid.UUID, int]]]
# topic ids -> {(topic id, partition): racks of its replicas}, for rack-aware assignment
RacksView = Callable[[Iterable[uuid.UUID]], Mapping[tuple, frozenset]]


@dataclass
class HeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: Optional[str] = None
    rack_id: Optional[str] = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: Optional[list[str]] = None
    subscribed_topic_regex: Optional[str] = None
    server_assignor: Optional[str] = None
    owned: Optional[Assignment] = None      # None: unchanged since the last heartbeat
    client_id: str = ""
    client_host: str = ""
    version: int = 1


@dataclass
class HeartbeatResult:
    error: ErrorCode
    message: Optional[str] = None
    member_id: Optional[str] = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Optional[dict] = None       # None: unchanged, the client keeps what it has


class ConsumerGroupCoordinator(ClassicMembersMixin, MigrationMixin):
    def __init__(self, clock, timers, log, config: ConsumerGroupConfig | None = None,
                 topics: TopicsView = lambda: {}, classic_busy: Callable[[str], bool] = lambda g: False,
                 partition_racks: RacksView = lambda topic_ids: {}):
        self.clock = clock
        self.timers = timers
        self.log = log
        self.config = config or ConsumerGroupConfig()
        self.topics = topics
        self.classic_busy = classic_busy     # group id -> a classic group with members holds the id
        self.partition_racks = partition_racks
        self.groups: dict[str, ConsumerGroup] = {}
        self.classic = None   # the classic GroupCoordinator: online migration moves groups between us

    # ==== ConsumerGroupHeartbeat =======================================================================
    def heartbeat(self, req: HeartbeatRequest) -> HeartbeatResult:
        invalid = self._invalid(req)
        if invalid:
            return HeartbeatResult(E.INVALID_REQUEST, invalid)
        if req.server_assignor is not None and req.server_assignor not in self.config.assignors:
            return HeartbeatResult(E.UNSUPPORTED_ASSIGNOR, f"ServerAssignor {req.server_assignor} is not supported. "
                                   f"Supported assignors: {', '.join(self.config.assignors)}.")
        if req.subscribed_topic_regex:
            try:
                _compiled(req.subscribed_topic_regex)
            except (Re2jError, re.error) as exc:
                description = exc.description if isinstance(exc, Re2jError) else INVALID_PERL_OP
                return HeartbeatResult(E.INVALID_REGULAR_EXPRESSION, f"SubscribedTopicRegex "
                                       f"`{req.subscribed_topic_regex}` is not a valid regular expression: "
                                       f"{description}.")
        if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(req)
        group = self.groups.get(req.group_id)
        classic = None if group is not None or self.classic is None else self.classic.groups.get(req.group_id)
        if classic is not None and classic.members and req.member_epoch == JOIN_EPOCH:
            try:
                group = self._upgrade(classic)
            except _Refused as refused:
                return HeartbeatResult(refused.code, refused.message)
        if group is None:
            if self.classic_busy(req.group_id):
                return HeartbeatResult(E.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a consumer group.")
            if req.member_epoch != JOIN_EPOCH:
                return HeartbeatResult(E.GROUP_ID_NOT_FOUND, f"Consumer group {req.group_id} not found.")
            group = ConsumerGroup(req.group_id, state_timestamp=self.clock.now_ms())
        try:
            member, replaced = self._member_for(group, req)
        except _Refused as refused:
            return HeartbeatResult(refused.code, refused.message)
        return self._update(group, member, replaced, req)

    def _invalid(self, req: HeartbeatRequest) -> Optional[str]:
        """Kafka's request checks (INVALID_REQUEST) before anything is looked up."""
        if not req.group_id:
            return "GroupId can't be empty."
        if req.instance_id is not None and not req.instance_id:
            return "InstanceId can't be empty."
        if req.version >= 1 and not req.member_id:
            return "MemberId can't be empty."
        if req.member_epoch == JOIN_EPOCH:
            if req.rebalance_timeout_ms == -1:
                return "RebalanceTimeoutMs must be provided in first request."
            if req.owned is None or req.owned:       # a join states it owns nothing (Kafka: not null)
                return "TopicPartitions must be empty when (re-)joining."
            if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
                return "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
        elif req.member_epoch == STATIC_LEAVE_EPOCH and req.instance_id is None:
            return "InstanceId can't be null."
        elif req.member_epoch < STATIC_LEAVE_EPOCH:
            return "MemberEpoch is invalid."
        if req.member_epoch != JOIN_EPOCH and not req.member_id:
            return "MemberId can't be empty."
        return None

    def _member_for(self, group: ConsumerGroup, req: HeartbeatRequest) -> tuple[ConsumerMember, Optional[str]]:
        """The member this heartbeat speaks for (new ones are not in the group yet), and the member id
        it replaces (a static member rejoining under a new id)."""
        if req.member_epoch == JOIN_EPOCH:
            member_id = req.member_id or _new_member_id()
            static = group.static_member(req.instance_id)
            if static is not None and static.member_id != member_id:
                if static.member_epoch != STATIC_LEAVE_EPOCH:
                    raise _Refused(E.UNRELEASED_INSTANCE_ID,
                                   f"Static member {static.member_id} with instance id {req.instance_id} "
                                   "is not released yet.")
                # the instance comes back under a new member id: it takes over what the old one had
                return dataclasses.replace(static, member_id=member_id, member_epoch=JOIN_EPOCH), static.member_id
            existing = group.members.get(member_id)
            if existing is not None:
                return existing, None
            if len(group.members) >= self.config.max_size:
                raise _Refused(E.GROUP_MAX_SIZE_REACHED, f"The consumer group has reached its maximum "
                                                         f"capacity of {self.config.max_size} members.")
            return ConsumerMember(member_id, instance_id=req.instance_id), None
        if req.instance_id is not None:     # a static member is found by its instance id first, as Kafka
            owner = group.static_members.get(req.instance_id)
            if owner is None:
                raise _Refused(E.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown.")
            if owner != req.member_id:
                raise _Refused(E.FENCED_INSTANCE_ID, _fenced_instance(req, owner))
        member = group.members.get(req.member_id)
        if member is None:
            raise _Refused(E.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group {group.group_id}.")
        if req.member_epoch > member.member_epoch:
            raise _Refused(E.FENCED_MEMBER_EPOCH, f"The consumer group member has a greater member epoch "
                                                  f"({req.member_epoch}) than the one known by the group "
                                                  f"coordinator ({member.member_epoch}). The member must abandon "
                                                  "all its partitions and rejoin.")
        if req.member_epoch < member.member_epoch and (
                req.member_epoch != member.previous_member_epoch or req.owned is None
                or not is_subset(req.owned, member.assigned)):
            # an epoch bump whose answer was lost is forgiven: the previous epoch with a subset
            raise _Refused(E.FENCED_MEMBER_EPOCH, f"The consumer group member has a smaller member epoch "
                                                  f"({req.member_epoch}) than the one known by the group "
                                                  f"coordinator ({member.member_epoch}).")
        return member, None

    def _update(self, group: ConsumerGroup, member: ConsumerMember, replaced: Optional[str],
                req: HeartbeatRequest) -> HeartbeatResult:
        updated = dataclasses.replace(
            member, classic=None,     # a ConsumerGroupHeartbeat speaks the consumer protocol
            instance_id=req.instance_id if req.instance_id is not None else member.instance_id,
            rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
            client_id=req.client_id, client_host=req.client_host,
            subscribed_topic_names=tuple(req.subscribed_topic_names) if req.subscribed_topic_names is not None
            else member.subscribed_topic_names,
            subscribed_topic_regex=req.subscribed_topic_regex if req.subscribed_topic_regex is not None
            else member.subscribed_topic_regex,
            server_assignor=req.server_assignor if req.server_assignor is not None else member.server_assignor,
            rebalance_timeout_ms=req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1
            else member.rebalance_timeout_ms)
        if req.subscribed_topic_regex == "" and req.version >= 1:
            updated.subscribed_topic_regex = None      # an empty regex clears it
        try:
            reconciled, changed = self._advance(group, member, updated, replaced, req.owned)
        except _Refused as refused:
            return HeartbeatResult(refused.code, refused.message)
        full = req.member_epoch == JOIN_EPOCH or (
            req.rebalance_timeout_ms != -1 and req.subscribed_topic_names is not None and req.owned is not None)
        return HeartbeatResult(E.NONE, None, reconciled.member_id, reconciled.member_epoch,
                               self.config.heartbeat_interval_ms,
                               normalize(reconciled.assigned) if full or changed else None)

    def _advance(self, group: ConsumerGroup, member: ConsumerMember, updated: ConsumerMember,
                 replaced: Optional[str], owned: Optional[Assignment]) -> tuple[ConsumerMember, bool]:
        """Write and apply one member's update (either protocol): its metadata, the group epoch and
        target assignment when they move, and its next step towards its target. Answers the member
        as it now is and whether its assignment changed; raises `_Refused` when the write fails."""
        gid = group.group_id
        is_new = member.member_id not in group.members and replaced is None
        records: list = []
        if replaced is not None:
            records += _removal_records(gid, replaced)
        subscription_changed = _subscription(updated) != _subscription(member)
        if is_new or replaced is not None or _metadata(updated) != _metadata(member):
            records.append(R.member_metadata(gid, updated))
        members = dict(group.members)
        members.pop(replaced or "", None)
        members[updated.member_id] = updated
        topics = self.topics()
        fingerprint = _fingerprint(members.values(), topics)
        epoch = group.group_epoch
        if is_new or subscription_changed or fingerprint != group.subscription_fingerprint:
            epoch += 1
            records.append(R.group_epoch(gid, epoch))
        assignment_epoch, target = group.assignment_epoch, dict(group.target)
        if replaced is not None:
            target[updated.member_id] = target.pop(replaced, {})
            records.append(R.target_member(gid, updated.member_id, target[updated.member_id]))
        if epoch > assignment_epoch:
            new_target = self._assign(members, topics, target)
            for member_id, assignment in new_target.items():
                if normalize(assignment) != normalize(target.get(member_id, {})) or member_id not in target:
                    records.append(R.target_member(gid, member_id, assignment))
            records.append(R.target_epoch(gid, epoch))
            assignment_epoch, target = epoch, new_target

        def owner_of(topic_id, partition):
            owner = group.owner(topic_id, partition)
            return updated.member_id if owner is not None and owner == replaced else owner

        reconciled = next_state(updated, assignment_epoch, target.get(updated.member_id, {}), owned, owner_of)
        if replaced is not None or is_new or _current(reconciled) != _current(member):
            records.append(R.current_assignment(gid, reconciled))
        # decided before the records apply (replay updates the member objects in place)
        changed = normalize(reconciled.assigned) != normalize(member.assigned) or is_new or replaced is not None
        starts_revoking = reconciled.state is MemberState.UNREVOKED_PARTITIONS and (
            member.state is not MemberState.UNREVOKED_PARTITIONS or is_new or replaced is not None)
        if records:
            try:
                self.log.append(gid, records)
            except Exception as exc:
                raise _Refused(append_error(exc), None) from exc
            for record in records:
                R.apply(self.groups, record)
        group = self.groups[gid]
        group.subscription_fingerprint = fingerprint
        if replaced is not None:
            self._cancel_timers(gid, replaced)
        self._schedule_session(gid, reconciled.member_id)
        if starts_revoking:
            self._schedule_revocation(gid, reconciled.member_id, reconciled.rebalance_timeout_ms)
        elif reconciled.state is not MemberState.UNREVOKED_PARTITIONS:
            self.timers.cancel(("cg-revoke", gid, reconciled.member_id))
        return group.members[reconciled.member_id], changed

    def _assign(self, members: Mapping[str, ConsumerMember], topics, current: Mapping[str, Assignment]) -> dict:
        subscriptions = {m.member_id: _subscribed_ids(m, topics) for m in members.values()}
        partitions = {topic_id: count for topic_id, count in topics.values()
                      if any(topic_id in s for s in subscriptions.values())}
        assignor = ASSIGNORS[self._preferred_assignor(members.values())]
        member_racks = {m.member_id: m.rack_id for m in members.values()}
        racks = Racks(member_racks, self.partition_racks(partitions) if any(member_racks.values()) else {})
        return assignor(subscriptions, partitions, current, racks)

    def _preferred_assignor(self, members: Iterable[ConsumerMember]) -> str:
        votes = Counter(m.server_assignor for m in members if m.server_assignor)
        return votes.most_common(1)[0][0] if votes else self.config.assignors[0]

    # ==== leaving and fencing ==========================================================================
    def _leave(self, req: HeartbeatRequest) -> HeartbeatResult:
        group = self.groups.get(req.group_id)
        if group is None:
            return HeartbeatResult(E.GROUP_ID_NOT_FOUND, f"Consumer group {req.group_id} not found.")
        if req.instance_id is not None:
            member = group.static_member(req.instance_id)
            if member is None:
                return HeartbeatResult(E.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown.")
            if member.member_id != req.member_id:
                return HeartbeatResult(E.FENCED_INSTANCE_ID, _fenced_instance(req, member.member_id))
            if req.member_epoch == STATIC_LEAVE_EPOCH:
                # a static member leaves for now: it keeps its partitions until its session expires
                left = dataclasses.replace(member, member_epoch=STATIC_LEAVE_EPOCH)
                try:
                    self._write(req.group_id, [R.current_assignment(req.group_id, left)])
                except Exception as exc:
                    return HeartbeatResult(append_error(exc))
                self.timers.cancel(("cg-revoke", req.group_id, member.member_id))
                return HeartbeatResult(E.NONE, None, member.member_id, STATIC_LEAVE_EPOCH)
        elif req.member_id not in group.members:
            return HeartbeatResult(E.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group "
                                                        f"{req.group_id}.")
        member_id = req.member_id if req.instance_id is None else group.static_members[req.instance_id]
        error = self.fence(req.group_id, member_id)
        return HeartbeatResult(error, None, member_id, LEAVE_EPOCH)

    def fence(self, group_id: str, member_id: str) -> ErrorCode:
        """Remove a member (it left, or missed its session or revocation deadline); the group epoch moves.
        When the last consumer-protocol member goes and classic members remain, the group goes back
        to being a classic group (as the migration policy allows)."""
        group = self.groups.get(group_id)
        if group is None or member_id not in group.members:
            return E.UNKNOWN_MEMBER_ID
        if self.classic is not None and downgrade_allowed(group, member_id, self.config.downgrade_enabled(),
                                                          self.config.classic_max_size):
            return self._downgrade(group, member_id)
        records = _removal_records(group_id, member_id) + [R.group_epoch(group_id, group.group_epoch + 1)]
        try:
            self._write(group_id, records)
        except Exception as exc:
            return append_error(exc)
        self._cancel_timers(group_id, member_id)
        return E.NONE

    def _write(self, group_id: str, records: list) -> None:
        self.log.append(group_id, records)
        for record in records:
            R.apply(self.groups, record)

    # ---- timers ------------------------------------------------------------------------------------
    def _schedule_session(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        member = None if group is None else group.members.get(member_id)
        # a classic-protocol member keeps the session timeout its JoinGroup asked for
        timeout = member.classic.session_timeout_ms if member is not None and member.classic is not None \
            else self.config.session_timeout_ms
        self.timers.schedule(("cg-session", group_id, member_id), self.clock.now_ms() + timeout,
                             lambda: self._expire(group_id, member_id))

    def _schedule_revocation(self, group_id: str, member_id: str, timeout_ms: int) -> None:
        def expire() -> None:
            group = self.groups.get(group_id)
            member = None if group is None else group.members.get(member_id)
            if member is not None and member.state is MemberState.UNREVOKED_PARTITIONS:
                self._expire(group_id, member_id)
        self.timers.schedule(("cg-revoke", group_id, member_id), self.clock.now_ms() + timeout_ms, expire)

    def _expire(self, group_id: str, member_id: str) -> None:
        if self.fence(group_id, member_id) not in (E.NONE, E.UNKNOWN_MEMBER_ID):
            self._schedule_session(group_id, member_id)   # the write failed: try again a session later

    def _cancel_timers(self, group_id: str, member_id: str) -> None:
        self.timers.cancel(("cg-session", group_id, member_id))
        self.timers.cancel(("cg-revoke", group_id, member_id))
        self.timers.cancel(("cg-join", group_id, member_id))
        self.timers.cancel(("cg-sync", group_id, member_id))

    # ==== offsets (the commits themselves are stored beside classic groups' offsets) =================
    def offset_commit_error(self, group_id: str, member_id: str, instance_id: Optional[str], member_epoch: int,
                            api_version: int, transactional: bool = False) -> Optional[ErrorCode]:
        """None when `group_id` is not a consumer group; else the error an OffsetCommit gets (NONE: allowed)."""
        group = self.groups.get(group_id)
        if group is None:
            return None
        if member_epoch < 0 and not group.members:
            return E.NONE                      # admin or assign()-style commits while nobody consumes
        if transactional and member_epoch < 0 and not member_id:
            return E.NONE
        member = group.members.get(member_id)
        if member is None:
            return E.UNKNOWN_MEMBER_ID
        if member.classic is not None:
            # a classic-protocol member commits with its generation: the member epoch
            return E.NONE if member_epoch == member.member_epoch else E.ILLEGAL_GENERATION
        if transactional:
            return E.NONE if member_epoch == member.member_epoch else E.ILLEGAL_GENERATION
        if api_version < 9:
            return E.UNSUPPORTED_VERSION       # members of consumer groups commit with OffsetCommit v9+
        if member_epoch != member.member_epoch:
            return E.STALE_MEMBER_EPOCH
        return E.NONE

    def offset_fetch_error(self, group_id: str, member_id: Optional[str], member_epoch: int) -> ErrorCode:
        group = self.groups.get(group_id)
        if group is None or (member_epoch < 0 and not member_id):
            return E.NONE
        member = group.members.get(member_id or "")
        if member is None:
            return E.UNKNOWN_MEMBER_ID
        return E.NONE if member_epoch == member.member_epoch else E.STALE_MEMBER_EPOCH

    # ==== admin =======================================================================================
    def list_groups(self, states: Iterable[str] = (), types: Iterable[str] = ()) -> list[tuple[str, str, str]]:
        wanted_states = {s.lower() for s in states}
        wanted_types = {t.lower() for t in types}
        if wanted_types and "consumer" not in wanted_types:
            return []
        rows = []
        for group in self.groups.values():
            state = group.state().value
            if not wanted_states or state.lower() in wanted_states:
                rows.append((group.group_id, "consumer", state))
        return rows

    def subscribed_topics(self, group_id: str) -> set[str]:
        """The topic names the group's members subscribe to now (their offsets cannot be deleted)."""
        group = self.groups.get(group_id)
        topics = self.topics()
        names: set[str] = set()
        for member in (group.members.values() if group is not None else ()):
            names |= _subscribed_names(member, topics)
        return names

    def is_active(self, group_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and bool(group.members)

    def describe(self, group_id: str) -> Optional[ConsumerGroup]:
        return self.groups.get(group_id)

    def assignor_name(self, group: ConsumerGroup) -> str:
        return self._preferred_assignor(group.members.values())

    def delete(self, group_id: str) -> ErrorCode:
        """DeleteGroups for a consumer group: only an empty one goes (its offsets are the caller's)."""
        group = self.groups.get(group_id)
        if group is None:
            return E.GROUP_ID_NOT_FOUND
        if group.members:
            return E.NON_EMPTY_GROUP
        try:
            self._write(group_id, [R.target_tombstone(group_id), R.group_tombstone(group_id)])
        except Exception as exc:
            return append_error(exc)
        return E.NONE

    def delete_forgotten(self, has_offsets: Callable[[str], bool]) -> None:
        """Kafka's periodic cleanup: an empty group with no committed offsets left is deleted."""
        for group_id, group in list(self.groups.items()):
            if not group.members and not has_offsets(group_id):
                self.delete(group_id)

    def yield_to_classic(self, group_id: str) -> bool:
        """A classic JoinGroup for this id: an empty consumer group gives way (as Kafka converts it);
        a non-empty one keeps it (False)."""
        group = self.groups.get(group_id)
        if group is None:
            return True
        return group.members == {} and self.delete(group_id) is E.NONE

    # ==== loading =====================================================================================
    def replay(self, record: R.GroupRecord) -> None:
        R.apply(self.groups, record)

    def loaded(self, group_ids: Optional[Iterable[str]] = None) -> None:
        """After replay: every member must heartbeat within a session; subscriptions are taken as of now."""
        wanted = list(self.groups) if group_ids is None else [g for g in group_ids if g in self.groups]
        topics = self.topics()
        for group_id in wanted:
            group = self.groups[group_id]
            group.subscription_fingerprint = _fingerprint(group.members.values(), topics)
            for member in group.members.values():
                self._schedule_session(group_id, member.member_id)
                if member.state is MemberState.UNREVOKED_PARTITIONS:
                    self._schedule_revocation(group_id, member.member_id, member.rebalance_timeout_ms)

    def unload(self, group_ids: Iterable[str]) -> None:
        for group_id in list(group_ids):
            group = self.groups.pop(group_id, None)
            if group is not None:
                for member_id in group.members:
                    self._cancel_timers(group_id, member_id)


_Refused = Refused


def _new_member_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def _removal_records(group_id: str, member_id: str) -> list:
    return [R.current_tombstone(group_id, member_id), R.target_member_tombstone(group_id, member_id),
            R.member_tombstone(group_id, member_id)]


def _subscription(m: ConsumerMember) -> tuple:
    """What the assignment depends on: a change moves the group epoch."""
    return (m.subscribed_topic_names, m.subscribed_topic_regex, m.server_assignor, m.rack_id)


def _metadata(m: ConsumerMember) -> tuple:
    return (m.instance_id, m.client_id, m.client_host, _subscription(m), m.rebalance_timeout_ms)


def _current(m: ConsumerMember) -> tuple:
    return (m.member_epoch, m.previous_member_epoch, m.state, normalize(m.assigned), normalize(m.pending_revocation))


@functools.lru_cache(maxsize=256)
def _compiled(regex: str) -> re.Pattern:
    """A subscription regex in Kafka's dialect (RE2/J), compiled once."""
    return compile_re2j(regex)


def _matches(regex: Optional[str], name: str) -> bool:
    if regex is None:
        return False
    try:
        return _compiled(regex).fullmatch(name) is not None
    except (Re2jError, re.error):
        return False


def _subscribed_names(m: ConsumerMember, topics) -> set[str]:
    names = {n for n in m.subscribed_topic_names if n in topics}
    if m.subscribed_topic_regex:
        names |= {n for n in topics if not n.startswith("__") and _matches(m.subscribed_topic_regex, n)}
    return names


def _subscribed_ids(m: ConsumerMember, topics) -> frozenset:
    return frozenset(topics[n][0] for n in _subscribed_names(m, topics))


def _fingerprint(members: Iterable[ConsumerMember], topics) -> tuple:
    """The subscribed topics' ids and partition counts: a change moves the group epoch."""
    names: set[str] = set()
    for m in members:
        names |= _subscribed_names(m, topics)
    return tuple(sorted((n, str(topics[n][0]), topics[n][1]) for n in names))


def _fenced_instance(req: HeartbeatRequest, owner: str) -> str:
    """FENCED_INSTANCE_ID's message: the static instance id belongs to another member, as Kafka words it."""
    return f"Static member {req.member_id} with instance id {req.instance_id} was fenced by member {owner}."
