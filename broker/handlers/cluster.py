"""Cluster views: DescribeCluster (60), DescribeTopicPartitions (75), ElectLeaders (43)."""

from __future__ import annotations

from protocol import ErrorCode, messages

from broker.controller.errors import ApiError
from broker.handlers import common
from broker.handlers.metadata import cluster_operations
from broker.security import access
from broker.security.acls import AclOperation, ResourceType

BROKERS_ENDPOINT_TYPE, CONTROLLERS_ENDPOINT_TYPE = 1, 2
_ENDPOINT_NAMES = {BROKERS_ENDPOINT_TYPE: "BROKER", CONTROLLERS_ENDPOINT_TYPE: "CONTROLLER"}


def refused_endpoint_type(header, body, served: int):
    """DescribeCluster asking a listener for the other kind of node (or an unknown kind): the error
    answer, as Kafka gives it; None when this listener serves what is asked (v0 asks for brokers)."""
    asked = body.endpoint_type if header.api_version >= 1 else BROKERS_ENDPOINT_TYPE
    if asked == served:
        return None
    if asked not in _ENDPOINT_NAMES:
        code, message = ErrorCode.UNSUPPORTED_ENDPOINT_TYPE, f"Unsupported endpoint type {asked}"
    else:
        code = ErrorCode.MISMATCHED_ENDPOINT_TYPE if header.api_version >= 1 else ErrorCode.INVALID_REQUEST
        message = (f"The request was sent to an endpoint of type {_ENDPOINT_NAMES[served]}, "
                   f"but we wanted an endpoint of type {_ENDPOINT_NAMES[asked]}")
    return messages.DescribeClusterResponse(throttle_time_ms=0, error_code=code, error_message=message,
                                            endpoint_type=BROKERS_ENDPOINT_TYPE, cluster_id="",
                                            controller_id=-1, brokers=[])


async def handle_describe_cluster(ctx, header, body):
    Response = messages.DescribeClusterResponse
    image = ctx.image
    refused = refused_endpoint_type(header, body, BROKERS_ENDPOINT_TYPE)
    if refused is not None:
        return refused
    # v2 (KIP-1073) may ask for fenced brokers too, each marked.
    with_fenced = header.api_version >= 2 and body.include_fenced_brokers
    brokers = []
    for broker in sorted(image.brokers.values(), key=lambda b: b.broker_id):
        endpoint = next((e for e in broker.endpoints if e.name == ctx.connection.listener_name),
                        None)
        if endpoint is None or (broker.fenced and not with_fenced):
            continue
        brokers.append(Response.DescribeClusterBroker(
            broker_id=broker.broker_id, host=endpoint.host, port=endpoint.port, rack=broker.rack,
            is_fenced=broker.fenced))
    return Response(
        throttle_time_ms=0, error_code=0, error_message=None, endpoint_type=BROKERS_ENDPOINT_TYPE,
        cluster_id=image.cluster_id, controller_id=ctx.node_id, brokers=brokers,
        cluster_authorized_operations=(cluster_operations(ctx)
                                       if body.include_cluster_authorized_operations
                                       else common.OPERATIONS_NOT_REQUESTED))


# ------------------------------------------------------------------------ DescribeTopicPartitions

