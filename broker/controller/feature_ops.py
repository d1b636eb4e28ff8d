"""Finalized features on the active controller: metadata.version on a fresh metadata log, and
UpdateFeatures. The checks are `features`' pure functions; this mixin runs them under the
controller's lock on the latest committed image and commits their records."""

from __future__ import annotations

import logging

import trio

from . import features
from .errors import ApiError

log = logging.getLogger(__name__)

BOOTSTRAP_POLL_S = 0.05


class FeatureOps:
    """Mixed into Controller: needs self._image, self._lock, self._quorum, self._commit,
    self._require_leader and self.node_id."""

    async def update_features(self, updates, validate_only: bool = False) -> dict:
        """UpdateFeatures: {feature: (error code, message or None)} for `updates`
        (features.FeatureUpdate); the valid ones are committed unless `validate_only`."""
        await self._require_leader()
        async with self._lock:
            batch, results = features.update_records(self._image, updates, self.node_id)
            if not validate_only:
                await self._commit(batch)
            return results

    async def _finalize_bootstrap_features(self) -> None:
        """The first active controller of a fresh metadata log finalizes metadata.version, as
        Kafka's writes its bootstrap records; done once the image holds it, whoever wrote it."""
        while features.METADATA_VERSION not in self._image.features:
            if self._quorum.is_leader:
                try:
                    await self._quorum.wait_ready()
                    async with self._lock:
                        batch = features.bootstrap_records(self._image)
                        await self._commit(batch)
                    if batch:
                        log.info("finalized %s at level %d", features.METADATA_VERSION,
                                 features.BOOTSTRAP_METADATA_VERSION)
                except ApiError:
                    pass         # lost leadership meanwhile: the next leader writes it
            await trio.sleep(BOOTSTRAP_POLL_S)
