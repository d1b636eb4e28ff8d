"""Replay steps the KIP-848-style group types share (consumer groups in `consumer_group/`, share groups
in `share_group/`): both keep a target assignment per member and an assignment epoch per group, and
their records carry assignments as (topic id, partitions) rows."""

from __future__ import annotations

import uuid
from typing import Optional


def assignment_of(rows) -> dict[uuid.UUID, frozenset]:
    """A record's (topic id, partitions) rows as an assignment; rows without partitions dropped."""
    return {r.topic_id: frozenset(r.partitions) for r in rows or () if r.partitions}


def replay_target(group, member_id: Optional[str], value) -> None:
    """A target-assignment record: with no `member_id` the group's assignment epoch (its metadata
    record), else that member's target (None: a tombstone, the member has none any more)."""
    if member_id is None:
        if value is not None:
            group.assignment_epoch = value.assignment_epoch
    elif value is None:
        group.target.pop(member_id, None)
    else:
        group.target[member_id] = assignment_of(value.topic_partitions)
