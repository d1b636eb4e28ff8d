"""KIP-848 online migration: a classic group becomes a consumer group when the first
ConsumerGroupHeartbeat member joins it (upgrade), and a consumer group whose last consumer-protocol
member leaves goes back to a classic group (downgrade), as `group.consumer.migration.policy` allows.

Both directions keep every member and what it consumes: an upgraded classic member stays in the
consumer group as a classic-protocol member (`ConsumerMember.classic`) at the classic generation
with the partitions of its last SyncGroup; a downgraded group is a classic group at the consumer
group's epoch whose members hold their current assignments, and a rebalance starts at once. The
records are Kafka's: a conversion writes the old group's tombstones and the new group's records in
one batch, so a coordinator that loads the partition finds the group as it was converted.
"""

from __future__ import annotations

import logging
import uuid
from typing import Mapping, Optional

from protocol import DecodeError
from protocol.consumer_protocol import Assignment as ProtocolAssignment, decode_assignment, \
    decode_subscription, encode_assignment

from protocol import ErrorCode

from ..group import CONSUMER_PROTOCOL_TYPE, Group, GroupState, Member
from ..group_offsets import append_error
from ..log_records import GroupMetadataRecord
from . import records as R
from .model import ClassicMetadata, ConsumerGroup, ConsumerMember, MemberState, Refused

E = ErrorCode
log = logging.getLogger(__name__)

TopicsView = Mapping[str, tuple[uuid.UUID, int]]   # topic name -> (topic id, partition count)


class MigrationMixin:
    """Part of `ConsumerGroupCoordinator` (which supplies `groups`, `log`, `config`, `classic`, `topics`,
    `clock`, `loaded` and `_cancel_timers`)."""

    def _upgrade(self, classic) -> ConsumerGroup:
        """A classic group with members becomes a consumer group for a joining consumer-protocol
        member: its members stay, as classic-protocol members with their current partitions."""
        gid = classic.group_id
        not_consumer = f"Group {gid} is not a consumer group."      # Kafka's answer; the reason is logged
        refusal = upgrade_refusal(classic, self.config.upgrade_enabled(), self.config.max_size)
        if refusal is not None:
            log.info(refusal)
            raise Refused(E.GROUP_ID_NOT_FOUND, not_consumer)
        topics = self.topics()
        try:
            records = consumer_records_from_classic(classic, topics)
        except NotConvertible as exc:
            raise Refused(E.GROUP_ID_NOT_FOUND, str(exc)) from exc
        try:
            self.log.append(gid, [GroupMetadataRecord(gid, None)] + records)
        except Exception as exc:
            raise Refused(append_error(exc), None) from exc
        self.classic.hand_over_to_consumer(gid)
        for record in records:
            R.apply(self.groups, record)
        group = self.groups[gid]
        group.state_timestamp = self.clock.now_ms()
        self.loaded([gid])     # subscriptions as of now, every member's session running
        log.info("upgraded classic group %s to a consumer group (%d classic members)", gid, len(group.members))
        return group

    def _downgrade(self, group: ConsumerGroup, leaving: Optional[str], rebalance: bool = True) -> ErrorCode:
        """The last consumer-protocol member left (or a classic static member replaced it): the classic
        members carry on as a classic group at the group epoch, holding their partitions, and
        rebalance at once (not after a replacement: the group is as it was)."""
        gid = group.group_id
        classic = downgraded_group(gid, group.group_epoch,
                                   classic_members_from_consumer(group, leaving, self.topics()), self.clock.now_ms())
        tombstones = consumer_group_tombstones(group)
        try:
            self.log.append(gid, tombstones + [GroupMetadataRecord(gid, self.classic.snapshot(classic))])
        except Exception as exc:
            return append_error(exc)
        for member_id in list(group.members):
            self._cancel_timers(gid, member_id)
        for record in tombstones:
            R.apply(self.groups, record)
        self.groups.pop(gid, None)
        self.classic.take_over_from_consumer(classic, rebalance)
        log.info("downgraded consumer group %s to a classic group at generation %d", gid, classic.generation_id)
        return E.NONE


class NotConvertible(Exception):
    """The group cannot change type (Kafka answers GROUP_ID_NOT_FOUND to the heartbeat)."""


# ---- upgrade: classic -> consumer ------------------------------------------------------------------
def upgrade_refusal(classic: Group, policy_allows: bool, max_size: int) -> Optional[str]:
    """Why this classic group may not become a consumer group now (None: it may)."""
    if not policy_allows:
        return f"Cannot upgrade classic group {classic.group_id} to consumer group because the online " \
               "upgrade is disabled."
    if classic.protocol_type != CONSUMER_PROTOCOL_TYPE:
        return f"Cannot upgrade classic group {classic.group_id} to consumer group because the group does " \
               "not use the consumer embedded protocol."
    if len(classic.members) > max_size:
        return f"Cannot upgrade classic group {classic.group_id} to consumer group because the group size " \
               "exceeds the consumer group maximum size."
    return None


