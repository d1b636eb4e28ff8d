"""Request handlers, one module per API family, merged into one registry.

Each module exposes ``HANDLERS = {api_key: (min_version, max_version, async_handler)}`` where
``async def handler(ctx, header, body)`` returns the response body (a ``protocol.messages`` object), or
None when Kafka sends no response (acks=0 Produce). ``ctx`` is a ``broker.connection.RequestContext``
(see ``broker/__init__.py`` for what it exposes). ApiVersions advertises exactly the merged ranges.

A module listed in ``MODULES`` that does not exist yet (another engineer's, still being written) is
skipped; any other import error is raised.
"""

from __future__ import annotations

import importlib
from typing import Awaitable, Callable

from broker.security.access import guard

Handler = Callable[..., Awaitable[object]]
Registry = dict[int, tuple[int, int, Handler]]

MODULES = (
    "api_versions",
    "metadata",
    "produce",
    "fetch",
    "offsets",
    "topics",
    "configs",
    "cluster",
    "log_dirs",        # DescribeLogDirs, AlterReplicaLogDirs (broker.log_dir_moves)
    "groups",          # coordinator engineer
    "consumer_groups",  # KIP-848: ConsumerGroupHeartbeat, ConsumerGroupDescribe
    "share_groups",    # KIP-932: ShareGroupHeartbeat, ShareGroupDescribe
    "share_fetch",     # KIP-932: ShareFetch, ShareAcknowledge
    "share_state",     # KIP-932's share coordinator: Initialize/Read/Write/DeleteShareGroupState
    "share_offsets",   # KIP-932: AlterShareGroupOffsets, DeleteShareGroupOffsets
    "transactions",    # coordinator engineer
    "quorum",          # DescribeQuorum, answered by the controller (broker.controller.admin)
    "quotas",          # DescribeClientQuotas, AlterClientQuotas
    "acls",            # CreateAcls, DescribeAcls, DeleteAcls (broker.security)
    "sasl",            # SaslHandshake, SaslAuthenticate (broker.security)
    "scram_credentials",
    "delegation_tokens",  # Create/Renew/Expire/DescribeDelegationToken (KIP-48, KIP-900)
    "reassignments",   # AlterPartitionReassignments, ListPartitionReassignments (the controller's)
    "features",        # UpdateFeatures (the controller's)
    "client_metrics",  # ListClientMetricsResources
)


def load_registry(modules=MODULES) -> Registry:
    registry: Registry = {}
    for name in modules:
        qualified = f"{__name__}.{name}"
        try:
            module = importlib.import_module(qualified)
        except ModuleNotFoundError as exc:
            if exc.name == qualified:
                continue
            raise
        for api_key, entry in module.HANDLERS.items():
            if api_key in registry:
                raise RuntimeError(f"api key {api_key} registered twice (in {qualified})")
            min_version, max_version, handler = entry
            if min_version > max_version:
                raise RuntimeError(f"bad version range for api key {api_key} in {qualified}")
            # Whole-request authorization rules (broker.security.access.REQUEST_RULES).
            registry[api_key] = (min_version, max_version, guard(api_key, handler))
    return registry
