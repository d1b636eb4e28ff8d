"""Controller-side answers to the requests brokers and admin clients send a KRaft controller.

Each `async def handler(controller, body) -> response body` takes a decoded request body (protocol's
generated classes) and never raises for a Kafka-level failure; `HANDLERS` maps api key -> handler.
A broker handler module can reuse them, e.g. DescribeQuorum (55) for Kafka's admin client.
"""

from __future__ import annotations

from protocol import ErrorCode, messages as m

from .alter_partition import IsrProposal
from .errors import ApiError
from .wire import describe_quorum_response


async def describe_quorum(controller, body):
    return describe_quorum_response(controller.describe_quorum(), body)


async def allocate_producer_ids(controller, body):
    try:
        block = await controller.allocate_producer_ids(body.broker_id, body.broker_epoch)
    except ApiError as exc:
        return m.AllocateProducerIdsResponse(error_code=int(exc.code))
    return m.AllocateProducerIdsResponse(producer_id_start=block.first_producer_id, producer_id_len=block.size)


async def broker_registration(controller, body):
    if body.cluster_id != controller.cluster_id:
        return m.BrokerRegistrationResponse(error_code=int(ErrorCode.INCONSISTENT_CLUSTER_ID))
    endpoints = [(l.name, l.host, l.port, l.security_protocol) for l in body.listeners]
    try:
        epoch = await controller.register_broker(
            body.broker_id, body.incarnation_id, endpoints, rack=body.rack,
            features={f.name: (f.min_supported_version, f.max_supported_version)
                      for f in body.features})
    except ApiError as exc:
        return m.BrokerRegistrationResponse(error_code=int(exc.code))
    return m.BrokerRegistrationResponse(broker_epoch=epoch)


async def broker_heartbeat(controller, body):
    try:
        result = await controller.heartbeat(body.broker_id, body.broker_epoch, body.current_metadata_offset,
                                            want_fence=body.want_fence, want_shutdown=body.want_shut_down)
    except ApiError as exc:
        return m.BrokerHeartbeatResponse(error_code=int(exc.code))
    return m.BrokerHeartbeatResponse(is_caught_up=result.is_caught_up, is_fenced=result.is_fenced,
                                     should_shut_down=result.should_shut_down)


async def unregister_broker(controller, body):
    try:
        await controller.unregister_broker(body.broker_id)
    except ApiError as exc:
        return m.UnregisterBrokerResponse(error_code=int(exc.code), error_message=exc.message)
    return m.UnregisterBrokerResponse(error_message=None)


async def alter_partition(controller, body, version: int = 3):
    """AlterPartition from a partition leader; `version` is the request's (it decides between topic
    names and ids, NewIsr and NewIsrWithEpochs, and OPERATION_NOT_ATTEMPTED vs INELIGIBLE_REPLICA)."""
    Response = m.AlterPartitionResponse
    proposals, shape = [], []
    for topic in body.topics:
        shape.append((topic, len(topic.partitions)))
        for p in topic.partitions:
            if version >= 3:
                isr = [(s.broker_id, s.broker_epoch) for s in p.new_isr_with_epochs]
            else:
                isr = [(b, -1) for b in p.new_isr]
            proposals.append(IsrProposal(
                partition=p.partition_index, leader_epoch=p.leader_epoch,
                partition_epoch=p.partition_epoch, new_isr=isr,
                topic_id=topic.topic_id if version >= 2 else None,
                topic_name=topic.topic_name if version < 2 else None,
                leader_recovery_state=p.leader_recovery_state))
    try:
        results = await controller.alter_partition(body.broker_id, body.broker_epoch, proposals, version)
    except ApiError as exc:
        return Response(error_code=int(exc.code), topics=[])
    topics, at = [], 0
    for topic, count in shape:
        entries = []
        for result in results[at:at + count]:
            entries.append(Response.PartitionData(
                partition_index=result.partition, error_code=result.error_code, leader_id=result.leader,
                leader_epoch=result.leader_epoch, isr=result.isr,
                leader_recovery_state=result.leader_recovery_state,
                partition_epoch=result.partition_epoch))
        at += count
        topics.append(Response.TopicData(topic_name=topic.topic_name, topic_id=topic.topic_id,
                                         partitions=entries))
    return Response(error_code=0, topics=topics)


HANDLERS = {55: describe_quorum, 67: allocate_producer_ids, 62: broker_registration, 63: broker_heartbeat,
            64: unregister_broker, 56: alter_partition}
