"""The broker's side of a client connection: frames in, handler calls, frames out.

Like Kafka's SocketServer, a connection's requests are processed one at a time
and answered in order: a request is read, handled (a long-poll Fetch may wait
here), its response written, and only then is the next request taken. Clients
still pipeline up to ``max.in.flight.requests.per.connection`` requests; they
wait in the queue.

Bad input never reaches a handler: a frame over ``socket.request.max.bytes``,
a negative size, an unknown API key, an unsupported version (other than
ApiVersions, which is answered with v0 and UNSUPPORTED_VERSION, KIP-511) or a
body that does not decode closes this connection only, and is logged once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

from kaflite.protocol import FrameDecoder, ProtocolError, RemoteProtocolError, encode_response
from kaflite.protocol.framing import peek_request, read_request_header
from kaflite.protocol.headers import RequestHeader
from kaflite.protocol.messages import REGISTRY, ApiVersionsResponse
from kaflite.protocol.messages._generated.api_versions_response import ApiVersion

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker

__all__ = ["ConnectionInfo", "ServerConnection"]

log = logging.getLogger("kaflite.cluster.network")

API_VERSIONS = 18
UNSUPPORTED_VERSION = 35


@dataclass
class ApiStats:
    count: int = 0
    total_ms: float = 0.0
    max_ms: float = 0.0
    errors: dict[int, int] = field(default_factory=dict)


@dataclass
class ConnectionInfo:
    """What the broker knows about one client connection (the registry's row)."""

    connection_id: int
    broker_id: int
    peer: str
    client_id: str | None = None
    software_name: str | None = None
    software_version: str | None = None
    principal: str = "User:ANONYMOUS"
    opened_at: float = field(default_factory=time.time)
    last_activity: float = field(default_factory=time.time)
    bytes_in: int = 0
    bytes_out: int = 0
    apis: dict[int, ApiStats] = field(default_factory=dict)
    replica_id: int | None = None
    partitions: set[tuple[str, int]] = field(default_factory=set)
    groups: set[str] = field(default_factory=set)
    transactional_ids: set[str] = field(default_factory=set)

    @property
    def roles(self) -> list[str]:
        roles = []
        if self.replica_id is not None:
            roles.append("replica-fetcher")
        if self.partitions and self.replica_id is None:
            roles.append("partition-leader")
        if self.groups:
            roles.append("group-coordinator")
        if self.transactional_ids:
            roles.append("txn-coordinator")
        if not roles and set(self.apis) <= {API_VERSIONS, 3}:
            roles.append("bootstrap")
        return roles


class ServerConnection(asyncio.BufferedProtocol):
    _ids = 0

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.decoder = FrameDecoder(broker.config.int("socket.request.max.bytes"))
        self.transport: asyncio.Transport | None = None
        self.queue: deque[bytes | bytearray] = deque()
        self.wakeup = asyncio.Event()
        self.worker: asyncio.Task[None] | None = None
        ServerConnection._ids += 1
        self.info = ConnectionInfo(ServerConnection._ids, broker.node_id, "?")
        self.closed = False

    # -- asyncio callbacks ------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses; both fit.
        self.transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        self.info.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.broker.connections[self.info.connection_id] = self
        self.worker = asyncio.get_running_loop().create_task(self._work())

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.decoder.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        self.info.bytes_in += nbytes
        try:
            frames = self.decoder.buffer_updated(nbytes)
        except ProtocolError as exc:
            self._reject(f"bad frame: {exc}")
            return
        if frames:
            self.queue.extend(frames)
            self.wakeup.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.broker.connections.pop(self.info.connection_id, None)
        if self.worker is not None:
            self.worker.cancel()

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    def _reject(self, why: str) -> None:
        self.broker.log_bad_input(self.info.peer, why)
        self.abort()

    # -- request processing ---------------------------------------------------------
    async def _work(self) -> None:
        while not self.closed:
            if not self.queue:
                self.wakeup.clear()
                await self.wakeup.wait()
                continue
            frame = self.queue.popleft()
            try:
                await self._handle(frame)
            except RemoteProtocolError as exc:
                self._reject(f"malformed request: {exc}")
                return
            except asyncio.CancelledError:
                raise
            except Exception:  # a handler bug must not take the broker down
                log.exception("broker %s: handler failed; closing %s",
                              self.broker.node_id, self.info.peer)
                self.abort()
                return

    async def _handle(self, frame: bytes | bytearray) -> None:
        started = time.perf_counter()
        api_key, version, correlation_id = peek_request(frame)
        info = REGISTRY.get(api_key)
        handler = self.broker.handlers.get(api_key)
        if info is None or handler is None:
            self._reject(f"unknown or unsupported API key {api_key}")
            return
        if not handler.min_version <= version <= handler.max_version:
            if api_key == API_VERSIONS:
                self._send(API_VERSIONS, 0, correlation_id, self.broker.api_versions_v0_error())
                return
            self._reject(f"{info.name} v{version} is not supported")
            return
        header, reader = read_request_header(frame)
        # Like Kafka's request parser, bytes left after the last field are ignored:
        # librdkafka's Metadata v12 "all topics" request carries three of them.
        body = info.request.read(reader, version)
        self.info.client_id = header.client_id
        self.info.last_activity = time.time()
        response = await handler.handle(self.broker, self, header, body)
        if response is not None and not self.closed:
            self._send(api_key, version, correlation_id, response)
        elapsed = (time.perf_counter() - started) * 1000
        stats = self.info.apis.get(api_key)
        if stats is None:
            stats = self.info.apis[api_key] = ApiStats()
        stats.count += 1
        stats.total_ms += elapsed
        stats.max_ms = max(stats.max_ms, elapsed)
        code = getattr(response, "error_code", 0)
        if code:
            stats.errors[code] = stats.errors.get(code, 0) + 1

    def _send(self, api_key: int, version: int, correlation_id: int, body: object) -> None:
        if self.transport is None or self.closed:
            return
        chunks = encode_response(api_key, version, correlation_id, body)  # type: ignore[arg-type]
        self.info.bytes_out += sum(len(c) for c in chunks)
        self.transport.writelines(chunks)


def api_versions_error_body(ranges: dict[int, tuple[int, int]]) -> ApiVersionsResponse:
    return ApiVersionsResponse(
        error_code=UNSUPPORTED_VERSION,
        api_keys=[ApiVersion(k, lo, hi) for k, (lo, hi) in sorted(ranges.items())
                  if k == API_VERSIONS],
    )


__all__ += ["RequestHeader", "api_versions_error_body"]
