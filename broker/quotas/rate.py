"""Kafka's quota arithmetic, time passed in (milliseconds), so tests drive it with a fake clock.

``SampledRate`` is Kafka's ``Rate`` over a ``WindowedSum`` (``SampledStat``): values go into the
current sample until it is ``window_ms`` old, then the next one starts (``samples + 1`` are kept);
a sample with no event for ``samples * window_ms`` is reset. The rate is the sum of the samples
over the elapsed time since the oldest sample started, counted as at least ``samples - 1`` whole
windows (so a first burst is not divided by a few milliseconds) and at least 1 ms.

``throttle_ms`` is Kafka's ``QuotaUtils.throttleTime``: how long the client must stay quiet for the
rate to fall back to the quota, ``(rate - quota) / quota * window``.

``TokenBucket`` is the controller mutation quota's measure (KIP-599): credits refill at the quota
rate up to ``quota * samples * window``; a mutation takes its partitions' worth even into debt; the
quota is exceeded while credits are below zero, for ``-credits / quota`` seconds.
"""

from __future__ import annotations


class _Sample:
    __slots__ = ("value", "events", "start_ms", "last_event_ms")

    def __init__(self, now_ms: int):
        self.reset(now_ms)

    def reset(self, now_ms: int) -> None:
        self.value = 0.0
        self.events = 0
        self.start_ms = now_ms
        self.last_event_ms = now_ms


class SampledRate:
    """Kafka's sampled ``Rate`` (per second) with ``samples`` windows of ``window_ms``."""

    __slots__ = ("samples", "window_ms", "_samples", "_current")

    def __init__(self, samples: int = 11, window_ms: int = 1000):
        self.samples = samples
        self.window_ms = window_ms
        self._samples: list[_Sample] = []
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_ms >= self.window_ms:
            sample = self._advance(now_ms)
        sample.value += value
        sample.events += 1
        sample.last_event_ms = now_ms

    def measure(self, now_ms: int) -> float:
        """Units per second."""
        self._purge(now_ms)
        total = sum(s.value for s in self._samples)
        return total / (self.window_size_ms(now_ms) / 1000.0)

    def window_size_ms(self, now_ms: int) -> int:
        self._purge(now_ms)
        elapsed = now_ms - self._oldest(now_ms).start_ms
        full_windows = elapsed // self.window_ms
        minimum = self.samples - 1
        if full_windows < minimum:
            elapsed += (minimum - full_windows) * self.window_ms
        return max(elapsed, 1)

    def _current_sample(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        return self._samples[self._current]

    def _advance(self, now_ms: int) -> _Sample:
        # One sample more than configured is kept (Kafka: see purgeObsoleteSamples).
        self._current = (self._current + 1) % (self.samples + 1)
        if self._current >= len(self._samples):
            sample = _Sample(now_ms)
            self._samples.append(sample)
            return sample
        sample = self._samples[self._current]
        sample.reset(now_ms)
        return sample

    def _oldest(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        return min(self._samples, key=lambda s: s.start_ms)

    def _purge(self, now_ms: int) -> None:
        expire = self.samples * self.window_ms
        for sample in self._samples:
            if now_ms - sample.last_event_ms >= expire:
                sample.reset(now_ms)


def throttle_ms(rate: SampledRate, quota: float, now_ms: int) -> int:
    """Kafka's throttle time for a rate over `quota`, 0 when within it."""
    observed = rate.measure(now_ms)
    if observed <= quota:
        return 0
    return _round((observed - quota) / quota * rate.window_size_ms(now_ms))


def _round(value: float) -> int:
    """Java's Math.round (half up), not Python's banker's rounding."""
    return int(value + 0.5) if value >= 0 else -int(-value + 0.5)


class TokenBucket:
    """Kafka's TokenBucket measurable; `quota` credits per second."""

    __slots__ = ("samples", "window_ms", "tokens", "_last_ms")

    def __init__(self, samples: int = 11, window_ms: int = 1000):
        self.samples = samples
        self.window_ms = window_ms
        self.tokens = 0.0
        self._last_ms = 0

    def burst(self, quota: float) -> float:
        return self.samples * self.window_ms / 1000.0 * quota

    def _refill(self, quota: float, now_ms: int) -> None:
        self.tokens = min(self.burst(quota), self.tokens + quota * (now_ms - self._last_ms) / 1000.0)
        self._last_ms = now_ms

    def measure(self, quota: float, now_ms: int) -> float:
        self._refill(quota, now_ms)
        return self.tokens

    def record(self, value: float, quota: float, now_ms: int) -> None:
        self._refill(quota, now_ms)
        self.tokens = min(self.burst(quota), self.tokens - value)

    def throttle_ms(self, quota: float, now_ms: int) -> int:
        """How long until the credits are back to zero; 0 when not in debt."""
        tokens = self.measure(quota, now_ms)
        return 0 if tokens >= 0 else _round(-tokens / quota * 1000)
