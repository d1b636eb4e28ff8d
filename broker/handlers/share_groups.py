"""KIP-932 share group membership APIs: ShareGroupHeartbeat (76) and ShareGroupDescribe (77).

Thin translations to `broker.coordinator.share_group`; share groups are on while the `share.version`
feature is finalized at 1+ or `group.share.enable=true` (`broker.share.manager.enabled`), else
ShareGroupHeartbeat answers UNSUPPORTED_VERSION, as Kafka's."""

from __future__ import annotations

from protocol import ErrorCode, messages

from broker.coordinator.service import CoordinatorService
from broker.coordinator.share_group.coordinator import ShareHeartbeat
from broker.handlers.common import OPERATIONS_NOT_REQUESTED
from broker.security import access
from broker.security.acls import AclOperation, ResourceType
from broker.share.manager import enabled

E = ErrorCode


def share_groups_enabled(ctx) -> bool:
    return enabled(ctx.broker.config, ctx.finalized_features())


async def share_group_heartbeat(ctx, header, body):
    Response = messages.ShareGroupHeartbeatResponse
    if not share_groups_enabled(ctx):
        return Response(error_code=E.UNSUPPORTED_VERSION, error_message="Share groups are not enabled "
                        "(the share.version feature, or group.share.enable).")
    denied = [t for t in body.subscribed_topic_names or ()
              if not access.allowed(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, t, log_if_denied=False)]
    if denied:
        return Response(error_code=E.TOPIC_AUTHORIZATION_FAILED, error_message="Topic authorization failed.")
    service = await CoordinatorService.of(ctx.broker)
    code = await service.group_coordinator_error(body.group_id)
    if code is not E.NONE:
        return Response(error_code=code, error_message=code.name)
    mark = service.write_mark()
    result = service.share_groups.heartbeat(ShareHeartbeat(
        body.group_id, body.member_id, body.member_epoch, body.rack_id, body.subscribed_topic_names,
        client_id=header.client_id or "", client_host="/" + ctx.connection.peer.rsplit(":", 1)[0]))
    unacknowledged = await service.settle(since=mark)
    error = result.error if result.error is not E.NONE else unacknowledged
    if error is not E.NONE:
        return Response(error_code=error, error_message=result.message or error.name)
    assignment = None if result.assignment is None else Response.Assignment(topic_partitions=[
        Response.TopicPartitions(topic_id=t, partitions=sorted(p))
        for t, p in sorted(result.assignment.items(), key=lambda kv: str(kv[0]))])
    return Response(error_code=E.NONE, member_id=result.member_id, member_epoch=result.member_epoch,
                    heartbeat_interval_ms=result.heartbeat_interval_ms, assignment=assignment)


async def share_group_describe(ctx, header, body):
    Response = messages.ShareGroupDescribeResponse
    service = await CoordinatorService.of(ctx.broker)
    names = {t.topic_id: name for name, t in ctx.broker.image.topics.items()}
    out = []
    for group_id in body.group_ids:
        ops = access.authorized_operations(ctx, ResourceType.GROUP, group_id) \
            if body.include_authorized_operations else OPERATIONS_NOT_REQUESTED
        if not access.allowed(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id or ""):
            out.append(Response.DescribedGroup(group_id=group_id, error_code=E.GROUP_AUTHORIZATION_FAILED,
                                               authorized_operations=ops))
            continue
        code = await service.group_coordinator_error(group_id)
        group = service.share_groups.describe(group_id) if code is E.NONE else None
        if code is E.NONE and group is None:
            code = E.GROUP_ID_NOT_FOUND
        if code is not E.NONE:
            out.append(Response.DescribedGroup(group_id=group_id, error_code=code, error_message=code.name,
                                               authorized_operations=ops))
            continue

        def assignment(partitions):
            return Response.Assignment(topic_partitions=[
                Response.TopicPartitions(topic_id=t, topic_name=names.get(t, ""), partitions=sorted(p))
                for t, p in sorted(partitions.items(), key=lambda kv: names.get(kv[0], str(kv[0])))])
        out.append(Response.DescribedGroup(
            group_id=group_id, group_state=group.state().value, group_epoch=group.group_epoch,
            assignment_epoch=group.assignment_epoch, assignor_name="simple", authorized_operations=ops,
            members=[Response.Member(member_id=m.member_id, rack_id=m.rack_id, member_epoch=m.member_epoch,
                                     client_id=m.client_id, client_host=m.client_host,
                                     subscribed_topic_names=list(m.subscribed_topic_names),
                                     assignment=assignment(m.assigned))
                     for m in group.members.values()]))
    return Response(groups=out)


HANDLERS = {
    76: (1, 1, share_group_heartbeat),
    77: (1, 1, share_group_describe),
}
