"""Moving one member towards its target assignment (Kafka's CurrentAssignmentBuilder).

Revocation comes before assignment: a member that must give partitions up stays at its epoch with
those partitions pending revocation until it reports them gone; only then does it move to the target
epoch, and a partition still owned by another member is held back (UNRELEASED_PARTITIONS) until that
member releases it. So no partition is ever owned by two members at once.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional

from .model import Assignment, ConsumerMember, MemberState, intersect, minus, normalize

OwnerOf = Callable[[object, int], Optional[str]]   # (topic id, partition) -> owning member id


def next_state(member: ConsumerMember, target_epoch: int, target: Assignment,
               reported: Optional[Assignment], owner_of: OwnerOf) -> ConsumerMember:
    """The member after this heartbeat; `reported` is what the client says it owns (None: unchanged)."""
    state = member.state
    if state is MemberState.UNREVOKED_PARTITIONS:
        if reported is not None and not intersect(reported, member.pending_revocation):
            return _compute(member, target_epoch, target, reported, owner_of)
        return member
    if state is MemberState.STABLE and member.member_epoch == target_epoch:
        return member
    return _compute(member, target_epoch, target, reported, owner_of)


def _compute(member: ConsumerMember, target_epoch: int, target: Assignment,
             reported: Optional[Assignment], owner_of: OwnerOf) -> ConsumerMember:
    target = normalize(target)
    kept = intersect(member.assigned, target)
    to_revoke = minus(member.assigned, target)
    if to_revoke and (reported is None or intersect(reported, to_revoke)):
        # give up first, at the current epoch; nothing new is handed out meanwhile
        return dataclasses.replace(member, state=MemberState.UNREVOKED_PARTITIONS, assigned=kept,
                                   pending_revocation=to_revoke)
    new_assigned = dict(kept)
    unreleased = False
    for topic_id, partitions in minus(target, kept).items():
        free = frozenset(p for p in partitions if owner_of(topic_id, p) in (None, member.member_id))
        if free:
            new_assigned[topic_id] = new_assigned.get(topic_id, frozenset()) | free
        if free != partitions:
            unreleased = True
    return dataclasses.replace(
        member, state=MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE,
        previous_member_epoch=member.member_epoch if member.member_epoch != target_epoch
        else member.previous_member_epoch,
        member_epoch=target_epoch, assigned=new_assigned, pending_revocation={})
