"""KIP-848 consumer group APIs: ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69).

Thin translations between wire bodies and `broker.coordinator.consumer_group`'s core; the rules live
there. OffsetCommit/OffsetFetch, ListGroups, DescribeGroups and DeleteGroups consult the same core
from `groups.py`.
"""

from __future__ import annotations

from protocol import ErrorCode, messages

from broker.coordinator.consumer_group.coordinator import HeartbeatRequest
from broker.coordinator.service import OFFSETS_TOPIC, CoordinatorService
from broker.handlers.common import OPERATIONS_NOT_REQUESTED
from broker.security import access
from broker.security.acls import AclOperation, ResourceType

E = ErrorCode
Op, RT = AclOperation, ResourceType


def consumer_protocol_enabled(ctx) -> bool:
    return "consumer" in ctx.broker.config["group.coordinator.rebalance.protocols"]


# ---- ConsumerGroupHeartbeat (68) ----------------------------------------------------------------------
async def consumer_group_heartbeat(ctx, header, body):
    Response = messages.ConsumerGroupHeartbeatResponse
    if not consumer_protocol_enabled(ctx):
        return Response(error_code=E.UNSUPPORTED_VERSION, error_message="The new consumer group protocol is "
                        "not enabled (group.coordinator.rebalance.protocols).")
    service = await CoordinatorService.of(ctx.broker)
    code = service.group_coordinator_error(body.group_id)
    if code is not E.NONE:
        return Response(error_code=code)     # as Kafka: its generic errors carry no message
    owned = None if body.topic_partitions is None else \
        {tp.topic_id: frozenset(tp.partitions) for tp in body.topic_partitions}
    mark = service.write_mark()
    result = service.consumer_groups.heartbeat(HeartbeatRequest(
        body.group_id, body.member_id, body.member_epoch, body.instance_id, body.rack_id,
        body.rebalance_timeout_ms, body.subscribed_topic_names,
        body.subscribed_topic_regex if header.api_version >= 1 else None, body.server_assignor, owned,
        client_id=header.client_id or "", client_host="/" + ctx.connection.peer.rsplit(":", 1)[0],
        version=header.api_version))
    unacknowledged = await service.settle(since=mark)
    if result.error is E.NONE and unacknowledged is E.NONE:
        # the answer may rest on other members' writes that have not committed (their own answers
        # gave up waiting): it goes out once the group's partition has committed all it holds
        unacknowledged = await service.caught_up(OFFSETS_TOPIC, service.offsets_partition(body.group_id))
    error = result.error if result.error is not E.NONE else unacknowledged
    if error is not E.NONE:
        return Response(error_code=error, error_message=result.message or error.name)
    assignment = None if result.assignment is None else Response.Assignment(topic_partitions=[
        Response.TopicPartitions(topic_id=t, partitions=sorted(p))
        for t, p in sorted(result.assignment.items(), key=lambda kv: str(kv[0]))])
    return Response(error_code=E.NONE, member_id=result.member_id, member_epoch=result.member_epoch,
                    heartbeat_interval_ms=result.heartbeat_interval_ms, assignment=assignment)


# ---- ConsumerGroupDescribe (69) -----------------------------------------------------------------------
async def consumer_group_describe(ctx, header, body):
    Response = messages.ConsumerGroupDescribeResponse
    service = await CoordinatorService.of(ctx.broker)
    out = []
    for group_id in body.group_ids:
        # Only a described group carries the operations (Kafka sets them where the error is NONE).
        ops = access.authorized_operations(ctx, RT.GROUP, group_id) \
            if body.include_authorized_operations else OPERATIONS_NOT_REQUESTED
        if not access.allowed(ctx, Op.DESCRIBE, RT.GROUP, group_id or ""):
            out.append(Response.DescribedGroup(group_id=group_id, error_code=E.GROUP_AUTHORIZATION_FAILED))
            continue
        code = service.group_coordinator_error(group_id)
        if code is not E.NONE:
            out.append(Response.DescribedGroup(group_id=group_id, error_code=code))
            continue
        out.append(describe_one(ctx, service, group_id, header.api_version, ops))
    return Response(groups=out)


def describe_one(ctx, service, group_id, version, ops):
    Response = messages.ConsumerGroupDescribeResponse
    core = service.consumer_groups
    group = core.describe(group_id)
    if group is None:
        # an unknown id, or one a classic group holds: Kafka 3.9 answers just the error code
        return Response.DescribedGroup(group_id=group_id, error_code=E.GROUP_ID_NOT_FOUND)
    names = {t.topic_id: name for name, t in ctx.broker.image.topics.items()}

    def assignment(partitions):
        return Response.Assignment(topic_partitions=[
            Response.TopicPartitions(topic_id=t, topic_name=names.get(t, ""), partitions=sorted(p))
            for t, p in sorted(partitions.items(), key=lambda kv: names.get(kv[0], str(kv[0])))])

    members = [Response.Member(
        member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id, member_epoch=m.member_epoch,
        client_id=m.client_id, client_host=m.client_host, subscribed_topic_names=list(m.subscribed_topic_names),
        subscribed_topic_regex=m.subscribed_topic_regex or "",   # Kafka: "" when subscribed by name
        assignment=assignment(m.assigned),
        target_assignment=assignment(group.target.get(m.member_id, {})),
        member_type=-1 if version < 1 else 0 if m.classic is not None else 1)   # 0: a classic-protocol member
        for m in group.members.values()]
    return Response.DescribedGroup(
        group_id=group_id, group_state=group.state().value, group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch, assignor_name=core.assignor_name(group), members=members,
        authorized_operations=ops)


HANDLERS = {
    68: (0, 1, consumer_group_heartbeat),
    69: (0, 1, consumer_group_describe),
}
