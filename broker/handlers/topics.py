"""Topic administration: CreateTopics (19), DeleteTopics (20), CreatePartitions (37), DeleteRecords (21).

Topic-level changes go through the controller and are committed to the metadata log before the answer;
the partition logs follow from the image listener (``broker.partitions``). DeleteRecords moves a log's
start offset in storage.
"""

from __future__ import annotations

import uuid
from collections import Counter


from protocol import ErrorCode, messages

from broker.controller.controller import CreatePartitionsSpec, CreateTopicSpec, DeleteTopicResult
from broker.controller.errors import ApiError
from broker.quotas.mutations import THROTTLED_MESSAGE, MutationQuota
from broker.security import access
from broker.security.acls import AclOperation, ResourceType

ZERO_UUID = uuid.UUID(int=0)
AUTHORIZATION_FAILED = "Authorization failed."
TOPIC_AUTHORIZATION_FAILED = "Topic authorization failed."
DUPLICATE_NAME = "Duplicate topic name."


def _allowed(ctx, operation, names, log_if_denied=True) -> set[str]:
    return access.allowed_names(ctx, operation, ResourceType.TOPIC, names,
                                log_if_denied=log_if_denied)


# ----------------------------------------------------------------------------------- CreateTopics

async def handle_create_topics(ctx, header, body):
    Response = messages.CreateTopicsResponse
    version = header.api_version
    # CREATE on the cluster covers every topic; otherwise CREATE on each (Kafka's controller).
    names = [topic.name for topic in body.topics]
    if access.cluster_allowed(ctx, AclOperation.CREATE, log_if_denied=False):
        creatable = set(names)
    else:
        creatable = _allowed(ctx, AclOperation.CREATE, names)
    describable = _allowed(ctx, AclOperation.DESCRIBE_CONFIGS, creatable, log_if_denied=False)
    specs = []
    for topic in body.topics:
        if topic.name not in creatable:
            continue
        assignments = {a.partition_index: list(a.broker_ids) for a in topic.assignments}
        configs = {c.name: c.value for c in topic.configs}
        specs.append(CreateTopicSpec(name=topic.name, num_partitions=topic.num_partitions,
                                     replication_factor=topic.replication_factor,
                                     assignments=assignments, configs=configs))
    quota = MutationQuota(ctx, header)
    refused: set[int] = set()
    try:
        if quota.enabled and not body.validate_only:
            # Charge the partitions of each topic that would be created, in request order.
            planned = await ctx.controller.create_topics(specs, validate_only=True)
            refused = {i for i, result in enumerate(planned)
                       if result.error_code == 0 and not quota.admit(result.num_partitions)}
        created = iter(await ctx.controller.create_topics(
            [spec for i, spec in enumerate(specs) if i not in refused],
            validate_only=body.validate_only))
    except ApiError as exc:
        return Response(throttle_time_ms=0, topics=[
            Response.CreatableTopicResult(name=spec.name, error_code=exc.code,
                                          error_message=exc.message, configs=[]) for spec in specs])
    quota.finish()
    out = []
    specs_by_name = iter(enumerate(specs))
    for name in names:
        if name not in creatable:
            out.append(Response.CreatableTopicResult(
                name=name, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                error_message=AUTHORIZATION_FAILED if version >= 1 else None, configs=[]))
            continue
        i, spec = next(specs_by_name)
        if i in refused:
            out.append(Response.CreatableTopicResult(
                name=spec.name, error_code=ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                error_message=THROTTLED_MESSAGE, configs=[]))
            continue
        result = next(created)
        # a topic not created has no configs: an empty list, as Kafka (never null)
        entry = Response.CreatableTopicResult(
            name=result.name, error_code=result.error_code,
            error_message=result.error_message if version >= 1 else None, configs=[])
        if result.error_code == 0:
            entry.topic_id = result.topic_id
            if version >= 5 and result.name not in describable:
                # Created, but its settings are not the caller's to see (KIP-525): as Kafka,
                # no configs and -1 for the counts.
                entry.topic_config_error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                out.append(entry)
                continue
            entry.num_partitions = result.num_partitions
            entry.replication_factor = result.replication_factor
            if version >= 5:
                entry.configs = [
                    Response.CreatableTopicConfigs(
                        name=described.name, value=described.value, read_only=described.read_only,
                        config_source=int(described.source), is_sensitive=described.sensitive)
                    for described in ctx.config.describe_topic(dict(result.configs))]
        out.append(entry)
    return Response(throttle_time_ms=0, topics=_duplicates_once(out, names, after=True, make=lambda name: (
        Response.CreatableTopicResult(name=name, error_code=ErrorCode.INVALID_REQUEST, configs=[],
                                      error_message=DUPLICATE_NAME if version >= 1 else None))))


