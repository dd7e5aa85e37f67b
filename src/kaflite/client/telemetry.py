"""Client telemetry (KIP-714): kaflite's client pushes its metrics to the cluster, as
Kafka's Java client does (``ClientTelemetryReporter``, ``ClientTelemetryUtils``).

Theory of operation
-------------------
With ``enable.metrics.push`` (on by default for producers and consumers, off for the
admin client, as in Java), a client that has started runs one background task on its
own loop. It never touches the data path: its requests go on an open connection (the
least loaded one) between the client's own, and a failure of its costs the client
nothing.

* **Subscription.** GetTelemetrySubscriptions with the zero id, then with the instance
  id the broker assigned. The answer gives the metric name prefixes to push (none: push
  nothing and ask again after the interval; ``*``: every metric), the interval, the
  accepted compression types (the first one kaflite can do is used: the broker lists
  them in its order of preference), delta or cumulative temporality and the subscription
  id. The first push waits the interval times a random factor from 0.5 to 1.5 (Java's
  jitter), so that clients started together do not push together; later ones wait the
  interval.
* **Push.** An OTLP ``MetricsData`` (``opentelemetry-proto``) with the metrics whose names
  start with a requested prefix (``kaflite.client.metrics``); windowed averages, maxima
  and rates as gauges, totals as monotonic sums: with delta temporality the change since
  the previous push, else the total since the metric was made. The resource carries
  Java's labels (``transactional_id``, ``group_id``, ``group_instance_id``,
  ``client_rack``) when set.
* **Errors**, as ``ClientTelemetryUtils.maybeFetchErrorIntervalMs``: UNKNOWN_SUBSCRIPTION_ID
  (the subscription changed) and UNSUPPORTED_COMPRESSION_TYPE ask for the subscription
  again at once (after the latter, payloads go uncompressed); TELEMETRY_TOO_LARGE and
  THROTTLING_QUOTA_EXCEEDED ask again after the interval; INVALID_REQUEST, INVALID_RECORD,
  UNSUPPORTED_VERSION and any other error stop telemetry for good, as does a broker that
  does not serve API 71 and 72. A KIP-219 throttle is kept by the connection. A network
  failure is retried after ``retry.backoff.ms`` (doubling), three times, then after the
  interval (300 s before a subscription came).
* **Close.** The task is cancelled and, if the subscription asks for metrics, one last
  push marked ``terminating`` goes out on a connection still open (for at most
  ``request.timeout.ms`` or 5 s, whichever is shorter).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from kaflite.client._aio import cancel_and_wait
from kaflite.client.events import EventLog
from kaflite.client.metrics import ClientMetrics, Measurement
from kaflite.client.pool import ConnectionPool, NoBrokerAvailable
from kaflite.client.recovery import error_name
from kaflite.config import ClientConfig
from kaflite.net.connection import BrokerConnection, ConnectionClosed
from kaflite.protocol import errors
from kaflite.protocol.messages import (
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
    PushTelemetryRequest,
    Request,
    Struct,
)
from kaflite.protocol.primitives import ZERO_UUID
from kaflite.protocol.records import Compression, compress

if TYPE_CHECKING:
    from opentelemetry.proto.metrics.v1.metrics_pb2 import Metric

__all__ = ["DEFAULT_PUSH_INTERVAL_MS", "State", "Subscription", "TelemetryReporter",
           "encode_metrics"]

R = TypeVar("R", bound=Struct)
log = logging.getLogger("kaflite.client.telemetry")

DEFAULT_PUSH_INTERVAL_MS = 300_000
JITTER = (0.5, 1.5)              # of the first push's interval
CLOSE_TIMEOUT_S = 5.0            # at most this for the terminating push
NETWORK_RETRIES = 3              # quick retries of a failed request, then the interval
GET_KEY = GetTelemetrySubscriptionsRequest.API_KEY
PUSH_KEY = PushTelemetryRequest.API_KEY
CODECS = frozenset({Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD})
_ASK_AGAIN = frozenset({errors.UnknownSubscriptionIdError.code,
                        errors.UnsupportedCompressionTypeError.code})
_WAIT_INTERVAL = frozenset({errors.TelemetryTooLargeError.code,
                            errors.ThrottlingQuotaExceededError.code})


class State(enum.Enum):
    SUBSCRIPTION_NEEDED = "subscription needed"
    PUSH_NEEDED = "push needed"
    DISABLED = "disabled"          # an unrecoverable answer, or a broker without the APIs
    TERMINATED = "terminated"      # closed (after the terminating push)


@dataclass(frozen=True)
class Subscription:
    instance_id: uuid.UUID
    subscription_id: int
    interval_ms: int
    accepted_compression: tuple[int, ...]
    delta: bool
    requested: tuple[str, ...]

    def wants(self, name: str) -> bool:
        """Java's selector: no prefix selects nothing, ``*`` alone everything."""
        if self.requested == ("*",):
            return True
        return any(name.startswith(p) for p in self.requested)


