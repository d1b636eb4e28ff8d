"""The SASL state of one connection (KIP-43, KIP-152, KIP-368).

    ApiVersions*  SaslHandshake(mechanism)  SaslAuthenticate(token)...  → authenticated
                  SaslHandshake v0          raw size-prefixed tokens... → authenticated (legacy)

Before authentication only ApiVersions, SaslHandshake and SaslAuthenticate are served; anything else,
a frame over ``sasl.server.max.receive.size`` or a request out of turn closes the connection, as in
Kafka. Refused credentials answer SASL_AUTHENTICATION_FAILED and close. With
``connections.max.reauth.ms`` the session lifetime goes back in SaslAuthenticate (v1+); a client must
re-authenticate (SaslHandshake + SaslAuthenticate, same principal) before it ends, or its next other
request closes the connection.
"""

from __future__ import annotations

import time

from protocol import ErrorCode, messages

from .principal import ANONYMOUS, KafkaPrincipal
from .sasl import AuthenticationFailed
from .sasl.scram import ScramCredential

SASL_HANDSHAKE, API_VERSIONS, SASL_AUTHENTICATE = 17, 18, 36
_BEFORE_AUTH = {API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE}

# states
HANDSHAKE, AUTHENTICATE, RAW_TOKENS, AUTHENTICATED, REAUTHENTICATE, FAILED = range(6)


class RequestRefused(Exception):
    """The connection must close (Kafka gives no error response in these cases)."""