def _duplicates_once(entries: list, names: list[str], *, after: bool, make) -> list:
    """As Kafka answers CreateTopics (after the others) and CreatePartitions (before them): a name
    asked more than once gets a single INVALID_REQUEST answer, made by `make(name)`."""
    counts = Counter(names)
    if len(counts) == len(names):
        return entries
    once = [make(name) for name in counts if counts[name] > 1]
    rest = [entry for entry in entries if counts[entry.name] == 1]
    return rest + once if after else once + rest


# ----------------------------------------------------------------------------------- DeleteTopics

async def handle_delete_topics(ctx, header, body):
    Response = messages.DeleteTopicsResponse
    version = header.api_version
    malformed = []
    if version >= 6:
        malformed = [t for t in body.topics if _malformed_deletion(t)]
        wellformed = [t for t in body.topics if not _malformed_deletion(t)]
        names = [t.name for t in wellformed if t.name is not None]
        ids = [t.topic_id for t in wellformed if t.name is None]
    else:
        names, ids = list(body.topic_names), []
    image = ctx.image
    known_ids = {i: image.topics_by_id[i].name for i in ids if i in image.topics_by_id}
    deletable = _allowed(ctx, AclOperation.DELETE, names + list(known_ids.values()))
    denied_names = [n for n in names if n not in deletable]
    denied_ids = [i for i in ids if i in known_ids and known_ids[i] not in deletable]
    names = [n for n in names if n in deletable]
    ids = [i for i in ids if i not in known_ids or known_ids[i] in deletable]
    quota = MutationQuota(ctx, header)
    refused_names, refused_ids = _refused_deletions(ctx, quota, names, ids)
    try:
        results = await ctx.controller.delete_topics(
            names=[n for n in names if n not in refused_names],
            topic_ids=[i for i in ids if i not in refused_ids])
    except ApiError as exc:
        return Response(throttle_time_ms=0, responses=[
            Response.DeletableTopicResult(name=name, error_code=exc.code) for name in names])
    quota.finish()
    out = [_throttled_deletion(name, topic_id, version) for name, topic_id in
           [(n, None) for n in refused_names] + [(None, i) for i in refused_ids]]
    out += [Response.DeletableTopicResult(name=t.name, topic_id=t.topic_id,
                                          error_code=ErrorCode.INVALID_REQUEST,
                                          error_message=_malformed_deletion(t)) for t in malformed]
    # Refused by name or id: TOPIC_AUTHORIZATION_FAILED, the name never revealed for an id.
    results = list(results) + [
        DeleteTopicResult(name=n, topic_id=ZERO_UUID, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                          error_message=TOPIC_AUTHORIZATION_FAILED) for n in denied_names] + [
        DeleteTopicResult(name=None, topic_id=i, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                          error_message=TOPIC_AUTHORIZATION_FAILED) for i in denied_ids]
    for result in results:
        entry = Response.DeletableTopicResult(name=result.name, error_code=result.error_code)
        if version >= 5:
            entry.error_message = result.error_message
        if version >= 6:
            entry.topic_id = result.topic_id
            if result.error_code == ErrorCode.UNKNOWN_TOPIC_ID:
                entry.name = None
        out.append(entry)
    return Response(throttle_time_ms=0, responses=out)


def _malformed_deletion(state) -> str | None:
    """Why a v6+ DeleteTopics entry names its topic wrongly (by both name and id, or by neither)."""
    if state.name is not None and state.topic_id != ZERO_UUID:
        return "You may not specify both topic name and topic id."
    if state.name is None and state.topic_id == ZERO_UUID:
        return "Neither topic name nor id were specified."
    return None


def _refused_deletions(ctx, quota, names, ids) -> tuple[list, list]:
    """Charge each existing topic's partitions; (names, ids) refused by a strict quota."""
    refused_names, refused_ids = [], []
    if not quota.enabled:
        return refused_names, refused_ids
    image = ctx.image
    for name in names:
        topic = image.topics.get(name)
        if topic is not None and not quota.admit(len(topic.partitions)):
            refused_names.append(name)
    for topic_id in ids:
        topic = image.topics_by_id.get(topic_id)
        if topic is not None and not quota.admit(len(topic.partitions)):
            refused_ids.append(topic_id)
    return refused_names, refused_ids


