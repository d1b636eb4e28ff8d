"""One client quota type (produce, fetch, request, controller mutation) as Kafka's ClientQuotaManager.

The quota that applies to a request is found by Kafka's precedence, most specific first:

    /config/users/<user>/clients/<client-id>     /config/users/<default>/clients/<client-id>
    /config/users/<user>/clients/<default>       /config/users/<default>/clients/<default>
    /config/users/<user>                         /config/users/<default>
                                                 /config/clients/<client-id>
                                                 /config/clients/<default>

(left column first, then right). The matching level decides the *metric tags* (user, client-id),
and everything with the same tags shares one sensor: a quota on ``/config/users/alice`` is shared by
all of alice's clients, one on ``/config/users/<default>`` is a separate quota per user. The user is
the request principal's name (``User:ANONYMOUS`` -> ``ANONYMOUS`` without authentication). With no
quota of this type anywhere nothing is recorded at all (Kafka's ``quotasEnabled``).
"""

from __future__ import annotations

import time
from collections import deque
from typing import Mapping

from broker.controller.client_quotas import CLIENT_ID, USER
from broker.quotas.rate import SampledRate, TokenBucket, throttle_ms

SENSOR_EXPIRY_MS = 3_600_000          # Kafka drops a client's quota sensors after an idle hour
THROTTLE_AVG_WINDOW_MS = 60_000       # Kafka's default metric config: 2 samples of 30 s


def monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


class Sensor:
    """One (user, client-id) tag pair's measurements."""

    __slots__ = ("rate", "bucket", "throttles", "throttle_total_ms", "throttled", "last_used_ms")

    def __init__(self, samples: int, window_ms: int, token_bucket: bool, now_ms: int):
        self.rate = SampledRate(samples, window_ms)
        self.bucket = TokenBucket(samples, window_ms) if token_bucket else None
        self.throttles: deque[tuple[int, int]] = deque()   # (when, ms) for the average
        self.throttle_total_ms = 0
        self.throttled = 0
        self.last_used_ms = now_ms

    def record_throttle(self, ms: int, now_ms: int) -> None:
        self.throttles.append((now_ms, ms))
        self.throttle_total_ms += ms
        self.throttled += 1

    def throttle_avg_ms(self, now_ms: int) -> float:
        while self.throttles and now_ms - self.throttles[0][0] >= THROTTLE_AVG_WINDOW_MS:
            self.throttles.popleft()
        if not self.throttles:
            return 0.0
        return sum(ms for _, ms in self.throttles) / len(self.throttles)


