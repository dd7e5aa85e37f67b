"""The client's connections: one per broker, plus a separate coordinator channel.

Theory of operation
-------------------
Connections are keyed by ``(node_id, channel)``. The ``data`` channel carries
Metadata, Produce, Fetch and ListOffsets to a broker; the ``coordinator``
channel carries group traffic to the same broker when it is the group
coordinator. Java keeps these apart too (it gives the coordinator the node id
``Integer.MAX_VALUE - id``), so that a long Fetch never delays a Heartbeat.

A broker is reached at the host and port it advertises in Metadata, never at
a bootstrap address. Bootstrap is discovery only: ``bootstrap()`` shuffles
``bootstrap.servers``, tries each address until one answers, and the caller
sends Metadata on it. If the answering address is a broker's advertised
address the connection is adopted as that broker's data connection; if not
(a load balancer, say), it closes once discovery is done.

A failed connect backs off exponentially, from ``reconnect.backoff.ms`` up to
``reconnect.backoff.max.ms``, with ±20 % jitter (as Java's
``ClusterConnectionStates``). A connection with nothing in flight and no
traffic for ``connections.max.idle.ms`` is closed by a reaper task. Concurrent
callers that want the same connection share one connect attempt.

Every connection authenticates as ``security.protocol`` says (TLS, then
ApiVersions and SASL: ``kaflite.net.connection``) before its first request. An
authentication failure is fatal, as Java's client raises its
``AuthenticationException`` to the application rather than retrying: the pool
keeps the error (``auth_error``), logs it as an ``auth`` event with the broker's
message, and raises it to every later caller instead of connecting again.

Roles shown by ``connections()`` come from providers the client registers:
the producer and the fetcher report partitions they lead traffic for, the
group member reports its coordinator.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from kaflite.client._aio import cancel_and_wait
from kaflite.client._security import Security
from kaflite.client.events import EventLog
from kaflite.client.recovery import backoff_delay
from kaflite.config import ClientConfig
from kaflite.net.connection import AuthenticationError, BrokerConnection, ConnectionClosed
from kaflite.protocol import REGISTRY, errors
from kaflite.protocol.messages import ApiVersionsRequest

API_VERSIONS_KEY = ApiVersionsRequest.API_KEY

__all__ = [
    "COORDINATOR",
    "DATA",
    "BrokerAddress",
    "ConnectionInfo",
    "ConnectionPool",
    "NoBrokerAvailable",
]

DATA = "data"
COORDINATOR = "coordinator"
Key = tuple[int, str]
RoleProvider = Callable[[int, str], list[str]]


class NoBrokerAvailable(ConnectionError):
    """No broker (and no bootstrap server) could be reached."""


@dataclass(frozen=True)
class BrokerAddress:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass
class ConnectionInfo:
    """One open connection, as ``client.connections()`` shows it."""

    broker: int
    address: str
    channel: str
    roles: list[str]
    in_flight: int
    requests: int
    bytes_sent: int
    bytes_received: int
    last_activity: float
    opened_at: float
    api_versions: dict[str, int] = field(default_factory=dict)
    throttled_ms: int = 0
    local_address: str = ""   # our end of the socket: the cluster registry's "peer"
    security_protocol: str = "PLAINTEXT"
    tls: str | None = None            # "TLSv1.3 TLS_AES_256_GCM_SHA384"
    mechanism: str | None = None      # the SASL mechanism
    principal: str | None = None      # who the broker sees, when known in advance
    session_lifetime_ms: int = 0      # the broker's SASL session (0: unlimited)
    reauthentications: int = 0        # KIP-368 re-authentications on this connection
    last_authenticated: float | None = None   # time.time() of the last (re)authentication


@dataclass
class _Backoff:
    failures: int = 0
    next_attempt: float = 0.0


class ConnectionPool:
    def __init__(self, config: ClientConfig, events: EventLog) -> None:
        self.config = config
        self.events = events
        self.brokers: dict[int, BrokerAddress] = {}
        self._conns: dict[Key, BrokerConnection] = {}
        self._connecting: dict[Key, asyncio.Future[BrokerConnection]] = {}
        self._backoff: dict[Key, _Backoff] = {}
        self._bootstrap: BrokerConnection | None = None
        self.role_providers: list[RoleProvider] = []
        self._reaper: asyncio.Task[None] | None = None
        self._closed = False
        self.bootstrap_servers = [_split(s) for s in config.strings("bootstrap.servers")]
        self.security = Security(config)
        self.auth_error: AuthenticationError | None = None
        # the cluster the brokers' connections must belong to (KIP-1242: ApiVersions v5
        # names it and the node; the metadata sets it), and what a broker's
        # REBOOTSTRAP_REQUIRED answer calls
        self.cluster_id: str | None = None
        self.on_rebootstrap_required: Callable[[str], None] | None = None
        # the newest ApiVersions version the cluster's brokers said they serve
        self.api_versions_max = 0
        # the client's metrics: a connection made, a request's round trip to a broker
        self.on_connection: Callable[[], None] | None = None
        self.on_latency: Callable[[int, float], None] | None = None

    # -- connection factory -------------------------------------------------------
    def _expect(self, node_id: int | None) -> tuple[str, int] | None:
        """What ApiVersions v5 names for a connection to ``node_id`` (Java's NetworkClient:
        a known node of a known cluster, with the check on and re-bootstrap allowed)."""
        c = self.config
        if node_id is None or node_id < 0 or self.cluster_id is None \
                or self.api_versions_max < 5 or not c.bool("metadata.cluster.check.enable") \
                or c["metadata.recovery.strategy"] == "none":
            return None
        return self.cluster_id, node_id

    def _new(self, host: str, port: int, node_id: int | None,
             failures: int = 0) -> BrokerConnection:
        c = self.config
        return BrokerConnection(
            host, port, client_id=c.string("client.id"), node_id=node_id,
            request_timeout_ms=c.int("request.timeout.ms"),
            connect_timeout_ms=self._setup_timeout_ms(failures),
            max_in_flight=c.int("max.in.flight.requests.per.connection"),
            max_frame_size=c.int("max.frame.bytes"),
            software_name=c.string("client.software.name"),
            software_version=c.string("client.software.version"),
            send_buffer_bytes=c.int("send.buffer.bytes"),
            receive_buffer_bytes=c.int("receive.buffer.bytes"),
            ssl_context=self.security.ssl_context,
            sasl=self.security.sasl_factory(),
            emit=self.events.emit,
            expect=self._expect(node_id),
            on_latency=self.on_latency,
        )

    def _connection_made(self) -> None:
        if self.on_connection is not None:
            self.on_connection()

    def _auth_failed(self, conn: BrokerConnection, exc: AuthenticationError) -> None:
        if self.auth_error is None:
            self.auth_error = exc
            self.events.emit("auth", f"authentication with {conn.label} failed "
                             f"({self.security.describe()})", cause=exc.message)

    def _setup_timeout_ms(self, failures: int) -> float:
        """Java's connection setup timeout: doubled per consecutive failure, up to the max."""
        base = self.config.int("socket.connection.setup.timeout.ms")
        top = self.config.int("socket.connection.setup.timeout.max.ms")
        return min(base * 2.0 ** failures, max(top, base)) * random.uniform(0.8, 1.2)

    def _backoff_delay(self, failures: int) -> float:
        return backoff_delay(self.config.int("reconnect.backoff.ms"),
                             self.config.int("reconnect.backoff.max.ms"), failures)

    def _start_reaper(self) -> None:
        if self._reaper is None and self.config.int("connections.max.idle.ms") >= 0:
            self._reaper = asyncio.get_running_loop().create_task(self._reap_idle())

    # -- bootstrap ------------------------------------------------------------------
    async def bootstrap(self) -> BrokerConnection:
        """Connect to a shuffled bootstrap server; the caller sends Metadata on it."""
        self._start_reaper()
        if self._bootstrap is not None and self._bootstrap.connected:
            return self._bootstrap
        if self.auth_error is not None:
            raise self.auth_error
        servers = list(self.bootstrap_servers)
        random.shuffle(servers)
        errors = []
        for i, (host, port) in enumerate(servers):
            conn = self._new(host, port, -1 - i)
            try:
                await conn.open()
            except AuthenticationError as exc:
                self._auth_failed(conn, exc)
                raise
            except (ConnectionClosed, OSError, TimeoutError) as exc:
                errors.append(f"{host}:{port}: {exc}")
                continue
            self._bootstrap = conn
            self._connection_made()
            self.api_versions_max = conn.api_versions.get(API_VERSIONS_KEY, (0, 0))[1]
            self.events.emit("bootstrap", f"connected to bootstrap server {host}:{port}")
            return conn
        raise NoBrokerAvailable("no bootstrap server answered: " + "; ".join(errors))

    def forget_bootstrap(self) -> None:
        """Close a bootstrap connection still open: a re-bootstrap connects afresh."""
        conn, self._bootstrap = self._bootstrap, None
        if conn is not None:
            conn.close()

    def adopt_bootstrap(self) -> None:
        """After discovery: keep the bootstrap connection as a broker's, or close it."""
        conn, self._bootstrap = self._bootstrap, None
        if conn is None:
            return
        for b in self.brokers.values():
            if (b.host, b.port) == (conn.host, conn.port) and (b.node_id, DATA) not in self._conns:
                conn.node_id = b.node_id
                if conn.connected:
                    self._conns[(b.node_id, DATA)] = conn
                    return
        conn.close()

    # -- broker connections ---------------------------------------------------------
    def update_brokers(self, brokers: dict[int, BrokerAddress]) -> None:
        for node_id, old in list(self.brokers.items()):
            new = brokers.get(node_id)
            if new is None or (new.host, new.port) != (old.host, old.port):
                for channel in (DATA, COORDINATOR):
                    self.close_connection(node_id, channel, "broker left the cluster metadata"
                                          if new is None else "broker address changed")
                    # a new address starts without the old one's backoff (as Java's
                    # ClusterConnectionStates starts a node anew when its host changes)
                    self._backoff.pop((node_id, channel), None)
        self.brokers = dict(brokers)

    def connection_if_open(self, node_id: int, channel: str = DATA) -> BrokerConnection | None:
        conn = self._conns.get((node_id, channel))
        return conn if conn is not None and conn.connected else None

    def ready_at(self, node_id: int, channel: str = DATA) -> float:
        """monotonic time before which a reconnect to ``node_id`` is backing off."""
        b = self._backoff.get((node_id, channel))
        return b.next_attempt if b is not None else 0.0

    async def get(self, node_id: int, channel: str = DATA, *,
                  address: BrokerAddress | None = None) -> BrokerConnection:
        """The open connection to ``node_id`` on ``channel``, connecting if needed."""
        key = (node_id, channel)
        conn = self._conns.get(key)
        if conn is not None:
            if conn.connected:
                return conn
            self._drop(key, conn, "connection lost")
        pending = self._connecting.get(key)
        if pending is None:
            pending = asyncio.get_running_loop().create_future()
            self._connecting[key] = pending
            try:
                conn = await self._connect(key, address)
            except BaseException as exc:
                # A caller that gave up (cancelled: a deadline of its own) leaves the
                # others sharing the attempt a network error they retry, not its cancel.
                pending.set_exception(ConnectionClosed(
                    f"the connect to broker {node_id} was abandoned")
                    if isinstance(exc, asyncio.CancelledError) else exc)
                with contextlib.suppress(BaseException):
                    pending.exception()
                raise
            else:
                pending.set_result(conn)
                return conn
            finally:
                self._connecting.pop(key, None)
        return await asyncio.shield(pending)

    async def _connect(self, key: Key, address: BrokerAddress | None) -> BrokerConnection:
        if self._closed:
            raise ConnectionClosed("client is closed")
        if self.auth_error is not None:
            raise self.auth_error
        self._start_reaper()
        node_id, channel = key
        addr = address or self.brokers.get(node_id)
        if addr is None:
            raise NoBrokerAvailable(f"broker {node_id} is not in the cluster metadata")
        backoff = self._backoff.setdefault(key, _Backoff())
        wait = backoff.next_attempt - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        conn = self._new(addr.host, addr.port, node_id, backoff.failures)
        try:
            await conn.open()
        except asyncio.CancelledError:
            conn.close()     # the caller gave up: no failure of the broker's
            raise
        except AuthenticationError as exc:
            self._auth_failed(conn, exc)
            raise
        except errors.RebootstrapRequiredError:
            # another cluster's broker at this address (KIP-1242): discover again; the
            # callers retry as after any failed connect, once the metadata is new
            conn.close()
            why = (f"broker {node_id} at {addr.host}:{addr.port} is not of cluster "
                   f"{self.cluster_id} (REBOOTSTRAP_REQUIRED)")
            if self.on_rebootstrap_required is not None:
                self.on_rebootstrap_required(why)
            raise ConnectionClosed(why) from None
        except BaseException as exc:
            backoff.failures += 1
            delay = self._backoff_delay(backoff.failures)
            backoff.next_attempt = time.monotonic() + delay
            self.events.emit("connect", f"cannot connect to broker {node_id} at "
                             f"{addr.host}:{addr.port}; retry in {delay * 1000:.0f} ms",
                             cause=type(exc).__name__)
            raise
        backoff.failures = 0
        backoff.next_attempt = 0.0
        self._conns[key] = conn
        self._connection_made()
        self.events.emit("connect", f"connected to broker {node_id} at {addr.host}:{addr.port}"
                         + (f" ({channel})" if channel != DATA else ""))
        return conn

    def _drop(self, key: Key, conn: BrokerConnection, why: str) -> None:
        if self._conns.get(key) is conn:
            del self._conns[key]
            self.events.emit("disconnect", f"connection to broker {key[0]} closed"
                             + (f" ({key[1]})" if key[1] != DATA else ""), cause=why)
        conn.close()

    def close_connection(self, node_id: int, channel: str = DATA, why: str = "closed") -> None:
        conn = self._conns.get((node_id, channel))
        if conn is not None:
            self._drop((node_id, channel), conn, why)

    def mark_failed(self, node_id: int, channel: str = DATA, why: str = "request failed") -> None:
        """A request on this connection failed at the network level: drop it."""
        self.close_connection(node_id, channel, why)

    def discard(self, conn: BrokerConnection, why: str) -> None:
        """Drop ``conn`` wherever it is kept (after a network-level failure)."""
        for key, c in list(self._conns.items()):
            if c is conn:
                self._drop(key, c, why)
        if conn is self._bootstrap:
            self._bootstrap = None
        conn.close()

    def open_connections(self) -> list[tuple[int, str, BrokerConnection]]:
        return [(k[0], k[1], c) for k, c in self._conns.items() if c.connected]

    def least_loaded(self) -> BrokerConnection | None:
        """The open data connection with the fewest requests in flight."""
        best: BrokerConnection | None = None
        for (_, channel), c in self._conns.items():
            if channel == DATA and c.connected and (best is None or c.in_flight < best.in_flight):
                best = c
        if best is None and self._bootstrap is not None and self._bootstrap.connected:
            best = self._bootstrap
        return best

    # -- idle connections ------------------------------------------------------------
    async def _reap_idle(self) -> None:
        idle = self.config.int("connections.max.idle.ms") / 1000
        period = max(min(idle / 4, 10.0), 0.05)
        while not self._closed:
            await asyncio.sleep(period)
            now = time.monotonic()
            for key, conn in list(self._conns.items()):
                if conn.in_flight == 0 and now - conn.last_used > idle:
                    self._drop(key, conn, f"idle for more than {idle * 1000:.0f} ms "
                                          "(connections.max.idle.ms)")

    # -- transparency ------------------------------------------------------------------
    def connections(self) -> list[ConnectionInfo]:
        out = []
        entries: list[tuple[int, str, BrokerConnection]] = self.open_connections()
        if self._bootstrap is not None and self._bootstrap.connected:
            bid = self._bootstrap.node_id
            entries.append((bid if bid is not None else -1, "bootstrap", self._bootstrap))
        for node_id, channel, conn in entries:
            roles: list[str] = ["bootstrap"] if channel == "bootstrap" else []
            for provider in self.role_providers:
                roles.extend(provider(node_id, channel))
            versions = {}
            for api_key, (lo, hi) in sorted(conn.api_versions.items()):
                info = REGISTRY.get(api_key)
                if info is not None and api_key in conn.stats.requests_by_api:
                    with contextlib.suppress(Exception):
                        versions[info.name] = conn.version_for(api_key)
                del lo, hi
            s, state = conn.stats, conn.state
            out.append(ConnectionInfo(
                broker=node_id, address=conn.address, channel=channel, roles=roles,
                in_flight=conn.in_flight, requests=s.requests, bytes_sent=s.bytes_sent,
                bytes_received=s.bytes_received, last_activity=s.last_activity,
                opened_at=s.opened_at, api_versions=versions, throttled_ms=s.throttled_ms,
                local_address=conn.local_address,
                security_protocol=self.security.protocol, tls=conn.tls,
                mechanism=state.mechanism, principal=self.security.principal,
                session_lifetime_ms=state.session_lifetime_ms,
                reauthentications=state.reauth_count, last_authenticated=state.last_auth))
        out.sort(key=lambda i: (i.broker, i.channel))
        return out

    async def close(self) -> None:
        self._closed = True
        await cancel_and_wait(self._reaper)
        for key, conn in list(self._conns.items()):
            self._drop(key, conn, "client closed")
        if self._bootstrap is not None:
            self._bootstrap.close()
            self._bootstrap = None
        await asyncio.sleep(0)


def _split(server: str) -> tuple[str, int]:
    host, _, port = server.rpartition(":")
    return host.strip("[]"), int(port)
