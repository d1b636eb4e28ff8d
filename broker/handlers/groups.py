"""Consumer-group APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
OffsetFetch, ListGroups, DescribeGroups, DeleteGroups, OffsetDelete.

Thin translations between wire bodies and `broker.coordinator`'s cores; the rules live there.
"""

from __future__ import annotations

import trio

from protocol import ErrorCode, messages

from broker.coordinator.group_coordinator import OffsetCommitItem
from broker.coordinator.service import OFFSETS_TOPIC, TRANSACTION_TOPIC, CoordinatorError, CoordinatorService
from broker.handlers.common import OPERATIONS_NOT_REQUESTED
from broker.security import access
from broker.security.acls import AclOperation, ResourceType

E = ErrorCode
Op, RT = AclOperation, ResourceType
GROUP_KEY, TRANSACTION_KEY = 0, 1


def _group_allowed(ctx, operation, group_id, log_if_denied=True) -> bool:
    return access.allowed(ctx, operation, RT.GROUP, group_id or "", log_if_denied=log_if_denied)


def _topics_allowed(ctx, operation, names) -> set[str]:
    return access.allowed_names(ctx, operation, RT.TOPIC, names)


async def wait_for(pending):
    """Await a core's Pending result."""
    if not pending.done:
        event = trio.Event()
        pending.add_callback(lambda _: event.set())
        await event.wait()
    return pending.result


# ---- FindCoordinator (10) -----------------------------------------------------------------------------
async def find_coordinator(ctx, header, body):
    Response = messages.FindCoordinatorResponse
    version = header.api_version
    key_type = body.key_type if version >= 1 else GROUP_KEY
    keys = body.coordinator_keys if version >= 4 else [body.key]
    service = await CoordinatorService.of(ctx.broker)
    found = [await _locate(ctx, service, key_type, key) for key in keys]
    if version >= 4:
        return Response(coordinators=[Response.Coordinator(key=key, node_id=node, host=host, port=port,
                                                           error_code=code, error_message=message)
                                      for key, (code, message, node, host, port) in zip(keys, found)])
    code, message, node, host, port = found[0]
    response = Response(error_code=code, node_id=node, host=host, port=port)
    if version >= 1:
        response.error_message = message
    return response


async def _locate(ctx, service, key_type, key):
    """(error, message, node id, host, port) of the coordinator for a key: the leader of its
    internal-topic partition in the metadata image (any broker, not only this one), as Kafka answers."""
    if key_type == GROUP_KEY and not _group_allowed(ctx, Op.DESCRIBE, key):
        code = E.GROUP_AUTHORIZATION_FAILED
        return code, code.name, -1, "", -1
    if key_type == TRANSACTION_KEY and not access.allowed(ctx, Op.DESCRIBE, RT.TRANSACTIONAL_ID,
                                                          key or ""):
        code = E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        return code, code.name, -1, "", -1
    if key_type == GROUP_KEY:
        topic, partition = OFFSETS_TOPIC, service.offsets_partition(key or "")
    elif key_type == TRANSACTION_KEY:     # an empty id too: Kafka 3.9 names its coordinator
        topic, partition = TRANSACTION_TOPIC, service.txn_partition(key or "")
    else:
        return E.INVALID_REQUEST, f"unsupported coordinator key type {key_type}", -1, "", -1
    try:
        await service.ensure_topic(topic)
    except CoordinatorError as exc:
        return exc.code, exc.code.name, -1, "", -1
    image = ctx.broker.image
    part = image.partition(topic, partition)
    leader = -1 if part is None else part.leader
    broker = image.brokers.get(leader)
    endpoint = None if broker is None or broker.fenced else next(
        (e for e in broker.endpoints if e.name == ctx.connection.listener_name), None)
    if endpoint is None:
        code = E.COORDINATOR_NOT_AVAILABLE
        return code, code.name, -1, "", -1
    return E.NONE, None, leader, endpoint.host, endpoint.port


