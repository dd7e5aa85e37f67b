"""What every kaflite client shares: configuration, connections, metadata, events.

``Producer``, ``Consumer`` and ``Admin`` derive from ``BaseClient``. It owns
the connection pool and the metadata cache, routes requests to a broker (and
drops a connection that failed at the network level, so the next request
reconnects with back-off), and exposes the transparency API:

* ``connections()``: every open connection, its broker, address, roles,
  requests in flight, bytes, last activity and negotiated API versions;
* ``events()``: the control-plane transitions so far (also logged to
  ``kaflite.client.events`` and passed to callbacks from ``on_event``).

It also keeps the client's metrics (``metrics``: connections made, each broker's
request latency, and what its subclass records) and pushes them to the cluster when a
client metrics subscription asks for them (KIP-714, ``kaflite.client.telemetry``).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Mapping
from types import TracebackType
from typing import Self, TypeVar

from kaflite.client.events import Event, EventLog
from kaflite.client.metadata import Metadata
from kaflite.client.metrics import AVG_MAX, ClientMetrics, Sensor
from kaflite.client.pool import DATA, ConnectionInfo, ConnectionPool
from kaflite.client.telemetry import TelemetryReporter
from kaflite.config import ClientConfig, resolve
from kaflite.net.connection import BrokerConnection, ConnectionClosed
from kaflite.protocol.messages import ProduceRequest, ProduceResponse, Request, Struct

__all__ = ["BaseClient"]

R = TypeVar("R", bound=Struct)
T = TypeVar("T")

# where Java's telemetry names each client's metrics (its metric groups: producer-metrics,
# consumer-metrics, admin-client-metrics)
METRICS_PREFIX = {"producer": "org.apache.kafka.producer.",
                  "consumer": "org.apache.kafka.consumer.",
                  "admin": "org.apache.kafka.admin.client."}


class BaseClient:
    ROLE = "admin"
    ALL_TOPICS = False

    def __init__(self, config: Mapping[str, object] | None = None, **kwargs: object) -> None:
        self.config: ClientConfig = resolve(self.ROLE, config, **kwargs)
        self.client_id = self.config.string("client.id")
        self._events = EventLog(self.client_id, self.config.int("events.max"))
        self.pool = ConnectionPool(self.config, self._events)
        self.metadata = Metadata(self.config, self.pool, self._events,
                                 all_topics=self.ALL_TOPICS)
        self.metrics = ClientMetrics(METRICS_PREFIX[self.ROLE])
        self.pool.on_connection = self.metrics.sensor(
            "connection.creation", ("rate", "total")).record
        self._node_latency: dict[int, Sensor] = {}
        self.pool.on_latency = self._record_latency
        self.telemetry = TelemetryReporter(self.config, self.pool, self.metrics,
                                           self._events, self._telemetry_resource())
        self._started = False
        self._closed = False
        self._start_lock: asyncio.Lock | None = None

    # -- lifecycle ------------------------------------------------------------------
    async def start(self) -> Self:
        if self._started:
            return self
        if self._start_lock is None:
            self._start_lock = asyncio.Lock()
        async with self._start_lock:
            if not self._started:
                await self.metadata.refresh("bootstrap")
                self.metadata.start()
                await self._on_start()
                self._started = True
                self.telemetry.start()
        return self

    async def _on_start(self) -> None:
        """Hook for subclasses (InitProducerId, group join...)."""

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self.telemetry.close()
        await self.metadata.close()
        await self.pool.close()

    def _telemetry_resource(self) -> dict[str, str]:
        """The labels of the client's telemetry resource (Java's ClientTelemetryProvider;
        subclasses add theirs)."""
        rack = self.config.string("client.rack")
        return {"client_rack": rack} if rack else {}

    def _record_latency(self, node_id: int, seconds: float) -> None:
        sensor = self._node_latency.get(node_id)
        if sensor is None:
            sensor = self._node_latency[node_id] = self.metrics.sensor(
                "node.request.latency", AVG_MAX, (("node.id", node_id),))
        sensor.record(seconds * 1000)

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.close()

    # -- requests ----------------------------------------------------------------------
    async def _request(self, node_id: int, body: Request[R], *, channel: str = DATA,
                       timeout: float | None = None) -> R:
        """Send ``body`` to broker ``node_id``; a network failure drops the connection."""
        conn = await self.pool.get(node_id, channel)
        return await self._dropping_on_failure(conn, body, conn.request(body, timeout=timeout))

    async def _produce(self, node_id: int, body: ProduceRequest, timeout: float | None = None,
                       max_version: int | None = None) -> ProduceResponse | None:
        """``_request`` for a Produce, which has no response with acks=0."""
        conn = await self.pool.get(node_id, DATA)
        version = conn.version_for(ProduceRequest.API_KEY)
        if max_version is not None:
            version = min(version, max_version)
        return await self._dropping_on_failure(
            conn, body, conn.produce(body, version=version, timeout=timeout))

    async def _dropping_on_failure(self, conn: BrokerConnection, body: Struct,
                                   call: Awaitable[T]) -> T:
        try:
            return await call
        except (ConnectionClosed, TimeoutError, OSError) as exc:
            self.pool.discard(conn, f"{type(body).__name__} failed: {type(exc).__name__}")
            raise

    async def _request_any(self, body: Request[R], timeout: float | None = None) -> R:
        """Send ``body`` to any broker (the least loaded one)."""
        conn = self.pool.least_loaded()
        if conn is None:
            await self.metadata.refresh("no open connection")
            conn = self.pool.least_loaded()
        if conn is None:
            node = next(iter(self.pool.brokers))
            return await self._request(node, body, timeout=timeout)
        try:
            return await conn.request(body, timeout=timeout)
        except (ConnectionClosed, TimeoutError, OSError):
            self.pool.discard(conn, f"{type(body).__name__} failed")
            raise

    # -- transparency --------------------------------------------------------------------
    def connections(self) -> list[ConnectionInfo]:
        """Every open connection: broker, address, roles, in flight, bytes, versions."""
        return self.pool.connections()

    async def client_instance_id(self, timeout: float = 0.0) -> uuid.UUID | None:
        """The id the cluster gave this client for its telemetry (KIP-714), waiting up to
        ``timeout`` seconds for it; None without one (``enable.metrics.push`` off, a
        broker without telemetry, or not yet)."""
        return await self.telemetry.wait_instance_id(timeout)

    def events(self, kind: str | None = None) -> list[Event]:
        """Control-plane transitions so far, oldest first."""
        return self._events.list(kind)

    def on_event(self, callback: Callable[[Event], None]) -> Callable[[], None]:
        """Call ``callback`` with each new event; returns an unsubscribe function."""
        return self._events.subscribe(callback)
