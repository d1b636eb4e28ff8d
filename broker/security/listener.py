"""What one listener needs to secure its connections, built once at start-up.

``ListenerSecurity.for_listener(config, listener)`` reads the listener's settings (with Kafka's
``listener.name.<listener>.`` overrides), builds its TLS context and its SASL mechanisms, and raises
ConfigError for anything unusable, so a bad setting stops the broker before it serves.
"""

from __future__ import annotations

from typing import Callable

from broker.config import BrokerConfig, ConfigError, Listener

from .jaas import JaasError, parse_single_module
from .sasl import SaslServer
from .sasl.jwt import JwksValidator, UnsecuredValidator
from .sasl.oauthbearer import OAuthBearerServer
from .sasl.plain import PlainServer, plain_users
from .sasl.scram import MECHANISMS as SCRAM_MECHANISMS, ScramCredential, ScramServer, TokenLookup
from .settings import ListenerSettings
from .tls import principal_mapper, server_context

SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
ScramLookup = Callable[[str, str], ScramCredential | None]


class ListenerSecurity:
    def __init__(self, settings: ListenerSettings):
        self.settings = settings
        self.listener_name = settings.listener_name
        self.security_protocol = settings.security_protocol
        self.ssl_context = None
        self.principal_mapper = None
        self.handshake_timeout_s = settings.get("ssl.handshake.timeout.ms") / 1000
        if settings.uses_tls:
            self.ssl_context = server_context(settings)
            self.principal_mapper = principal_mapper(settings)
        self.mechanisms: list[str] = []
        self._factories: dict[str, Callable[[ScramLookup, TokenLookup | None], SaslServer]] = {}
        if settings.uses_sasl:
            self._configure_sasl()
        self.reauth_ms = settings.get("connections.max.reauth.ms")
        self.max_receive_size = settings.get("sasl.server.max.receive.size")

    @classmethod
    def for_listener(cls, config: BrokerConfig, listener: Listener) -> "ListenerSecurity | None":
        """None for a PLAINTEXT listener (nothing to do)."""
        if listener.security_protocol == "PLAINTEXT":
            return None
        return cls(ListenerSettings(config, listener.name, listener.security_protocol))

    @property
    def uses_tls(self) -> bool:
        return self.ssl_context is not None

    @property
    def uses_sasl(self) -> bool:
        return bool(self.mechanisms)

    def new_sasl_server(self, mechanism: str, scram_lookup: ScramLookup,
                        token_lookup: TokenLookup | None = None) -> SaslServer:
        return self._factories[mechanism](scram_lookup, token_lookup)

    # ----------------------------------------------------------------------------- set-up
    def _configure_sasl(self) -> None:
        settings = self.settings
        mechanisms = [m.strip().upper() for m in settings.get("sasl.enabled.mechanisms") if m.strip()]
        if not mechanisms:
            raise ConfigError(f"listener {self.listener_name}: sasl.enabled.mechanisms is empty",
                              "sasl.enabled.mechanisms")
        for mechanism in mechanisms:
            if mechanism not in SUPPORTED_MECHANISMS:
                raise ConfigError(
                    f"listener {self.listener_name}: SASL mechanism {mechanism} is not supported "
                    f"(supported: {', '.join(SUPPORTED_MECHANISMS)}; set "
                    "sasl.enabled.mechanisms)", "sasl.enabled.mechanisms")
            self._factories[mechanism] = self._factory(mechanism)
        self.mechanisms = mechanisms

    def _jaas_options(self, mechanism: str, required_module: str | None) -> dict[str, str]:
        text = self.settings.for_mechanism(mechanism, "sasl.jaas.config")
        if not text:
            if required_module:
                raise ConfigError(
                    f"listener {self.listener_name}: SASL mechanism {mechanism} needs "
                    f"listener.name.{self.listener_name.lower()}.{mechanism.lower()}"
                    f".sasl.jaas.config ({required_module})", "sasl.jaas.config")
            return {}
        try:
            module = parse_single_module(text)
        except JaasError as exc:
            raise ConfigError(f"listener {self.listener_name}: sasl.jaas.config for {mechanism}: "
                              f"{exc}", "sasl.jaas.config") from None
        return module.options

    def _factory(self, mechanism: str) -> Callable[[ScramLookup, TokenLookup | None], SaslServer]:
        if mechanism == "PLAIN":
            users = plain_users(self._jaas_options(
                mechanism, "org.apache.kafka.common.security.plain.PlainLoginModule"))
            return lambda lookup, token_lookup: PlainServer(users)
        if mechanism in SCRAM_MECHANISMS:
            return lambda lookup, token_lookup: ScramServer(mechanism, lookup, token_lookup)
        # OAUTHBEARER: signed tokens against a JWKS when one is configured, else Kafka's
        # default unsecured validator (development only, as in Kafka)
        if self.settings.for_mechanism(mechanism, "sasl.oauthbearer.jwks.endpoint.url"):
            validator = JwksValidator(self.settings, mechanism)
        else:
            validator = UnsecuredValidator(self._jaas_options(mechanism, None))
        return lambda lookup, token_lookup: OAuthBearerServer(validator)