# ---- JoinGroup (11) / SyncGroup (14) / Heartbeat (12) / LeaveGroup (13) -------------------------------
async def join_group(ctx, header, body):
    Response = messages.JoinGroupResponse
    version = header.api_version
    service = await CoordinatorService.of(ctx.broker)
    config = service.groups.config
    if body.group_id and not \
            config.min_session_timeout_ms <= body.session_timeout_ms <= config.max_session_timeout_ms:
        # as Kafka's (KIP-848) group coordinator: checked before it looks for the group's partition
        code = E.INVALID_SESSION_TIMEOUT
    else:
        code = _group_error(service, body.group_id)
    if code is not E.NONE:
        return Response(error_code=code, member_id=body.member_id, protocol_name=_name(None, version))
    if body.group_id in service.share_groups.groups:
        return Response(error_code=E.INCONSISTENT_GROUP_PROTOCOL, member_id=body.member_id,
                        protocol_name=_name(None, version))
    rebalance_timeout = body.rebalance_timeout_ms if version >= 1 else body.session_timeout_ms
    if _in_consumer_group(service, body.group_id, joining=True):
        # KIP-848 online migration: a classic member of a consumer group, driven by the coordinator
        result = service.consumer_groups.classic_join(
            body.group_id, body.member_id, body.group_instance_id if version >= 5 else None,
            header.client_id or "", "/" + ctx.connection.peer.rsplit(":", 1)[0], body.session_timeout_ms,
            rebalance_timeout, body.protocol_type, [(p.name, bytes(p.metadata)) for p in body.protocols],
            require_known_member_id=version >= 4)
        await service.settle()
        return _join_response(Response, version, result)
    if not service.consumer_groups.yield_to_classic(body.group_id):
        return Response(error_code=E.INCONSISTENT_GROUP_PROTOCOL, member_id=body.member_id,
                        protocol_name=_name(None, version))
    ctx.release_order()  # a join can wait a whole rebalance; later requests must not queue behind it
    pending = service.groups.join_group(
        body.group_id, body.member_id, body.group_instance_id if version >= 5 else None,
        header.client_id or "", "/" + ctx.connection.peer.rsplit(":", 1)[0], body.session_timeout_ms,
        rebalance_timeout, body.protocol_type, [(p.name, bytes(p.metadata)) for p in body.protocols],
        require_known_member_id=version >= 4, supports_skip_assignment=version >= 9)
    # a static member's rejoin is answered once the group record holding its new id commits
    await service.settle()
    result = await wait_for(pending)
    await service.settle()
    return _join_response(Response, version, result)


def _join_response(Response, version, result):
    ok = result.error is E.NONE
    return Response(
        error_code=result.error, generation_id=result.generation_id if ok else -1,
        protocol_type=result.protocol_type if ok and version >= 7 else None,
        protocol_name=_name(result.protocol_name if ok else None, version), leader=result.leader if ok else "",
        skip_assignment=result.skip_assignment and version >= 9, member_id=result.member_id,
        members=[Response.JoinGroupResponseMember(member_id=m, group_instance_id=i, metadata=meta)
                 for m, i, meta in result.members])


def _group_error(service, group_id: str) -> ErrorCode:
    """As Kafka: a membership request (or OffsetDelete) for the empty group id is refused before
    the group's coordinator is looked for."""
    return E.INVALID_GROUP_ID if not group_id else service.group_coordinator_error(group_id)


def _in_consumer_group(service, group_id: str, joining: bool = False) -> bool:
    return service.consumer_groups.hosts_classic_requests(group_id, joining)


def _name(protocol_name, version):
    # nullable from v7; before that Kafka writes an empty string
    return protocol_name if version >= 7 else (protocol_name or "")


async def sync_group(ctx, header, body):
    Response = messages.SyncGroupResponse
    version = header.api_version
    if version >= 5 and (body.protocol_type is None or body.protocol_name is None):
        # As Kafka (KIP-559): v5+ must name the protocol; checked before the group is looked up
        return Response(error_code=E.INCONSISTENT_GROUP_PROTOCOL)
    service = await CoordinatorService.of(ctx.broker)
    code = _group_error(service, body.group_id)
    if code is not E.NONE:
        return Response(error_code=code)
    if _in_consumer_group(service, body.group_id):
        result = service.consumer_groups.classic_sync(
            body.group_id, body.member_id, body.group_instance_id if version >= 3 else None, body.generation_id,
            body.protocol_type if version >= 5 else None, body.protocol_name if version >= 5 else None)
        await service.settle()
        return _sync_response(Response, version, result)
    ctx.release_order()
    pending = service.groups.sync_group(
        body.group_id, body.member_id, body.group_instance_id if version >= 3 else None, body.generation_id,
        body.protocol_type if version >= 5 else None, body.protocol_name if version >= 5 else None,
        [(a.member_id, bytes(a.assignment)) for a in body.assignments])
    # a leader's assignments are answered once the group's record commits: acknowledge it first
    await service.settle()
    result = await wait_for(pending)
    await service.settle()
    return _sync_response(Response, version, result)


