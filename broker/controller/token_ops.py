"""Delegation tokens on the active controller (KIP-900): create, renew and expire under the lock
on the latest committed image, and the periodic sweep of expired tokens
(``delegation.token.expiry.check.interval.ms``). The decisions are `delegation_tokens`' functions."""

from __future__ import annotations

import logging
import time

import trio

from . import delegation_tokens as tokens
from .errors import ApiError

log = logging.getLogger(__name__)


def _now_ms() -> int:
    return int(time.time() * 1000)


class TokenOps:
    """Mixed into Controller: needs self._image, self._lock, self._quorum, self._commit,
    self._require_leader and self._settings.tokens."""

    async def create_delegation_token(self, owner, requester, renewers,
                                      max_lifetime_ms: int) -> tokens.CreatedToken:
        return await self._decide(tokens.create, owner, requester, renewers, max_lifetime_ms)

    async def renew_delegation_token(self, principal, hmac: bytes,
                                     renew_period_ms: int) -> tuple[int, int]:
        """(error code, new expiry timestamp in ms)."""
        return await self._decide(tokens.renew, principal, hmac, renew_period_ms)

    async def expire_delegation_token(self, principal, hmac: bytes,
                                      expiry_period_ms: int) -> tuple[int, int]:
        return await self._decide(tokens.expire, principal, hmac, expiry_period_ms)

    async def _decide(self, decision, *args):
        await self._require_leader()
        async with self._lock:
            batch, answer = decision(self._image, self._settings.tokens, _now_ms(), *args)
            await self._commit(batch)
            return answer

    async def _sweep_expired_tokens(self) -> None:
        settings = self._settings.tokens
        if not settings.secret_key:
            return
        while True:
            await trio.sleep(settings.check_interval_ms / 1000)
            if not self._quorum.is_leader:
                continue
            try:
                async with self._lock:
                    batch = tokens.sweep(self._image, _now_ms())
                    await self._commit(batch)
            except ApiError:
                continue     # lost leadership meanwhile: the next leader sweeps
            if batch:
                log.info("removed %d expired delegation token(s)", len(batch))
