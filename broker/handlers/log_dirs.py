"""Log dirs: DescribeLogDirs (35) and AlterReplicaLogDirs (34), moving a replica to another log
dir of this broker (broker.log_dir_moves)."""

from __future__ import annotations

import os

from protocol import ErrorCode, messages

from broker.security import access
from broker.security.acls import AclOperation


async def handle_describe_log_dirs(ctx, header, body):
    Response = messages.DescribeLogDirsResponse
    wanted = None
    if body.topics is not None:
        wanted = {(t.topic, p) for t in body.topics for p in t.partitions}
    replicas = await ctx.run_blocking(ctx.partitions.dir_moves.describe)
    results = []
    for log_dir in ctx.config.log_dirs:
        log_dir = os.path.abspath(log_dir)
        by_topic: dict[str, list] = {}
        for topic, index, size, lag, future in sorted(replicas.get(log_dir, ())):
            if wanted is not None and (topic, index) not in wanted:
                continue
            by_topic.setdefault(topic, []).append(Response.DescribeLogDirsPartition(
                partition_index=index, partition_size=size, offset_lag=lag, is_future_key=future))
        total = usable = -1
        try:
            stats = os.statvfs(log_dir)
            total, usable = stats.f_blocks * stats.f_frsize, stats.f_bavail * stats.f_frsize
        except OSError:
            pass
        results.append(Response.DescribeLogDirsResult(
            error_code=0, log_dir=log_dir,
            topics=[Response.DescribeLogDirsTopic(name=name, partitions=parts)
                    for name, parts in by_topic.items()],
            total_bytes=total, usable_bytes=usable))
    return Response(throttle_time_ms=0, error_code=0, results=results)


async def handle_alter_replica_log_dirs(ctx, header, body):
    """Each partition gets its own error; a move runs on in the background (Kafka answers once
    the copy has started, and DescribeLogDirs shows its progress)."""
    Response = messages.AlterReplicaLogDirsResponse
    allowed = access.cluster_allowed(ctx, AclOperation.ALTER)
    destinations: dict[tuple[str, int], str] = {}
    for entry in body.dirs:
        for topic in entry.topics:
            for index in topic.partitions:
                destinations[(topic.name, index)] = entry.path
    results: dict[str, list] = {}
    for (topic, index), path in destinations.items():
        code = (ctx.partitions.dir_moves.alter(topic, index, path) if allowed
                else ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        results.setdefault(topic, []).append(Response.AlterReplicaLogDirPartitionResult(
            partition_index=index, error_code=code))
    return Response(throttle_time_ms=0, results=[
        Response.AlterReplicaLogDirTopicResult(topic_name=name, partitions=parts)
        for name, parts in results.items()])


HANDLERS = {
    34: (0, 2, handle_alter_replica_log_dirs),
    35: (0, 4, handle_describe_log_dirs),
}