class SaslAuthenticator:
    def __init__(self, security, connection, broker):
        self.security = security
        self.connection = connection
        self.broker = broker
        self.state = HANDSHAKE
        self.mechanism: str | None = None
        self.principal: KafkaPrincipal = ANONYMOUS
        self.session_deadline: float | None = None   # monotonic
        self._server = None

    # ------------------------------------------------------------------ gatekeeping
    @property
    def authenticated(self) -> bool:
        return self.state in (AUTHENTICATED, REAUTHENTICATE)

    @property
    def expects_raw_token(self) -> bool:
        return self.state == RAW_TOKENS

    def check_request(self, api_key: int) -> None:
        """Raise RequestRefused when `api_key` may not be served now."""
        if self.state == FAILED:   # closing: nothing pipelined behind the failure is served
            raise RequestRefused("SASL authentication failed")
        if self.state == HANDSHAKE:
            if api_key not in _BEFORE_AUTH or api_key == SASL_AUTHENTICATE:
                raise RequestRefused(f"unexpected request (api {api_key}) before SASL "
                                     "authentication")
        elif self.state == AUTHENTICATE:
            if api_key != SASL_AUTHENTICATE:
                raise RequestRefused(f"unexpected request (api {api_key}) during SASL "
                                     "authentication")
        elif self.state == REAUTHENTICATE:
            if api_key != SASL_AUTHENTICATE:
                raise RequestRefused(f"unexpected request (api {api_key}) during SASL "
                                     "re-authentication")
        elif self.session_deadline is not None and time.monotonic() >= self.session_deadline \
                and api_key != SASL_HANDSHAKE:
            raise RequestRefused("SASL session expired without re-authentication "
                                 "(connections.max.reauth.ms)")

    # ------------------------------------------------------------------ SaslHandshake
    def handshake(self, version: int, mechanism: str):
        Response = messages.SaslHandshakeResponse
        enabled = list(self.security.mechanisms)
        if self.state == AUTHENTICATED:
            if self.session_deadline is None or version == 0:
                return Response(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=enabled), False
            if mechanism != self.mechanism:
                self._fail(f"re-authentication must use {self.mechanism}, not {mechanism}",
                           reauthentication=True)
                return Response(error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                                mechanisms=enabled), True
            self.state = REAUTHENTICATE
            self._server = self._new_server(mechanism)
            return Response(error_code=ErrorCode.NONE, mechanisms=enabled), False
        if mechanism not in enabled:
            self._fail(f"unsupported SASL mechanism {mechanism!r}", mechanism)
            return Response(error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                            mechanisms=enabled), True
        self.mechanism = mechanism
        self._server = self._new_server(mechanism)
        self.state = RAW_TOKENS if version == 0 else AUTHENTICATE
        return Response(error_code=ErrorCode.NONE, mechanisms=enabled), False

    def _new_server(self, mechanism: str):
        return self.security.new_sasl_server(mechanism, self._scram_credential,
                                             self._token_credential)

    def _scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        return self.broker.image.scram_credentials.get((user, mechanism))

    def _token_credential(self, token_id: str, mechanism: str):
        """A delegation token's (owner name, SCRAM credential, expiry ms), or None."""
        found = self.broker.token_credentials.lookup(self.broker.image.delegation_tokens,
                                                     token_id, mechanism)
        if found is None:
            return None
        token, credential = found
        return token.owner.name, credential, token.expiry_timestamp

    # ------------------------------------------------------------------ SaslAuthenticate
    def authenticate(self, version: int, token: bytes):
        """(response, close afterwards)."""
        Response = messages.SaslAuthenticateResponse
        if self.state == AUTHENTICATED:
            return Response(error_code=ErrorCode.ILLEGAL_SASL_STATE,
                            error_message="SaslAuthenticate request received after successful "
                                          "authentication", auth_bytes=b""), False
        try:
            challenge = self._evaluate(token)
        except AuthenticationFailed as exc:
            return Response(error_code=ErrorCode.SASL_AUTHENTICATION_FAILED,
                            error_message=str(exc), auth_bytes=b""), True
        response = Response(error_code=ErrorCode.NONE, error_message="", auth_bytes=challenge)
        if version >= 1 and self.state == AUTHENTICATED and self.session_deadline is not None:
            response.session_lifetime_ms = max(
                1, int((self.session_deadline - time.monotonic()) * 1000))
        return response, False

    def raw_token(self, token: bytes) -> bytes:
        """A legacy (handshake v0) token; raises RequestRefused when authentication fails."""
        try:
            return self._evaluate(token)
        except AuthenticationFailed as exc:
            raise RequestRefused(f"SASL authentication failed: {exc}") from None

    def _evaluate(self, token: bytes) -> bytes:
        server = self._server
        reauthenticating = self.state == REAUTHENTICATE
        try:
            challenge = server.evaluate(token)
        except AuthenticationFailed as exc:
            # OAUTHBEARER's final message is a JSON status; its reason was kept aside
            self._fail(getattr(server, "failure_reason", None) or str(exc),
                       reauthentication=reauthenticating)
            raise
        if not server.complete:
            return challenge
        principal = KafkaPrincipal.user(server.principal_name,
                                        token_authenticated=server.token_authenticated)
        if reauthenticating and principal != self.principal:
            message = (f"Cannot change principals during re-authentication from "
                       f"{self.principal}: {principal}")
            self._fail(message, reauthentication=True)
            raise AuthenticationFailed(message)
        self.principal = principal
        self.connection.set_principal(principal)
        self._start_session(server.credential_expiry_ms)
        self.state = AUTHENTICATED
        self._server = None
        self.broker.auth_audit.succeeded(self.security.listener_name, reauthenticating)
        return challenge

    def _start_session(self, credential_expiry_ms: int | None) -> None:
        """KIP-368, as Kafka: a session ends after connections.max.reauth.ms or when its credential
        (an OAuth or delegation token) expires, whichever comes first; with neither, never."""
        lifetimes = [self.security.reauth_ms] if self.security.reauth_ms > 0 else []
        if credential_expiry_ms is not None:
            lifetimes.append(credential_expiry_ms - int(time.time() * 1000))
        self.session_deadline = (time.monotonic() + max(min(lifetimes), 0) / 1000
                                 if lifetimes else None)

    def _fail(self, reason: str, mechanism: str | None = None, *,
              reauthentication=False) -> None:
        self.state = FAILED
        self.broker.auth_audit.failed(self.security.listener_name, self.connection.peer,
                                      mechanism or self.mechanism, reason, reauthentication)