def _sync_response(Response, version, result):
    ok = result.error is E.NONE
    return Response(error_code=result.error, assignment=result.assignment if ok else b"",
                    protocol_type=result.protocol_type if ok and version >= 5 else None,
                    protocol_name=result.protocol_name if ok and version >= 5 else None)


async def heartbeat(ctx, header, body):
    service = await CoordinatorService.of(ctx.broker)
    code = _group_error(service, body.group_id)
    if code is E.NONE:
        instance_id = body.group_instance_id if header.api_version >= 3 else None
        if _in_consumer_group(service, body.group_id):
            code = service.consumer_groups.classic_heartbeat(body.group_id, body.member_id, instance_id,
                                                             body.generation_id)
        else:
            code = service.groups.heartbeat(body.group_id, body.member_id, instance_id, body.generation_id)
        await service.settle()
    return messages.HeartbeatResponse(error_code=code)


async def leave_group(ctx, header, body):
    Response = messages.LeaveGroupResponse
    version = header.api_version
    service = await CoordinatorService.of(ctx.broker)
    code = _group_error(service, body.group_id)
    if code is not E.NONE:
        return Response(error_code=code)
    leaving = [(body.member_id, None)] if version < 3 else \
        [(m.member_id, m.group_instance_id) for m in body.members]
    if _in_consumer_group(service, body.group_id):
        top, results = service.consumer_groups.classic_leave(body.group_id, leaving)
    else:
        top, results = service.groups.leave_group(body.group_id, leaving)
    await service.settle()
    if version < 3:
        # one member: its error is the response's error
        code = top if top is not E.NONE else (results[0][2] if results else E.NONE)
        return Response(error_code=code)
    return Response(error_code=top, members=[
        Response.MemberResponse(member_id=m, group_instance_id=i, error_code=err) for m, i, err in results])


# ---- OffsetCommit (8) / OffsetFetch (9) / OffsetDelete (47) -------------------------------------------
async def offset_commit(ctx, header, body):
    Response = messages.OffsetCommitResponse
    version = header.api_version
    if version == 0:
        # v0 commits went to ZooKeeper: Kafka 3.9 (KRaft) refuses every partition of one
        return Response(topics=[Response.OffsetCommitResponseTopic(name=topic.name, partitions=[
            Response.OffsetCommitResponsePartition(partition_index=p.partition_index,
                                                   error_code=E.UNSUPPORTED_VERSION)
            for p in topic.partitions]) for topic in body.topics])
    service = await CoordinatorService.of(ctx.broker)
    if _group_allowed(ctx, Op.READ, body.group_id):
        code = service.group_coordinator_error(body.group_id)
        readable = _topics_allowed(ctx, Op.READ, (t.name for t in body.topics))
    else:
        code, readable = E.GROUP_AUTHORIZATION_FAILED, set()
    image = ctx.broker.image
    errors: dict[tuple[str, int], ErrorCode] = {}
    items = []
    now = service.clock.now_ms()
    retention = body.retention_time_ms if 2 <= version <= 4 else -1
    for topic in body.topics:
        for p in topic.partitions:
            key = (topic.name, p.partition_index)
            # as Kafka: the group's authorization, then each partition's, before the coordinator
            if code is E.GROUP_AUTHORIZATION_FAILED:
                errors[key] = code
            elif topic.name not in readable:
                errors[key] = E.TOPIC_AUTHORIZATION_FAILED
            elif image.partition(topic.name, p.partition_index) is None:
                errors[key] = E.UNKNOWN_TOPIC_OR_PARTITION
            elif code is not E.NONE:
                errors[key] = code
            else:
                items.append(OffsetCommitItem(
                    topic.name, p.partition_index, p.committed_offset,
                    p.committed_leader_epoch if version >= 6 else -1, p.committed_metadata,
                    now + retention if retention >= 0 else -1))
    if code is E.NONE and items:
        mark = service.write_mark()
        member_id, instance_id = body.member_id, body.group_instance_id if version >= 7 else None
        generation = body.generation_id_or_member_epoch
        consumer_check = service.consumer_groups.offset_commit_error(
            body.group_id, member_id, instance_id, generation, version)
        if consumer_check is not None:
            # a KIP-848 group: the member epoch is checked there, the offsets are stored as any group's
            member_id, instance_id, generation = "", None, -1
        if consumer_check not in (None, E.NONE):
            top, per = consumer_check, {}
        else:
            top, per = service.groups.commit_offsets(body.group_id, member_id, instance_id, generation, items)
        unacknowledged = await service.settle(since=mark)
        for item in items:
            key = (item.topic, item.partition)
            errors[key] = top if top is not E.NONE else per.get(key, E.NONE)
            if errors[key] is E.NONE:
                errors[key] = unacknowledged
    topics: dict[str, list] = {}
    for topic in body.topics:
        for p in topic.partitions:
            topics.setdefault(topic.name, []).append(Response.OffsetCommitResponsePartition(
                partition_index=p.partition_index, error_code=errors[(topic.name, p.partition_index)]))
    return Response(topics=[Response.OffsetCommitResponseTopic(name=name, partitions=parts)
                            for name, parts in topics.items()])


