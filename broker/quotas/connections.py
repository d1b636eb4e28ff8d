"""Connection creation rate limits (KIP-612), as Kafka's ConnectionQuotas applies them on accept.

- ``max.connection.creation.rate`` (broker-wide) and ``listener.name.<listener>.max.connection.
  creation.rate``: new connections per second over the quota windows. Over the limit the acceptor
  waits (the client waits in the listen backlog) for the throttle time, capped at one window;
- ``connection_creation_rate`` of an ``ip`` quota entity (that address, else the ``<default>`` ip
  entity): over the limit the new connection is not counted and is closed, but only after the
  throttle time, so a client does not reconnect at once in a tight loop.
"""

from __future__ import annotations

from broker.controller.client_quotas import CONNECTION_CREATION_RATE, IP
from broker.quotas.manager import monotonic_ms
from broker.quotas.rate import SampledRate, throttle_ms

UNLIMITED = 2**31 - 1
BROKER_WIDE = "max.connection.creation.rate"


class ConnectionRateQuotas:
    def __init__(self, config, clock=monotonic_ms):
        self.config = config
        self.clock = clock
        self.samples = config["quota.window.num"]
        self.window_ms = config["quota.window.size.seconds"] * 1000
        self._rates: dict[object, SampledRate] = {}
        self._ip_quotas: dict[str | None, float] = {}

    def update(self, client_quotas) -> None:
        self._ip_quotas = {dict(entity)[IP]: values[CONNECTION_CREATION_RATE]
                           for entity, values in client_quotas.items()
                           if len(entity) == 1 and entity[0][0] == IP
                           and CONNECTION_CREATION_RATE in values}
        for key in [k for k in self._rates if isinstance(k, tuple) and k[0] == IP]:
            if key[1] not in self._ip_quotas and None not in self._ip_quotas:
                del self._rates[key]

    def _rate(self, key) -> SampledRate:
        rate = self._rates.get(key)
        if rate is None:
            rate = self._rates[key] = SampledRate(self.samples, self.window_ms)
        return rate

    def _record(self, key, limit: float, now_ms: int) -> int:
        rate = self._rate(key)
        rate.record(1.0, now_ms)
        return throttle_ms(rate, limit, now_ms)

    def accept_delay_ms(self, listener_name: str, listeners: int = 1) -> int:
        """How long the acceptor waits before taking this new connection (0: at once). As in
        Kafka, the inter-broker listener is spared the broker-wide limit when there are others."""
        now_ms = self.clock()
        delay = 0
        listener_key = f"listener.name.{listener_name.lower()}.{BROKER_WIDE}"
        if self.config.is_set(listener_key):
            try:
                limit = float(self.config.get(listener_key))
            except ValueError:   # a malformed override limits nothing (it is logged at start)
                limit = UNLIMITED
            if limit < UNLIMITED:
                delay = self._record(("listener", listener_name), limit, now_ms)
        limit = self.config[BROKER_WIDE]
        protected = listeners > 1 and listener_name == self._inter_broker_listener()
        if limit < UNLIMITED and not protected:
            delay = max(delay, self._record("broker", limit, now_ms))
        return min(delay, self.window_ms)

    def _inter_broker_listener(self) -> str:
        # Kafka: inter.broker.listener.name, else the listener named after the protocol
        return self.config["inter.broker.listener.name"] or \
            self.config["security.inter.broker.protocol"]

    def ip_throttle_ms(self, address: str) -> int:
        """> 0: the connection from `address` is over its IP's rate; close it after that long."""
        limit = self._ip_quotas.get(address, self._ip_quotas.get(None))
        if limit is None or limit >= UNLIMITED:
            return 0
        now_ms = self.clock()
        rate = self._rate((IP, address))
        rate.record(1.0, now_ms)
        throttle = min(throttle_ms(rate, limit, now_ms), self.window_ms)
        if throttle > 0:
            rate.record(-1.0, now_ms)   # not accepted, not counted
        return throttle
