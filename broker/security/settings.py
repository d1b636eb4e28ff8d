"""One listener's security settings, with Kafka's per-listener overrides.

A listener-prefixed key wins over the plain one: ``listener.name.<listener>.ssl.keystore.location``
over ``ssl.keystore.location``, and for SASL ``listener.name.<listener>.<mechanism>.sasl.jaas.config``
over ``listener.name.<listener>.sasl.jaas.config`` over ``sasl.jaas.config`` (listener and mechanism
names lower-case, as Kafka writes them).
"""

from __future__ import annotations

from typing import Any

from broker.config import BrokerConfig
from broker.config.broker_catalog import BROKER_CONFIGS
from broker.config.values import parse_checked

SSL_PROTOCOLS = ("SSL", "SASL_SSL")
SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")


class ListenerSettings:
    def __init__(self, config: BrokerConfig, listener_name: str, security_protocol: str):
        self.config = config
        self.listener_name = listener_name
        self.security_protocol = security_protocol
        self.prefix = f"listener.name.{listener_name.lower()}."

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in SSL_PROTOCOLS

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in SASL_PROTOCOLS

    def get(self, key: str) -> Any:
        return self._lookup([self.prefix + key], key)

    def for_mechanism(self, mechanism: str, key: str) -> Any:
        return self._lookup([f"{self.prefix}{mechanism.lower()}.{key}", self.prefix + key], key)

    def _lookup(self, prefixed: list[str], key: str) -> Any:
        for name in prefixed:
            if self.config.is_set(name):
                definition = BROKER_CONFIGS[key]
                return parse_checked(name, definition.type, definition.validator,
                                     self.config.get(name))
        return self.config.get(key)