def encode_metrics(measurements: list[Measurement], resource: dict[str, str],
                   delta: bool, last: dict[tuple[str, object], tuple[float, int]],
                   clock: Callable[[], float] = time.monotonic) -> bytes:
    """``measurements`` as a serialized OTLP ``MetricsData``. ``last`` keeps each sum's
    value and time at the previous push, for delta temporality (and is updated)."""
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
    from opentelemetry.proto.metrics.v1 import metrics_pb2 as otlp
    from opentelemetry.proto.resource.v1.resource_pb2 import Resource

    now_ns = time.time_ns()
    mono = clock()

    def attrs(pairs: tuple[tuple[str, str | int], ...]) -> list[KeyValue]:
        return [KeyValue(key=k, value=AnyValue(int_value=v) if isinstance(v, int)
                         else AnyValue(string_value=v)) for k, v in pairs]

    metrics: list[Metric] = []
    for m in measurements:
        if m.kind == "gauge":
            metrics.append(otlp.Metric(name=m.name, gauge=otlp.Gauge(data_points=[
                otlp.NumberDataPoint(time_unix_nano=now_ns, as_double=m.value,
                                     attributes=attrs(m.attributes))])))
            continue
        key = (m.name, m.attributes)
        start_ns = now_ns - int((mono - m.started) * 1e9)
        value = m.value
        if delta:
            previous = last.get(key)
            if previous is not None:
                value, start_ns = m.value - previous[0], previous[1]
            last[key] = (m.value, now_ns)
        metrics.append(otlp.Metric(name=m.name, sum=otlp.Sum(
            aggregation_temporality=(otlp.AGGREGATION_TEMPORALITY_DELTA if delta
                                     else otlp.AGGREGATION_TEMPORALITY_CUMULATIVE),
            is_monotonic=True, data_points=[otlp.NumberDataPoint(
                start_time_unix_nano=start_ns, time_unix_nano=now_ns, as_double=value,
                attributes=attrs(m.attributes))])))
    labels = [KeyValue(key=k, value=AnyValue(string_value=v)) for k, v in resource.items()]
    data = otlp.MetricsData(resource_metrics=[otlp.ResourceMetrics(
        resource=Resource(attributes=labels),
        scope_metrics=[otlp.ScopeMetrics(metrics=metrics)])])
    return bytes(data.SerializeToString())