async def offset_fetch(ctx, header, body):
    Response = messages.OffsetFetchResponse
    version = header.api_version
    service = await CoordinatorService.of(ctx.broker)
    require_stable = body.require_stable if version >= 7 else False
    if version >= 8:
        groups = []
        for group in body.groups:
            wanted = None if group.topics is None else \
                [(t.name, p) for t in group.topics for p in t.partition_indexes]
            code, rows = await _fetch_group(ctx, service, group.group_id, wanted, require_stable)
            if code is E.NONE and version >= 9:
                code = service.consumer_groups.offset_fetch_error(group.group_id, group.member_id,
                                                                  group.member_epoch)
                rows = rows if code is E.NONE else []
            groups.append(Response.OffsetFetchResponseGroup(
                group_id=group.group_id, error_code=code, topics=[
                    Response.OffsetFetchResponseTopics(name=name, partitions=[
                        Response.OffsetFetchResponsePartitions(
                            partition_index=r.partition, committed_offset=r.offset,
                            committed_leader_epoch=r.leader_epoch, metadata=r.metadata, error_code=r.error)
                        for r in parts])
                    for name, parts in _by_topic(rows)]))
        return Response(groups=groups)
    topics = body.topics if (version >= 2 or body.topics is not None) else []
    wanted = None if topics is None else [(t.name, p) for t in topics for p in t.partition_indexes]
    if version == 0:
        # v0 read ZooKeeper's offsets: Kafka 3.9 (KRaft) refuses every partition asked for
        code, rows = E.NONE, [_row(t, p, E.UNSUPPORTED_VERSION) for t, p in wanted]
    else:
        code, rows = await _fetch_group(ctx, service, body.group_id, wanted, require_stable)
    if code is E.GROUP_AUTHORIZATION_FAILED and version < 2:
        # no top-level error field before v2: every partition carries a refusal (a coordinator's
        # error, NOT_COORDINATOR say, Kafka 3.9 answers with no partitions at all)
        rows = [_row(t, p, code) for t, p in wanted]
    return Response(error_code=code if version >= 2 else 0, topics=[
        Response.OffsetFetchResponseTopic(name=name, partitions=[
            Response.OffsetFetchResponsePartition(
                partition_index=r.partition, committed_offset=r.offset,
                committed_leader_epoch=r.leader_epoch, metadata=r.metadata, error_code=r.error)
            for r in parts])
        for name, parts in _by_topic(rows)])


def _row(topic, partition, code):
    from broker.coordinator.group_coordinator import FetchedOffset
    return FetchedOffset(topic, partition, error=code)


