"""Topic administration: CreateTopics (19), DeleteTopics (20), CreatePartitions (37), DeleteRecords (21).

Topic-level changes go through the controller and are committed to the metadata log before the answer;
the partition logs follow from the image listener (``broker.partitions``). DeleteRecords moves a log's
start offset in storage.
"""

from __future__ import annotations

import uuid


from protocol import ErrorCode, messages

from broker.controller.controller import CreatePartitionsSpec, CreateTopicSpec
from broker.controller.errors import ApiError
from broker.quotas.mutations import THROTTLED_MESSAGE, MutationQuota

ZERO_UUID = uuid.UUID(int=0)


# ----------------------------------------------------------------------------------- CreateTopics

async def handle_create_topics(ctx, header, body):
    Response = messages.CreateTopicsResponse
    version = header.api_version
    specs = []
    for topic in body.topics:
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
                                          error_message=exc.message) for spec in specs])
    quota.finish()
    out = []
    for i, spec in enumerate(specs):
        if i in refused:
            out.append(Response.CreatableTopicResult(
                name=spec.name, error_code=ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                error_message=THROTTLED_MESSAGE, configs=None))
            continue
        result = next(created)
        entry = Response.CreatableTopicResult(
            name=result.name, error_code=result.error_code,
            error_message=result.error_message if version >= 1 else None)
        if result.error_code == 0:
            entry.topic_id = result.topic_id
            entry.num_partitions = result.num_partitions
            entry.replication_factor = result.replication_factor
            if version >= 5:
                entry.configs = [
                    Response.CreatableTopicConfigs(
                        name=described.name, value=described.value, read_only=described.read_only,
                        config_source=int(described.source), is_sensitive=described.sensitive)
                    for described in ctx.config.describe_topic(dict(result.configs))]
        elif version >= 5:
            entry.configs = None
        out.append(entry)
    return Response(throttle_time_ms=0, topics=out)


# ----------------------------------------------------------------------------------- DeleteTopics

async def handle_delete_topics(ctx, header, body):
    Response = messages.DeleteTopicsResponse
    version = header.api_version
    if version >= 6:
        names = [t.name for t in body.topics if t.name is not None]
        ids = [t.topic_id for t in body.topics if t.name is None]
    else:
        names, ids = list(body.topic_names), []
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
    specs = [
        CreatePartitionsSpec(
            name=topic.name, count=topic.count,
            assignments=[list(a.broker_ids) for a in topic.assignments]
            if topic.assignments else None)
        for topic in body.topics
    ]
    quota = MutationQuota(ctx, header)
    refused: set[int] = set()
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
                                                 error_message=exc.message) for spec in specs])
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
    return Response(throttle_time_ms=0, results=out)


# ---------------------------------------------------------------------------------- DeleteRecords

async def handle_delete_records(ctx, header, body):
    Response = messages.DeleteRecordsResponse
    topics = []
    for topic in body.topics:
        partitions = []
        for request in topic.partitions:
            low_watermark, error = await ctx.partitions.delete_records(
                topic.name, request.partition_index, request.offset)
            partitions.append(Response.DeleteRecordsPartitionResult(
                partition_index=request.partition_index, low_watermark=low_watermark,
                error_code=error))
        topics.append(Response.DeleteRecordsTopicResult(name=topic.name, partitions=partitions))
    return Response(throttle_time_ms=0, topics=topics)


HANDLERS = {
    19: (2, 7, handle_create_topics),
    20: (1, 6, handle_delete_topics),
    37: (0, 3, handle_create_partitions),
    21: (0, 2, handle_delete_records),
}
