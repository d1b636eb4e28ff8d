"""The client side of Kafka security for Odradek's own connections (admin tools; inter-broker).

``ClientSecurity.from_properties(props)`` reads Kafka's client properties (the file the tools take
with ``--command-config``): ``security.protocol``, ``ssl.*``, ``sasl.mechanism`` and either
``sasl.jaas.config`` (PlainLoginModule / ScramLoginModule username+password, OAuthBearerLoginModule
with ``unsecuredLoginStringClaim_sub``) or librdkafka's ``sasl.username`` / ``sasl.password``.
"""

from __future__ import annotations

import base64
import json
import socket
import ssl
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from broker.config import ConfigError
from broker.config.broker_catalog import BROKER_CONFIGS
from broker.config.values import parse_checked

from .jaas import JaasError, parse_single_module
from .sasl import AuthenticationFailed
from .sasl.oauthbearer import client_initial_response
from .sasl.scram import MECHANISMS as SCRAM_MECHANISMS, ScramClient
from .tls import client_context

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36


class ClientSettings:
    """Client properties with the same typed ``get`` the listener settings offer."""

    listener_name = "client"

    def __init__(self, properties: Mapping[str, str]):
        self.properties = dict(properties)

    def get(self, key: str) -> Any:
        definition = BROKER_CONFIGS.get(key)
        if key in self.properties:
            text = self.properties[key]
            if definition is None:
                return text
            return parse_checked(key, definition.type, definition.validator, text)
        return None if definition is None else definition.default


