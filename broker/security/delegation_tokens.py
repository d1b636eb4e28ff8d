"""Delegation tokens (KIP-48; KIP-900 keeps them in the KRaft metadata log): what a token is, who
may renew and see it, and the SCRAM credential a client logs in with.

A token's secret is its HMAC: HMAC-SHA512 of the token id under ``delegation.token.secret.key``.
The metadata log (DelegationTokenRecord) holds only the token's information, never the HMAC, so
every node with the same secret key recomputes it. A client authenticates with SCRAM, the token id
as user name, base64(HMAC) as password and the extension ``tokenauth=true``; the session is then
the token's owner.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from dataclasses import dataclass

from .principal import KafkaPrincipal
from .sasl.scram import MECHANISMS, MIN_ITERATIONS, ScramCredential, credential_from_salted, \
    salted_password


@dataclass(frozen=True)
class TokenInfo:
    token_id: str
    owner: KafkaPrincipal
    requester: KafkaPrincipal
    renewers: tuple[KafkaPrincipal, ...]
    issue_timestamp: int
    max_timestamp: int
    expiry_timestamp: int

    def owner_or_renewer(self, principal: KafkaPrincipal) -> bool:
        """Who sees the token without a DescribeTokens ACL."""
        return principal in (self.owner, self.requester) or principal in self.renewers

    def may_renew(self, principal: KafkaPrincipal) -> bool:
        """Renew and expire: the owner and the named renewers (not the requester, as in Kafka)."""
        return principal == self.owner or principal in self.renewers


def token_secret_key(config) -> str | None:
    """delegation.token.secret.key (or its old name delegation.token.master.key): None for none."""
    return config["delegation.token.secret.key"] or None


def token_hmac(secret_key: str, token_id: str) -> bytes:
    return hmac.new(secret_key.encode(), token_id.encode(), hashlib.sha512).digest()


def token_from_record(rec) -> TokenInfo:
    return TokenInfo(rec.token_id, KafkaPrincipal.parse(rec.owner),
                     KafkaPrincipal.parse(rec.requester),
                     tuple(KafkaPrincipal.parse(p) for p in rec.renewers),
                     rec.issue_timestamp, rec.max_timestamp, rec.expiration_timestamp)


def record_fields(token: TokenInfo) -> dict:
    """DelegationTokenRecord's fields (principals as Kafka writes them: "User:alice")."""
    return dict(token_id=token.token_id, owner=str(token.owner), requester=str(token.requester),
                renewers=[str(p) for p in token.renewers], issue_timestamp=token.issue_timestamp,
                max_timestamp=token.max_timestamp, expiration_timestamp=token.expiry_timestamp)


class TokenCredentials:
    """The SCRAM credentials of the tokens a broker knows, derived from their HMACs on first use
    (salted with a fresh salt per node, as Kafka does) and kept while the token exists."""

    def __init__(self, secret_key: str | None):
        self.secret_key = secret_key or None
        self._cache: dict[tuple[str, str], ScramCredential] = {}

    def lookup(self, tokens, token_id: str, mechanism: str) -> tuple[TokenInfo, ScramCredential] | None:
        """(token, credential) for a token of `tokens` (the image's), or None."""
        token = tokens.get(token_id)
        if token is None or self.secret_key is None or mechanism not in MECHANISMS:
            return None
        key = (token_id, mechanism)
        credential = self._cache.get(key)
        if credential is None:
            if len(self._cache) > 4 * len(tokens) + 64:   # forget tokens gone from the image
                self._cache = {k: v for k, v in self._cache.items() if k[0] in tokens}
            password = base64.b64encode(token_hmac(self.secret_key, token_id)).decode()
            salt = os.urandom(32)
            salted = salted_password(mechanism, password, salt, MIN_ITERATIONS)
            credential = credential_from_salted(mechanism, salted, salt, MIN_ITERATIONS)
            self._cache[key] = credential
        return token, credential
