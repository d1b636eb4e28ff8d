"""CreateTopics, DeleteTopics and CreatePartitions: validation, placement, the records they commit."""

from __future__ import annotations

import base64
import uuid
from collections import Counter
from typing import Mapping, Sequence

import trio

from . import configs as cfg
from . import records as r
from .errors import ApiError, ErrorCode
from .image import TOPIC_RESOURCE, MetadataImage
from .placement import PlacementError, candidates, place_replicas, validate_assignment
from .specs import (
    BatchTooLarge, CreatePartitionsResult, CreatePartitionsSpec, CreateTopicResult, CreateTopicSpec,
    DeleteTopicResult, check_room, error_of,
)
from .topics import collision_key, validate_topic_name

# A CreateTopics planning this many partitions (~3 ms) gives the loop a turn before planning more.
YIELD_EVERY_RECORDS = 1000


class TopicOps:
    """Mixed into Controller: needs self._image, self._settings, self._lock, self._rng, self._commit,
    self._require_leader, self._config_validator."""

    async def create_topics(self, specs: Sequence[CreateTopicSpec],
                            validate_only: bool = False) -> list[CreateTopicResult]:
        """Create topics (one result per spec, in order); the valid ones commit as one atomic batch."""
        await self._require_leader()
        async with self._lock:
            names = Counter(s.name for s in specs)
            batch, results = [], []
            taken = {collision_key(n): n for n in self._image.topics}
            planned_since_yield = 0
            for spec in specs:
                if planned_since_yield >= YIELD_EVERY_RECORDS:
                    # thousands of partitions planned (~3 µs each): let the loop serve others.
                    # Nothing else changes the image meanwhile: only commits do, under this lock.
                    await trio.lowlevel.checkpoint()
                    planned_since_yield = 0
                result = CreateTopicResult(name=spec.name)
                results.append(result)
                try:
                    if names[spec.name] > 1:
                        raise ApiError(ErrorCode.INVALID_REQUEST, "Duplicate topic name.")
                    records = self._create_topic_records(spec, result, taken, used=len(batch))
                except BatchTooLarge:
                    raise
                except ApiError as exc:
                    result.error_code, result.error_message = error_of(exc)
                    continue
                taken[collision_key(spec.name)] = spec.name
                batch += records
                planned_since_yield += len(records)
            if not validate_only:
                await self._commit(batch)
            return results

    def _create_topic_records(self, spec: CreateTopicSpec, result: CreateTopicResult,
                              taken: Mapping[str, str], used: int = 0) -> list:
        """The records creating one topic; `used` records of this operation are already planned."""
        validate_topic_name(spec.name)
        if spec.name in self._image.topics:
            raise ApiError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{spec.name}' already exists.")
        other = taken.get(collision_key(spec.name))
        if other is not None:
            raise ApiError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                           f"Topic '{spec.name}' collides with existing topic: {other}")
        usable = _active_brokers(self._image)
        if spec.assignments:
            if spec.num_partitions != -1:
                raise ApiError(ErrorCode.INVALID_REQUEST, "A manual partition assignment was specified, "
                               "but numPartitions was not set to -1.")
            if spec.replication_factor != -1:
                raise ApiError(ErrorCode.INVALID_REQUEST, "A manual partition assignment was specified, "
                               "but replicationFactor was not set to -1.")
            check_room(1 + len(spec.configs) + len(spec.assignments), used)
            placements = validate_assignment(spec.assignments, self._image.brokers)
            for p, replicas in enumerate(placements):
                if not any(b in usable for b in replicas):
                    raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                   f"All brokers specified in the manual partition assignment for "
                                   f"partition {p} are fenced or in controlled shutdown.")
        else:
            partitions = self._settings.num_partitions if spec.num_partitions == -1 else spec.num_partitions
            factor = (self._settings.default_replication_factor if spec.replication_factor == -1
                      else spec.replication_factor)
            if partitions <= 0:
                raise ApiError(ErrorCode.INVALID_PARTITIONS,
                               "Number of partitions was set to an invalid non-positive value.")
            if factor <= 0:
                raise ApiError(ErrorCode.INVALID_REPLICATION_FACTOR,
                               "Replication factor must be larger than 0, or -1 to use the default value.")
            check_room(1 + len(spec.configs) + partitions, used)
            placements = _place(self._image, partitions, factor, self._rng)
        configs = {}
        for key, value in spec.configs.items():
            if value is None:
                raise ApiError(ErrorCode.INVALID_CONFIG, f"Null value not supported for topic configs: {key}")
            configs[key] = value
        cfg.run_validator(self._config_validator, TOPIC_RESOURCE, spec.name, configs)

        topic_id = new_topic_id(self._image)
        result.topic_id = topic_id
        result.num_partitions = len(placements)
        result.replication_factor = len(placements[0])
        result.configs = configs
        batch: list = [r.TopicRecord(name=spec.name, topic_id=topic_id)]
        batch += cfg.diff_records(TOPIC_RESOURCE, spec.name, {}, configs)
        batch += [self._new_partition(topic_id, p, replicas, usable) for p, replicas in enumerate(placements)]
        return batch

    @staticmethod
    def _new_partition(topic_id, partition: int, replicas: Sequence[int], usable) -> r.PartitionRecord:
        isr = [b for b in replicas if b in usable]
        return r.PartitionRecord(partition_id=partition, topic_id=topic_id, replicas=list(replicas),
                                 isr=isr, leader=isr[0], leader_epoch=0, partition_epoch=0)

    async def delete_topics(self, names: Sequence[str] = (),
                            topic_ids: Sequence[uuid.UUID] = ()) -> list[DeleteTopicResult]:
        """Delete by name and/or id; one result per name, then per id, in order (a name or id
        asked more than once: one INVALID_REQUEST result for it, as Kafka answers)."""
        await self._require_leader()
        async with self._lock:
            results, batch, doomed = [], [], set()
            asked = [(n, None) for n in names] + [(None, t) for t in topic_ids]
            wanted = Counter(asked)
            for name, topic_id in dict.fromkeys(asked):
                result = DeleteTopicResult(name=name, topic_id=topic_id or r.ZERO_UUID)
                results.append(result)
                try:
                    topic = self._topic_to_delete(name, topic_id, wanted)
                except ApiError as exc:
                    result.error_code, result.error_message = error_of(exc)
                    continue
                result.name, result.topic_id = topic.name, topic.topic_id
                if topic.topic_id not in doomed:
                    doomed.add(topic.topic_id)
                    batch.append(r.RemoveTopicRecord(topic_id=topic.topic_id))
            await self._commit(batch)
            return results

    def _topic_to_delete(self, name, topic_id, wanted):
        if wanted[(name, topic_id)] > 1:
            raise ApiError(ErrorCode.INVALID_REQUEST,
                           "Duplicate topic name." if name is not None else "Duplicate topic id.")
        if not self._settings.delete_topic_enable:
            raise ApiError(ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled.")
        if name is not None:
            topic = self._image.topics.get(name)
            if topic is None:
                raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                               "This server does not host this topic-partition.")
        else:
            topic = self._image.topics_by_id.get(topic_id)
            if topic is None:
                raise ApiError(ErrorCode.UNKNOWN_TOPIC_ID, "This server does not host this topic ID.")
        return topic

    async def create_partitions(self, specs: Sequence[CreatePartitionsSpec],
                                validate_only: bool = False) -> list[CreatePartitionsResult]:
        await self._require_leader()
        async with self._lock:
            names = Counter(s.name for s in specs)
            results, batch = [], []
            for spec in specs:
                result = CreatePartitionsResult(name=spec.name)
                results.append(result)
                try:
                    if names[spec.name] > 1:
                        raise ApiError(ErrorCode.INVALID_REQUEST, "Duplicate topic name.")
                    batch += self._create_partitions_records(spec, used=len(batch))
                except BatchTooLarge:
                    raise
                except ApiError as exc:
                    result.error_code, result.error_message = error_of(exc)
            if not validate_only:
                await self._commit(batch)
            return results

    def _create_partitions_records(self, spec: CreatePartitionsSpec, used: int = 0) -> list:
        """The records adding partitions to one topic; `used` records are already planned."""
        topic = self._image.topics.get(spec.name)
        if topic is None:
            raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)   # no message, as Kafka
        current = len(topic.partitions)
        if spec.count < current:
            raise ApiError(ErrorCode.INVALID_PARTITIONS, f"The topic {spec.name} currently has {current} "
                           f"partition(s); {spec.count} would not be an increase.")
        if spec.count == current:
            raise ApiError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partition(s).")
        added = spec.count - current
        check_room(added, used)
        usable = _active_brokers(self._image)
        if spec.assignments is not None:
            if len(spec.assignments) != added:
                raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                               f"Attempted to add {added} additional partition(s), but only "
                               f"{len(spec.assignments)} assignment(s) were specified.")
            factor = len(topic.partitions[0].replicas)
            placements = validate_assignment(
                {current + i: a for i, a in enumerate(spec.assignments)}, self._image.brokers,
                first_partition=current, replication_factor=factor)
            for p, replicas in enumerate(placements, start=current):
                if not any(b in usable for b in replicas):
                    raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                   f"All brokers specified in the manual partition assignment for "
                                   f"partition {p} are fenced or in controlled shutdown.")
        else:
            factor = len(topic.partitions[0].replicas)
            try:     # unlike CreateTopics, Kafka answers the placer's message as it is here
                placements = place_replicas(candidates(self._image), added, factor, self._rng)
            except PlacementError as exc:
                raise ApiError(ErrorCode.INVALID_REPLICATION_FACTOR, exc.message) from None
        return [self._new_partition(topic.topic_id, p, replicas, usable)
                for p, replicas in enumerate(placements, start=current)]


def _active_brokers(image) -> set[int]:
    """Brokers a new partition's ISR may hold: unfenced and not in controlled shutdown."""
    return {b.broker_id for b in image.brokers.values() if not b.fenced and not b.in_controlled_shutdown}


def _place(image, partitions: int, factor: int, rng) -> list[list[int]]:
    try:
        return place_replicas(candidates(image), partitions, factor, rng)
    except PlacementError as exc:
        raise ApiError(ErrorCode.INVALID_REPLICATION_FACTOR,
                       f"Unable to replicate the partition {factor} time(s): {exc.message}") from None


def new_topic_id(image: MetadataImage) -> uuid.UUID:
    """Random ids as Kafka makes them: never zero, never the metadata topic's id (1), never one whose
    base64 form starts with '-' (command-line tools would read it as an option)."""
    while True:
        candidate = uuid.uuid4()
        if candidate.int in (0, 1) or candidate in image.topics_by_id:
            continue
        if base64.urlsafe_b64encode(candidate.bytes).startswith(b"-"):
            continue
        return candidate

