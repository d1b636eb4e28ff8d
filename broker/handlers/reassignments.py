"""AlterPartitionReassignments (key 45) and ListPartitionReassignments (key 46), v0: the active
controller decides (``broker.controller.reassignment``); a broker forwards them there. The same handlers
serve the controller listener (``broker.cluster.controller_api``)."""

from __future__ import annotations

from protocol import ErrorCode, messages

from broker.controller.errors import ApiError


async def handle_alter_partition_reassignments(ctx, header, body):
    Response = messages.AlterPartitionReassignmentsResponse
    requested = [(t.name, [(p.partition_index, None if p.replicas is None else list(p.replicas))
                           for p in t.partitions]) for t in body.topics]
    try:
        results = await ctx.controller.alter_partition_reassignments(requested)
    except ApiError as exc:
        return Response(throttle_time_ms=0, error_code=int(exc.code), error_message=exc.message,
                        responses=[])
    return Response(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, responses=[
        Response.ReassignableTopicResponse(name=name, partitions=[
            Response.ReassignablePartitionResponse(partition_index=p, error_code=code,
                                                   error_message=message)
            for p, code, message in partitions])
        for name, partitions in results])


async def handle_list_partition_reassignments(ctx, header, body):
    Response = messages.ListPartitionReassignmentsResponse
    requested = (None if body.topics is None
                 else [(t.name, list(t.partition_indexes)) for t in body.topics])
    try:
        ongoing = await ctx.controller.list_partition_reassignments(requested)
    except ApiError as exc:
        return Response(throttle_time_ms=0, error_code=int(exc.code), error_message=exc.message,
                        topics=[])
    return Response(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, topics=[
        Response.OngoingTopicReassignment(name=name, partitions=[
            Response.OngoingPartitionReassignment(partition_index=p, replicas=replicas,
                                                  adding_replicas=adding, removing_replicas=removing)
            for p, replicas, adding, removing in partitions])
        for name, partitions in ongoing])


HANDLERS = {
    45: (0, 0, handle_alter_partition_reassignments),
    46: (0, 0, handle_list_partition_reassignments),
}