async def _fetch_group(ctx, service, group_id, wanted, require_stable):
    """Kafka: DESCRIBE on the group, then DESCRIBE on each topic; asked-for topics the principal
    may not describe answer TOPIC_AUTHORIZATION_FAILED, and "all offsets" leaves them out."""
    if not _group_allowed(ctx, Op.DESCRIBE, group_id):
        return E.GROUP_AUTHORIZATION_FAILED, []
    code = service.group_coordinator_error(group_id)
    if code is not E.NONE:
        return code, []
    if not access.enabled(ctx):
        return service.groups.fetch_offsets(group_id, wanted, require_stable)
    if wanted is None:
        code, rows = service.groups.fetch_offsets(group_id, None, require_stable)
        visible = access.allowed_names(ctx, Op.DESCRIBE, RT.TOPIC, {r.topic for r in rows},
                                       log_if_denied=False)
        return code, [r for r in rows if r.topic in visible]
    visible = access.allowed_names(ctx, Op.DESCRIBE, RT.TOPIC, {t for t, _ in wanted})
    code, rows = service.groups.fetch_offsets(
        group_id, [tp for tp in wanted if tp[0] in visible], require_stable)
    refused = [_row(t, p, E.TOPIC_AUTHORIZATION_FAILED) for t, p in wanted if t not in visible]
    return code, list(rows) + refused


def _by_topic(rows):
    topics: dict[str, list] = {}
    for row in rows:
        topics.setdefault(row.topic, []).append(row)
    return topics.items()


async def offset_delete(ctx, header, body):
    Response = messages.OffsetDeleteResponse
    if not _group_allowed(ctx, Op.DELETE, body.group_id):
        return Response(error_code=E.GROUP_AUTHORIZATION_FAILED)
    service = await CoordinatorService.of(ctx.broker)
    code = _group_error(service, body.group_id)
    if code is not E.NONE:
        return Response(error_code=code)
    image = ctx.broker.image
    requested = [(t.name, p.partition_index) for t in body.topics for p in t.partitions]
    readable = _topics_allowed(ctx, Op.READ, (t.name for t in body.topics))
    known = [tp for tp in requested if tp[0] in readable and image.partition(*tp) is not None]
    # a KIP-848 group's live subscriptions keep their offsets (its offsets sit in an offsets-only group)
    subscribed = service.consumer_groups.subscribed_topics(body.group_id)
    if body.group_id in service.consumer_groups.groups and body.group_id not in service.groups.groups:
        top, per = E.NONE, {tp: E.NONE for tp in known}   # a consumer group with nothing committed yet
    else:
        top, per = service.groups.delete_offsets(body.group_id, [tp for tp in known if tp[0] not in subscribed])
    per = {**per, **{tp: E.GROUP_SUBSCRIBED_TO_TOPIC for tp in known if tp[0] in subscribed}}
    await service.settle()
    if top is not E.NONE:
        return Response(error_code=top)
    topics: dict[str, list] = {}
    for name, index in requested:
        topics.setdefault(name, []).append(Response.OffsetDeleteResponsePartition(
            partition_index=index,
            error_code=(per.get((name, index), E.UNKNOWN_TOPIC_OR_PARTITION) if name in readable
                        else E.TOPIC_AUTHORIZATION_FAILED)))
    return Response(topics=[Response.OffsetDeleteResponseTopic(name=n, partitions=ps) for n, ps in topics.items()])


# ---- ListGroups (16) / DescribeGroups (15) / DeleteGroups (42) ----------------------------------------
async def list_groups(ctx, header, body):
    Response = messages.ListGroupsResponse
    version = header.api_version
    service = await CoordinatorService.of(ctx.broker)
    states, types = body.states_filter if version >= 4 else (), body.types_filter if version >= 5 else ()
    consumer = service.consumer_groups
    # a KIP-848 group's offsets sit in a classic (offsets-only) group of the same id: list it once
    rows = [row + ("classic",) for row in service.groups.list_groups(states, types) if row[0] not in consumer.groups]
    rows += [row + ("consumer",) for row in consumer.list_groups(states, types)]
    rows += [row + ("share",) for row in service.share_groups.list_groups(states, types)]
    # DESCRIBE on the cluster lists every group; otherwise only the groups one may describe.
    if not access.cluster_allowed(ctx, Op.DESCRIBE, log_if_denied=False):
        rows = [row for row in rows if _group_allowed(ctx, Op.DESCRIBE, row[0], False)]
    # as Kafka: the groups loaded so far, flagged while some of this broker's partitions still load
    code = E.COORDINATOR_LOAD_IN_PROGRESS if service.loading(OFFSETS_TOPIC) else E.NONE
    return Response(error_code=code, groups=[
        Response.ListedGroup(group_id=g, protocol_type=ptype, group_state=state if version >= 4 else "",
                             group_type=group_type if version >= 5 else "")
        for g, ptype, state, group_type in sorted(rows)])


