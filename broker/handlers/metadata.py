"""Metadata (key 3), v0–v12: brokers, cluster id, controller, topics and partitions.

Unknown topics are created on the spot when the client allows it and ``auto.create.topics.enable`` is
on. As Kafka 3.9 (KRaft), the request that starts a creation answers the topic
UNKNOWN_TOPIC_OR_PARTITION (clients retry; kafka-node's fetchLatestOffsets reports the topic missing);
the creation is committed to the metadata log before that answer, so the client's next Metadata
request finds the topic with its leaders.
"""

from __future__ import annotations

import logging
import uuid

from protocol import ErrorCode, messages

from broker.controller.errors import ApiError
from broker.coordinator.service import OFFSETS_TOPIC, TRANSACTION_TOPIC, CoordinatorError, CoordinatorService
from broker.handlers import common
from broker.handlers.metadata_encoding import encoded_answer
from broker.security import access
from broker.security.acls import AclOperation, ResourceType

log = logging.getLogger(__name__)

API_KEY = 3
ZERO_UUID = uuid.UUID(int=0)

Response = messages.MetadataResponse


def broker_entries(ctx, image, listener_name: str) -> list:
    """Live brokers, each with its endpoint for the listener the request came in on."""
    out = []
    for broker in sorted(image.brokers.values(), key=lambda b: b.broker_id):
        if broker.fenced:
            continue
        endpoint = next((e for e in broker.endpoints if e.name == listener_name), None)
        if endpoint is None:
            continue
        out.append(Response.MetadataResponseBroker(node_id=broker.broker_id, host=endpoint.host,
                                                   port=endpoint.port, rack=broker.rack))
    return out


def live_brokers(image) -> frozenset:
    return frozenset(b.broker_id for b in image.brokers.values() if not b.fenced)


def partition_entries(image, topic, live=None) -> list:
    return _build_partition_entries(topic, live_brokers(image) if live is None else live)


def _build_partition_entries(topic, live) -> list:
    out = []
    for index in sorted(topic.partitions):
        partition = topic.partitions[index]
        error = ErrorCode.NONE if partition.leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE
        out.append(Response.MetadataResponsePartition(
            error_code=error, partition_index=index, leader_id=partition.leader,
            leader_epoch=partition.leader_epoch, replica_nodes=list(partition.replicas),
            isr_nodes=list(partition.isr),
            offline_replicas=[b for b in partition.replicas if b not in live]))
    return out


def topic_entry(ctx, image, topic, include_operations: bool, live=None):
    return Response.MetadataResponseTopic(
        error_code=ErrorCode.NONE, name=topic.name, topic_id=topic.topic_id,
        is_internal=common.is_internal(topic.name), partitions=partition_entries(image, topic, live),
        topic_authorized_operations=(
            access.authorized_operations(ctx, ResourceType.TOPIC, topic.name)
            if include_operations else common.OPERATIONS_NOT_REQUESTED))


def _describable(ctx, names, log_if_denied=True) -> set[str]:
    return access.allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names,
                                log_if_denied=log_if_denied)


# Kafka auto-creates the coordinators' topics on Metadata too, with their own settings (as on
# FindCoordinator): a monitor such as Burrow asks for __consumer_offsets before any group exists.
COORDINATOR_TOPICS = (OFFSETS_TOPIC, TRANSACTION_TOPIC)


async def _create_coordinator_topics(ctx, names) -> None:
    service = await CoordinatorService.of(ctx.broker)
    for name in names:
        try:
            await service.ensure_topic(name)
        except CoordinatorError as exc:   # too few brokers alive yet: the topic stays unknown
            log.info("not auto-creating %s yet: %s", name, exc.code.name)


def _creatable(ctx, names) -> set[str]:
    """Auto-creation needs CREATE on the cluster or on each topic."""
    if access.cluster_allowed(ctx, AclOperation.CREATE, log_if_denied=False):
        return set(names)
    return access.allowed_names(ctx, AclOperation.CREATE, ResourceType.TOPIC, names)


# Topics the principal may DESCRIBE that are answered with an error still carry its operations
# on that name (Kafka sets them on everything its metadata cache answered, unknown topics too;
# not on refused names or unknown topic ids).
NAMED_TOPIC_ERRORS = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.INVALID_TOPIC_EXCEPTION)


def with_operations(ctx, entry):
    if entry.name is not None and entry.error_code in NAMED_TOPIC_ERRORS:
        entry.topic_authorized_operations = access.authorized_operations(ctx, ResourceType.TOPIC,
                                                                         entry.name)
    return entry


def error_topic(name, error, topic_id=ZERO_UUID):
    return Response.MetadataResponseTopic(error_code=error, name=name, topic_id=topic_id,
                                          is_internal=False, partitions=[])


def names_topics_by_id(version: int, requested) -> bool:
    """Before v12 a topic must be named and carry no id (Kafka: "Topic IDs are not supported in
    requests for version N"): the whole request is then an InvalidRequestException."""
    return version < 12 and requested is not None and any(
        t.name is None or getattr(t, "topic_id", ZERO_UUID) != ZERO_UUID for t in requested)


