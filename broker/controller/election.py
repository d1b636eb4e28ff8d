"""Partition leadership decisions: pure functions from a metadata image to PartitionChangeRecords.

Kafka's rules (KRaft, without eligible leader replicas):
- A broker is an acceptable leader when it is registered, unfenced and not in controlled shutdown.
- A clean election keeps the current leader if it is still acceptable and in the (new) ISR, else takes
  the first replica, in replica order, that is in the ISR and acceptable; a preferred election tries the
  first replica before that. Nobody → leader -1 (offline) with the ISR left as it was.
- An unclean election (`unclean.leader.election.enable`: topic config, else the broker's) may, when no
  ISR member is acceptable, pick the first acceptable replica outside the ISR; the ISR becomes just that
  leader and the partition is marked RECOVERING (leader_recovery_state 1).
- A removed broker leaves every ISR it is in, except that an ISR is never emptied (the last member
  stays, as the replica that must come back); a change of leader bumps the leader epoch, every change
  bumps the partition epoch (the image does both on replay).

Nothing here writes anything: the caller commits the records. Functions that handle several partitions
compute each from the image as it stands; where one change must see the previous one (several brokers
fenced at once) the caller applies the records in between (`chain`).
"""

from __future__ import annotations

from typing import Callable, Iterable, Sequence

from . import records as r
from .errors import ErrorCode

NO_LEADER = -1
NO_LEADER_CHANGE = -2
RECOVERED, RECOVERING = 0, 1

# ElectLeaders' ElectionType.
PREFERRED_ELECTION, UNCLEAN_ELECTION = 0, 1

# The PartitionChangeBuilder's election modes.
ANY, PREFERRED, UNCLEAN = "any", "preferred", "unclean"

UNCLEAN_KEY = "unclean.leader.election.enable"


def is_active(image, broker_id: int) -> bool:
    broker = image.brokers.get(broker_id)
    return broker is not None and not broker.fenced and not broker.in_controlled_shutdown


def acceptor(image, remove: int = NO_LEADER, add: int = NO_LEADER) -> Callable[[int], bool]:
    """Who may lead: active brokers, never `remove`, and `add` even while the image still fences it
    (but never one in controlled shutdown)."""
    def acceptable(b: int) -> bool:
        if b == remove:
            return False
        if b == add:
            broker = image.brokers.get(b)
            return broker is not None and not broker.in_controlled_shutdown
        return is_active(image, b)
    return acceptable


def unclean_enabled(image, topic: str, default: bool = False, node_id: int | None = None) -> bool:
    """`unclean.leader.election.enable` for a topic: its own config, the controller node's dynamic
    config, the cluster-wide dynamic default, then the static `default`."""
    sources = [image.topic_configs.get(topic, {})]
    if node_id is not None:
        sources.append(image.broker_configs.get(str(node_id), {}))
    sources.append(image.broker_configs.get("", {}))
    for configs in sources:
        value = configs.get(UNCLEAN_KEY)
        if value is not None:
            return value.strip().lower() == "true"
    return default


class PartitionChange:
    """The change to one partition (Kafka's PartitionChangeBuilder): set targets, then `build()`."""

    def __init__(self, topic_id, partition, acceptable: Callable[[int], bool], election: str = ANY):
        self.topic_id = topic_id
        self.partition = partition
        self.acceptable = acceptable
        self.election = election
        self.target_isr: list[int] = list(partition.isr)
        self.target_recovery_state = partition.leader_recovery_state

    def _valid_leader(self, broker: int) -> bool:
        return broker in self.target_isr and self.acceptable(broker)

    def elect(self) -> tuple[int, bool]:
        """(leader, unclean) under the election mode."""
        part = self.partition
        if self.election == PREFERRED and part.replicas and self._valid_leader(part.replicas[0]):
            return part.replicas[0], False
        if self._valid_leader(part.leader):
            return part.leader, False
        for broker in part.replicas:
            if self._valid_leader(broker):
                return broker, False
        if self.election == UNCLEAN:
            for broker in part.replicas:
                if self.acceptable(broker):
                    return broker, True
        return NO_LEADER, False

    def build(self) -> r.PartitionChangeRecord | None:
        part = self.partition
        record = r.PartitionChangeRecord(partition_id=part.partition_id, topic_id=self.topic_id)
        leader, unclean = self.elect()
        if leader != part.leader:
            record.leader = leader
            if unclean:            # data may be lost: the new leader is the whole ISR until it recovers
                record.isr = [leader]
                if part.leader_recovery_state != RECOVERING:
                    record.leader_recovery_state = RECOVERING
        if record.isr is None and self.target_isr and self.target_isr != list(part.isr):
            record.isr = list(self.target_isr)
        if (record.leader_recovery_state == -1
                and self.target_recovery_state != part.leader_recovery_state):
            record.leader_recovery_state = self.target_recovery_state
        if (record.leader == NO_LEADER_CHANGE and record.isr is None
                and record.leader_recovery_state == -1):
            return None
        return record


def _partitions(image) -> Iterable[tuple[object, object]]:
    for _, topic in sorted(image.topics.items()):
        for _, part in sorted(topic.partitions.items()):
            yield topic, part


