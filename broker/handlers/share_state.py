"""The share coordinator's RPCs (KIP-932): InitializeShareGroupState (83), ReadShareGroupState (84),
WriteShareGroupState (85), DeleteShareGroupState (86) and ReadShareGroupStateSummary (87), answered from `broker.share.state_store`
for the `__share_group_state` partitions this broker leads (NOT_COORDINATOR for the others). They are
inter-broker APIs (CLUSTER_ACTION); this broker's own share-partitions call the store directly.
"""

from __future__ import annotations

from protocol import ErrorCode, messages

from broker.coordinator.ownership import SHARE_STATE_TOPIC
from broker.coordinator.service import CoordinatorError, CoordinatorService
from broker.share.glue import state_partition
from broker.share.partition import StateBatch
from broker.share.state_store import coordinator_key

E = ErrorCode


async def _each_partition(ctx, body, answer):
    """`answer(service, key, partition_data) -> PartitionResult` for every partition, with the
    coordinator check first; returns [(topic id, [results])]."""
    service = await CoordinatorService.of(ctx.broker)
    try:
        await service.ensure_topic(SHARE_STATE_TOPIC)
        topic_error = E.NONE
    except CoordinatorError as exc:
        topic_error = exc.code
    mark = service.write_mark()
    out = []
    for topic in body.topics:
        results = []
        for p in topic.partitions:
            key = (body.group_id, topic.topic_id, p.partition)
            code = topic_error if topic_error is not E.NONE else service.coordinator_error(
                SHARE_STATE_TOPIC, state_partition(service, coordinator_key(key)))
            results.append(answer(service, key, p, code))
        out.append((topic.topic_id, results))
    failed = await service.settle(since=mark)
    return out, failed


def _partition_result(Result, partition, code):
    return Result(partition=partition, error_code=code, error_message=None if code is E.NONE else code.name)


async def initialize_share_group_state(ctx, header, body):
    R = messages.InitializeShareGroupStateResponse

    def answer(service, key, p, code):
        if code is E.NONE:
            code = service.share_states.initialize(key, p.state_epoch, p.start_offset)
        return _partition_result(R.PartitionResult, p.partition, code)
    out, _ = await _each_partition(ctx, body, answer)
    return R(results=[R.InitializeStateResult(topic_id=t, partitions=parts) for t, parts in out])


async def read_share_group_state(ctx, header, body):
    R = messages.ReadShareGroupStateResponse

    def answer(service, key, p, code):
        if code is not E.NONE:
            return R.PartitionResult(partition=p.partition, error_code=code, error_message=code.name,
                                     state_epoch=0, start_offset=-1, state_batches=[])
        state = service.share_states.read(key)
        if state is None:               # never initialized: Kafka's uninitialized start offset
            return R.PartitionResult(partition=p.partition, error_code=E.NONE, state_epoch=0, start_offset=-1,
                                     state_batches=[])
        return R.PartitionResult(
            partition=p.partition, error_code=E.NONE, state_epoch=state.state_epoch, start_offset=state.start_offset,
            state_batches=[R.StateBatch(first_offset=b.first_offset, last_offset=b.last_offset,
                                        delivery_state=b.delivery_state, delivery_count=b.delivery_count)
                           for b in state.batches])
    out, _ = await _each_partition(ctx, body, answer)
    return R(results=[R.ReadStateResult(topic_id=t, partitions=parts) for t, parts in out])


async def read_share_group_state_summary(ctx, header, body):
    R = messages.ReadShareGroupStateSummaryResponse

    def answer(service, key, p, code):
        state = service.share_states.read(key) if code is E.NONE else None
        if state is None:
            return R.PartitionResult(partition=p.partition, error_code=code, state_epoch=0, leader_epoch=-1,
                                     start_offset=-1, delivery_complete_count=-1,
                                     error_message=None if code is E.NONE else code.name)
        # records in the in-flight window that are done with (acknowledged or archived)
        done = sum(b.last_offset - b.first_offset + 1 for b in state.batches if b.delivery_state in (2, 4))
        return R.PartitionResult(partition=p.partition, error_code=E.NONE, state_epoch=state.state_epoch,
                                 leader_epoch=state.leader_epoch, start_offset=state.start_offset,
                                 delivery_complete_count=done)
    out, _ = await _each_partition(ctx, body, answer)
    return R(results=[R.ReadStateSummaryResult(topic_id=t, partitions=parts) for t, parts in out])


async def write_share_group_state(ctx, header, body):
    R = messages.WriteShareGroupStateResponse

    def answer(service, key, p, code):
        if code is E.NONE:
            code = service.share_states.write(
                key, p.state_epoch, p.leader_epoch, p.start_offset,
                [StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in p.state_batches])
        return _partition_result(R.PartitionResult, p.partition, code)
    out, _ = await _each_partition(ctx, body, answer)
    return R(results=[R.WriteStateResult(topic_id=t, partitions=parts) for t, parts in out])


async def delete_share_group_state(ctx, header, body):
    R = messages.DeleteShareGroupStateResponse

    def answer(service, key, p, code):
        if code is E.NONE:
            code = service.share_states.delete(key)
        return _partition_result(R.PartitionResult, p.partition, code)
    out, _ = await _each_partition(ctx, body, answer)
    return R(results=[R.DeleteStateResult(topic_id=t, partitions=parts) for t, parts in out])


HANDLERS = {
    83: (0, 0, initialize_share_group_state),
    84: (0, 0, read_share_group_state),
    85: (0, 1, write_share_group_state),
    87: (0, 1, read_share_group_state_summary),
    86: (0, 0, delete_share_group_state),
}
