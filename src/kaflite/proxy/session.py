"""One client connection through the proxy: its downstream and upstream sockets.

Theory of operation
-------------------
A ``Session`` pairs the client's connection (``Downstream``) with one upstream
connection of its own to the broker its local port stands for (a bootstrap
connection goes to any upstream bootstrap server; in naive mode every
connection goes to an upstream broker drawn at random). Both sides split their
bytes into frames with the codec's ``FrameDecoder``.

Requests, in order:

1. the leading api key, version and correlation id are read (``peek_request``);
   the header for the client id. A frame too short for them, a body that does
   not decode, or an API key the upstream did not advertise closes this client
   connection only.
2. The body is decoded unless it is a Produce or Fetch request that no filter
   asks for: record batches are never decoded, and a request nobody changed is
   forwarded as the very bytes that came in.
3. The filter chain may change the request, answer it locally, delay or drop
   its answer, or close the connection.
4. The request joins ``pending``, the in-order queue of answers owed to the
   client (Produce with acks=0 gets no answer, and no place in it), and, unless
   answered locally, ``upstream_wait``, the requests the upstream will answer,
   in order.

Responses: the first of ``upstream_wait`` is the one the upstream answers (a
broker answers a connection's requests in order; a correlation id that does
not match closes the session). Responses the proxy rewrites (Metadata,
FindCoordinator, DescribeCluster, Produce and Fetch from the KIP-951 versions)
and those of every API but Produce and Fetch are decoded; the addresses are
rewritten (``BrokerMap``), the response filters run, the registry records the
exchange, and the frame is re-encoded only if something changed. Answers leave
in request order: a local or delayed answer waits for those before it.

Back-pressure: when one side's transport has more than ``WRITE_HIGH`` bytes
queued, the other side stops reading until it drains below ``WRITE_LOW``; more
than ``MAX_PENDING`` answers owed also stops reading the client. Every buffer
is bounded: frames by ``max_frame_size``, queues by these limits.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from collections import deque
from typing import TYPE_CHECKING, cast

from kaflite.cluster.network import api_versions_error_body
from kaflite.cluster.observe import record_request
from kaflite.cluster.request_log import Touched, group_mark
from kaflite.protocol import FrameDecoder, ProtocolError, decode_response, encode_response
from kaflite.protocol._exceptions import KafkaError
from kaflite.protocol.framing import (
    Frame,
    encode_request,
    peek_request,
    read_request_header,
)
from kaflite.protocol.messages import (
    REGISTRY,
    ApiVersionsResponse,
    ProduceRequest,
    Struct,
)
from kaflite.protocol.primitives import BytesLike, Reader
from kaflite.proxy.filters.base import Exchange
from kaflite.proxy.registry import BOOTSTRAP_NODE
from kaflite.proxy.sasl import SASL_AUTHENTICATE, SASL_HANDSHAKE, answer_sasl, login
from kaflite.proxy.versions import advertise_sasl, intersect, omit_default_tags
from kaflite.security.errors import SaslError

if TYPE_CHECKING:
    from kaflite.cluster.auth import SaslSession
    from kaflite.cluster.observe import ConnectionRecord
    from kaflite.proxy.server import Proxy

__all__ = ["Session"]

log = logging.getLogger("kaflite.proxy")

PRODUCE, FETCH, API_VERSIONS = 0, 1, 18
HOT_APIS = frozenset({PRODUCE, FETCH})
WRITE_HIGH = 4 * 1024 * 1024
WRITE_LOW = 1024 * 1024
MAX_PENDING = 1024
_SIZE = struct.Struct(">i")


class _Answer:
    """An answer owed to the client, in request order."""

    __slots__ = ("chunks", "drop", "exchange", "ready")

    def __init__(self, exchange: Exchange) -> None:
        self.exchange = exchange
        self.chunks: list[BytesLike] | None = None
        self.ready = False
        self.drop = False


def _produce_acks(frame: BytesLike, version: int, header_end: int) -> int:
    """The acks of a Produce request, read without decoding its records."""
    r = Reader(frame)
    r.pos = header_end
    if version >= 3:
        if version >= 9:
            r.compact_nullable_string()
        else:
            r.nullable_string()
    return r.int16()


class _Side(asyncio.BufferedProtocol):
    """One socket of a session: frames in, bytes out, flow control both ways."""

    def __init__(self, session: Session, max_frame_size: int) -> None:
        self.session = session
        self.decoder = FrameDecoder(max_frame_size)
        self.transport: asyncio.Transport | None = None
        self.paused_by: set[str] = set()     # why reading is paused
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        self.transport.set_write_buffer_limits(high=WRITE_HIGH, low=WRITE_LOW)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.decoder.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        try:
            frames = self.decoder.buffer_updated(nbytes)
        except ProtocolError as exc:
            self.session.fail(f"bad frame from {self.label}: {exc}")
            return
        self.count(nbytes)
        for frame in frames:
            if self.session.closed:
                return
            try:
                self.on_frame(frame)
            except Exception:   # a filter's bug, an answer that does not encode...
                log.exception("closing connection %s after an error",
                              self.session.record.connection_id)
                self.session.close()
                return

    label = "side"

    def count(self, nbytes: int) -> None:
        return None

    def on_frame(self, frame: Frame) -> None:
        raise NotImplementedError

    def pause(self, reason: str) -> None:
        if not self.paused_by and self.transport is not None and not self.closed:
            self.transport.pause_reading()
        self.paused_by.add(reason)

    def resume(self, reason: str) -> None:
        if reason not in self.paused_by:
            return
        self.paused_by.discard(reason)
        if not self.paused_by and self.transport is not None and not self.closed:
            self.transport.resume_reading()

    def write(self, chunks: list[BytesLike]) -> None:
        if self.transport is not None and not self.closed:
            self.transport.writelines(chunks)

    def close(self) -> None:
        if self.transport is not None and not self.closed:
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.decoder.close()
        self.session.side_lost(self)


class Downstream(_Side):
    label = "client"

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self.pause("connecting")
        self.session.start(self)

    def count(self, nbytes: int) -> None:
        self.session.record.bytes_in += nbytes

    def on_frame(self, frame: Frame) -> None:
        self.session.on_request(frame)

    def pause_writing(self) -> None:
        self.session.upstream_pause("client-writes")

    def resume_writing(self) -> None:
        self.session.upstream_resume("client-writes")


class Upstream(_Side):
    label = "upstream"

    def __init__(self, session: Session, max_frame_size: int) -> None:
        super().__init__(session, max_frame_size)
        self.login_reply: asyncio.Future[bytes] | None = None   # the proxy's own SASL login

    def on_frame(self, frame: Frame) -> None:
        waiter = self.login_reply
        if waiter is not None:
            self.login_reply = None
            if not waiter.done():
                waiter.set_result(bytes(frame))
            return
        self.session.on_response(frame)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.login_reply is not None and not self.login_reply.done():
            self.login_reply.set_exception(ConnectionError("the upstream closed the connection"))
        super().connection_lost(exc)

    def pause_writing(self) -> None:
        self.session.downstream.pause("upstream-writes")

    def resume_writing(self) -> None:
        self.session.downstream.resume("upstream-writes")


class Session:
    """A client connection and its own upstream connection."""

    def __init__(self, proxy: Proxy, node_id: int | None) -> None:
        self.proxy = proxy
        self.node_id = node_id
        self.downstream = Downstream(self, proxy.max_frame_size)
        self.upstream: Upstream | None = None
        self.pending: deque[_Answer] = deque()
        self.upstream_wait: deque[_Answer] = deque()
        self.record: ConnectionRecord = proxy.registry.opened("?", node_id, proxy.security_name)
        self.closed = False
        self.upstream_node: int | None = node_id
        self.upstream_address: tuple[str, int] | None = None
        self._upstream_paused: set[str] = set()
        self.early: list[list[BytesLike]] = []   # requests that came before the upstream
        self.sasl: SaslSession | None = proxy.sasl.session() if proxy.sasl else None

    # -- lifecycle --------------------------------------------------------------------
    def start(self, downstream: Downstream) -> None:
        assert downstream.transport is not None
        peer = downstream.transport.get_extra_info("peername")
        if isinstance(peer, tuple):
            self.record.peer = f"{peer[0]}:{peer[1]}"
        if self.proxy.sni_suffix is not None:   # the ClientHello named the broker
            node = self.proxy.sni_node(downstream.transport.get_extra_info("ssl_object"))
            self.node_id = self.upstream_node = node
            self.record.broker_id = BOOTSTRAP_NODE if node is None else node
        self.proxy.sessions.add(self)
        task = asyncio.get_running_loop().create_task(self._connect())
        self.proxy.tasks.add(task)
        task.add_done_callback(self.proxy.tasks.discard)

    async def _connect(self) -> None:
        loop = asyncio.get_running_loop()
        targets = self.proxy.targets_for(self.node_id)
        last: BaseException | None = None
        for host, port, node in targets:
            if self.closed:
                return
            try:
                _, upstream = await asyncio.wait_for(loop.create_connection(
                    lambda: Upstream(self, self.proxy.max_upstream_frame),
                    host, port, ssl=self.proxy.upstream_ssl,
                    server_hostname=host if self.proxy.upstream_ssl is not None else None),
                    self.proxy.connect_timeout_s)
            except (TimeoutError, OSError) as exc:
                last = exc
                continue
            if self.proxy.upstream_sasl is not None and not self.closed:
                try:
                    await self._login(upstream)
                except (TimeoutError, ConnectionError, ProtocolError, KafkaError,
                        SaslError) as exc:
                    upstream.close()
                    self.fail(f"the proxy's SASL login to {host}:{port} failed: {exc}")
                    return
            if self.closed:
                upstream.close()
                return
            self.upstream = upstream
            self.upstream_node = node
            self.upstream_address = (host, port)
            assert upstream.transport is not None
            local = upstream.transport.get_extra_info("sockname")
            if isinstance(local, tuple):
                self.proxy.registry.upstream_sockets[self.record.connection_id] = (
                    self.record.peer, f"{local[0]}:{local[1]}:{host}:{port}")
            for reason in self._upstream_paused:
                upstream.pause(reason)
            for chunks in self.early:
                upstream.write(chunks)
            self.early.clear()
            self.downstream.resume("connecting")   # unless paused for another reason too
            return
        self.fail(f"no upstream broker reachable for node {self.node_id}: {last}")

    async def _login(self, upstream: Upstream) -> None:
        """Authenticate this upstream connection with the proxy's own credentials."""
        creds = self.proxy.upstream_sasl
        assert creds is not None
        corr = 0

        async def call(api_key: int, request: Struct) -> Struct:
            nonlocal corr
            corr += 1
            waiter: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
            upstream.login_reply = waiter
            upstream.write(encode_request(api_key, 1, corr, "kaflite-proxy", request))
            frame = await asyncio.wait_for(waiter, self.proxy.connect_timeout_s)
            return decode_response(frame, api_key, 1)[1]

        await login(creds, call)

    def reached_node(self) -> int | None:
        """The broker this connection reaches: its node, or for a bootstrap connection
        the node at the address it reached, once the proxy has learned it."""
        if self.upstream_node is None and self.upstream_address is not None:
            self.upstream_node = self.proxy.brokers.node_at(*self.upstream_address)
        return self.upstream_node

    def fail(self, why: str) -> None:
        if not self.closed:
            log.info("closing connection %s (%s): %s", self.record.connection_id,
                     self.record.peer, why)
        self.close()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.pending.clear()
        self.upstream_wait.clear()
        self.downstream.close()
        if self.upstream is not None:
            self.upstream.close()
        self.proxy.registry.closed_now(self.record)
        self.proxy.sessions.discard(self)

    def side_lost(self, side: _Side) -> None:
        # Either side gone: the other closes too, as a broker's own connection would.
        self.close()

    def upstream_pause(self, reason: str) -> None:
        self._upstream_paused.add(reason)
        if self.upstream is not None:
            self.upstream.pause(reason)

    def upstream_resume(self, reason: str) -> None:
        self._upstream_paused.discard(reason)
        if self.upstream is not None:
            self.upstream.resume(reason)

    # -- requests -----------------------------------------------------------------------
    def on_request(self, frame: Frame) -> None:
        proxy = self.proxy
        try:
            api_key, version, corr = peek_request(frame)
        except ProtocolError:
            self.fail("a frame too short for a request header")
            return
        info = REGISTRY.get(api_key)
        known = info is not None and info.min_version <= version <= info.max_version
        if not known and api_key != API_VERSIONS and api_key not in proxy.advertised:
            self.fail(f"API key {api_key} v{version}, which the upstream did not advertise")
            return
        if not known and api_key == API_VERSIONS:
            # KIP-511: an ApiVersions the proxy cannot read (Kafka 4.4's Java client sent
            # v5 before the codec read it) is answered here, v0 UNSUPPORTED_VERSION with the versions the proxy
            # reads, and the client asks again within them. Forwarded, its answer went
            # through unread: the client saw the upstream's versions, not the ones the
            # proxy can decode, and its Metadata then went unrewritten, past the proxy.
            reads = REGISTRY[API_VERSIONS]
            ex = Exchange(self.record.connection_id, self.record.peer, self.node_id,
                          API_VERSIONS, 0, corr, self.record.client_id)
            ex.answer(api_versions_error_body({API_VERSIONS: (reads.min_version,
                                                               reads.max_version)}))
            self._answer_locally(_Answer(ex))
            return
        client_id: str | None = self.record.client_id
        request: Struct | None = None
        header_end = 0
        decode = known and (api_key not in HOT_APIS or proxy.filters.wants(api_key, version))
        if known:
            assert info is not None
            try:
                header, reader = read_request_header(frame)
                client_id = header.client_id
                header_end = reader.pos
                if decode:
                    request = info.request.read(reader, version)
            except (ProtocolError, KafkaError, ValueError) as exc:
                self.fail(f"a request that does not decode: {exc}")
                return
        self.record.client_id = client_id
        if self.sasl is not None and (why := self.sasl.refuse(
                api_key, info.name if info is not None else f"API key {api_key}")):
            self.fail(why)
            return
        ex = Exchange(self.record.connection_id, self.record.peer, self.node_id, api_key,
                      version, corr, client_id, request, resolve=proxy.brokers.resolve_topic,
                      upstream_node=self.reached_node())
        if self.sasl is not None and api_key in (SASL_HANDSHAKE, SASL_AUTHENTICATE) \
                and request is not None:
            self._sasl_answer(ex, request)
        elif decode and proxy.filters:
            proxy.filters.on_request(ex)
            if ex.close:
                self.fail("closed by a filter")
                return
        expects = True
        if api_key == PRODUCE and known:
            try:
                expects = (request.acks if isinstance(request, ProduceRequest)
                           else _produce_acks(frame, version, header_end)) != 0
            except ProtocolError:
                self.fail("a Produce request that does not decode")
                return
        answer = _Answer(ex)
        proxy.metrics.request(api_key, len(frame) + 4)
        if ex.local_response is not None:
            self._answer_locally(answer)
            return
        if ex.request_changed and request is not None:
            chunks = encode_request(api_key, version, corr, client_id, request)
        else:
            chunks = [_SIZE.pack(len(frame)), frame]
        if expects:
            self.pending.append(answer)
            self.upstream_wait.append(answer)
            if len(self.pending) >= MAX_PENDING:
                self.downstream.pause("pending")
        else:   # acks=0: counted now, there will be no answer
            self._record(ex, None)
        if self.upstream is not None:
            self.upstream.write(chunks)
        else:   # uvloop reads before connection_made's pause takes effect
            self.early.append(chunks)
            if self.downstream.transport is not None:
                self.downstream.transport.pause_reading()

    def _sasl_answer(self, ex: Exchange, request: Struct) -> None:
        """SASL ends here: the proxy's own answer, the principal into the registry."""
        assert self.sasl is not None
        before = self.sasl.authentications
        response, close = answer_sasl(self.sasl, ex.api_key, ex.version, request)
        ex.answer(response)
        ex.close = close
        if close:
            log.info("connection %s (%s): SASL refused: %s", self.record.connection_id,
                     self.record.peer, getattr(response, "error_message", None) or "")
        if self.sasl.authentications > before:
            record = self.record
            if record.authenticated_at is not None:
                record.reauthentications += 1
            record.principal = self.sasl.principal or record.principal
            record.sasl_mechanism = self.sasl.mechanism
            record.authenticated_at = time.time()
            record.session_expires_at = self.sasl.expires_at

    def _answer_locally(self, answer: _Answer) -> None:
        ex = answer.exchange
        assert ex.local_response is not None
        try:
            answer.chunks = encode_response(ex.api_key, ex.version, ex.correlation_id,
                                            ex.local_response)
        except ProtocolError as exc:
            self.fail(f"a local answer that does not encode: {exc}")
            return
        self._record(ex, ex.local_response)
        self.pending.append(answer)
        self._release(answer)

    # -- responses ----------------------------------------------------------------------
    def on_response(self, frame: Frame) -> None:
        if not self.upstream_wait:
            self.fail("a response to no request")
            return
        answer = self.upstream_wait.popleft()
        ex = answer.exchange
        if len(frame) < 4 or _SIZE.unpack_from(frame)[0] != ex.correlation_id:
            self.fail("a response out of order")
            return
        proxy = self.proxy
        body: Struct | None = None
        info = REGISTRY.get(ex.api_key)
        known = info is not None and info.min_version <= ex.version <= info.max_version
        if known:
            try:
                body = self._decode(frame, ex)
            except (ProtocolError, KafkaError, ValueError) as exc:
                log.warning("cannot decode a %s v%d response: %s", ex.api_key, ex.version, exc)
        changed = False
        if body is not None:
            ex.response = body
            if isinstance(body, ApiVersionsResponse):
                proxy.advertised.update(intersect(body))
                omit_default_tags(body)
                if proxy.sasl is not None:
                    advertise_sasl(body)
                changed = True
            if proxy.brokers.needs_decode(ex.api_key, ex.version):
                changed = proxy.brokers.rewrite(ex.api_key, ex.version, body) or changed
            if ex.request is not None and proxy.filters:
                proxy.filters.on_response(ex)
            changed = changed or ex.response_changed
            self._record(ex, ex.response)
        if changed and ex.response is not None:
            version = ex.version
            if isinstance(ex.response, ApiVersionsResponse) and ex.response.error_code:
                version = 0
            answer.chunks = encode_response(ex.api_key, version, ex.correlation_id,
                                            ex.response)
        else:
            answer.chunks = [_SIZE.pack(len(frame)), frame]
        self._release(answer)

    def _decode(self, frame: Frame, ex: Exchange) -> Struct | None:
        if ex.api_key == API_VERSIONS:
            try:
                return decode_response(frame, ex.api_key, ex.version)[1]
            except ProtocolError:   # UNSUPPORTED_VERSION comes at v0 (KIP-511)
                return decode_response(frame, ex.api_key, 0)[1]
        return decode_response(frame, ex.api_key, ex.version)[1]

    def _record(self, ex: Exchange, response: Struct | None) -> None:
        request = ex.request
        if request is None:
            info = REGISTRY.get(ex.api_key)
            if info is None:
                return
            request = info.request()
        elapsed = (time.perf_counter() - ex.started) * 1000
        stats = self.record.stats(ex.api_key)
        before = dict(stats.errors)
        request_log = self.proxy.request_log
        touched: Touched | None = None if request_log is None else []
        record_request(self.record, ex.api_key, ex.version, request, response, elapsed,
                       self.proxy.brokers.resolve_topic, touched)
        if request_log is not None and touched is not None:
            throttle = getattr(response, "throttle_time_ms", 0) if response is not None else 0
            request_log.record(self.record, ex.api_key, ex.version, elapsed,
                               throttle if isinstance(throttle, int) else 0, touched,
                               group_mark(ex.api_key, request, response))
        for code, n in stats.errors.items():
            if n != before.get(code, 0):
                self.proxy.metrics.error(ex.api_key, code, n - before.get(code, 0))

    def _release(self, answer: _Answer) -> None:
        ex = answer.exchange
        if ex.drop_response:
            answer.drop = True
        if ex.delay_s > 0:
            asyncio.get_running_loop().call_later(ex.delay_s, self._ready, answer)
        else:
            self._ready(answer)

    def _mute(self, seconds: float) -> None:
        self.downstream.pause("throttle")
        asyncio.get_running_loop().call_later(seconds, self.downstream.resume, "throttle")

    def _ready(self, answer: _Answer) -> None:
        answer.ready = True
        pending = self.pending
        while pending and pending[0].ready:
            done = pending.popleft()
            if done.chunks is not None and not done.drop:
                size = sum(len(c) for c in done.chunks)
                self.record.bytes_out += size
                self.proxy.metrics.response(size)
                self.downstream.write(done.chunks)
                if done.exchange.mute_s > 0:   # KIP-219: the mute starts as it leaves
                    self._mute(done.exchange.mute_s)
        if len(pending) < MAX_PENDING // 2:
            self.downstream.resume("pending")
        if answer.exchange.close:
            self.fail("closed by a filter")