def invalid_request_response(requested):
    """Kafka's error response: every topic answered INVALID_REQUEST, a null name sent back as ""."""
    return Response(throttle_time_ms=0, topics=[
        error_topic("" if t.name is None else t.name, ErrorCode.INVALID_REQUEST,
                    getattr(t, "topic_id", ZERO_UUID)) for t in requested])


async def handle_metadata(ctx, header, body):
    version = header.api_version
    include_operations = version >= 8 and body.include_topic_authorized_operations
    requested = body.topics
    if version == 0 and not requested:
        requested = None   # v0: an empty list means every topic
    if names_topics_by_id(version, requested):
        return invalid_request_response(requested)
    image = ctx.image

    if requested is None:
        # Every topic the principal may DESCRIBE; the others are not even mentioned.
        visible = _describable(ctx, image.topics, log_if_denied=False)
        answers = [image.topics[name] for name in _sorted_names(image) if name in visible]
    else:
        allow_auto_create = (body.allow_auto_topic_creation if version >= 4 else True) \
            and ctx.config["auto.create.topics.enable"]
        by_id = {r.topic_id: image.topics_by_id[r.topic_id].name for r in requested
                 if r.name is None and getattr(r, "topic_id", ZERO_UUID) in image.topics_by_id}
        visible = _describable(ctx, [r.name for r in requested if r.name is not None]
                               + list(by_id.values()))
        to_create = {}   # an ordered set: names may repeat in the request
        for request in requested:
            name = request.name
            if name is None or name not in visible:
                continue
            if name not in image.topics and allow_auto_create and common.topic_name_error(name) is None \
                    and (name in COORDINATOR_TOPICS or not common.is_internal(name)):
                to_create[name] = None
        refused_creation = set()
        if to_create:
            creatable = _creatable(ctx, to_create)
            refused_creation = set(to_create) - creatable
            to_create = {name: None for name in to_create if name in creatable}
        internal = [name for name in to_create if name in COORDINATOR_TOPICS]
        if internal:
            await _create_coordinator_topics(ctx, internal)
            to_create = {name: None for name in to_create if name not in internal}
        if to_create:
            try:
                await common.create_topics_with_defaults(ctx, list(to_create))
            except ApiError as exc:
                # The whole creation was refused (e.g. over the controller's per-operation record
                # bound): the topics stay unknown.
                log.warning("auto-creating %d topics failed: %s", len(to_create), exc)
            # Answered from the image the request was read under: the new topics as unknown.
        answers, seen = [], set()   # topic images to answer, or error entries
        for request in requested:
            name = request.name
            if name is None:
                topic_id = getattr(request, "topic_id", ZERO_UUID)
                topic = image.topics_by_id.get(topic_id)
                if topic is None:
                    answers.append(error_topic(None, ErrorCode.UNKNOWN_TOPIC_ID, topic_id))
                elif topic.name not in visible:
                    # Topic ids are not secret: Kafka answers the id, without the name.
                    answers.append(error_topic(None, ErrorCode.TOPIC_AUTHORIZATION_FAILED, topic_id))
                elif topic.name not in seen:
                    seen.add(topic.name)
                    answers.append(topic)
                continue
            if name in seen:
                continue
            seen.add(name)
            topic = image.topics.get(name)
            if name not in visible or name in refused_creation:
                # Never says whether a topic the principal may not DESCRIBE exists.
                answers.append(error_topic(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
            elif topic is not None:
                answers.append(topic)
            elif common.topic_name_error(name) is not None:
                answers.append(error_topic(name, ErrorCode.INVALID_TOPIC_EXCEPTION))
            else:
                answers.append(error_topic(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))

    response = Response(
        throttle_time_ms=0,
        brokers=broker_entries(ctx, image, ctx.connection.listener_name),
        cluster_id=image.cluster_id,
        controller_id=ctx.node_id,
        topics=[],
    )
    if 8 <= version <= 10:
        response.cluster_authorized_operations = (
            cluster_operations(ctx) if body.include_cluster_authorized_operations
            else common.OPERATIONS_NOT_REQUESTED)
    live = live_brokers(image)
    if include_operations:   # per principal: answered struct by struct, nothing cached
        response.topics = [with_operations(ctx, item) if type(item) is Response.MetadataResponseTopic
                           else topic_entry(ctx, image, item, True, live) for item in answers]
        return response
    # Each topic's bytes cached per change, the answer spliced and built in slices: at 10,000
    # partitions encoding it whole held the event loop for tens of milliseconds per request.
    return await encoded_answer(response, version, answers, live, len(image.topics),
                                lambda topic: topic_entry(ctx, image, topic, False, live))


# The topic names of the last image answered in full, sorted (10,000 names take ms to sort).
_sorted_cache: list = [None, []]


def _sorted_names(image) -> list[str]:
    if _sorted_cache[0] is not image.topics:
        _sorted_cache[:] = [image.topics, sorted(image.topics)]
    return _sorted_cache[1]


def cluster_operations(ctx) -> int:
    """KIP-430 for the cluster: 0 unless the principal may DESCRIBE it (Kafka)."""
    if not access.cluster_allowed(ctx, AclOperation.DESCRIBE, log_if_denied=False):
        return 0
    return access.authorized_operations(ctx, ResourceType.CLUSTER, "kafka-cluster")


HANDLERS = {API_KEY: (0, 12, handle_metadata)}
