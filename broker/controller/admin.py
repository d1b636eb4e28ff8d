"""Controller-side answers to the requests brokers and admin clients send a KRaft controller.

Each `async def handler(controller, body) -> response body` takes a decoded request body (protocol's
generated classes) and never raises for a Kafka-level failure; `HANDLERS` maps api key -> handler.
A broker handler module can reuse them, e.g. DescribeQuorum (55) for Kafka's admin client.
"""

from __future__ import annotations

from protocol import ErrorCode, messages as m

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
        epoch = await controller.register_broker(body.broker_id, body.incarnation_id, endpoints,
                                                 rack=body.rack)
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


HANDLERS = {55: describe_quorum, 67: allocate_producer_ids, 62: broker_registration, 63: broker_heartbeat}
