"""DescribeQuorum (55), v0–v2: the metadata quorum as the controller sees it (Kafka's admin client
asks a broker, which answers for its controller)."""

from __future__ import annotations

from broker.controller import admin


async def handle_describe_quorum(ctx, header, body):
    forward = getattr(ctx.controller, "forward", None)
    if forward is not None:      # a cluster: the active controller answers (v2: with its Nodes)
        return await forward(55, header.api_version, body)
    return await admin.describe_quorum(ctx.controller, body)


HANDLERS = {55: (0, 2, handle_describe_quorum)}