@dataclass
class ClientSecurity:
    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    mechanism: str | None = None
    username: str | None = None
    password: str | None = None
    jaas_options: dict | None = None

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> "ClientSecurity":
        settings = ClientSettings(properties)
        protocol = (properties.get("security.protocol") or "PLAINTEXT").strip().upper()
        if protocol not in PROTOCOLS:
            raise ConfigError(f"security.protocol {protocol} is not one of {', '.join(PROTOCOLS)}",
                              "security.protocol")
        security = cls(protocol)
        if protocol in ("SSL", "SASL_SSL"):
            security.ssl_context = client_context(settings)
        if protocol.startswith("SASL_"):
            security.mechanism = (properties.get("sasl.mechanism") or "GSSAPI").strip().upper()
            if security.mechanism not in ("PLAIN", "OAUTHBEARER", *SCRAM_MECHANISMS):
                raise ConfigError(f"sasl.mechanism {security.mechanism} is not supported",
                                  "sasl.mechanism")
            options: dict[str, str] = {}
            if properties.get("sasl.jaas.config"):
                try:
                    options = parse_single_module(properties["sasl.jaas.config"]).options
                except JaasError as exc:
                    raise ConfigError(f"sasl.jaas.config: {exc}", "sasl.jaas.config") from None
            security.jaas_options = options
            security.username = properties.get("sasl.username") or options.get("username")
            security.password = properties.get("sasl.password") or options.get("password")
            if security.mechanism != "OAUTHBEARER" and not (security.username and
                                                           security.password):
                raise ConfigError(f"SASL {security.mechanism} needs a username and password "
                                  "(sasl.jaas.config or sasl.username/sasl.password)",
                                  "sasl.jaas.config")
        return security

    @classmethod
    def from_file(cls, path: str) -> "ClientSecurity":
        from broker.config import parse_properties
        try:
            with open(path, encoding="utf-8") as handle:
                return cls.from_properties(parse_properties(handle.read()))
        except OSError as exc:
            raise ConfigError(f"cannot read {path}: {exc.strerror}") from None

    def wrap(self, sock: socket.socket, host: str) -> socket.socket:
        """TLS over a connected blocking socket (the handshake happens here)."""
        if self.ssl_context is None:
            return sock
        return self.ssl_context.wrap_socket(sock, server_hostname=host)

    def authenticate(self, request: Callable[[int, Any], tuple[int, Any]]) -> None:
        """SaslHandshake + SaslAuthenticate over `request(api_key, body) -> (version, response)`;
        raises AuthenticationFailed with the broker's message."""
        exchange = self.sasl_exchange()
        try:
            api_key, body = next(exchange)
            while True:
                api_key, body = exchange.send(request(api_key, body)[1])
        except StopIteration:
            return

    def sasl_exchange(self):
        """The SASL conversation as a generator, for blocking and async callers alike: it yields
        (api_key, request body) and is sent each decoded response; it raises
        AuthenticationFailed with the broker's message."""
        if self.mechanism is None:
            return
        from protocol import ErrorCode, messages
        handshake = yield SASL_HANDSHAKE, messages.SaslHandshakeRequest(mechanism=self.mechanism)
        if handshake.error_code:
            raise AuthenticationFailed(
                f"{ErrorCode(handshake.error_code).name}: the broker offers "
                f"{', '.join(handshake.mechanisms) or 'no mechanism'}, not {self.mechanism}")

        def step(token: bytes):
            answer = yield SASL_AUTHENTICATE, messages.SaslAuthenticateRequest(auth_bytes=token)
            if answer.error_code:
                raise AuthenticationFailed(f"{ErrorCode(answer.error_code).name}: "
                                           f"{answer.error_message}")
            return bytes(answer.auth_bytes)

        if self.mechanism == "PLAIN":
            yield from step(f"\0{self.username}\0{self.password}".encode())
        elif self.mechanism in SCRAM_MECHANISMS:
            token_auth = (self.jaas_options or {}).get("tokenauth", "").lower() == "true"
            scram = ScramClient(self.mechanism, self.username, self.password,
                                token_auth=token_auth)
            server_first = yield from step(scram.first_message())
            scram.verify_server_final((yield from step(scram.final_message(server_first))))
        else:
            challenge = yield from step(client_initial_response(self._unsecured_token()))
            if challenge:   # an RFC 7628 error: acknowledge it, the broker then fails us
                yield from step(b"\x01")

    def _unsecured_token(self) -> str:
        """Kafka's OAuthBearerUnsecuredLoginCallbackHandler: an alg=none JWS for development."""
        options = self.jaas_options or {}
        claim = options.get("unsecuredLoginPrincipalClaimName", "sub")
        subject = options.get(f"unsecuredLoginStringClaim_{claim}") or self.username
        if not subject:
            raise ConfigError("OAUTHBEARER needs unsecuredLoginStringClaim_sub in "
                              "sasl.jaas.config", "sasl.jaas.config")
        now = int(time.time())
        lifetime = int(options.get("unsecuredLoginLifetimeSeconds", "3600"))
        claims = {claim: subject, "iat": now, "exp": now + lifetime}
        return ".".join(_b64url(json.dumps(part).encode())
                        for part in ({"alg": "none"}, claims)) + "."


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def broker_client_security(config, listener, mechanism_config: str =
                           "sasl.mechanism.inter.broker.protocol") -> ClientSecurity:
    """How this broker connects to another node's `listener` (inter-broker, or the controller
    listener with ``sasl.mechanism.controller.protocol``): the listener's own ssl.* settings (its
    key store doubles as the client certificate, as in Kafka) and, for SASL, the ``username`` /
    ``password`` options of the listener's JAAS entry for the mechanism."""
    from .settings import ListenerSettings
    settings = ListenerSettings(config, listener.name, listener.security_protocol)
    security = ClientSecurity(listener.security_protocol)
    if settings.uses_tls:
        security.ssl_context = client_context(settings)
    if settings.uses_sasl:
        mechanism = config[mechanism_config].strip().upper()
        if mechanism not in ("PLAIN", "OAUTHBEARER", *SCRAM_MECHANISMS):
            raise ConfigError(f"{mechanism_config} {mechanism} is not supported", mechanism_config)
        text = settings.for_mechanism(mechanism, "sasl.jaas.config")
        options = parse_single_module(text).options if text else {}
        security.mechanism, security.jaas_options = mechanism, options
        security.username, security.password = options.get("username"), options.get("password")
        if mechanism != "OAUTHBEARER" and not (security.username and security.password):
            raise ConfigError(f"listener {listener.name}: the {mechanism} JAAS entry needs "
                              "username and password for the broker's own connections",
                              "sasl.jaas.config")
    return security
