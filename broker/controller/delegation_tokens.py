"""Create, renew and expire delegation tokens as Kafka's controller does (KIP-900), and sweep out
the expired ones. Each decision is (records to commit, answer); the broker checked beforehand who
may ask (``broker.handlers.delegation_tokens``).

Errors answered here leave the timestamps 0, as Kafka's controller does: DELEGATION_TOKEN_AUTH_DISABLED
without a secret key, DELEGATION_TOKEN_NOT_FOUND for an unknown HMAC, DELEGATION_TOKEN_EXPIRED
(renewal only), DELEGATION_TOKEN_OWNER_MISMATCH when neither the owner nor a renewer asks.
"""

from __future__ import annotations

import base64
import hmac
import os
from dataclasses import dataclass

from broker.security.delegation_tokens import TokenInfo, record_fields, token_hmac
from broker.security.principal import KafkaPrincipal

from . import records as r
from .errors import ErrorCode


@dataclass(frozen=True)
class TokenSettings:
    secret_key: str | None = None        # delegation.token.secret.key (or .master.key)
    max_lifetime_ms: int = 7 * 24 * 3600 * 1000   # delegation.token.max.lifetime.ms
    renew_lifetime_ms: int = 24 * 3600 * 1000     # delegation.token.expiry.time.ms
    check_interval_ms: int = 3600 * 1000          # delegation.token.expiry.check.interval.ms


@dataclass
class CreatedToken:
    error_code: int
    token: TokenInfo | None = None
    hmac: bytes = b""


def new_token_id() -> str:
    """A random id written like Kafka's Uuid (22 URL-safe base64 characters, never a leading '-')."""
    while True:
        text = base64.urlsafe_b64encode(os.urandom(16)).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text


def create(image, settings: TokenSettings, now: int, owner: KafkaPrincipal,
           requester: KafkaPrincipal, renewers, max_lifetime_ms: int):
    if not settings.secret_key:
        return [], CreatedToken(int(ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED))
    lifetime = settings.max_lifetime_ms
    if max_lifetime_ms > 0:
        lifetime = min(lifetime, max_lifetime_ms)
    max_timestamp = now + lifetime
    token = TokenInfo(new_token_id(), owner, requester, tuple(renewers), now, max_timestamp,
                      min(max_timestamp, now + settings.renew_lifetime_ms))
    return ([r.DelegationTokenRecord(**record_fields(token))],
            CreatedToken(0, token, token_hmac(settings.secret_key, token.token_id)))


def renew(image, settings: TokenSettings, now: int, principal: KafkaPrincipal, token_hmac_: bytes,
          renew_period_ms: int):
    """(records, (error code, new expiry timestamp))."""
    token, error = _find(image, settings, token_hmac_)
    if error:
        return [], (error, 0)
    if token.max_timestamp < now or token.expiry_timestamp < now:
        return [], (int(ErrorCode.DELEGATION_TOKEN_EXPIRED), 0)
    if not token.may_renew(principal):
        return [], (int(ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH), 0)
    period = settings.renew_lifetime_ms
    if renew_period_ms > 0:
        period = min(period, renew_period_ms)
    expiry = min(token.max_timestamp, now + period)
    return [_updated(token, expiry)], (0, expiry)


def expire(image, settings: TokenSettings, now: int, principal: KafkaPrincipal, token_hmac_: bytes,
           expiry_period_ms: int):
    """(records, (error code, new expiry timestamp)): a timestamp in the past removes the token."""
    token, error = _find(image, settings, token_hmac_)
    if error:
        return [], (error, 0)
    if not token.may_renew(principal):
        return [], (int(ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH), 0)
    expiry = min(token.max_timestamp, now + expiry_period_ms)
    if expiry < now:
        return [r.RemoveDelegationTokenRecord(token_id=token.token_id)], (0, expiry)
    return [_updated(token, expiry)], (0, expiry)


def sweep(image, now: int) -> list:
    """Removal records for every token past its expiry (the periodic expiry check)."""
    return [r.RemoveDelegationTokenRecord(token_id=token.token_id)
            for token in image.delegation_tokens.values()
            if token.expiry_timestamp < now or token.max_timestamp < now]


def _find(image, settings: TokenSettings, wanted: bytes) -> tuple[TokenInfo | None, int]:
    if not settings.secret_key:
        return None, int(ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED)
    for token in image.delegation_tokens.values():
        if hmac.compare_digest(token_hmac(settings.secret_key, token.token_id), bytes(wanted)):
            return token, 0
    return None, int(ErrorCode.DELEGATION_TOKEN_NOT_FOUND)


def _updated(token: TokenInfo, expiry: int):
    fields = record_fields(token)
    fields["expiration_timestamp"] = expiry
    return r.DelegationTokenRecord(**fields)