class ClientQuotaManager:
    """Quotas of one key (e.g. ``producer_byte_rate``) and the sensors that enforce them."""

    def __init__(self, key: str, *, samples: int = 11, window_ms: int = 1000,
                 max_throttle_ms: int | None = None, token_bucket: bool = False,
                 clock=monotonic_ms):
        self.key = key
        self.samples = samples
        self.window_ms = window_ms
        self.max_throttle_ms = max_throttle_ms   # the request quota caps a throttle at one window
        self.token_bucket = token_bucket
        self.clock = clock
        self._quotas: dict[tuple, float] = {}
        # Any quota of this key set (an attribute, not a property: read on every request)
        self.enabled = False
        self.sensors: dict[tuple[str, str], Sensor] = {}
        self._lookups: dict[tuple[str, str], tuple[tuple[str, str], float | None]] = {}
        self._next_expiry_ms = 0
        self._kinds = (False, False, False)

    # -- quotas --------------------------------------------------------------------------------
    def update(self, client_quotas: Mapping[tuple, Mapping[str, float]]) -> None:
        """Take this key's quotas from the image's client quotas."""
        quotas = {}
        for entity, values in client_quotas.items():
            value = values.get(self.key)
            if value is not None and all(t in (USER, CLIENT_ID) for t, _ in entity):
                quotas[entity] = value
        self._quotas = quotas
        self.enabled = bool(quotas)
        self._lookups = {}
        kinds = {tuple(t for t, _ in entity) for entity in quotas}
        self._kinds = ((CLIENT_ID, USER) in kinds, (USER,) in kinds, (CLIENT_ID,) in kinds)

    def _quota(self, user=None, client=None, *, has_user=False, has_client=False):
        entity = []
        if has_client:
            entity.append((CLIENT_ID, client))
        if has_user:
            entity.append((USER, user))
        return self._quotas.get(tuple(entity))

    def lookup(self, user: str, client_id: str) -> tuple[tuple[str, str], float | None]:
        """(metric tags, quota or None) for a request from `user` with `client_id`."""
        key = (user, client_id)
        found = self._lookups.get(key)
        if found is None:
            found = self._lookups[key] = self._resolve(user, client_id)
            if len(self._lookups) > 100_000:   # a flood of client ids: start over
                self._lookups = {key: found}
        return found

    def _resolve(self, user: str, client_id: str):
        """Walk the eight levels; the first that has this quota gives the tags and the value."""
        q = self._quota
        levels = (
            ((user, client_id), lambda: q(user, client_id, has_user=True, has_client=True)),
            ((user, client_id), lambda: q(user, None, has_user=True, has_client=True)),
            ((user, ""), lambda: q(user, has_user=True)),
            ((user, client_id), lambda: q(None, client_id, has_user=True, has_client=True)),
            ((user, client_id), lambda: q(None, None, has_user=True, has_client=True)),
            ((user, ""), lambda: q(None, has_user=True)),
            (("", client_id), lambda: q(client=client_id, has_client=True)),
            (("", client_id), lambda: q(client=None, has_client=True)),
        )
        for tags, value in levels:
            found = value()
            if found is not None:
                return tags, found
        both, user_only, client_only = self._kinds
        if user_only and not both and not client_only:
            return (user, ""), None
        if both and not user_only and not client_only:
            return (user, client_id), None
        return ("", client_id), None

    # -- recording -----------------------------------------------------------------------------
    def _sensor(self, tags: tuple[str, str], now_ms: int) -> Sensor:
        sensor = self.sensors.get(tags)
        if sensor is None:
            if now_ms >= self._next_expiry_ms:
                self._expire(now_ms)
            sensor = self.sensors[tags] = Sensor(self.samples, self.window_ms, self.token_bucket,
                                                 now_ms)
        sensor.last_used_ms = now_ms
        return sensor

    def _expire(self, now_ms: int) -> None:
        self._next_expiry_ms = now_ms + 60_000
        for tags in [t for t, s in self.sensors.items()
                     if now_ms - s.last_used_ms >= SENSOR_EXPIRY_MS]:
            del self.sensors[tags]

    def record(self, user: str, client_id: str, value: float, now_ms: int | None = None) -> int:
        """Record `value` and return the throttle time in ms (0 within the quota)."""
        if not self._quotas:
            return 0
        now_ms = self.clock() if now_ms is None else now_ms
        tags, quota = self.lookup(user, client_id)
        sensor = self._sensor(tags, now_ms)
        sensor.rate.record(value, now_ms)
        if quota is None:
            return 0
        throttle = throttle_ms(sensor.rate, quota, now_ms)
        if self.max_throttle_ms is not None:
            throttle = min(throttle, self.max_throttle_ms)
        return throttle

    def unrecord(self, user: str, client_id: str, value: float, now_ms: int | None = None) -> None:
        """Take back a recorded value (a throttled fetch returns no data)."""
        if self._quotas:
            now_ms = self.clock() if now_ms is None else now_ms
            tags, _ = self.lookup(user, client_id)
            self._sensor(tags, now_ms).rate.record(-value, now_ms)

    def max_value_in_window(self, user: str, client_id: str) -> float:
        """Kafka's getMaxValueInQuotaWindow: what the quota allows over samples - 1 windows."""
        if not self._quotas:
            return float("inf")
        _, quota = self.lookup(user, client_id)
        if quota is None:
            return float("inf")
        return quota * (self.samples - 1) * self.window_ms / 1000.0

    def note_throttle(self, user: str, client_id: str, ms: int, now_ms: int | None = None) -> None:
        """The throttle-time sensor: this request's channel is muted for `ms`."""
        if ms > 0 and self._quotas:
            now_ms = self.clock() if now_ms is None else now_ms
            tags, _ = self.lookup(user, client_id)
            self._sensor(tags, now_ms).record_throttle(ms, now_ms)

    # -- controller mutations (token bucket, KIP-599) ------------------------------------------
    def mutation_throttle_ms(self, user: str, client_id: str, now_ms: int | None = None) -> int:
        """How long the bucket stays in debt (0: a strict mutation may go ahead)."""
        if not self._quotas:
            return 0
        now_ms = self.clock() if now_ms is None else now_ms
        tags, quota = self.lookup(user, client_id)
        if quota is None:
            return 0
        return self._sensor(tags, now_ms).bucket.throttle_ms(quota, now_ms)

    def record_mutation(self, user: str, client_id: str, partitions: int,
                        now_ms: int | None = None) -> None:
        if not self._quotas:
            return
        now_ms = self.clock() if now_ms is None else now_ms
        tags, quota = self.lookup(user, client_id)
        sensor = self._sensor(tags, now_ms)
        sensor.rate.record(partitions, now_ms)
        if quota is not None:
            sensor.bucket.record(partitions, quota, now_ms)