def remove_broker(image, broker_id: int, unclean_default: bool = False, node_id: int | None = None,
                  change_class=PartitionChange) -> list:
    """Fenced, unregistered or in controlled shutdown: `broker_id` leaves every ISR and leadership."""
    out = []
    accept = acceptor(image, remove=broker_id)
    for topic, part in _partitions(image):
        if broker_id not in part.isr:
            continue
        change = change_class(topic.topic_id, part, accept,
                              UNCLEAN if unclean_enabled(image, topic.name, unclean_default, node_id)
                              else ANY)
        change.target_isr = [b for b in part.isr if b != broker_id]
        record = change.build()
        if record is not None:
            out.append(record)
    return out


def add_broker(image, broker_id: int, unclean_default: bool = False, node_id: int | None = None,
               change_class=PartitionChange) -> list:
    """`broker_id` is being unfenced: leaderless partitions elect again, with it acceptable."""
    out = []
    accept = acceptor(image, add=broker_id)
    for topic, part in _partitions(image):
        if part.leader != NO_LEADER:
            continue
        change = change_class(topic.topic_id, part, accept,
                              UNCLEAN if unclean_enabled(image, topic.name, unclean_default, node_id)
                              else ANY)
        record = change.build()
        if record is not None:
            out.append(record)
    return out


def elect_unclean_where_enabled(image, unclean_default: bool = False, node_id: int | None = None,
                                change_class=PartitionChange) -> list:
    """Leaderless partitions whose topic now allows unclean election get any live replica."""
    out = []
    accept = acceptor(image)
    for topic, part in _partitions(image):
        if part.leader == NO_LEADER and unclean_enabled(image, topic.name, unclean_default, node_id):
            record = change_class(topic.topic_id, part, accept, UNCLEAN).build()
            if record is not None:
                out.append(record)
    return out


def chain(image, steps: Sequence[Callable]) -> tuple[list, object]:
    """Run record-producing steps one after the other, each on the image left by the previous ones."""
    out = []
    for step in steps:
        records = step(image)
        if records:
            image = image.apply(records)
            out += records
    return out, image


# -- ElectLeaders -------------------------------------------------------------------------------------

ELECTION_MESSAGES = {
    ErrorCode.ELECTION_NOT_NEEDED: "Leader election not needed for topic partition.",
    ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE: "The preferred leader was not available.",
    ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE: "Eligible topic partition leaders are not available.",
}


def elect_one(image, topic_name: str, partition_id: int, election_type: int,
              change_class=PartitionChange) -> tuple[int, str | None, r.PartitionChangeRecord | None]:
    """(error code, message, record) for one partition of an ElectLeaders request, as Kafka answers."""
    topic = image.topics.get(topic_name)
    if topic is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {topic_name}", None
    part = topic.partitions.get(partition_id)
    if part is None:
        return (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"No such partition as {topic_name}-{partition_id}", None)
    if election_type == PREFERRED_ELECTION:
        needed = not (part.replicas and part.leader == part.replicas[0])
        mode, failure = PREFERRED, ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    else:
        needed = part.leader == NO_LEADER
        mode, failure = UNCLEAN, ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
    if not needed:
        code = ErrorCode.ELECTION_NOT_NEEDED
        return code, ELECTION_MESSAGES[code], None
    record = change_class(topic.topic_id, part, acceptor(image), mode).build()
    if record is None:
        return failure, ELECTION_MESSAGES[failure], None
    return ErrorCode.NONE, None, record


def elect_leaders(image, election_type: int, topic_partitions, change_class=PartitionChange):
    """ElectLeaders: `topic_partitions` [(topic, [partition ids])] or None for every partition.

    Returns (records, [(topic, [(partition, error code, message)])]); with None, partitions that need
    no election are left out of the answer (each topic still appears), as Kafka does."""
    records, results = [], []
    everything = topic_partitions is None
    if everything:
        topic_partitions = [(name, sorted(t.partitions)) for name, t in sorted(image.topics.items())]
    for name, partition_ids in topic_partitions:
        answers = []
        for partition_id in partition_ids:
            code, message, record = elect_one(image, name, partition_id, election_type, change_class)
            if record is not None:
                image = image.apply([record])
                records.append(record)
            if everything and code == ErrorCode.ELECTION_NOT_NEEDED:
                continue
            answers.append((partition_id, int(code), message))
        results.append((name, answers))
    return records, results


# -- auto leader rebalance ----------------------------------------------------------------------------

def imbalance_by_broker(image) -> dict[int, float]:
    """For each preferred leader: the share of its partitions that another replica leads."""
    preferred: dict[int, int] = {}
    elsewhere: dict[int, int] = {}
    for _, part in _partitions(image):
        if not part.replicas:
            continue
        first = part.replicas[0]
        preferred[first] = preferred.get(first, 0) + 1
        if part.leader != first:
            elsewhere[first] = elsewhere.get(first, 0) + 1
    return {b: elsewhere.get(b, 0) / n for b, n in preferred.items()}


def rebalance(image, percentage: int, change_class=PartitionChange, limit: int = 1000) -> list:
    """Move leadership back to preferred replicas (in the ISR and active) of every broker whose
    leader imbalance is above `percentage` (leader.imbalance.per.broker.percentage)."""
    over = {b for b, ratio in imbalance_by_broker(image).items() if ratio * 100 > percentage}
    out = []
    accept = acceptor(image)
    for topic, part in _partitions(image):
        if len(out) >= limit:
            break
        if not part.replicas or part.replicas[0] not in over or part.leader == part.replicas[0]:
            continue
        if part.replicas[0] not in part.isr or not accept(part.replicas[0]):
            continue
        record = change_class(topic.topic_id, part, accept, PREFERRED).build()
        if record is not None:
            out.append(record)
    return out
