"""ListClientMetricsResources (74) v0 (KIP-714): the names of the client metrics subscriptions,
which are CLIENT_METRICS config resources in the metadata image (``broker.config.client_metrics``).
The authorizer's rule (DESCRIBE_CONFIGS on the cluster) is applied by the registry."""

from __future__ import annotations

from protocol import messages


async def handle_list_client_metrics_resources(ctx, header, body):
    Response = messages.ListClientMetricsResourcesResponse
    return Response(throttle_time_ms=0, error_code=0, client_metrics_resources=[
        Response.ClientMetricsResource(name=name)
        for name in sorted(ctx.image.client_metrics_configs)])


HANDLERS = {74: (0, 0, handle_list_client_metrics_resources)}