def consumer_records_from_classic(classic: Group, topics: TopicsView) -> list:
    """The records of the consumer group a classic group becomes: every member at the classic
    generation, its target and current assignment what its last SyncGroup gave it.

    One step safer than Kafka: a cooperative member may still consume what its last JoinGroup said
    it owns beyond its assignment (it lets them go only once it has its SyncGroup answer); those
    partitions stay its own, pending revocation, until it rejoins without them (a member that let
    them go already rejoins once more for nothing)."""
    gid, generation = classic.group_id, classic.generation_id
    parsed = []
    taken: set = set()
    for m in classic.members.values():
        metadata = m.metadata_for(classic.protocol_name or "") or (m.protocols[0][1] if m.protocols else b"")
        try:
            _, subscription = decode_subscription(bytes(metadata))
            assignment = _decode_assignment(m.assignment)
        except DecodeError as exc:
            raise NotConvertible(f"Cannot upgrade the classic group {gid} to consumer group because the "
                                 "embedded consumer protocol is malformed.") from exc
        # one owner per partition, whatever a half-finished rebalance left behind
        assigned = _claim(((tp.topic, p) for tp in assignment.assigned_partitions for p in tp.partitions),
                          topics, taken)
        parsed.append((m, subscription, assigned))
    members: list[ConsumerMember] = []
    for m, subscription, assigned in parsed:
        still_owned = _claim(((tp.topic, p) for tp in subscription.owned_partitions or () for p in tp.partitions),
                             topics, taken)
        members.append(ConsumerMember(
            m.member_id, instance_id=m.group_instance_id, rack_id=subscription.rack_id, client_id=m.client_id,
            client_host=m.client_host, subscribed_topic_names=tuple(sorted(subscription.topics)),
            rebalance_timeout_ms=m.rebalance_timeout_ms, member_epoch=generation, previous_member_epoch=generation,
            state=MemberState.UNREVOKED_PARTITIONS if still_owned else MemberState.STABLE, assigned=assigned,
            pending_revocation=still_owned,
            classic=ClassicMetadata(m.session_timeout_ms, tuple((n, bytes(md)) for n, md in m.protocols))))
    records = [R.member_metadata(gid, member) for member in members]
    records.append(R.group_epoch(gid, generation))
    records += [R.target_member(gid, member.member_id, member.assigned) for member in members]
    records.append(R.target_epoch(gid, generation))
    records += [R.current_assignment(gid, member) for member in members]
    return records


def _claim(partitions, topics: TopicsView, taken: set) -> dict:
    """{topic id: partitions} of the (topic name, partition) pairs nobody has taken yet; takes them."""
    out: dict = {}
    for topic, p in partitions:
        if topic in topics and (topics[topic][0], p) not in taken:
            topic_id = topics[topic][0]
            taken.add((topic_id, p))
            out[topic_id] = out.get(topic_id, frozenset()) | {p}
    return out


def _decode_assignment(data: bytes):
    # empty bytes (a member the leader gave nothing, or no sync yet) do not parse either, as in Kafka
    return decode_assignment(bytes(data))[1]


# ---- downgrade: consumer -> classic ----------------------------------------------------------------
def downgrade_allowed(group: ConsumerGroup, leaving: Optional[str], policy_allows: bool,
                      classic_max_size: int) -> bool:
    """Kafka's rule: the member leaving is the last one on the consumer protocol (None: one was just
    replaced by a classic static member), others remain, the policy allows it, and the rest fits a
    classic group."""
    others = [m for mid, m in group.members.items() if mid != leaving]
    return bool(others) and (leaving is None or leaving in group.members) \
        and all(m.classic is not None for m in others) and policy_allows and len(others) <= classic_max_size


def consumer_group_tombstones(group: ConsumerGroup) -> list:
    gid = group.group_id
    records: list = []
    for member_id in group.members:
        records += [R.current_tombstone(gid, member_id), R.target_member_tombstone(gid, member_id),
                    R.member_tombstone(gid, member_id)]
    return records + [R.target_tombstone(gid), R.group_tombstone(gid)]


def classic_members_from_consumer(group: ConsumerGroup, leaving: Optional[str], topics: TopicsView) -> list[Member]:
    """The classic members a downgraded group keeps: their protocols, and their current partitions as
    the SyncGroup assignment they hold."""
    names = {topic_id: name for name, (topic_id, _) in topics.items()}
    members = []
    for m in group.members.values():
        if m.member_id == leaving or m.classic is None:
            continue
        assignment = ProtocolAssignment(assigned_partitions=[
            ProtocolAssignment.TopicPartition(topic=names[t], partitions=sorted(p))
            for t, p in sorted(m.assigned.items(), key=lambda kv: str(kv[0])) if t in names and p])
        members.append(Member(m.member_id, m.instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                              m.classic.session_timeout_ms, CONSUMER_PROTOCOL_TYPE, list(m.classic.protocols),
                              assignment=encode_assignment(assignment)))
    return members


def downgraded_group(group_id: str, generation: int, members: list[Member], now_ms: int) -> Group:
    classic = Group(group_id, state=GroupState.STABLE, previous_state=GroupState.STABLE, state_timestamp=now_ms,
                    generation_id=generation)
    for member in members:
        classic.add(member)
    classic.protocol_name = classic.select_protocol()
    return classic
