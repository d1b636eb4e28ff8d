"""KIP-932's share-group offset admin APIs of the group coordinator: AlterShareGroupOffsets (91,
Admin.alterShareGroupOffsets) and DeleteShareGroupOffsets (92, Admin.deleteShareGroupOffsets).

Both need an empty share group (NON_EMPTY_GROUP otherwise; GROUP_ID_NOT_FOUND for a group of another
type, or a missing group when deleting: altering creates it, as Kafka 4.2 does, so offsets can be set
before the group is first used). The group epoch is bumped first, then each share-partition's state is
initialized at the new start offset (state epoch = the new group epoch, which fences a leader still
holding the old state) or deleted (the next fetch starts at `share.auto.offset.reset`), at its share
coordinator (`broker.share.persister`).
"""

from __future__ import annotations

import uuid

from protocol import ErrorCode, messages

from broker.coordinator.service import CoordinatorService
from broker.handlers.share_fetch import share_state_ready
from broker.handlers.share_groups import share_groups_enabled
from broker.security import access
from broker.security.acls import AclOperation, ResourceType

E = ErrorCode
_NO_ID = uuid.UUID(int=0)


async def _begin(ctx, group_id: str, operation: AclOperation, create: bool):
    """(service, new group epoch) or (None, the top-level error)."""
    if not share_groups_enabled(ctx):
        return None, E.UNSUPPORTED_VERSION
    if not group_id:
        return None, E.INVALID_GROUP_ID
    if not access.allowed(ctx, operation, ResourceType.GROUP, group_id):
        return None, E.GROUP_AUTHORIZATION_FAILED
    service = await CoordinatorService.of(ctx.broker)
    code = service.group_coordinator_error(group_id)
    if code is not E.NONE:
        return None, code
    code = await share_state_ready(service)
    if code is not E.NONE:
        return None, code
    if group_id not in service.share_groups.groups and (
            group_id in service.groups.groups or group_id in service.consumer_groups.groups):
        return None, E.GROUP_ID_NOT_FOUND       # a classic or consumer group (if only its offsets) by that id
    mark = service.write_mark()
    code, epoch = service.share_groups.begin_offsets_change(group_id, create)
    if code is E.NONE:
        code = await service.settle(since=mark)
    return (service, epoch) if code is E.NONE else (None, code)


def _topic_error(ctx, name: str):
    """The error for a whole topic (unknown, or not readable), else None."""
    if not access.allowed(ctx, AclOperation.READ, ResourceType.TOPIC, name, log_if_denied=False):
        return E.TOPIC_AUTHORIZATION_FAILED
    return None if name in ctx.broker.image.topics else E.UNKNOWN_TOPIC_OR_PARTITION


async def alter_share_group_offsets(ctx, header, body):
    Response = messages.AlterShareGroupOffsetsResponse

    async def topic_answer(service, epoch, asked, topic, topic_error):
        manager = service.share_partitions
        partitions = []
        for p in asked.partitions:
            if topic_error is not None:
                code = topic_error
            elif p.partition_index not in topic.partitions:
                code = E.UNKNOWN_TOPIC_OR_PARTITION
            elif p.start_offset < 0:
                code = E.INVALID_REQUEST
            else:
                key = (body.group_id, topic.topic_id, p.partition_index)
                code = await manager.persister.initialize(key, epoch, p.start_offset)
                if code is E.NONE:
                    manager.forget([key])         # a share-partition led here reloads the new state
                    code = service.share_groups.change_state_topics(body.group_id, {topic.topic_id: [
                        p.partition_index]}, add=True)
            partitions.append(Response.AlterShareGroupOffsetsResponsePartition(
                partition_index=p.partition_index, error_code=code,
                error_message=None if code is E.NONE else code.name))
        return Response.AlterShareGroupOffsetsResponseTopic(
            topic_name=asked.topic_name, topic_id=topic.topic_id if topic is not None else _NO_ID,
            partitions=partitions)
    return await _answer(ctx, body, Response, AclOperation.READ, True, topic_answer)


async def delete_share_group_offsets(ctx, header, body):
    Response = messages.DeleteShareGroupOffsetsResponse

    async def topic_answer(service, epoch, asked, topic, code):
        manager = service.share_partitions
        if code is None:
            keys = [(body.group_id, topic.topic_id, index) for index in sorted(topic.partitions)]
            code = await manager.persister.delete(keys)
            if code is E.NONE:
                manager.forget(keys)
                code = service.share_groups.change_state_topics(body.group_id, {topic.topic_id: ()}, add=False)
        return Response.DeleteShareGroupOffsetsResponseTopic(
            topic_name=asked.topic_name, topic_id=topic.topic_id if topic is not None else _NO_ID,
            error_code=code, error_message=None if code is E.NONE else code.name)
    return await _answer(ctx, body, Response, AclOperation.DELETE, False, topic_answer)


async def _answer(ctx, body, Response, operation: AclOperation, create: bool, topic_answer):
    """Check and bump the group, answer each topic with `topic_answer`, and respond once the share
    coordinators' writes made here are acknowledged."""
    service, epoch = await _begin(ctx, body.group_id, operation, create)
    if service is None:
        return Response(error_code=epoch, error_message=epoch.name)
    mark = service.write_mark()
    topics = [await topic_answer(service, epoch, asked, ctx.broker.image.topics.get(asked.topic_name),
                                 _topic_error(ctx, asked.topic_name))
              for asked in body.topics]
    code = await service.settle(since=mark)
    if code is not E.NONE:
        return Response(error_code=code, error_message=code.name)
    return Response(error_code=E.NONE, responses=topics)


HANDLERS = {
    91: (0, 0, alter_share_group_offsets),
    92: (0, 0, delete_share_group_offsets),
}
