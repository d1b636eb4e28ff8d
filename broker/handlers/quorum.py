"""DescribeQuorum (55), v0–v2: the metadata quorum as the controller sees it (Kafka's admin client
asks a broker, which answers for its controller)."""

from __future__ import annotations

from broker.controller import admin


async def handle_describe_quorum(ctx, header, body):
    return await admin.describe_quorum(ctx.controller, body)


HANDLERS = {55: (0, 2, handle_describe_quorum)}
