"""Topic rules: legal names, collisions, and where partition replicas go."""

from __future__ import annotations

import re
from typing import Iterable, Mapping, Sequence

from .errors import ApiError, ErrorCode

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")


def validate_topic_name(name: str | None) -> None:
    """Kafka's topic name rules; raises ApiError(INVALID_TOPIC_EXCEPTION)."""
    if not name:
        raise ApiError(ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise ApiError(ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name cannot be \".\" or \"..\"")
    if len(name) > MAX_NAME_LENGTH:
        raise ApiError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                       f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, "
                       f"topic name: {name}")
    if not _LEGAL.fullmatch(name):
        raise ApiError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                       f"Topic name \"{name}\" is illegal, it contains a character other than "
                       "ASCII alphanumerics, '.', '_' and '-'")


def collision_key(name: str) -> str:
    """'.' and '_' collide in metric names, so Kafka refuses topics differing only by them."""
    return name.replace(".", "_")


def place_replicas(brokers: Sequence[int], num_partitions: int, replication_factor: int,
                   first_partition: int = 0, start: int = 0) -> list[list[int]]:
    """Spread `num_partitions` partitions over `brokers` round-robin, leaders rotating.

    `start` shifts the whole layout so that successive topics do not all lead on the same broker.
    """
    if replication_factor > len(brokers):
        raise ApiError(ErrorCode.INVALID_REPLICATION_FACTOR,
                       f"Unable to replicate the partition {replication_factor} time(s): The target "
                       f"replication factor of {replication_factor} cannot be reached because only "
                       f"{len(brokers)} broker(s) are registered.")
    n = len(brokers)
    placements = []
    for p in range(first_partition, first_partition + num_partitions):
        first = (start + p) % n
        # Followers step by a shift that changes every n partitions, as Kafka's placer does.
        shift = 1 + (p // n) % max(n - 1, 1)
        replicas = [brokers[first]]
        for k in range(1, replication_factor):
            candidate = (first + shift * k) % n
            while brokers[candidate] in replicas:
                candidate = (candidate + 1) % n
            replicas.append(brokers[candidate])
        placements.append(replicas)
    return placements


def validate_assignment(assignment: Mapping[int, Sequence[int]], known_brokers: Iterable[int],
                        first_partition: int = 0) -> list[list[int]]:
    """Check a manual assignment {partition: replicas}; returns it as a list ordered by partition."""
    known = set(known_brokers)
    expected = list(range(first_partition, first_partition + len(assignment)))
    if sorted(assignment) != expected:
        raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                       "Partitions should be a consecutive 0-based integer sequence")
    width = None
    out = []
    for p in expected:
        replicas = list(assignment[p])
        if not replicas:
            raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                           f"The manual partition assignment includes an empty replica list for partition {p}.")
        if len(set(replicas)) != len(replicas):
            raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                           f"The manual partition assignment includes the broker {_first_dup(replicas)} "
                           f"more than once for partition {p}.")
        for b in replicas:
            if b not in known:
                raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                               f"The manual partition assignment includes broker {b}, but no such "
                               "broker is registered.")
        if width is not None and len(replicas) != width:
            raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                           f"The manual partition assignment includes a partition with {len(replicas)} "
                           f"replica(s), but this is not consistent with previous partitions, which "
                           f"have {width} replica(s).")
        width = len(replicas)
        out.append(replicas)
    return out


def _first_dup(items):
    seen = set()
    for x in items:
        if x in seen:
            return x
        seen.add(x)
    return None
