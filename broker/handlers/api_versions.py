"""ApiVersions (key 18), v0–v4: the registry's version ranges and the cluster's features.

A request version we do not know is answered in v0 format with UNSUPPORTED_VERSION and our ranges
(KIP-511) by the connection, which calls ``unsupported_version_response``.
"""

from __future__ import annotations

import re

from protocol import ErrorCode, messages

from broker.controller.features import SUPPORTED_FEATURES

API_KEY = 18


def _api_keys(registry) -> list:
    return [
        messages.ApiVersionsResponse.ApiVersion(api_key=key, min_version=low, max_version=high)
        for key, (low, high, _) in sorted(registry.items())
    ]


def unsupported_version_response(registry):
    return messages.ApiVersionsResponse(
        error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=_api_keys(registry))


# KIP-848's APIs, advertised only while `group.coordinator.rebalance.protocols` lists "consumer" (as Kafka)
_CONSUMER_PROTOCOL_APIS = (68, 69)


def _advertised(ctx):
    # KIP-932's APIs are advertised whether or not share groups are on (stable since Kafka 4.1); while
    # they are off, ShareGroupHeartbeat and ShareFetch answer UNSUPPORTED_VERSION, as Kafka's do.
    registry = ctx.handlers
    if "consumer" in ctx.config["group.coordinator.rebalance.protocols"]:   # also on a controller
        return registry
    return {key: entry for key, entry in registry.items() if key not in _CONSUMER_PROTOCOL_APIS}


_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


async def handle_api_versions(ctx, header, body):
    if header.api_version >= 3 and not (
            _SOFTWARE.fullmatch(body.client_software_name or "")
            and _SOFTWARE.fullmatch(body.client_software_version or "")):
        # KIP-511: names must be printable identifiers; Kafka answers INVALID_REQUEST, no ranges.
        return messages.ApiVersionsResponse(error_code=ErrorCode.INVALID_REQUEST, api_keys=[],
                                            throttle_time_ms=0)
    response = messages.ApiVersionsResponse(error_code=0, api_keys=_api_keys(_advertised(ctx)),
                                            throttle_time_ms=0)
    if header.api_version >= 3:
        # Before v4, clients took a minimum of 0 for a bad range, so Kafka leaves such features out.
        response.supported_features = [
            messages.ApiVersionsResponse.SupportedFeatureKey(name=name, min_version=low,
                                                             max_version=high)
            for name, (low, high) in SUPPORTED_FEATURES.items()
            if low > 0 or header.api_version >= 4
        ]
        finalized = ctx.finalized_features()
        if finalized:
            # Kafka's epoch is the offset of the metadata image the answer comes from.
            response.finalized_features_epoch = ctx.metadata_epoch()
            response.finalized_features = [
                messages.ApiVersionsResponse.FinalizedFeatureKey(
                    name=name, max_version_level=level, min_version_level=level)
                for name, level in sorted(finalized.items())
            ]
    return response


HANDLERS = {API_KEY: (0, 4, handle_api_versions)}
