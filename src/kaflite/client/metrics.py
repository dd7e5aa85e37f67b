"""A client's own metrics: the few that KIP-714's standard client metrics name and that
kaflite's client can measure, kept where the client pushes them from
(``kaflite.client.telemetry``).

Theory of operation
-------------------
A ``Sensor`` takes the values one quantity is recorded with (a request's latency, a
batch's queue time) and gives the statistics Kafka's Java client derives from a sensor,
over the same window (``metrics.sample.window.ms`` 30000 and ``metrics.num.samples``
2: the samples of the last 30 to 60 seconds):

* ``avg`` and ``max`` of the values in the window (none when the window holds none:
  such a metric is left out of a push, where Java pushes NaN);
* ``rate``: the count per second over the window, which counts as at least one sample
  window long (Java's ``Rate`` of a ``WindowedCount``);
* ``total``: the sum of every value ever recorded (Java's ``CumulativeSum``), a
  monotonic sum that telemetry pushes as a delta or a cumulative value.

A ``Gauge`` reads its value from a function when the metrics are collected (the number
of partitions assigned). ``ClientMetrics`` is a client's registry: it names each metric
as Java's telemetry names it (``org.apache.kafka.<role>.<group>.<name>``: the prefix
is the client's), keeps one sensor per name and attributes (``node.id`` for the
per-broker latency), and ``collect()`` reads them all at once. Recording costs a clock
read and a few additions; nothing is computed until a push collects.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

__all__ = ["AVG_MAX", "ClientMetrics", "Gauge", "Measurement", "Sensor", "Stat"]

Stat = Literal["avg", "max", "rate", "total"]
Kind = Literal["gauge", "sum"]
Attributes = tuple[tuple[str, str | int], ...]
AVG_MAX: tuple[Stat, ...] = ("avg", "max")

SAMPLE_WINDOW_S = 30.0      # metrics.sample.window.ms
SAMPLES = 2                 # metrics.num.samples


@dataclass(frozen=True, slots=True)
class Measurement:
    """One metric's value when collected: a gauge, or a monotonic sum (a total)
    together with the monotonic time it started counting at."""

    name: str
    kind: Kind
    value: float
    attributes: Attributes = ()
    started: float = 0.0


class _Sample:
    __slots__ = ("count", "max", "start", "total")

    def __init__(self, start: float) -> None:
        self.start = start
        self.count = 0
        self.total = 0.0
        self.max = -math.inf


class Sensor:
    """Values of one quantity: windowed avg, max and rate, and a total."""

    __slots__ = ("_clock", "_samples", "created", "total")

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._samples: list[_Sample] = []
        self.created = clock()
        self.total = 0.0

    def record(self, value: float = 1.0) -> None:
        now = self._clock()
        samples = self._samples
        if not samples or now - samples[-1].start >= SAMPLE_WINDOW_S:
            samples.append(_Sample(now))
            if len(samples) > SAMPLES:
                del samples[0]
        current = samples[-1]
        current.count += 1
        current.total += value
        if value > current.max:
            current.max = value
        self.total += value

    def _live(self, now: float) -> list[_Sample]:
        """The samples still inside the window (older ones are forgotten)."""
        return [s for s in self._samples if now - s.start < SAMPLE_WINDOW_S * SAMPLES]

    def avg(self, now: float | None = None) -> float | None:
        live = self._live(self._clock() if now is None else now)
        count = sum(s.count for s in live)
        return sum(s.total for s in live) / count if count else None

    def max(self, now: float | None = None) -> float | None:
        live = self._live(self._clock() if now is None else now)
        return max(s.max for s in live) if live else None

    def rate(self, now: float | None = None) -> float:
        """Values recorded per second in the window (Java's ``Rate`` of a count)."""
        now = self._clock() if now is None else now
        live = self._live(now)
        count = sum(s.count for s in live)
        elapsed = now - live[0].start if live else 0.0
        # as Java's Rate.windowSize: at least SAMPLES - 1 full windows long
        return count / max(elapsed, SAMPLE_WINDOW_S * (SAMPLES - 1))


class Gauge:
    """A value read when collected."""

    __slots__ = ("read",)

    def __init__(self, read: Callable[[], float]) -> None:
        self.read = read


class ClientMetrics:
    """One client's metrics, named under ``prefix`` (``org.apache.kafka.producer.``)."""

    def __init__(self, prefix: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.prefix = prefix
        self._clock = clock
        self._sensors: dict[tuple[str, Attributes], tuple[Sensor, tuple[Stat, ...]]] = {}
        self._gauges: dict[str, Gauge] = {}

    def sensor(self, name: str, stats: Iterable[Stat] = AVG_MAX,
               attributes: Attributes = ()) -> Sensor:
        """The sensor of ``name`` (e.g. ``record.queue.time``) with ``attributes``, made
        at its first use; ``stats`` are the metrics it gives (``name.avg``, ...)."""
        key = (name, attributes)
        found = self._sensors.get(key)
        if found is None:
            found = (Sensor(self._clock), tuple(stats))
            self._sensors[key] = found
        return found[0]

    def gauge(self, name: str, read: Callable[[], float]) -> None:
        self._gauges[name] = Gauge(read)

    def names(self) -> list[str]:
        """The full name of every metric registered so far."""
        out = [f"{self.prefix}{name}.{stat}" for (name, _), (_, stats) in self._sensors.items()
               for stat in stats]
        return sorted(set(out) | {self.prefix + name for name in self._gauges})

    def collect(self, wanted: Callable[[str], bool] | None = None) -> list[Measurement]:
        """Every metric that has a value now (and whose full name ``wanted`` accepts)."""
        now = self._clock()
        out: list[Measurement] = []
        for (name, attributes), (sensor, stats) in list(self._sensors.items()):
            for stat in stats:
                full = f"{self.prefix}{name}.{stat}"
                if wanted is not None and not wanted(full):
                    continue
                if stat == "total":
                    out.append(Measurement(full, "sum", sensor.total, attributes,
                                           sensor.created))
                    continue
                value = (sensor.avg(now) if stat == "avg" else
                         sensor.max(now) if stat == "max" else sensor.rate(now))
                if value is not None:
                    out.append(Measurement(full, "gauge", value, attributes))
        for name, gauge in list(self._gauges.items()):
            full = self.prefix + name
            if wanted is None or wanted(full):
                out.append(Measurement(full, "gauge", float(gauge.read())))
        return out
