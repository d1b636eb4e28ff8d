"""Where a new partition's replicas go: striped over racks and brokers, as Kafka's StripedReplicaPlacer.

Every registered broker that is not in controlled shutdown can hold a replica; fenced ones only as
followers (a fenced broker never leads a new partition) and only once the unfenced ones of its rack are
used. Racks are visited round-robin from a random start so that:

- leaders rotate over racks, and within a rack over its brokers, so leadership spreads evenly;
- the replicas of one partition land on distinct racks whenever there are enough racks;
- after as many partitions as there are unfenced brokers the order is reshuffled, so followers do not
  always pair up the same way.

A broker without `broker.rack` counts as its own rack "None" (all of them share it).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from .errors import ApiError, ErrorCode


@dataclass(frozen=True)
class Candidate:
    """A broker that may receive replicas (Kafka's UsableBroker)."""
    broker_id: int
    rack: str | None = None
    fenced: bool = False


def candidates(image) -> list[Candidate]:
    """The image's usable brokers: registered and not in controlled shutdown, in id order."""
    return [Candidate(b.broker_id, b.rack, b.fenced) for _, b in sorted(image.brokers.items())
            if not b.in_controlled_shutdown]


class PlacementError(ApiError):
    """INVALID_REPLICATION_FACTOR; the caller prefixes "Unable to replicate the partition N time(s): "."""

    def __init__(self, message: str):
        super().__init__(ErrorCode.INVALID_REPLICATION_FACTOR, message)


def check_factor(replication_factor: int, brokers: Sequence[Candidate]) -> None:
    """Kafka's three refusals, in its order."""
    if replication_factor <= 0:
        raise PlacementError(f"Invalid replication factor {replication_factor}: the replication factor "
                             "must be positive.")
    if not any(not b.fenced for b in brokers):
        raise PlacementError("All brokers are currently fenced.")
    if replication_factor > len(brokers):
        raise PlacementError(f"The target replication factor of {replication_factor} cannot be reached "
                             f"because only {len(brokers)} broker(s) are registered.")


class _Cycle:
    """Brokers handed out in rotation: each partition starts one further along than the previous."""

    def __init__(self, brokers: list[int]):
        self.brokers = brokers
        self.epoch = -1
        self.offset = -1
        self.index = 0

    def next(self, epoch: int) -> int | None:
        if not self.brokers:
            return None
        if epoch != self.epoch:
            self.epoch, self.index = epoch, 0
            self.offset = (self.offset + 1) % len(self.brokers)
        if self.index >= len(self.brokers):
            return None
        broker = self.brokers[(self.offset + self.index) % len(self.brokers)]
        self.index += 1
        return broker


class _Rack:
    def __init__(self, unfenced: list[int], fenced: list[int]):
        self.unfenced, self.fenced = _Cycle(unfenced), _Cycle(fenced)

    def next_unfenced(self, epoch: int) -> int | None:
        return self.unfenced.next(epoch)

    def next(self, epoch: int) -> int | None:
        broker = self.unfenced.next(epoch)
        return broker if broker is not None else self.fenced.next(epoch)


class StripedPlacer:
    """One topic's (or one CreatePartitions call's) placement; `rng` decides the random start."""

    def __init__(self, brokers: Sequence[Candidate], rng: random.Random):
        self.rng = rng
        by_rack: dict[str | None, list[Candidate]] = {}
        for b in sorted(brokers, key=lambda b: b.broker_id):
            by_rack.setdefault(b.rack, []).append(b)
        self.layout = by_rack
        self.unfenced_count = sum(1 for b in brokers if not b.fenced)
        self.epoch = 0
        self.offset = 0
        self._shuffle()

    def _shuffle(self) -> None:
        names = sorted(self.layout, key=lambda n: (n is not None, n or ""))
        self.rng.shuffle(names)
        self.racks = []
        for name in names:
            unfenced = [b.broker_id for b in self.layout[name] if not b.fenced]
            fenced = [b.broker_id for b in self.layout[name] if b.fenced]
            self.rng.shuffle(unfenced)
            self.rng.shuffle(fenced)
            self.racks.append(_Rack(unfenced, fenced))

    def place_one(self, replication_factor: int) -> list[int]:
        # After as many partitions as unfenced brokers, reshuffle so follower sets vary.
        if self.epoch == self.unfenced_count and self.unfenced_count > 1:
            self._shuffle()
            self.epoch = 0
        n = len(self.racks)
        if self.offset == n:
            self.offset = 0
        # The leader: the next unfenced broker of the first rack (in rotation) that has one.
        rack_index = self.offset
        while True:
            leader = self.racks[rack_index].next_unfenced(self.epoch)
            if leader is not None:
                break
            rack_index = (rack_index + 1) % n
        replicas = [leader]
        # Followers: one per rack visit, racks in rotation after the leader's starting rack; a rack
        # that hands out a broker already chosen is asked again until it runs out.
        rack_index = self.offset
        while len(replicas) < replication_factor:
            rack_index = (rack_index + 1) % n
            while True:
                follower = self.racks[rack_index].next(self.epoch)
                if follower is None or follower not in replicas:
                    break
            if follower is not None:
                replicas.append(follower)
        self.epoch += 1
        self.offset += 1
        return replicas


def place_replicas(brokers: Sequence[Candidate], num_partitions: int, replication_factor: int,
                   rng: random.Random) -> list[list[int]]:
    """Replica lists (leader first) for `num_partitions` new partitions; raises PlacementError."""
    check_factor(replication_factor, brokers)
    placer = StripedPlacer(brokers, rng)
    return [placer.place_one(replication_factor) for _ in range(num_partitions)]


def validate_assignment(assignment: Mapping[int, Sequence[int]], known_brokers: Iterable[int],
                        first_partition: int = 0, replication_factor: int | None = None) -> list[list[int]]:
    """Check a manual assignment {partition: replicas} in Kafka's words (each partition: empty, then
    its broker ids in ascending order for unknown or repeated ones, then the replica count against
    `replication_factor` or the first partition's); returns the replica lists ordered by partition."""
    known = set(known_brokers)
    expected = list(range(first_partition, first_partition + len(assignment)))
    if sorted(assignment) != expected:
        raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                       "partitions should be a consecutive 0-based integer sequence")
    width = replication_factor
    out = []
    for p in expected:
        replicas = list(assignment[p])
        if not replicas:
            raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                           "The manual partition assignment includes an empty replica list.")
        previous = None
        for b in sorted(replicas):
            if b not in known:
                raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                               f"The manual partition assignment includes broker {b}, but no such "
                               "broker is registered.")
            if b == previous:
                raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                               f"The manual partition assignment includes the broker {b} more than once.")
            previous = b
        if width is not None and len(replicas) != width:
            raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                           f"The manual partition assignment includes a partition with {len(replicas)} "
                           f"replica(s), but this is not consistent with previous partitions, which "
                           f"have {width} replica(s).")
        width = len(replicas)
        out.append(replicas)
    return out
