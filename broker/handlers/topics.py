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
    try:
        results = await ctx.controller.create_topics(specs, validate_only=body.validate_only)
    except ApiError as exc:
        return Response(throttle_time_ms=0, topics=[
            Response.CreatableTopicResult(name=spec.name, error_code=exc.code,
                                          error_message=exc.message) for spec in specs])
    out = []
    for result in results:
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
    try:
        results = await ctx.controller.delete_topics(names=names, topic_ids=ids)
    except ApiError as exc:
        return Response(throttle_time_ms=0, responses=[
            Response.DeletableTopicResult(name=name, error_code=exc.code) for name in names])
    out = []
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
    try:
        results = await ctx.controller.create_partitions(specs, validate_only=body.validate_only)
    except ApiError as exc:
        return Response(throttle_time_ms=0, results=[
            Response.CreatePartitionsTopicResult(name=spec.name, error_code=exc.code,
                                                 error_message=exc.message) for spec in specs])
    return Response(throttle_time_ms=0, results=[
        Response.CreatePartitionsTopicResult(name=result.name, error_code=result.error_code,
                                             error_message=result.error_message)
        for result in results])


# ---------------------------------------------------------------------------------- DeleteRecords

async def handle_delete_records(ctx, header, body):
    """The leader moves its log start first; then, as Kafka's DelayedDeleteRecords, the answer waits
    (up to the request's timeout) until every live replica's log start offset reached it too."""
    Response = messages.DeleteRecordsResponse
    topics = []
    waits = []       # (answer, partition, offset)
    for topic in body.topics:
        partitions = []
        for request in topic.partitions:
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
    19: (2, 7, handle_create_topics),
    20: (1, 6, handle_delete_topics),
    37: (0, 3, handle_create_partitions),
    21: (0, 2, handle_delete_records),
}
