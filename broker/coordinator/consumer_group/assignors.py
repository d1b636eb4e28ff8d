"""Server-side assignors (`group.consumer.assignors`): `uniform` and `range`, as Kafka names them.

An assignor maps each member's subscribed topic ids to partitions: `assign(members, topics, current,
racks)` with members `{member id: frozenset(topic id)}`, topics `{topic id: partition count}`, the
current target `{member id: assignment}` (for stickiness) and `racks` (rack awareness, optional); it
answers `{member id: assignment}`. Every partition of a subscribed topic goes to exactly one member
subscribed to it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Mapping, Optional

from .model import Assignment

Members = Mapping[str, frozenset]


@dataclass(frozen=True)
class Racks:
    """Where members and partition replicas live: a partition prefers a member in a rack that holds
    one of its replicas (fetching from the nearest replica, KIP-392), as far as balance allows."""
    members: Mapping[str, Optional[str]] = field(default_factory=dict)          # member id -> rack
    partitions: Mapping[tuple, frozenset] = field(default_factory=dict)          # (topic id, p) -> racks

    def aware(self) -> bool:
        return any(self.members.values()) and bool(self.partitions)

    def matches(self, member_id: str, tp) -> bool:
        rack = self.members.get(member_id)
        return rack is not None and rack in self.partitions.get(tp, ())


NO_RACKS = Racks()


def uniform(members: Members, topics: Mapping[uuid.UUID, int], current: Mapping[str, Assignment],
            racks: Racks = NO_RACKS) -> dict:
    """Balanced and sticky: partitions stay with their member while that keeps the counts within one
    of each other (among members able to take them); the rest go to the least-loaded eligible member.
    Rack-aware when members and replicas have racks: a partition stays with, or goes to, a member in
    one of its replicas' racks where one can take it without unbalancing the group."""
    aware = racks.aware()

    def mismatch(member_id, tp) -> bool:
        return aware and not racks.matches(member_id, tp)

    eligible: dict[tuple[uuid.UUID, int], list[str]] = {}
    for topic_id in sorted(topics, key=str):
        subscribers = sorted(m for m, subs in members.items() if topic_id in subs)
        if subscribers:
            for p in range(topics[topic_id]):
                eligible[(topic_id, p)] = subscribers
    if not eligible:
        return {m: {} for m in members}
    owned: dict[str, set] = {m: set() for m in members}
    # the fair share if everyone could take everything; heterogeneous subscriptions balance below
    quota = -(-len(eligible) // max(len(members), 1))
    for member_id in sorted(members):
        for topic_id, partitions in current.get(member_id, {}).items():
            for p in sorted(partitions):
                tp = (topic_id, p)
                if tp in eligible and member_id in eligible[tp] and len(owned[member_id]) < quota \
                        and not any(tp in s for s in owned.values()) \
                        and not (mismatch(member_id, tp) and any(racks.matches(m, tp) for m in eligible[tp])):
                    owned[member_id].add(tp)
    taken = set().union(*owned.values())
    for tp, candidates in eligible.items():
        if tp not in taken:
            owned[min(candidates, key=lambda m: (len(owned[m]) >= quota, mismatch(m, tp), len(owned[m]), m))].add(tp)
    _balance(owned, eligible, mismatch)
    return {m: _as_assignment(tps) for m, tps in owned.items()}


def _balance(owned: dict[str, set], eligible: dict, mismatch=lambda m, tp: False) -> None:
    """Move partitions from the most to a less loaded eligible member until no move narrows the gap
    (rack-matching moves first)."""
    moved = True
    while moved:
        moved = False
        for donor in sorted(owned, key=lambda m: (-len(owned[m]), m)):
            # partitions away from their replicas' racks move first, to a rack-matching taker if any
            for tp in sorted(owned[donor], key=lambda x: (not mismatch(donor, x), str(x[0]), x[1])):
                taker = min((m for m in eligible[tp] if len(owned[m]) + 1 < len(owned[donor])),
                            key=lambda m: (mismatch(m, tp), len(owned[m]), m), default=None)
                if taker is not None:
                    owned[donor].discard(tp)
                    owned[taker].add(tp)
                    moved = True
                    break
            if moved:
                break


def range_(members: Members, topics: Mapping[uuid.UUID, int], current: Mapping[str, Assignment],
           racks: Racks = NO_RACKS) -> dict:
    """Per topic, its subscribers sorted by member id take consecutive ranges; the first
    `partitions % subscribers` take one more (co-partitioned topics land on the same member)."""
    out: dict[str, dict] = {m: {} for m in members}
    for topic_id, count in topics.items():
        subscribers = sorted(m for m, subs in members.items() if topic_id in subs)
        if not subscribers:
            continue
        per, extra = divmod(count, len(subscribers))
        start = 0
        for i, member_id in enumerate(subscribers):
            size = per + (1 if i < extra else 0)
            if size:
                out[member_id][topic_id] = frozenset(range(start, start + size))
            start += size
    return out


def _as_assignment(tps) -> dict:
    out: dict[uuid.UUID, set] = {}
    for topic_id, p in tps:
        out.setdefault(topic_id, set()).add(p)
    return {t: frozenset(ps) for t, ps in out.items()}


ASSIGNORS = {"uniform": uniform, "range": range_}
