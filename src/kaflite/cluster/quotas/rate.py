"""Rate windows and throttle times, as Kafka's metrics library computes them.

``Rate`` is Kafka's ``Rate`` over a ``SampledStat`` (as of Kafka 4):
``quota.window.num`` samples (default 11) of ``quota.window.size.seconds`` each
(default 1), plus one extra so that a sample still overlapping the window is
kept. A value goes into the current sample; a new sample starts with the first
value recorded after the current one is a window old. A sample whose last value
is ``window.num`` windows old is reset before it is read. The rate is the sum of
the live samples divided by the time since the oldest one started, taken as at
least ``window.num - 1`` full windows, so that a client's first burst is not
measured over a few milliseconds.

``SimpleRate`` is Kafka's ``SimpleRate``, which the replication quotas use (KIP-73's
``ReplicationQuotaManager``): the same samples, measured over the time since the
oldest live sample began, taken as at least one window.

``throttle_time_ms`` is Kafka's ``QuotaUtils.throttleTime``: if O is the
observed rate and T the quota over a window W, a delay X with O * W / (W + X)
= T brings the rate back to the quota, X = (O - T) / T * W.
``bounded_throttle_time_ms`` caps it (the request quota caps it at one window).

``TokenBucket`` is the controller mutation quota's bucket (KIP-599): tokens
come back at the quota's rate up to a burst of ``quota * window.num *
window.size``; a request may spend more than is left, leaving the bucket
negative, and the time to refill it to zero is the throttle time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["QuotaWindows", "Rate", "SimpleRate", "TokenBucket", "bounded_throttle_time_ms",
           "throttle_time_ms"]


@dataclass(frozen=True)
class QuotaWindows:
    """``quota.window.num`` and ``quota.window.size.seconds``."""

    samples: int = 11
    window_ms: int = 1000

    def __post_init__(self) -> None:
        if self.samples < 1 or self.window_ms < 1:
            raise ValueError("quota.window.num and quota.window.size.seconds must be >= 1")


@dataclass
class _Sample:
    start_ms: float
    last_ms: float
    value: float = 0.0


@dataclass
class Rate:
    """A per-second rate over sampled windows (Kafka's ``Rate``/``SampledStat``)."""

    windows: QuotaWindows = field(default_factory=QuotaWindows)
    _samples: list[_Sample] = field(default_factory=list)
    _current: int = 0

    def record(self, value: float, now_ms: float) -> None:
        if not self._samples:
            self._samples.append(_Sample(now_ms, now_ms))
        sample = self._samples[self._current]
        if now_ms - sample.start_ms >= self.windows.window_ms:   # complete: take the next
            self._current = (self._current + 1) % (self.windows.samples + 1)
            sample = _Sample(now_ms, now_ms)
            if self._current >= len(self._samples):
                self._samples.append(sample)
            else:
                self._samples[self._current] = sample
        sample.value += value
        sample.last_ms = now_ms

    def _purge(self, now_ms: float) -> None:
        expire = self.windows.samples * self.windows.window_ms
        for i, sample in enumerate(self._samples):
            if now_ms - sample.last_ms >= expire:
                self._samples[i] = _Sample(now_ms, now_ms)

    def window_ms(self, now_ms: float) -> float:
        """The time the live samples cover, at least ``samples - 1`` full windows."""
        self._purge(now_ms)
        oldest = min((s.start_ms for s in self._samples), default=now_ms)
        elapsed = now_ms - oldest
        full = int(elapsed // self.windows.window_ms)
        if full < self.windows.samples - 1:
            elapsed += (self.windows.samples - 1 - full) * self.windows.window_ms
        return elapsed

    def total(self, now_ms: float) -> float:
        self._purge(now_ms)
        return sum(s.value for s in self._samples)

    def measure(self, now_ms: float) -> float:
        """Units per second."""
        window = self.window_ms(now_ms)
        return self.total(now_ms) / (window / 1000) if window > 0 else 0.0


class SimpleRate(Rate):
    """Kafka's ``SimpleRate``: the window is the live samples' span, at least one window."""

    def window_ms(self, now_ms: float) -> float:
        self._purge(now_ms)
        oldest = min((s.start_ms for s in self._samples), default=now_ms)
        return max(now_ms - oldest, float(self.windows.window_ms))


def throttle_time_ms(observed: float, bound: float, window_ms: float) -> int:
    """Kafka's ``QuotaUtils.throttleTime``: X = (O - T) / T * W, rounded."""
    if bound <= 0 or observed <= bound:
        return 0
    return round((observed - bound) / bound * window_ms)


def bounded_throttle_time_ms(observed: float, bound: float, window_ms: float,
                             max_ms: int) -> int:
    """Kafka's ``QuotaUtils.boundedThrottleTime``: the throttle time, at most ``max_ms``."""
    return min(throttle_time_ms(observed, bound, window_ms), max_ms)


@dataclass
class TokenBucket:
    """Kafka's ``TokenBucket`` (KIP-599): credits refill at ``rate`` up to a burst."""

    rate: float
    windows: QuotaWindows = field(default_factory=QuotaWindows)
    tokens: float | None = None
    last_ms: float | None = None

    @property
    def burst(self) -> float:
        return self.rate * self.windows.samples * self.windows.window_ms / 1000

    def refill(self, now_ms: float) -> float:
        """The tokens left now (negative: spent ahead)."""
        if self.tokens is None or self.last_ms is None:
            self.tokens, self.last_ms = self.burst, now_ms
        elapsed = max(now_ms - self.last_ms, 0.0)
        self.tokens = min(self.burst, self.tokens + self.rate * elapsed / 1000)
        self.last_ms = now_ms
        return self.tokens

    def spend(self, permits: float, now_ms: float) -> None:
        self.refill(now_ms)
        assert self.tokens is not None
        self.tokens -= permits

    def throttle_time_ms(self, now_ms: float) -> int:
        """How long until the bucket is back at zero (0 if it is not negative)."""
        tokens = self.refill(now_ms)
        if tokens >= 0 or self.rate <= 0:
            return 0
        return round(-tokens / self.rate * 1000)