async def describe_groups(ctx, header, body):
    Response = messages.DescribeGroupsResponse
    version = header.api_version
    service = await CoordinatorService.of(ctx.broker)
    out = []
    for group_id in body.groups:
        if not _group_allowed(ctx, Op.DESCRIBE, group_id):
            out.append(Response.DescribedGroup(error_code=E.GROUP_AUTHORIZATION_FAILED,
                                               group_id=group_id))
            continue
        code = service.group_coordinator_error(group_id)
        if code is not E.NONE:      # as Kafka: only a described group carries its operations
            out.append(Response.DescribedGroup(error_code=code, group_id=group_id))
            continue
        ops = access.authorized_operations(ctx, RT.GROUP, group_id) \
            if version >= 3 and body.include_authorized_operations else OPERATIONS_NOT_REQUESTED
        d = service.groups.describe_group(group_id)
        if d.error is E.GROUP_ID_NOT_FOUND or group_id in service.consumer_groups.groups:
            # (a KIP-848 group is not a classic group: Kafka describes it here as Dead too)
            # up to v5 Kafka describes an unknown group as a Dead one, without an error
            out.append(Response.DescribedGroup(group_id=group_id, group_state="Dead", authorized_operations=ops))
            continue
        out.append(Response.DescribedGroup(
            error_code=d.error, group_id=group_id, group_state=d.state, protocol_type=d.protocol_type,
            protocol_data=d.protocol_name, authorized_operations=ops, members=[
                Response.DescribedGroupMember(
                    member_id=m.member_id, group_instance_id=m.group_instance_id if version >= 4 else None,
                    client_id=m.client_id, client_host=m.client_host, member_metadata=m.metadata,
                    member_assignment=m.assignment)
                for m in d.members]))
    return Response(groups=out)


async def delete_groups(ctx, header, body):
    Response = messages.DeleteGroupsResponse
    service = await CoordinatorService.of(ctx.broker)
    results = []
    for group_id in dict.fromkeys(body.groups_names):     # a group named twice: one answer, as Kafka
        if not _group_allowed(ctx, Op.DELETE, group_id):
            results.append(Response.DeletableGroupResult(group_id=group_id,
                                                         error_code=E.GROUP_AUTHORIZATION_FAILED))
            continue
        code = service.group_coordinator_error(group_id)
        if code is E.NONE and group_id in service.consumer_groups.groups:
            code = service.consumer_groups.delete(group_id)
            if code is E.NONE and group_id in service.groups.groups:   # its offsets go with it
                code = service.groups.delete_groups([group_id])[group_id]
        elif code is E.NONE and group_id in service.share_groups.groups:
            # as Kafka: the share-partitions' state is deleted first (at their share coordinators), then the group
            code = E.NON_EMPTY_GROUP if service.share_groups.groups[group_id].members else \
                await service.share_partitions.delete_group(group_id)
            if code is E.NONE:
                code = service.share_groups.delete(group_id)
        elif code is E.NONE:
            code = service.groups.delete_groups([group_id])[group_id]
        results.append(Response.DeletableGroupResult(group_id=group_id, error_code=code))
    await service.settle()
    return Response(results=results)


HANDLERS = {
    8: (0, 9, offset_commit),
    9: (0, 9, offset_fetch),
    10: (0, 6, find_coordinator),
    11: (0, 9, join_group),
    12: (0, 4, heartbeat),
    13: (0, 5, leave_group),
    14: (0, 5, sync_group),
    15: (0, 5, describe_groups),
    16: (0, 5, list_groups),
    42: (0, 2, delete_groups),
    47: (0, 0, offset_delete),
}
