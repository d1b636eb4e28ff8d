"""SASL/OAUTHBEARER (RFC 7628) as Kafka's broker runs it.

The client's only message is ``gs2-header %x01 auth=Bearer <token> %x01 [key=value %x01]* %x01``.
A token that does not validate is answered with an RFC 7628 JSON error as a challenge; the client
acknowledges it with a single %x01 and the authentication fails with that JSON as the message.
"""

from __future__ import annotations

import json
import re

from . import AuthenticationFailed, SaslServer, generic_failure
from .jwt import InvalidToken

_INITIAL = re.compile(r"n,(?:a=(?P<authzid>[^,]*))?,\x01(?P<kvpairs>(?:[A-Za-z]+=[\x21-\x7E \t]*\x01)*)\x01",
                      re.S)


class OAuthBearerServer(SaslServer):
    mechanism = "OAUTHBEARER"

    def __init__(self, validator):
        super().__init__()
        self._validator = validator
        self._error: str | None = None
        self.failure_reason: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        token = bytes(token)
        if self._error is not None:
            if token == b"\x01":
                raise AuthenticationFailed(self._error)
            raise generic_failure(self.mechanism)
        if self.complete:
            raise generic_failure(self.mechanism)
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise generic_failure(self.mechanism) from None
        match = _INITIAL.fullmatch(text)
        if not match:
            raise generic_failure(self.mechanism)
        pairs = dict(item.split("=", 1) for item in match["kvpairs"].split("\x01") if item)
        auth = pairs.get("auth", "")
        scheme, _, value = auth.partition(" ")
        if scheme.lower() != "bearer" or not value.strip():
            raise generic_failure(self.mechanism)
        try:
            validated = self._validator.validate(value.strip())
        except InvalidToken as exc:
            error = {"status": exc.status}
            if exc.scope:
                error["scope"] = exc.scope
            self._error = json.dumps(error, separators=(",", ":"))
            self.failure_reason = str(exc)
            return self._error.encode()
        if match["authzid"] and match["authzid"] != validated.principal_name:
            raise AuthenticationFailed("Authentication failed: Client requested an "
                                       "authorization id that is different from the token's "
                                       "principal name")
        self.principal_name = validated.principal_name
        self.credential_expiry_ms = validated.expiry_ms
        self.complete = True
        return b""


def client_initial_response(token: str, authzid: str = "", extensions=None) -> bytes:
    kvpairs = "".join(f"{k}={v}\x01" for k, v in (extensions or {}).items())
    prefix = f"n,a={authzid}," if authzid else "n,,"
    return f"{prefix}\x01auth=Bearer {token}\x01{kvpairs}\x01".encode()