def _throttled_deletion(name, topic_id, version):
    Response = messages.DeleteTopicsResponse
    entry = Response.DeletableTopicResult(name=name, error_code=ErrorCode.THROTTLING_QUOTA_EXCEEDED)
    if version >= 5:
        entry.error_message = THROTTLED_MESSAGE
    if version >= 6:
        entry.topic_id = topic_id if topic_id is not None else ZERO_UUID
    return entry


# ------------------------------------------------------------------------------- CreatePartitions

async def handle_create_partitions(ctx, header, body):
    Response = messages.CreatePartitionsResponse
    alterable = _allowed(ctx, AclOperation.ALTER, (topic.name for topic in body.topics))
    specs = [
        CreatePartitionsSpec(
            name=topic.name, count=topic.count,
            assignments=[list(a.broker_ids) for a in topic.assignments]
            if topic.assignments else None)
        for topic in body.topics if topic.name in alterable
    ]
    quota = MutationQuota(ctx, header)
    refused: set[int] = set()
    denied = [Response.CreatePartitionsTopicResult(
        name=topic.name, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        error_message=AUTHORIZATION_FAILED) for topic in body.topics if topic.name not in alterable]
    try:
        if quota.enabled and not body.validate_only:
            planned = await ctx.controller.create_partitions(specs, validate_only=True)
            image = ctx.image
            for i, (spec, result) in enumerate(zip(specs, planned)):
                topic = image.topics.get(spec.name)
                if result.error_code == 0 and topic is not None \
                        and not quota.admit(spec.count - len(topic.partitions)):
                    refused.add(i)
        results = iter(await ctx.controller.create_partitions(
            [spec for i, spec in enumerate(specs) if i not in refused],
            validate_only=body.validate_only))
    except ApiError as exc:
        return Response(throttle_time_ms=0, results=[
            Response.CreatePartitionsTopicResult(name=spec.name, error_code=exc.code,
                                                 error_message=exc.message) for spec in specs]
            + denied)
    quota.finish()
    out = []
    for i, spec in enumerate(specs):
        if i in refused:
            out.append(Response.CreatePartitionsTopicResult(
                name=spec.name, error_code=ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                error_message=THROTTLED_MESSAGE))
            continue
        result = next(results)
        out.append(Response.CreatePartitionsTopicResult(
            name=result.name, error_code=result.error_code, error_message=result.error_message))
    return Response(throttle_time_ms=0, results=_duplicates_once(
        out + denied, [topic.name for topic in body.topics], after=False,
        make=lambda name: Response.CreatePartitionsTopicResult(
            name=name, error_code=ErrorCode.INVALID_REQUEST, error_message=DUPLICATE_NAME)))


# ---------------------------------------------------------------------------------- DeleteRecords

async def handle_delete_records(ctx, header, body):
    """The leader moves its log start first; then, as Kafka's DelayedDeleteRecords, the answer waits
    (up to the request's timeout) until every live replica's log start offset reached it too."""
    Response = messages.DeleteRecordsResponse
    deletable = _allowed(ctx, AclOperation.DELETE, (topic.name for topic in body.topics))
    topics = []
    waits = []       # (answer, partition, offset)
    for topic in body.topics:
        partitions = []
        for request in topic.partitions:
            if topic.name not in deletable:
                partitions.append(Response.DeleteRecordsPartitionResult(
                    partition_index=request.partition_index, low_watermark=-1,
                    error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            low_watermark, error, partition = await ctx.partitions.delete_records(
                topic.name, request.partition_index, request.offset)
            answer = Response.DeleteRecordsPartitionResult(
                partition_index=request.partition_index, low_watermark=low_watermark,
                error_code=error)
            partitions.append(answer)
            if not error:
                waits.append((answer, partition, low_watermark))
        topics.append(Response.DeleteRecordsTopicResult(name=topic.name, partitions=partitions))
    if waits:
        outcomes = await ctx.partitions.replication.wait_for_low_watermarks(
            [(partition, offset) for _, partition, offset in waits], body.timeout_ms / 1000)
        for (answer, _, _), (error, low_watermark) in zip(waits, outcomes):
            answer.error_code, answer.low_watermark = error, low_watermark if not error else -1
    return Response(throttle_time_ms=0, topics=topics)


HANDLERS = {
    19: (0, 7, handle_create_topics),
    20: (0, 6, handle_delete_topics),
    37: (0, 3, handle_create_partitions),
    21: (0, 2, handle_delete_records),
}