async def handle_describe_topic_partitions(ctx, header, body):
    Response = messages.DescribeTopicPartitionsResponse
    if body.cursor is not None and body.cursor.partition_index < 0:
        # as Kafka: the request is refused, INVALID_REQUEST for each topic it names
        return Response(throttle_time_ms=0, next_cursor=None, topics=[
            Response.DescribeTopicPartitionsResponseTopic(error_code=ErrorCode.INVALID_REQUEST, name=t.name,
                                                          is_internal=False, partitions=[])
            for t in body.topics])
    image = ctx.image
    live = {b.broker_id for b in image.brokers.values() if not b.fenced}
    if body.topics:
        names = sorted({t.name for t in body.topics})
        visible = access.allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
    else:
        names = sorted(image.topics)
        visible = access.allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names,
                                       log_if_denied=False)
    # Named topics the principal may not DESCRIBE are refused (after the others, as Kafka);
    # when listing all, they are left out.
    refused = [Response.DescribeTopicPartitionsResponseTopic(
        error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name, is_internal=False,
        partitions=[]) for name in names if name not in visible] if body.topics else []
    names = [name for name in names if name in visible]
    cursor = body.cursor
    if cursor is not None:
        names = [n for n in names if n >= cursor.topic_name]
    budget = max(body.response_partition_limit, 1)
    topics, next_cursor = [], None
    for name in names:
        topic = image.topics.get(name)
        if topic is None:
            topics.append(Response.DescribeTopicPartitionsResponseTopic(   # operations: as Kafka
                error_code=(ErrorCode.INVALID_TOPIC_EXCEPTION if common.topic_name_error(name)
                            else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                name=name, is_internal=False, partitions=[],
                topic_authorized_operations=access.authorized_operations(ctx, ResourceType.TOPIC,
                                                                         name)))
            continue
        start = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        indexes = [i for i in sorted(topic.partitions) if i >= start]
        if budget <= 0:
            next_cursor = Response.Cursor(topic_name=name, partition_index=start)
            break
        taken, rest = indexes[:budget], indexes[budget:]
        budget -= len(taken)
        partitions = []
        for index in taken:
            partition = topic.partitions[index]
            partitions.append(Response.DescribeTopicPartitionsResponsePartition(
                error_code=0, partition_index=index, leader_id=partition.leader,
                leader_epoch=partition.leader_epoch, replica_nodes=list(partition.replicas),
                isr_nodes=list(partition.isr), eligible_leader_replicas=[], last_known_elr=[],
                offline_replicas=[b for b in partition.replicas if b not in live]))
        topics.append(Response.DescribeTopicPartitionsResponseTopic(
            error_code=0, name=name, topic_id=topic.topic_id, is_internal=common.is_internal(name),
            partitions=partitions,
            topic_authorized_operations=access.authorized_operations(ctx, ResourceType.TOPIC,
                                                                     name)))
        if rest:
            next_cursor = Response.Cursor(topic_name=name, partition_index=rest[0])
            break
    return Response(throttle_time_ms=0, topics=topics + refused, next_cursor=next_cursor)


# ----------------------------------------------------------------------------------- ElectLeaders

async def handle_elect_leaders(ctx, header, body):
    """The controller decides (preferred or unclean election, Kafka's per-partition errors)."""
    Response = messages.ElectLeadersResponse

    def every_partition_fails(code):
        # v0 has no top-level error code: there each partition carries it alone
        return Response(throttle_time_ms=0, error_code=code if header.api_version >= 1 else 0,
                        replica_election_results=[
            Response.ReplicaElectionResult(topic=t.topic, partition_result=[
                Response.PartitionResult(partition_id=index, error_code=code,
                                         error_message=None) for index in t.partitions])
            for t in body.topic_partitions or []])

    if not access.cluster_allowed(ctx, AclOperation.ALTER):
        return every_partition_fails(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    if body.timeout_ms <= 0 and body.topic_partitions != []:
        # Kafka's controller finds the deadline already past before it looks at anything else
        # (but answers an empty list at once, whatever its timeout).
        return every_partition_fails(ErrorCode.REQUEST_TIMED_OUT)
    election_type = body.election_type if header.api_version >= 1 else 0
    requested = (None if body.topic_partitions is None
                 else [(t.topic, list(t.partitions)) for t in body.topic_partitions])
    try:
        results = await ctx.controller.elect_leaders(election_type, requested)
    except ApiError as exc:     # e.g. an unknown election type: every partition says so too
        error_code = int(exc.code)
        results = [(name, [(p, error_code, exc.message) for p in partitions])
                   for name, partitions in requested or []]
    else:
        error_code = 0
    return Response(throttle_time_ms=0, error_code=error_code, replica_election_results=[
        Response.ReplicaElectionResult(topic=name, partition_result=[
            Response.PartitionResult(partition_id=p, error_code=code, error_message=message)
            for p, code, message in partitions])
        for name, partitions in results])


HANDLERS = {
    60: (0, 2, handle_describe_cluster),
    75: (0, 0, handle_describe_topic_partitions),
    43: (0, 2, handle_elect_leaders),
}