class TelemetryReporter:
    """One client's pushes; ``start`` on the client's loop once it has started."""

    def __init__(self, config: ClientConfig, pool: ConnectionPool, metrics: ClientMetrics,
                 events: EventLog, resource: dict[str, str]) -> None:
        self.enabled = config.bool("enable.metrics.push")
        self.pool = pool
        self.metrics = metrics
        self.events = events
        self.resource = resource
        self.request_timeout = config.int("request.timeout.ms") / 1000
        self.backoff = config.int("retry.backoff.ms") / 1000
        self.backoff_max = config.int("retry.backoff.max.ms") / 1000
        self.state = State.SUBSCRIPTION_NEEDED if self.enabled else State.DISABLED
        self.subscription: Subscription | None = None
        self.pushes = 0                  # pushes the broker accepted
        self.last_error: int = 0         # the last error code answered (0: none)
        self._due = 0.0                  # monotonic time of the next request
        self._uncompressed = False       # after UNSUPPORTED_COMPRESSION_TYPE
        self._last: dict[tuple[str, object], tuple[float, int]] = {}
        self._task: asyncio.Task[None] | None = None
        self._settled: asyncio.Event | None = None   # a subscription came, or telemetry off

    @property
    def instance_id(self) -> uuid.UUID | None:
        """The client instance id the broker assigned (None before it did)."""
        return self.subscription.instance_id if self.subscription is not None else None

    async def wait_instance_id(self, timeout: float) -> uuid.UUID | None:
        """The client instance id, waiting up to ``timeout`` seconds for the broker to
        assign it (Java's ``clientInstanceId``); None if it did not, or telemetry is off."""
        if self._settled is None:
            self._settled = asyncio.Event()
        if self.subscription is None and self.state is not State.DISABLED:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._settled.wait()
        return self.instance_id

    def _settle(self) -> None:
        if self._settled is not None:
            self._settled.set()

    def start(self) -> None:
        if self.state is State.SUBSCRIPTION_NEEDED and self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def close(self) -> None:
        """Stop; one terminating push if the subscription asks for metrics."""
        await cancel_and_wait(self._task)
        self._task = None
        sub = self.subscription
        # on a connection still open only, and briefly: a close must not wait for a
        # broker that is gone
        if self.state is not State.DISABLED and self.state is not State.TERMINATED \
                and sub is not None and sub.requested and self.pool.least_loaded() is not None:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(min(self.request_timeout, CLOSE_TIMEOUT_S)):
                    await self._push(sub, terminating=True)
        if self.state is not State.DISABLED:
            self.state = State.TERMINATED

    # -- the loop ----------------------------------------------------------------------
    async def _run(self) -> None:
        failures = 0
        while self.state in (State.SUBSCRIPTION_NEEDED, State.PUSH_NEEDED):
            wait = self._due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            try:
                sub = self.subscription
                if self.state is State.PUSH_NEEDED and sub is not None:
                    await self._push(sub, terminating=False)
                else:
                    await self._get()
                failures = 0
            except (ConnectionClosed, NoBrokerAvailable, OSError, TimeoutError) as exc:
                failures += 1
                self.state = State.SUBSCRIPTION_NEEDED
                if failures <= NETWORK_RETRIES:
                    delay = min(self.backoff * 2 ** (failures - 1), self.backoff_max)
                else:
                    delay = self._interval_s()
                self._due = time.monotonic() + delay
                log.debug("telemetry request failed (%r); again in %.1f s", exc, delay)
            except asyncio.CancelledError:
                raise
            except Exception as exc:   # a bug of ours must not spin: stop telemetry
                log.warning("client telemetry stopped: %r", exc)
                self._disable(f"failed: {exc!r}")

    def _interval_s(self) -> float:
        sub = self.subscription
        return (sub.interval_ms if sub is not None else DEFAULT_PUSH_INTERVAL_MS) / 1000

    async def _connection(self) -> BrokerConnection | None:
        """An open connection to send on (None: the broker cannot do telemetry)."""
        conn = self.pool.least_loaded()
        if conn is None:
            brokers = sorted(self.pool.brokers)
            if not brokers:
                raise NoBrokerAvailable("no broker known yet")
            conn = await self.pool.get(random.choice(brokers))
        if GET_KEY not in conn.api_versions or PUSH_KEY not in conn.api_versions:
            self._disable(f"{conn.label} does not serve GetTelemetrySubscriptions and "
                          "PushTelemetry")
            return None
        return conn

    async def _send(self, conn: BrokerConnection, body: Request[R]) -> R:
        try:
            return await conn.request(body)
        except (ConnectionClosed, TimeoutError, OSError):
            self.pool.discard(conn, f"{type(body).__name__} failed")
            raise

    async def _get(self) -> None:
        conn = await self._connection()
        if conn is None:
            return
        sub = self.subscription
        instance = sub.instance_id if sub is not None else ZERO_UUID
        resp = await self._send(conn, GetTelemetrySubscriptionsRequest(
            client_instance_id=instance))
        if resp.error_code:
            self._error(resp.error_code, "GetTelemetrySubscriptions")
        else:
            self._subscribed(resp)

    def _subscribed(self, resp: GetTelemetrySubscriptionsResponse) -> None:
        if resp.client_instance_id == ZERO_UUID:
            self._disable("the broker assigned no client instance id")
            return
        old = self.subscription
        sub = Subscription(
            resp.client_instance_id, resp.subscription_id,
            resp.push_interval_ms if resp.push_interval_ms > 0 else DEFAULT_PUSH_INTERVAL_MS,
            tuple(c for c in resp.accepted_compression_types if c in CODECS),
            resp.delta_temporality, tuple(resp.requested_metrics))
        if old is not None and old.delta != sub.delta:
            self._last.clear()    # the values last sent mean nothing to the other kind
        self.subscription = sub
        self._settle()
        now = time.monotonic()
        if sub.requested:
            self.state = State.PUSH_NEEDED
            self._due = now + sub.interval_ms / 1000 * random.uniform(*JITTER)
        else:
            self.state = State.SUBSCRIPTION_NEEDED
            self._due = now + sub.interval_ms / 1000
        if (old.requested if old is not None else ()) != sub.requested:
            self.events.emit("telemetry", f"client instance {sub.instance_id}: subscription "
                             f"{sub.subscription_id}, "
                             + (f"{', '.join(sub.requested)} every {sub.interval_ms} ms"
                                if sub.requested else "no metrics requested"))

    def _codec(self, sub: Subscription) -> int:
        if self._uncompressed or not sub.accepted_compression:
            return Compression.NONE
        return sub.accepted_compression[0]

    def payload(self, sub: Subscription) -> bytes:
        """The metrics the subscription asks for, encoded (and the delta ledger moved)."""
        return encode_metrics(self.metrics.collect(sub.wants), self.resource, sub.delta,
                              self._last)

    async def _push(self, sub: Subscription, *, terminating: bool) -> None:
        conn = await self._connection()
        if conn is None:
            return
        raw = self.payload(sub)
        codec = self._codec(sub)
        try:
            body = compress(codec, raw) if codec != Compression.NONE else raw
        except Exception:     # as Java: send it uncompressed
            codec, body = Compression.NONE, raw
        resp = await self._send(conn, PushTelemetryRequest(
            client_instance_id=sub.instance_id, subscription_id=sub.subscription_id,
            terminating=terminating, compression_type=codec, metrics=body))
        code = resp.error_code
        if terminating:
            self.state = State.TERMINATED
            if code == 0:
                self.pushes += 1
            return
        if code:
            if code == errors.UnsupportedCompressionTypeError.code:
                self._uncompressed = True
            self._error(code, "PushTelemetry")
            return
        self.pushes += 1
        self.last_error = 0
        self.state = State.PUSH_NEEDED
        self._due = time.monotonic() + sub.interval_ms / 1000

    def _error(self, code: int, what: str) -> None:
        """Java's ``maybeFetchErrorIntervalMs``: when to ask for the subscription again."""
        self.last_error = code
        name = error_name(code)
        if code in _ASK_AGAIN:
            delay = 0.0
        elif code in _WAIT_INTERVAL:
            delay = self._interval_s()
        else:
            self._disable(f"{what} answered {name}")
            return
        self.state = State.SUBSCRIPTION_NEEDED
        self._due = time.monotonic() + delay
        log.debug("%s answered %s; subscription again in %.1f s", what, name, delay)

    def _disable(self, why: str) -> None:
        self.state = State.DISABLED
        self._settle()
        self.events.emit("telemetry", "client telemetry off", cause=why)
