"""KIP-932 share group APIs of the group coordinator: ShareGroupHeartbeat (76), ShareGroupDescribe (77)
and DescribeShareGroupOffsets (90, Admin.listShareGroupOffsets).

Thin translations to `broker.coordinator.share_group`; share groups are on while the `share.version`
feature is finalized at 1+ or `group.share.enable=true` (`broker.share.manager.enabled`), else
ShareGroupHeartbeat answers UNSUPPORTED_VERSION, as Kafka's."""

from __future__ import annotations

import uuid

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
    code = service.group_coordinator_error(body.group_id)
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
        code = service.group_coordinator_error(group_id)
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


async def describe_share_group_offsets(ctx, header, body):
    """Each share-partition's start offset (-1 before the group first fetched it), the leader epoch of its
    last write and, from v1, its lag (records at or past the start offset not yet delivered for good;
    -1 when the partition is not led here)."""
    Response = messages.DescribeShareGroupOffsetsResponse
    service = await CoordinatorService.of(ctx.broker)
    image = ctx.broker.image
    out = []
    for asked in body.groups:
        group_id = asked.group_id
        if not access.allowed(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id or ""):
            code = E.GROUP_AUTHORIZATION_FAILED
        else:
            code = service.group_coordinator_error(group_id)
        group = service.share_groups.describe(group_id) if code is E.NONE else None
        if code is E.NONE and group is None:
            code = E.GROUP_ID_NOT_FOUND
        if code is not E.NONE:
            out.append(Response.DescribeShareGroupOffsetsResponseGroup(group_id=group_id, error_code=code,
                                                                      error_message=code.name, topics=[]))
            continue
        if asked.topics is None:        # every topic the group consumes or has state for
            ids = {k[1] for k in service.share_states.states if k[0] == group_id} | set(group.state_topics)
            names = {n for m in group.members.values() for n in m.subscribed_topic_names}
            names |= {t.name for t in (image.topics_by_id.get(i) for i in ids) if t is not None}
            wanted = [(n, sorted(image.topics[n].partitions)) for n in sorted(names) if n in image.topics]
        else:
            wanted = [(t.topic_name, list(t.partitions)) for t in asked.topics]
        topics = []
        for name, indexes in wanted:
            topic = image.topics.get(name)
            if topic is None or not access.allowed(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, name,
                                                   log_if_denied=False):
                error = E.UNKNOWN_TOPIC_OR_PARTITION if topic is None else E.TOPIC_AUTHORIZATION_FAILED
                topics.append(Response.DescribeShareGroupOffsetsResponseTopic(
                    topic_name=name, topic_id=_NO_ID, partitions=[Response.DescribeShareGroupOffsetsResponsePartition(
                        partition_index=i, start_offset=-1, leader_epoch=-1, lag=-1, error_code=error,
                        error_message=error.name) for i in indexes]))
                continue
            partitions = []
            for index in indexes:
                code, start, leader_epoch, done = await service.share_partitions.persister.read_summary(
                    (group_id, topic.topic_id, index))
                lag = -1
                local = ctx.partitions.get(name, index)
                if code is E.NONE and start >= 0 and local is not None and local.leader == ctx.broker.node_id:
                    lag = max(local.log.high_watermark - start - done, 0)
                partitions.append(Response.DescribeShareGroupOffsetsResponsePartition(
                    partition_index=index, start_offset=start, leader_epoch=leader_epoch, lag=lag, error_code=code,
                    error_message=None if code is E.NONE else code.name))
            topics.append(Response.DescribeShareGroupOffsetsResponseTopic(topic_name=name, topic_id=topic.topic_id,
                                                                          partitions=partitions))
        out.append(Response.DescribeShareGroupOffsetsResponseGroup(group_id=group_id, topics=topics))
    return Response(groups=out)


_NO_ID = uuid.UUID(int=0)

HANDLERS = {
    76: (1, 1, share_group_heartbeat),
    77: (1, 1, share_group_describe),
    90: (0, 1, describe_share_group_offsets),
}
