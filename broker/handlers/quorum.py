"""DescribeQuorum (55), v0–v2: the metadata quorum as the controller sees it (Kafka's admin client
asks a broker, which answers for its controller); UnregisterBroker (64): a decommissioned broker's
registration removed by the active controller."""

from __future__ import annotations

from broker.controller import admin


async def handle_describe_quorum(ctx, header, body):
    forward = getattr(ctx.controller, "forward", None)
    if forward is not None:      # a cluster: the active controller answers (v2: with its Nodes)
        return await forward(55, header.api_version, body)
    return await admin.describe_quorum(ctx.controller, body)


async def handle_unregister_broker(ctx, header, body):
    from protocol import messages

    from broker.controller.errors import ApiError

    try:
        await ctx.controller.unregister_broker(body.broker_id)
    except ApiError as exc:
        return messages.UnregisterBrokerResponse(throttle_time_ms=0, error_code=int(exc.code),
                                                 error_message=exc.message)
    return messages.UnregisterBrokerResponse(throttle_time_ms=0, error_code=0, error_message=None)


HANDLERS = {55: (0, 2, handle_describe_quorum), 64: (0, 0, handle_unregister_broker)}
