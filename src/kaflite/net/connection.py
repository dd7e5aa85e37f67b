"""One TCP connection to one Kafka broker, with requests multiplexed on it.

Theory of operation
-------------------
``BrokerConnection.open()`` connects (bounded by
``socket.connection.setup.timeout.ms``) and negotiates ApiVersions before
anything else: it sends the newest ApiVersions version kaflite knows; a broker
that does not know it answers UNSUPPORTED_VERSION with a v0 body listing its
own range (KIP-511), and the request is repeated at the broker's newest one.
From then on ``request()`` picks, per request, the highest version both sides
support.

Requests are multiplexed: each gets the next correlation id and a future, at
most ``max_in_flight`` are outstanding (a semaphore), and each has its own
timeout. Kafka answers the requests of one connection in order, but responses
are still matched by correlation id; one that matches nothing is a protocol
error and closes the connection, failing everything in flight.

Produce with acks=0 has no response: it is written and completed at once.

A response carrying ``throttle_time_ms > 0`` (KIP-219: the broker answers at
once and leaves the waiting to the client) holds back the next request on this
connection until the throttle time has passed.

The receive side is an ``asyncio.BufferedProtocol`` fed by ``FrameDecoder``, so
a large Fetch response is read straight into its own buffer and decoded
without a copy of its records.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import socket
import time
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from kaflite._lowat import ReceiveLowWater
from kaflite.protocol import (
    REGISTRY,
    FrameDecoder,
    KafkaError,
    ProtocolError,
    RemoteProtocolError,
    decode_response,
    encode_request,
)
from kaflite.protocol.errors import error_for_code
from kaflite.protocol.framing import Frame
from kaflite.protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    ProduceRequest,
    ProduceResponse,
    Request,
    Struct,
)

__all__ = ["BrokerConnection", "ConnectionClosed", "ConnectionStats", "NoCommonVersion"]

R = TypeVar("R", bound=Struct)

API_VERSIONS = ApiVersionsRequest.API_KEY
PRODUCE = ProduceRequest.API_KEY
UNSUPPORTED_VERSION = 35


class ConnectionClosed(ConnectionError):
    """The connection closed (or failed) before the response arrived."""


class NoCommonVersion(KafkaError):
    """kaflite and the broker share no version of an API."""

    code = UNSUPPORTED_VERSION
    name = "UNSUPPORTED_VERSION"


@dataclass
class ConnectionStats:
    opened_at: float = field(default_factory=time.time)
    last_activity: float = field(default_factory=time.time)
    requests: int = 0
    bytes_sent: int = 0
    bytes_received: int = 0
    requests_by_api: dict[int, int] = field(default_factory=dict)
    throttled_ms: int = 0


@dataclass
class _Pending:
    api_key: int
    version: int
    future: asyncio.Future[Struct]


# A chunk at least this large is written on its own rather than joined with its
# neighbours.
_WRITE_ALONE = 65536


def _write(transport: asyncio.Transport, chunks: list[Any]) -> None:
    """Write a request's chunks without joining its big payloads into one copy.

    ``writelines`` of asyncio's selector transport (3.11) joins all chunks into
    one bytes object, a copy of every record batch of a Produce request. Small
    chunks are still joined (one write, one send); a large one is handed to
    ``write`` by itself, which sends what the socket takes straight from it and
    copies only the rest into the transport's buffer.
    """
    if len(chunks) == 1 or all(len(c) < _WRITE_ALONE for c in chunks):
        transport.writelines(chunks)
        return
    small: list[Any] = []
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
    def __init__(self, conn: BrokerConnection, max_frame_size: int) -> None:
        self.conn = conn
        self.decoder = FrameDecoder(max_frame_size)
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
        return self.decoder.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        self.conn.stats.bytes_received += nbytes
        try:
            frames = self.decoder.buffer_updated(nbytes)
            for frame in frames:
                self.conn._on_frame(frame)
        except ProtocolError as exc:
            self.conn._fail(exc)
            return
        if self.low_water is not None:
            self.low_water.update(self.decoder.awaiting)

    def connection_lost(self, exc: Exception | None) -> None:
        self.conn._fail(ConnectionClosed(f"connection to {self.conn.address} lost: {exc}"))
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
    ) -> None:
        self.host, self.port, self.node_id = host, port, node_id
        # SO_SNDBUF / SO_RCVBUF; -1 leaves the sizes to the OS (which tunes them)
        self.socket_buffers = (send_buffer_bytes, receive_buffer_bytes)
        self.client_id = client_id
        self.request_timeout = request_timeout_ms / 1000
        self.connect_timeout = connect_timeout_ms / 1000
        self.max_frame_size = max_frame_size
        self.software = (software_name, software_version)
        self.api_versions: dict[int, tuple[int, int]] = {}
        self.stats = ConnectionStats()
        self._slots = asyncio.Semaphore(max_in_flight)
        self._pending: dict[int, _Pending] = {}
        self._ids = itertools.count(1)
        self._protocol: _Protocol | None = None
        self._closed: BaseException | None = None
        # time.monotonic() before which no request may be sent (KIP-219 throttling)
        self.throttled_until = 0.0
        self._in_order = asyncio.Lock()
        # time.monotonic() of the last request or response, for connections.max.idle.ms
        self.last_used = time.monotonic()
        # our end of the socket, as the broker sees it (the registry's "peer")
        self.local_address = ""

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    @property
    def connected(self) -> bool:
        return self._protocol is not None and self._closed is None

    # -- lifecycle -------------------------------------------------------------
    async def open(self) -> BrokerConnection:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self.connect_timeout):
                _, proto = await loop.create_connection(
                    lambda: _Protocol(self, self.max_frame_size), self.host, self.port)
        except (OSError, TimeoutError) as exc:
            raise ConnectionClosed(f"cannot connect to {self.address}: {exc!r}") from exc
        self._protocol = proto
        self._size_socket_buffers(proto)
        try:
            await self._negotiate()
        except BaseException:
            self.close()
            raise
        return self

    def _size_socket_buffers(self, proto: _Protocol) -> None:
        sock = proto.transport.get_extra_info("socket") if proto.transport else None
        if sock is None:
            return
        for option, size in zip((socket.SO_SNDBUF, socket.SO_RCVBUF), self.socket_buffers,
                                strict=True):
            if size > 0:
                sock.setsockopt(socket.SOL_SOCKET, option, size)
        proto.low_water = ReceiveLowWater(sock, receive_buffer=self.socket_buffers[1])

    async def _negotiate(self) -> None:
        ours = REGISTRY[API_VERSIONS]
        version = ours.max_version
        for _ in range(2):
            req = ApiVersionsRequest(*self.software)
            resp = await self._send(req, API_VERSIONS, version)
            assert isinstance(resp, ApiVersionsResponse)
            ranges = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
            if resp.error_code == UNSUPPORTED_VERSION and API_VERSIONS in ranges:
                version = min(version, ranges[API_VERSIONS][1])
                continue
            if resp.error_code:
                raise error_for_code(resp.error_code, "ApiVersions")
            self.api_versions = ranges
            return
        raise NoCommonVersion("ApiVersions negotiation did not converge")

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
        info = REGISTRY[api_key]
        theirs = self.api_versions.get(api_key)
        if theirs is None:
            raise NoCommonVersion(f"broker {self.address} does not support {info.name}")
        top = min(info.max_version, theirs[1])
        if top < max(info.min_version, theirs[0]):
            raise NoCommonVersion(f"no common version of {info.name} with {self.address}")
        return top

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
        expect_response = not (api_key == PRODUCE and isinstance(body, ProduceRequest)
                               and body.acks == 0)
        async with self._slots:
            # Requests go out in the order they were made, also when they wait out a
            # throttle together (one timer each fired in any order: an idempotent
            # producer's batches then reached the broker out of sequence). The lock is
            # FIFO and held only until the request is written.
            async with self._in_order:
                wait = self.throttled_until - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                if self._closed is not None:
                    raise ConnectionClosed(str(self._closed))
                self.last_used = time.monotonic()
                cid = next(self._ids) & 0x7FFFFFFF
                chunks = encode_request(api_key, version, cid, self.client_id, body)
                future: asyncio.Future[Struct] = asyncio.get_running_loop().create_future()
                if expect_response:
                    self._pending[cid] = _Pending(api_key, version, future)
                _write(proto.transport, chunks)
            self.stats.requests += 1
            self.stats.requests_by_api[api_key] = self.stats.requests_by_api.get(api_key, 0) + 1
            self.stats.bytes_sent += sum(len(c) for c in chunks)
            self.stats.last_activity = time.time()
            await proto.drain()
            if not expect_response:
                return None
            try:
                async with asyncio.timeout(timeout or self.request_timeout):
                    return await future
            except BaseException:  # timed out or cancelled: the answer is not wanted
                self._pending.pop(cid, None)
                raise

    # -- protocol callbacks ------------------------------------------------------
    def _on_frame(self, frame: Frame) -> None:
        self.stats.last_activity = time.time()
        self.last_used = time.monotonic()
        if len(frame) < 4:
            raise RemoteProtocolError("response frame shorter than its header")
        cid = int.from_bytes(frame[:4], "big", signed=True)
        pending = self._pending.pop(cid, None)
        if pending is None:
            raise RemoteProtocolError(f"response with unknown correlation id {cid}")
        try:
            if pending.api_key == API_VERSIONS:
                # A broker that rejects our ApiVersions version answers with v0.
                try:
                    _, body = decode_response(frame, API_VERSIONS, pending.version)
                except ProtocolError:
                    _, body = decode_response(frame, API_VERSIONS, 0)
            else:
                _, body = decode_response(frame, pending.api_key, pending.version)
        except ProtocolError as exc:
            if not pending.future.done():
                pending.future.set_exception(exc)
            raise
        throttle = getattr(body, "throttle_time_ms", 0)
        if throttle and throttle > 0:
            self.stats.throttled_ms += throttle
            self.throttled_until = max(self.throttled_until, time.monotonic() + throttle / 1000)
        if not pending.future.done():
            pending.future.set_result(body)

    def _fail(self, exc: BaseException) -> None:
        if self._closed is None:
            self._closed = exc
        if self._protocol is not None and self._protocol.transport is not None:
            self._protocol.transport.close()
        pending, self._pending = self._pending, {}
        for p in pending.values():
            if not p.future.done():
                p.future.set_exception(
                    exc if isinstance(exc, ConnectionClosed) else ConnectionClosed(repr(exc))
                )
                # The caller may have given up already; don't warn about it.
                with contextlib.suppress(BaseException):
                    p.future.exception()
