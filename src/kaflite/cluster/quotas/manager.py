"""One broker's quota enforcement: it records what clients use and says how long
to throttle them (Kafka's ClientQuotaManager, RequestQuotaManager and
ControllerMutationQuotaManager, for one broker).

Quotas are per broker, as in Kafka: a client held to 1 MB/s may do 1 MB/s on
each broker it talks to. The limits come from the controller's ``QuotaStore``
at every request, so a change applies at once, to clients already connected.
With no quota anywhere nothing is recorded (Kafka's ``quotasEnabled``).

* Produce: the request's size, in bytes, after it was appended.
* Fetch: the response's record bytes. When that, or the request quota, calls for
  a throttle, the bytes are taken back out (Kafka's ``unrecordQuotaSensor``)
  and the client gets an empty response with the throttle time.
* Request percentage (KIP-124): the time the handler ran, as a percentage of one
  thread; a Fetch's long-poll wait is not counted. Its throttle time is capped
  at one window (``boundedThrottleTime``).
* Controller mutations (KIP-599): partitions created or deleted, against a token
  bucket; see ``kaflite.cluster.handlers.admin_topics``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from kaflite.cluster.quotas.entities import QuotaStore, Resolved, entity_label, user_of
from kaflite.cluster.quotas.rate import (
    QuotaWindows,
    Rate,
    TokenBucket,
    bounded_throttle_time_ms,
    throttle_time_ms,
)

__all__ = ["CONSUME", "MUTATION", "PRODUCE", "REQUEST", "QuotaManager", "Usage"]

PRODUCE, CONSUME = "producer_byte_rate", "consumer_byte_rate"
REQUEST, MUTATION = "request_percentage", "controller_mutation_rate"


@dataclass
class Usage:
    """What the registry shows for one quota of a connection."""

    limit: float
    rate: float
    entity: str
    throttle_time_ms: int = 0


class QuotaManager:
    def __init__(self, store: QuotaStore, windows: QuotaWindows,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.store = store
        self.windows = windows
        self.clock = clock
        self.rates: dict[tuple[str, str, str], Rate] = {}
        self.buckets: dict[tuple[str, str, str], TokenBucket] = {}
        self._cache: dict[tuple[str, str, str], Resolved | None] = {}
        self._cache_version = -1

    @property
    def enabled(self) -> bool:
        return bool(self.store)

    def now_ms(self) -> float:
        return self.clock() * 1000

    def resolve(self, key: str, principal: str, client_id: str | None) -> Resolved | None:
        if self._cache_version != self.store.version:
            self._cache.clear()
            self._cache_version = self.store.version
        user, client = user_of(principal), client_id or ""
        cache_key = (key, user, client)
        if cache_key not in self._cache:
            self._cache[cache_key] = self.store.resolve(key, user, client)
        return self._cache[cache_key]

    def _rate(self, key: str, resolved: Resolved) -> Rate:
        tags = (key, *resolved.tags)
        rate = self.rates.get(tags)
        if rate is None:
            rate = self.rates[tags] = Rate(self.windows)
        return rate

    def record(self, key: str, principal: str, client_id: str | None, value: float,
               usage: dict[str, Usage] | None = None) -> int:
        """Record ``value`` and return the throttle time it calls for (Kafka's
        ``Sensor.record`` with its quota check, then ``throttleTime``)."""
        resolved = self.resolve(key, principal, client_id)
        if resolved is None:
            if usage is not None:
                usage.pop(key, None)
            return 0
        now = self.now_ms()
        rate = self._rate(key, resolved)
        rate.record(value, now)
        observed = rate.measure(now)
        window = rate.window_ms(now)
        if key == REQUEST:
            throttle = bounded_throttle_time_ms(observed, resolved.limit, window,
                                                self.windows.window_ms)
        else:
            throttle = throttle_time_ms(observed, resolved.limit, window)
        if usage is not None:
            usage[key] = Usage(resolved.limit, round(observed, 3),
                               entity_label(resolved.entity), throttle)
        return throttle

    def unrecord(self, key: str, principal: str, client_id: str | None, value: float) -> None:
        """Take back a recorded value (a throttled Fetch sends no data)."""
        resolved = self.resolve(key, principal, client_id)
        if resolved is not None:
            self._rate(key, resolved).record(-value, self.now_ms())

    def measure(self, key: str, principal: str, client_id: str | None) -> float | None:
        """The rate a client's quota counts now (None: no quota applies)."""
        resolved = self.resolve(key, principal, client_id)
        if resolved is None:
            return None
        return self._rate(key, resolved).measure(self.now_ms())

    def max_value_in_window(self, key: str, principal: str, client_id: str | None) -> float:
        """The most one request may record without being throttled for certain,
        ``quota * (window.num - 1) * window.size`` (Kafka's ``getMaxValueInQuotaWindow``,
        which bounds the bytes a Fetch may return); infinite with no quota."""
        resolved = self.resolve(key, principal, client_id) if self.enabled else None
        if resolved is None:
            return float("inf")
        return resolved.limit * (self.windows.samples - 1) * self.windows.window_ms / 1000

    # -- controller mutations (KIP-599) ------------------------------------------------
    def _bucket(self, principal: str, client_id: str | None) -> TokenBucket | None:
        resolved = self.resolve(MUTATION, principal, client_id)
        if resolved is None:
            return None
        tags = (MUTATION, *resolved.tags)
        bucket = self.buckets.get(tags)
        if bucket is None:
            bucket = self.buckets[tags] = TokenBucket(resolved.limit, self.windows)
        bucket.rate = resolved.limit      # a changed quota applies at once
        return bucket

    def mutation_throttle_ms(self, principal: str, client_id: str | None) -> int:
        """How long the bucket needs to be back at zero (0: mutations may go ahead)."""
        bucket = self._bucket(principal, client_id)
        return 0 if bucket is None else bucket.throttle_time_ms(self.now_ms())

    def record_mutations(self, principal: str, client_id: str | None, permits: float) -> None:
        bucket = self._bucket(principal, client_id)
        if bucket is not None and permits > 0:
            bucket.spend(permits, self.now_ms())
