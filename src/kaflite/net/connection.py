"""One TCP connection to one Kafka broker: the asyncio transport of a ``ClientConnection``.

Theory of operation
-------------------
The protocol's rules for a connection (ApiVersions first and its KIP-511
fallback, correlation ids, in-flight accounting, KIP-219 throttle deadlines,
version choice) live in ``kaflite.protocol.connection.ClientConnection``, which
does no I/O. This module does the I/O around it: ``open()`` connects (bounded by
``socket.connection.setup.timeout.ms``) and writes the ApiVersions request the
protocol object starts with; ``request()`` waits for a free in-flight slot and
for any throttle, writes what ``send()`` encoded, and waits (up to its timeout)
for the future that the ``Response`` event with its correlation id completes. A
``Failed`` event closes the connection and fails every request in flight.

Produce with acks=0 has no response: it is written and completed at once.

Security: with an ``ssl_context`` the connection is TLS (asyncio's ``ssl=``, the
broker's host as ``server_hostname``: Python checks an IP address against the
certificate's IP SANs and sends no SNI for it, as librdkafka and Java's client
do). A ``sasl`` factory makes the mechanism for each exchange; it runs in a
thread, since an OAUTHBEARER token may come from a callback or an HTTP token
endpoint. ``open()`` returns once ApiVersions and SASL are done, so requests made
before that wait for it. KIP-368 re-authentication runs when its time comes
(a timer, and a check before each request) under the lock that orders requests:
new requests wait for it, those already in flight complete as usual. A failed
TLS handshake or SASL exchange raises an ``AuthenticationError``, not
``ConnectionClosed``: it is fatal, not a network error to retry.

The receive side is an ``asyncio.BufferedProtocol`` that lends the protocol
object's frame buffers to the transport, so a large Fetch response is read
straight into its own buffer and decoded without a copy of its records.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import time
from collections.abc import Callable
from typing import Any, TypeVar, cast

from kaflite._lowat import ReceiveLowWater
from kaflite.protocol.connection import (
    AuthenticationError,
    ClientConnection,
    ConnectionStats,
    Event,
    Failed,
    NoCommonVersion,
    Outgoing,
    Ready,
    Reauthenticated,
    Response,
    SaslAuthenticationError,
    SaslMechanism,
    SslAuthenticationError,
)
from kaflite.protocol.messages import (
    REGISTRY,
    ProduceRequest,
    ProduceResponse,
    Request,
    Struct,
)
from kaflite.protocol.primitives import BytesLike

__all__ = ["AuthenticationError", "BrokerConnection", "ConnectionClosed", "ConnectionStats",
           "NoCommonVersion", "SaslFactory", "SslAuthenticationError"]

SaslFactory = Callable[[], SaslMechanism]
Emit = Callable[[str, str], object]     # (kind, message): the client's event log
# (node id, seconds from writing a request to its response): the client's metrics
Latency = Callable[[int, float], None]

R = TypeVar("R", bound=Struct)

PRODUCE = ProduceRequest.API_KEY


class ConnectionClosed(ConnectionError):
    """The connection closed (or failed) before the response arrived."""


# A chunk at least this large is written on its own rather than joined with its
# neighbours.
_WRITE_ALONE = 65536


def _write(transport: asyncio.Transport, chunks: list[BytesLike]) -> None:
    """Write a request's chunks without joining its big payloads into one copy.

    ``writelines`` of asyncio's selector transport (3.11) joins all chunks into
    one bytes object, a copy of every record batch of a Produce request. Small
    chunks are still joined (one write, one send); a large one is handed to
    ``write`` by itself, which sends what the socket takes straight from it and
    copies only the rest into the transport's buffer.
    """
    if len(chunks) == 1 or type(transport).__module__.startswith("uvloop") \
            or all(len(c) < _WRITE_ALONE for c in chunks):
        # (uvloop's writelines is one writev of the chunks as they are: no copy, and
        # one system call, which uvloop makes holding the GIL)
        transport.writelines(chunks)
        return
    small: list[BytesLike] = []
    for chunk in chunks:
        if len(chunk) >= _WRITE_ALONE:
            if small:
                transport.write(b"".join(small))
                small = []
            transport.write(chunk)
        else:
            small.append(chunk)
    if small:
        transport.write(b"".join(small))


class _Protocol(asyncio.BufferedProtocol):
    def __init__(self, conn: BrokerConnection) -> None:
        self.conn = conn
        self.state = conn.state
        self.transport: asyncio.Transport | None = None
        self._drained: asyncio.Future[None] | None = None
        self.low_water: ReceiveLowWater | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses; both fit.
        self.transport = cast(asyncio.Transport, transport)
        sockname = transport.get_extra_info("sockname")
        if isinstance(sockname, tuple) and len(sockname) >= 2:
            self.conn.local_address = f"{sockname[0]}:{sockname[1]}"

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.state.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        self.conn.on_events(self.state.buffer_updated(nbytes))
        if self.low_water is not None:
            self.low_water.update(self.state.decoder.awaiting)

    def connection_lost(self, exc: Exception | None) -> None:
        conn = self.conn
        if isinstance(exc, ssl.SSLError):   # e.g. the broker refused our certificate
            conn._fail(_ssl_error(conn.address, exc))
        elif not conn.state.ready and conn._closed is None:
            # A broker that drops a TLS 1.3 client without the certificate it requires
            # may close without an alert: say what to check, but as a network error,
            # since a restarting broker looks the same.
            hint = (" (does it require a client certificate, or another security.protocol?)"
                    if conn.ssl_context is not None else
                    " (does it require TLS or SASL: security.protocol?)")
            conn._fail(ConnectionClosed(
                f"connection to {conn.address} closed by the broker during the handshake"
                f"{hint}: {exc}"))
        else:
            conn._fail(ConnectionClosed(f"connection to {conn.address} lost: {exc}"))
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    def pause_writing(self) -> None:
        self._drained = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        self._drained = None

    async def drain(self) -> None:
        if self._drained is not None:
            await self._drained


class BrokerConnection:
    """A multiplexed connection to one broker."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        client_id: str | None = "kaflite",
        node_id: int | None = None,
        request_timeout_ms: int = 30_000,
        connect_timeout_ms: float = 10_000,
        max_in_flight: int = 5,
        max_frame_size: int = 104_857_600,
        software_name: str = "kaflite",
        software_version: str = "0.1.0",
        send_buffer_bytes: int = -1,
        receive_buffer_bytes: int = -1,
        ssl_context: ssl.SSLContext | None = None,
        sasl: SaslFactory | None = None,
        emit: Emit | None = None,
        expect: tuple[str, int] | None = None,
        on_latency: Latency | None = None,
    ) -> None:
        self.host, self.port, self.node_id = host, port, node_id
        # SO_SNDBUF / SO_RCVBUF; -1 leaves the sizes to the OS (which tunes them)
        self.socket_buffers = (send_buffer_bytes, receive_buffer_bytes)
        self.client_id = client_id
        self.request_timeout = request_timeout_ms / 1000
        self.connect_timeout = connect_timeout_ms / 1000
        self.state = ClientConnection(client_id, max_in_flight=max_in_flight,
                                      max_frame_size=max_frame_size,
                                      software=(software_name, software_version))
        self.state.expect = expect
        self._slots = asyncio.Semaphore(max_in_flight)
        self._futures: dict[int, asyncio.Future[Struct]] = {}
        self._ready: asyncio.Future[None] | None = None
        self._protocol: _Protocol | None = None
        self._closed: BaseException | None = None
        self._in_order = asyncio.Lock()
        # time.monotonic() of the last request or response, for connections.max.idle.ms
        self.last_used = time.monotonic()
        # our end of the socket, as the broker sees it (the registry's "peer")
        self.local_address = ""
        self.ssl_context = ssl_context
        self.sasl = sasl
        self.emit = emit
        self.on_latency = on_latency
        self.tls: str | None = None     # "TLSv1.3 TLS_AES_256_GCM_SHA384" once handshaken
        self._reauth: asyncio.Future[None] | None = None
        self._reauth_timer: asyncio.TimerHandle | None = None
        self._reauth_task: asyncio.Task[None] | None = None

    @property
    def label(self) -> str:
        node = self.node_id
        who = f"broker {node}" if node is not None and node >= 0 else "bootstrap server"
        return f"{who} at {self.address}"

    @property
    def mechanism(self) -> str | None:
        return self.state.mechanism

    def _emit(self, kind: str, message: str) -> None:
        if self.emit is not None:
            self.emit(kind, message)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def api_versions(self) -> dict[int, tuple[int, int]]:
        return self.state.api_versions

    @property
    def finalized_features(self) -> dict[str, int]:
        """The feature levels the cluster finalized, as this broker said (KIP-584)."""
        return self.state.finalized_features

    @property
    def stats(self) -> ConnectionStats:
        return self.state.stats

    @property
    def throttled_until(self) -> float:
        """time.monotonic() before which no request may be sent (KIP-219)."""
        return self.state.throttled_until

    @property
    def in_flight(self) -> int:
        return self.state.in_flight

    @property
    def connected(self) -> bool:
        return self._protocol is not None and self._closed is None

    # -- lifecycle -------------------------------------------------------------
    async def open(self) -> BrokerConnection:
        loop = asyncio.get_running_loop()
        sasl = await self._new_sasl() if self.sasl is not None else None
        tls = self.ssl_context
        try:
            async with asyncio.timeout(self.connect_timeout):
                transport, proto = await loop.create_connection(
                    lambda: _Protocol(self), self.host, self.port, ssl=tls,
                    server_hostname=self.host if tls is not None else None)
        except ssl.SSLError as exc:
            raise _ssl_error(self.address, exc) from exc
        except (OSError, TimeoutError) as exc:
            raise ConnectionClosed(f"cannot connect to {self.address}: {exc!r}") from exc
        self._protocol = proto
        self._size_socket_buffers(proto)
        if tls is not None:
            obj = transport.get_extra_info("ssl_object")
            cipher = obj.cipher() if obj is not None else None
            self.tls = " ".join(x for x in (obj.version() if obj else None,
                                            cipher[0] if cipher else None) if x) or "TLS"
            self._emit("tls", f"TLS handshake with {self.label} done ({self.tls})")
        self._ready = loop.create_future()
        try:
            self._write(self.state.start(sasl))
            async with asyncio.timeout(self.request_timeout):
                await self._ready
        except BaseException:
            self.close()
            raise
        return self

    async def _new_sasl(self) -> SaslMechanism:
        """A mechanism for one exchange, made and started in a thread: its first
        message may need a token from a callback or an HTTP endpoint."""
        factory = self.sasl
        assert factory is not None

        def make() -> SaslMechanism:
            mechanism = factory()
            return _Started(mechanism, mechanism.start())

        try:
            return await asyncio.to_thread(make)
        except AuthenticationError:
            raise
        except Exception as exc:
            raise SaslAuthenticationError(f"cannot get SASL credentials: {exc}") from exc

    # -- KIP-368 re-authentication ------------------------------------------------------
    def _schedule_reauth(self) -> None:
        at = self.state.reauth_at
        if at is None or self._closed is not None:
            return
        loop = asyncio.get_running_loop()
        self._reauth_timer = loop.call_later(max(at - time.monotonic(), 0),
                                             self._reauth_in_background)

    def _reauth_in_background(self) -> None:
        self._reauth_timer = None
        if self._closed is None and self._reauth_task is None:
            task = asyncio.get_running_loop().create_task(self._reauth_when_due())
            self._reauth_task = task

    async def _reauth_when_due(self) -> None:
        # A failure has closed the connection already, and its users learn of it.
        try:
            with contextlib.suppress(Exception):
                async with self._in_order:
                    if self.state.reauth_due():
                        await self._reauthenticate()
        finally:
            self._reauth_task = None

    async def _reauthenticate(self) -> None:
        """One KIP-368 exchange; call with ``_in_order`` held, so that requests wait."""
        sasl = await self._new_sasl()
        if self._closed is not None:
            raise ConnectionClosed(str(self._closed))
        self._reauth = asyncio.get_running_loop().create_future()
        self._write(self.state.reauthenticate(sasl))
        try:
            async with asyncio.timeout(self.request_timeout):
                await self._reauth
        except TimeoutError:
            self._fail(ConnectionClosed(f"re-authentication with {self.address} timed out"))
            raise
        finally:
            self._reauth = None

    def _size_socket_buffers(self, proto: _Protocol) -> None:
        sock = proto.transport.get_extra_info("socket") if proto.transport else None
        if sock is None:
            return
        for option, size in zip((socket.SO_SNDBUF, socket.SO_RCVBUF), self.socket_buffers,
                                strict=True):
            if size > 0:
                sock.setsockopt(socket.SOL_SOCKET, option, size)
        # Over TLS the socket carries records the SSL layer reads ahead and holds: a
        # low-water mark counted in plaintext bytes can exceed what is left to arrive on
        # the socket, and the response never wakes the reader. So plaintext only.
        if proto.transport is not None and proto.transport.get_extra_info("ssl_object") is None:
            proto.low_water = ReceiveLowWater(sock, receive_buffer=self.socket_buffers[1])

    def close(self) -> None:
        if self._protocol is not None and self._protocol.transport is not None:
            self._protocol.transport.close()
        self._fail(ConnectionClosed(f"connection to {self.address} closed"))

    async def wait_closed(self) -> None:
        self.close()
        await asyncio.sleep(0)

    # -- requests --------------------------------------------------------------
    def version_for(self, api_key: int) -> int:
        """The highest version of ``api_key`` that kaflite and the broker share."""
        try:
            return self.state.version_for(api_key)
        except NoCommonVersion as exc:
            raise NoCommonVersion(f"{exc} ({self.address})") from None

    async def request(self, body: Request[R], *, version: int | None = None,
                      timeout: float | None = None) -> R:
        """Send ``body`` and return its decoded response, typed by the request's class.
        A Produce with acks=0 has none: send it with ``produce``."""
        api_key = type(body).API_KEY
        v = self.version_for(api_key) if version is None else version
        response = await self._send(body, api_key, v, timeout)
        if response is None:
            raise ValueError("a Produce with acks=0 has no response: use produce()")
        return cast(R, response)

    async def produce(self, body: ProduceRequest, *, version: int | None = None,
                      timeout: float | None = None) -> ProduceResponse | None:
        """Send a Produce; ``None`` with acks=0, which the broker does not answer."""
        v = self.version_for(PRODUCE) if version is None else version
        return cast("ProduceResponse | None", await self._send(body, PRODUCE, v, timeout))

    async def _send(self, body: Struct, api_key: int, version: int,
                    timeout: float | None = None) -> Struct | None:
        if self._closed is not None:
            raise ConnectionClosed(str(self._closed))
        proto = self._protocol
        assert proto is not None and proto.transport is not None
        async with self._slots:
            # Requests go out in the order they were made, also when they wait out a
            # throttle together (one timer each fired in any order: an idempotent
            # producer's batches then reached the broker out of sequence). The lock is
            # FIFO and held only until the request is written.
            async with self._in_order:
                # A timer may fire early by as long as the loop's current iteration has
                # run (uvloop's clock is read once per iteration): sleep until it is over.
                wait = self.state.throttle_remaining()
                while wait > 0:
                    await asyncio.sleep(wait)
                    wait = self.state.throttle_remaining()
                if self._closed is None and self.state.reauth_due():
                    await self._reauthenticate()
                if self._closed is not None:
                    raise ConnectionClosed(str(self._closed))
                self.last_used = sent = time.monotonic()
                out = self.state.send(body, api_key, version)
                if out.expects_response:
                    future: asyncio.Future[Struct] = \
                        asyncio.get_running_loop().create_future()
                    self._futures[out.correlation_id] = future
                self._write(out)
            await proto.drain()
            if not out.expects_response:
                return None
            try:
                async with asyncio.timeout(timeout or self.request_timeout):
                    response = await future
            except BaseException:  # timed out or cancelled: the answer is not wanted
                self._futures.pop(out.correlation_id, None)
                self.state.abandon(out.correlation_id)
                raise
            node = self.node_id
            if self.on_latency is not None and node is not None and node >= 0:
                self.on_latency(node, time.monotonic() - sent)
            return response

    def _write(self, out: Outgoing) -> None:
        proto = self._protocol
        assert proto is not None and proto.transport is not None
        _write(proto.transport, out.chunks)

    # -- protocol events ---------------------------------------------------------
    def on_events(self, events: list[Event]) -> None:
        """What the protocol object made of the bytes received."""
        for event in events:
            if isinstance(event, Response):
                # (a re-authentication alone does not keep an idle connection alive)
                self.last_used = time.monotonic()
                throttle = getattr(event.body, "throttle_time_ms", 0)
                if throttle and throttle > 0:   # KIP-219: nothing goes out until it is over
                    self._emit("throttle", f"{self.label} throttled {_api(event.api_key)} "
                               f"for {throttle} ms")
                future = self._futures.pop(event.correlation_id, None)
                if future is not None and not future.done():
                    future.set_result(event.body)
            elif isinstance(event, Outgoing):   # ApiVersions again, at the broker's version
                self._write(event)
            elif isinstance(event, Ready):
                if event.mechanism is not None:
                    self._emit("auth", f"authenticated to {self.label} with {event.mechanism}"
                               f" ({_session(event.session_lifetime_ms)})")
                    self._schedule_reauth()
                if self._ready is not None and not self._ready.done():
                    self._ready.set_result(None)
            elif isinstance(event, Reauthenticated):
                self._emit("reauth", f"re-authenticated to {self.label} with "
                           f"{event.mechanism} (#{self.state.reauth_count}, "
                           f"{_session(event.session_lifetime_ms)})")
                if self._reauth is not None and not self._reauth.done():
                    self._reauth.set_result(None)
                self._schedule_reauth()
            elif isinstance(event, Failed):
                if event.correlation_id is not None:
                    future = self._futures.pop(event.correlation_id, None)
                    if future is not None and not future.done():
                        future.set_exception(event.error)
                for waiting in (self._ready, self._reauth):
                    if waiting is not None and not waiting.done():
                        waiting.set_exception(event.error)
                self._fail(event.error)
                return

    def _fail(self, exc: BaseException) -> None:
        if self._closed is None:
            self._closed = exc
        if self._reauth_timer is not None:
            self._reauth_timer.cancel()
            self._reauth_timer = None
        if self._protocol is not None and self._protocol.transport is not None:
            self._protocol.transport.close()
        self.state.closed()
        futures, self._futures = self._futures, {}
        waiting: list[asyncio.Future[Any]] = [f for f in futures.values() if not f.done()]
        # who waits for the handshake learns why it failed: an authentication error
        # is not a network error
        for handshake in (self._ready, self._reauth):
            if handshake is not None and not handshake.done():
                if isinstance(exc, AuthenticationError):
                    handshake.set_exception(exc)
                    with contextlib.suppress(BaseException):
                        handshake.exception()
                else:
                    waiting.append(cast("asyncio.Future[Any]", handshake))
        for f in waiting:
            f.set_exception(
                exc if isinstance(exc, ConnectionClosed) else ConnectionClosed(repr(exc))
            )
            # The caller may have given up already; don't warn about it.
            with contextlib.suppress(BaseException):
                f.exception()


class _Started:
    """A mechanism whose first message was made already (off the event loop)."""

    def __init__(self, inner: SaslMechanism, first: bytes) -> None:
        self.inner = inner
        self.mechanism = inner.mechanism
        self.first = first

    def start(self) -> bytes:
        return self.first

    def respond(self, challenge: bytes) -> bytes | None:
        return self.inner.respond(challenge)

    @property
    def complete(self) -> bool:
        return self.inner.complete


def _session(lifetime_ms: int) -> str:
    return f"session {lifetime_ms} ms" if lifetime_ms > 0 else "no session limit"


def _ssl_error(address: str, exc: ssl.SSLError) -> SslAuthenticationError:
    detail = getattr(exc, "verify_message", None) or exc.reason or str(exc)
    return SslAuthenticationError(f"SSL handshake with {address} failed: {detail}")


def _api(api_key: int) -> str:
    info = REGISTRY.get(api_key)
    return info.name if info is not None else f"api {api_key}"
