"""Classic-protocol members of a consumer group (KIP-848 online migration, Kafka's
classicGroup*ToConsumerGroup): consumers that still speak JoinGroup/SyncGroup/Heartbeat/LeaveGroup
while they share a consumer group with ConsumerGroupHeartbeat members.

The coordinator drives them: a JoinGroup is one reconciliation step (the member's owned partitions
come from its subscription), its generation is the member epoch, and SyncGroup answers the member's
assigned partitions, computed on the broker (the client never leads: the leader id is empty). A
heartbeat answers REBALANCE_IN_PROGRESS when the member must rejoin: the group epoch moved past it,
it has partitions to give up, or the partitions it waits for are free now. A classic member gives a
partition up by leaving it out of its next JoinGroup, so no partition has two owners here either.

`ClassicMembersMixin` is part of `ConsumerGroupCoordinator` (which supplies `groups`, `config`,
`classic`, `topics`, `timers`, `clock`, `_advance`, `fence` and the session timers).
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Optional

from protocol import DecodeError, ErrorCode
from protocol.consumer_protocol import Assignment as ProtocolAssignment, decode_subscription, encode_assignment

from ..group import CONSUMER_PROTOCOL_TYPE
from ..group_coordinator import JoinResult, SyncResult
from .migration import downgrade_allowed
from .model import ClassicMetadata, ConsumerGroup, ConsumerMember, MemberState, Refused, normalize

E = ErrorCode
UNKNOWN_MEMBER_ID = ""


class ClassicMembersMixin:
    def hosts_classic_requests(self, group_id: str, joining: bool = False) -> bool:
        """Classic group requests for this id go here: a KIP-848 consumer group holds it (with members,
        for a JoinGroup: an empty one gives way to a classic group) and no classic group with members."""
        group = self.groups.get(group_id)
        if group is None or (joining and not group.members):
            return False
        classic = None if self.classic is None else self.classic.groups.get(group_id)
        return classic is None or not (classic.members or classic.pending_members)

    # ==== JoinGroup ===================================================================================
    def classic_join(self, group_id: str, member_id: str, instance_id: Optional[str], client_id: str,
                     client_host: str, session_timeout_ms: int, rebalance_timeout_ms: int, protocol_type: str,
                     protocols: list[tuple[str, bytes]], require_known_member_id: bool) -> JoinResult:
        group = self.groups[group_id]
        limits = self.classic.config
        if not (limits.min_session_timeout_ms <= session_timeout_ms <= limits.max_session_timeout_ms):
            return JoinResult(E.INVALID_SESSION_TIMEOUT, member_id)
        unknown = member_id == UNKNOWN_MEMBER_ID
        if unknown:
            member_id = f"{instance_id if instance_id is not None else client_id}-{uuid.uuid4()}"
        if len(group.members) >= self.config.max_size and member_id not in group.members:
            return JoinResult(E.GROUP_MAX_SIZE_REACHED, member_id)
        if not _supports(group, member_id, protocol_type, protocols):
            return JoinResult(E.INCONSISTENT_GROUP_PROTOCOL, member_id)
        if unknown and require_known_member_id and instance_id is None:
            # KIP-394: the member joins again with this id; nothing changes until it does
            return JoinResult(E.MEMBER_ID_REQUIRED, member_id)
        try:
            _, subscription = decode_subscription(bytes(protocols[0][1]))
        except DecodeError:
            return JoinResult(E.INCONSISTENT_GROUP_PROTOCOL, member_id)
        member, replaced = group.members.get(member_id), None
        if instance_id is not None:
            static = group.static_member(instance_id)
            if static is not None and static.member_id != member_id:
                if not unknown:
                    return JoinResult(E.FENCED_INSTANCE_ID, member_id)
                # the instance restarted: the new member id takes over what the old one held
                member = dataclasses.replace(static, member_id=member_id, member_epoch=0, previous_member_epoch=-1)
                replaced = static.member_id
        if member is None:
            member = ConsumerMember(member_id, instance_id=instance_id)
        elif member.classic is None and replaced is None:
            return JoinResult(E.UNKNOWN_MEMBER_ID, member_id)   # a consumer-protocol member's id
        topics = self.topics()
        updated = dataclasses.replace(
            member, instance_id=instance_id if instance_id is not None else member.instance_id,
            rack_id=subscription.rack_id, client_id=client_id, client_host=client_host,
            subscribed_topic_names=tuple(sorted(subscription.topics)), subscribed_topic_regex=None,
            server_assignor=None, rebalance_timeout_ms=rebalance_timeout_ms,
            classic=ClassicMetadata(session_timeout_ms, tuple((n, bytes(m)) for n, m in protocols)))
        # what the client still consumes: the partitions its subscription says it owns (an eager
        # client has revoked everything before it joins)
        owned: dict = {}
        for tp in subscription.owned_partitions or ():
            if tp.topic in topics and tp.partitions:
                topic_id = topics[tp.topic][0]
                owned[topic_id] = owned.get(topic_id, frozenset()) | frozenset(tp.partitions)
        if member_id not in group.members and replaced is None:
            owned = {}
        try:
            reconciled, _ = self._advance(group, member, updated, replaced, owned)
        except Refused as refused:             # the write failed
            return JoinResult(refused.code, member_id)
        self.timers.cancel(("cg-join", group_id, member_id))
        self._schedule_sync_timeout(group_id, member_id, rebalance_timeout_ms)
        if replaced is not None and downgrade_allowed(self.groups[group_id], None, self.config.downgrade_enabled(),
                                                      self.config.classic_max_size):
            # it replaced the last consumer-protocol member: the group is a classic group again
            self._downgrade(self.groups[group_id], None, rebalance=False)
        return JoinResult(E.NONE, member_id, reconciled.member_epoch, CONSUMER_PROTOCOL_TYPE, protocols[0][0],
                          "", [])

    # ==== SyncGroup ===================================================================================
    def classic_sync(self, group_id: str, member_id: str, instance_id: Optional[str], generation_id: int,
                     protocol_type: Optional[str], protocol_name: Optional[str]) -> SyncResult:
        group = self.groups.get(group_id)
        member, error = self._classic_member(group, member_id, instance_id)
        if error is not E.NONE:
            return SyncResult(error)
        if generation_id != member.member_epoch:
            return SyncResult(E.ILLEGAL_GENERATION)
        chosen = member.classic.protocols[0][0]
        if (protocol_type is not None and protocol_type != CONSUMER_PROTOCOL_TYPE) or \
                (protocol_name is not None and protocol_name != chosen):
            return SyncResult(E.INCONSISTENT_GROUP_PROTOCOL)
        if group.group_epoch > member.member_epoch and member.state is not MemberState.UNREVOKED_PARTITIONS:
            # a newer epoch came while it joined: catch up first (one revoking finishes its step)
            self._schedule_join_timeout(group_id, member)
            return SyncResult(E.REBALANCE_IN_PROGRESS)
        self.timers.cancel(("cg-sync", group_id, member_id))
        self._schedule_session(group_id, member_id)
        return SyncResult(E.NONE, CONSUMER_PROTOCOL_TYPE, chosen, self._encoded_assignment(member))

    def _encoded_assignment(self, member: ConsumerMember) -> bytes:
        names = {topic_id: name for name, (topic_id, _) in self.topics().items()}
        return encode_assignment(ProtocolAssignment(assigned_partitions=[
            ProtocolAssignment.TopicPartition(topic=names[t], partitions=sorted(p))
            for t, p in sorted(normalize(member.assigned).items(), key=lambda kv: str(kv[0])) if t in names]))

    # ==== Heartbeat ===================================================================================
    def classic_heartbeat(self, group_id: str, member_id: str, instance_id: Optional[str],
                          generation_id: int) -> ErrorCode:
        group = self.groups.get(group_id)
        member, error = self._classic_member(group, member_id, instance_id)
        if error is not E.NONE:
            return error
        if generation_id != member.member_epoch:
            return E.ILLEGAL_GENERATION
        self._schedule_session(group_id, member_id)
        if member.member_epoch < group.group_epoch or member.state is MemberState.UNREVOKED_PARTITIONS or (
                member.state is MemberState.UNRELEASED_PARTITIONS and not _waits_for_others(group, member)):
            self._schedule_join_timeout(group_id, member)
            return E.REBALANCE_IN_PROGRESS
        return E.NONE

    # ==== LeaveGroup ==================================================================================
    def classic_leave(self, group_id: str, members: list[tuple[str, Optional[str]]]
                      ) -> tuple[ErrorCode, list[tuple[str, Optional[str], ErrorCode]]]:
        group = self.groups.get(group_id)
        results = []
        for member_id, instance_id in members:
            if group is None:
                results.append((member_id, instance_id, E.UNKNOWN_MEMBER_ID))
                continue
            if instance_id is not None:
                static = group.static_member(instance_id)
                if static is None:
                    results.append((member_id, instance_id, E.UNKNOWN_MEMBER_ID))
                    continue
                if member_id != UNKNOWN_MEMBER_ID and member_id != static.member_id:
                    results.append((member_id, instance_id, E.FENCED_INSTANCE_ID))
                    continue
                member_id_to_fence = static.member_id
            else:
                member_id_to_fence = member_id
            results.append((member_id, instance_id, self.fence(group_id, member_id_to_fence)))
            group = self.groups.get(group_id)    # a downgrade may have made it a classic group
        return E.NONE, results

    # ---- shared ------------------------------------------------------------------------------------
    def _classic_member(self, group: Optional[ConsumerGroup], member_id: str, instance_id: Optional[str]
                        ) -> tuple[Optional[ConsumerMember], ErrorCode]:
        if group is None or not group.members:
            return None, E.UNKNOWN_MEMBER_ID
        if instance_id is not None:
            member = group.static_member(instance_id)
            if member is None:
                return None, E.UNKNOWN_MEMBER_ID
            if member.member_id != member_id:
                return None, E.FENCED_INSTANCE_ID
        else:
            member = group.members.get(member_id)
        if member is None or member.classic is None:
            return None, E.UNKNOWN_MEMBER_ID
        return member, E.NONE

    def _schedule_sync_timeout(self, group_id: str, member_id: str, timeout_ms: int) -> None:
        """A classic member that joined must sync within its rebalance timeout, or it is fenced."""
        def expire() -> None:
            group = self.groups.get(group_id)
            if group is not None and member_id in group.members:
                self.fence(group_id, member_id)
        self.timers.schedule(("cg-sync", group_id, member_id), self.clock.now_ms() + timeout_ms, expire)

    def _schedule_join_timeout(self, group_id: str, member: ConsumerMember) -> None:
        """A classic member told to rejoin must do so within its rebalance timeout, or it is fenced."""
        key = ("cg-join", group_id, member.member_id)
        if self.timers.is_scheduled(key):
            return
        epoch = member.member_epoch

        def expire() -> None:
            group = self.groups.get(group_id)
            current = None if group is None else group.members.get(member.member_id)
            if current is not None and current.member_epoch == epoch:
                self.fence(group_id, member.member_id)
        self.timers.schedule(key, self.clock.now_ms() + member.rebalance_timeout_ms, expire)


def _supports(group: ConsumerGroup, member_id: str, protocol_type: str, protocols: list) -> bool:
    """The consumer protocol type, and one protocol every other classic member supports too."""
    if protocol_type != CONSUMER_PROTOCOL_TYPE or not protocols:
        return False
    others = [m.classic for mid, m in group.members.items() if m.classic is not None and mid != member_id]
    return not others or any(all(name in c.protocol_names() for c in others) for name, _ in protocols)


def _waits_for_others(group: ConsumerGroup, member: ConsumerMember) -> bool:
    """Some partition of its target is still owned by another member."""
    for topic_id, partitions in group.target.get(member.member_id, {}).items():
        for p in partitions:
            owner = group.owner(topic_id, p)
            if owner is not None and owner != member.member_id:
                return True
    return False
