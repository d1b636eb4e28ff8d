"""UpdateFeatures (57) v0–v1: finalized feature levels changed through the controller, which checks
each update as Kafka 3.9's does (``broker.controller.features``). ApiVersions answers what is
finalized; the authorizer's rule (ALTER on the cluster) is applied by the registry."""

from __future__ import annotations

from protocol import messages

from broker.controller.errors import ApiError
from broker.controller.features import UPGRADE, FeatureUpdate


def feature_updates(header, body) -> list[FeatureUpdate]:
    # v0's AllowDowngrade is not honoured: Kafka 3.9 treats every v0 update as an upgrade.
    return [FeatureUpdate(u.feature, u.max_version_level,
                          u.upgrade_type if header.api_version >= 1 else UPGRADE)
            for u in body.feature_updates]


def update_features_response(results: dict):
    Response = messages.UpdateFeaturesResponse
    # Kafka answers success with an empty (not null) top-level message.
    return Response(throttle_time_ms=0, error_code=0, error_message="", results=[
        Response.UpdatableFeatureResult(feature=name, error_code=code, error_message=message)
        for name, (code, message) in results.items()])


async def handle_update_features(ctx, header, body):
    try:
        results = await ctx.controller.update_features(feature_updates(header, body),
                                                       validate_only=body.validate_only)
    except ApiError as exc:
        return messages.UpdateFeaturesResponse(throttle_time_ms=0, error_code=int(exc.code),
                                               error_message=exc.message, results=[])
    return update_features_response(results)


HANDLERS = {57: (0, 1, handle_update_features)}
