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

Around each handler call the connection

* asks the cluster's fault injector (``broker.faults``) for a plan: drop the
  connection, answer with an error without calling the handler, take faulted
  partitions out of the request, rewrite the response, delay or throttle it;
* with an authorizer (``authorizer.class.name``), checks what the request needs
  (``kaflite.cluster.acl``): refuses it, or takes out what the caller may not
  touch and rewrites the response;
* records the request in the connection registry (``observe.record_request``):
  latency, error codes at every level, roles.

On a SASL listener a connection carries a ``SaslSession`` (kaflite.cluster.auth):
until it has authenticated, only ApiVersions, SaslHandshake and SaslAuthenticate
are served and anything else closes it; once its session lifetime
(``connections.max.reauth.ms``, KIP-368) has passed, only a re-authentication
is. After SaslHandshake v0 the SASL tokens come bare, without SaslAuthenticate
around them, as Kafka's first SASL clients send them. On an SSL listener the
principal is the client certificate's subject.

A connection with no traffic for ``connections.max.idle.ms`` is closed, as
Kafka's selector closes idle channels; its client reconnects when it needs to.

Memory: a frame's buffer grows only as its bytes arrive (``FrameDecoder``), what
a connection holds (its partial frame and its queued requests) is charged to
the broker's ``RequestMemory`` (``queued.max.request.bytes``), which pauses
reading while it is full, and a closed connection lets go of its buffers at
once, without waiting for a garbage collection.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections import deque
from typing import TYPE_CHECKING, Any, cast

from kaflite.cluster.acl import check as acl_check
from kaflite.cluster.auth import BrokerCredentials, SaslSession
from kaflite.cluster.observe import ApiStats, ConnectionRecord, record_request
from kaflite.cluster.quotas.enforce import after_request
from kaflite.cluster.request_log import Touched, group_mark
from kaflite.protocol import (
    FrameDecoder,
    ProtocolError,
    RemoteProtocolError,
    encode_response,
    errors,
)
from kaflite.protocol.framing import Frame, peek_request, read_request_header
from kaflite.protocol.headers import RequestHeader
from kaflite.protocol.messages import (
    REGISTRY,
    ApiVersionsRequest,
    ApiVersionsResponse,
    FetchRequest,
    ListOffsetsRequest,
    Struct,
)
from kaflite.protocol.messages._generated.api_versions_response import ApiVersion
from kaflite.security.errors import IllegalSaslState, SaslAuthenticationFailed
from kaflite.security.tls import principal_from_peer_cert

if TYPE_CHECKING:
    from kaflite.cluster._inject import RequestPlan
    from kaflite.cluster.broker import Broker
    from kaflite.cluster.listeners import ListenerSpec

__all__ = ["ApiStats", "ConnectionRecord", "ServerConnection"]

log = logging.getLogger("kaflite.cluster.network")

FETCH, LIST_OFFSETS, API_VERSIONS = (FetchRequest.API_KEY, ListOffsetsRequest.API_KEY,
                                     ApiVersionsRequest.API_KEY)
UNSUPPORTED_VERSION = errors.UnsupportedVersionError.code
# Closed connections stay visible to the registry for a while (the latest ones).

# The first version of each API whose clients throttle themselves from
# throttle_time_ms (KIP-219): the broker answers at once and then mutes the
# channel. Before it, the broker held the response back for the throttle time.
KIP219_VERSION = {0: 6, 1: 8, 2: 3, 3: 6, 8: 4, 9: 4, 10: 2, 11: 3, 12: 2, 13: 2, 14: 2,
                  15: 2, 16: 2, 18: 2, 19: 3, 20: 2, 21: 1, 22: 1, 23: 3, 32: 2}


# How long after a throttled response a request may still arrive without its
# client having ignored the throttle (it was on its way before the client read it).
MUTE_GRACE = 0.05


def _replica_id(api_key: int, version: int, body: Any) -> int:
    """The replica id a follower's Fetch (or ListOffsets) carries; -1 for clients."""
    if api_key == FETCH and version >= 15:
        return int(body.replica_state.replica_id)
    if api_key in (FETCH, LIST_OFFSETS):
        return int(getattr(body, "replica_id", -1))
    return -1


class ServerConnection(asyncio.BufferedProtocol):
    _ids = 0

    def __init__(self, broker: Broker, listener: ListenerSpec | None = None) -> None:
        self.broker = broker
        self.listener = listener if listener is not None else broker.listeners[0]
        self.decoder = FrameDecoder(broker.config.int("socket.request.max.bytes"))
        self.transport: asyncio.Transport | None = None
        self.queue: deque[Frame] = deque()
        self.wakeup = asyncio.Event()
        self.worker: asyncio.Task[None] | None = None
        ServerConnection._ids += 1
        self.info = ConnectionRecord(ServerConnection._ids, broker.node_id, "?",
                                     listener=self.listener.name,
                                     security_protocol=self.listener.security_protocol)
        self.closed = False
        # the peer closed while requests it sent were read and not yet answered: they are
        # still handled (as Kafka's request handlers finish what its socket server read),
        # their responses dropped; the broker's own abort cancels them
        self.draining = False
        self.handling = False
        self.idle_ms = broker.config.int("connections.max.idle.ms")
        self.queued_bytes = 0   # of the complete frames not yet handled
        self.sasl = (SaslSession(BrokerCredentials(broker.controller, broker.config.props,
                                                   self.listener.name),
                                 broker.config.props, self.listener.name)
                     if self.listener.sasl else None)
        # set by a handler whose response must be the last (a failed authentication)
        self.close_after_response = False
        # -- client quotas (kaflite.cluster.quotas) --
        self.quota_throttle_ms = 0      # set by a handler that throttles (Fetch, mutations)
        self.handler_started = 0.0      # perf_counter() when the handler was called
        self.waited_s = 0.0             # long-poll time of the handler, not counted as work
        self.muted_since = self.muted_until = 0.0   # monotonic: the channel's last mute

    # -- asyncio callbacks ------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses; both fit.
        self.transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        self.info.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        if self.listener.security_protocol == "SSL":
            self.info.principal = principal_from_peer_cert(transport.get_extra_info("peercert"))
        self.broker.connections[self.info.connection_id] = self
        self.worker = asyncio.get_running_loop().create_task(self._work())

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.decoder.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        self.info.bytes_in += nbytes
        self.info.last_activity = time.time()
        try:
            frames = self.decoder.buffer_updated(nbytes)
        except ProtocolError as exc:
            self._reject(f"bad frame: {exc}")
            return
        if frames:
            if self.muted_until:
                self._arrived_while_muted(len(frames))
            self.queue.extend(frames)
            self.queued_bytes += sum(map(len, frames))
            self.wakeup.set()
        self.broker.request_memory.update(self, self.decoder.held + self.queued_bytes)

    def pause_reading(self) -> None:
        if self.transport is not None and not self.closed:
            self.transport.pause_reading()

    def resume_reading(self) -> None:
        if self.transport is not None and not self.closed:
            self.transport.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        by_peer = not self.closed
        self.closed = True
        self.decoder.close()
        if self.broker.connections.pop(self.info.connection_id, None) is not None:
            self.info.closed_at = time.time()
            self.info.history.closed_by = ("client" if by_peer else
                                           "broker" if self.broker.running else "broker down")
            self.broker.closed_connections.append(self.info)
        worker = self.worker
        if by_peer and self.broker.running and worker is not None and not worker.done() \
                and (self.handling or self.queue):
            # A LeaveGroup or commit sent just before the client closed still takes effect.
            self.draining = True
            self.broker.draining.add(self)
            self.wakeup.set()
            worker.add_done_callback(lambda _: self._released())
            return
        self.queue.clear()
        self._released()
        if worker is not None:
            worker.cancel()

    def _released(self) -> None:
        """The connection's last request is done: what it held is given back."""
        self.draining = False
        self.broker.draining.discard(self)
        self.broker.request_memory.forget(self)
        if self.broker.share is not None and self.broker.running:
            self.broker.share.connection_closed(self.info.connection_id)

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def _forget_injected_member(self, body: Any) -> None:
        """An injected UNKNOWN_MEMBER_ID: the coordinator drops the member too, as Kafka
        has whenever it answers so (the fault is otherwise a state Kafka never reaches)."""
        group_id, member_id = getattr(body, "group_id", None), getattr(body, "member_id", None)
        groups = self.broker.groups
        if isinstance(group_id, str) and isinstance(member_id, str) and member_id \
                and groups is not None:
            with contextlib.suppress(errors.KafkaError):
                groups.forget_member(group_id, member_id)

    def abort(self) -> None:
        self.closed = True
        if self.draining and self.worker is not None:   # the transport is gone already
            self.queue.clear()
            self.worker.cancel()
        if self.transport is not None:
            self.transport.abort()

    def _reject(self, why: str) -> None:
        self.broker.log_bad_input(self.info.peer, why)
        self.abort()

    # -- request processing ---------------------------------------------------------
    async def _work(self) -> None:
        while not self.closed or self.draining:
            if not self.queue:
                if self.draining:
                    return
                self.wakeup.clear()
                if not await self._wait_or_idle():
                    log.debug("broker %s: closing idle connection from %s",
                              self.broker.node_id, self.info.peer)
                    self.close()
                    return
                continue
            frame = self.queue.popleft()
            self.handling = True
            try:
                await self._handle(frame)
                self.queued_bytes -= len(frame)
                del frame
                self.broker.request_memory.update(self, self.decoder.held + self.queued_bytes)
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
            finally:
                self.handling = False

    async def _wait_or_idle(self) -> bool:
        """Wait for a request; False once the connection has been idle too long."""
        while True:
            idle_left = self.idle_ms / 1000 - (time.time() - self.info.last_activity)
            if idle_left <= 0:
                return False
            try:
                await asyncio.wait_for(self.wakeup.wait(), idle_left)
                return True
            except TimeoutError:
                continue

    async def _handle(self, frame: Frame) -> None:
        if self.sasl is not None and self.sasl.raw:
            self._raw_sasl_token(frame)
            return
        started = time.perf_counter()
        api_key, version, correlation_id = peek_request(frame)
        info = REGISTRY.get(api_key)
        handler = self.broker.handlers.get(api_key)
        if info is None or handler is None:
            self._reject(f"unknown or unsupported API key {api_key}")
            return
        if self.sasl is not None and (why := self.sasl.refuse(api_key, info.name)):
            self._reject(why)
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
        replica = _replica_id(api_key, version, body)
        if replica >= 0:
            self.info.replica_id = replica
        faults = self.broker.faults
        plan: RequestPlan | None = None
        if faults is not None and faults.active:
            plan = faults.plan(self.broker.node_id, header.client_id,
                               self.info.replica, api_key, version, body,
                               self._resolve)
        if plan is not None and plan.drop:
            record_request(self.info, api_key, version, body, None, 0.0)
            self.abort()
            return
        if plan is not None and plan.forgets_member:
            self._forget_injected_member(body)
        self.quota_throttle_ms, self.waited_s = 0, 0.0
        self.handler_started = time.perf_counter()
        gate = None if self.broker.authorizer is None else \
            acl_check(self.broker, self, api_key, version, body)
        if plan is not None and plan.response is not None:
            response: Struct | None = plan.response
        elif gate is not None and gate.response is not None:
            response = gate.response      # refused by the authorizer (kaflite.cluster.acl)
        else:
            response = await handler.handle(self.broker, self, header, body)
            if gate is not None and response is not None:
                gate.finish(response, version)
            if plan is not None and faults is not None and response is not None:
                response = faults.finish(plan, api_key, version, body, response,
                                         self._resolve, self._session_partitions)
        quota_ms = max(self.quota_throttle_ms, after_request(
            self.broker.quotas, self.info, api_key, header.client_id, len(frame),
            time.perf_counter() - self.handler_started - self.waited_s))
        if plan is not None and plan.delay_ms:
            await asyncio.sleep(plan.delay_ms / 1000)
        throttle_ms = given_throttle_ms = max(plan.throttle_ms if plan is not None else 0,
                                              quota_ms)
        if throttle_ms:
            self.info.throttled(throttle_ms)
        if throttle_ms and response is not None:
            if hasattr(response, "throttle_time_ms"):
                response.throttle_time_ms = max(response.throttle_time_ms, throttle_ms)
            if version < KIP219_VERSION.get(api_key, 0):
                await asyncio.sleep(throttle_ms / 1000)  # pre-KIP-219: hold the response
                throttle_ms = 0
        if throttle_ms:   # KIP-219: the mute starts as the response goes out
            self.muted_since = time.monotonic()
            self.muted_until = self.muted_since + throttle_ms / 1000
        if response is not None and not self.closed:
            self._send(api_key, version, correlation_id, response)
        if self.close_after_response:
            self.close()
        elapsed = (time.perf_counter() - started) * 1000
        self.broker.metrics.request(api_key, version, elapsed, self.info.replica)
        request_log = self.broker.request_log
        if request_log is None:
            record_request(self.info, api_key, version, body, response, elapsed, self._resolve)
        else:   # the same walk collects what the request log's record needs
            touched: Touched = []
            record_request(self.info, api_key, version, body, response, elapsed, self._resolve,
                           touched)
            request_log.record(self.info, api_key, version, elapsed, given_throttle_ms,
                               touched, group_mark(api_key, body, response))
        if throttle_ms:   # KIP-219: mute the channel
            await asyncio.sleep(max(self.muted_until - time.monotonic(), 0.0))

    def _arrived_while_muted(self, n: int) -> None:
        """Count requests a client sent although it had been told to wait.

        A request that arrives within ``MUTE_GRACE`` of the throttled response may
        have been sent before the client read it; later ones were not."""
        now = time.monotonic()
        if self.muted_since + MUTE_GRACE <= now < self.muted_until:
            self.info.requests_while_muted += n

    def _raw_sasl_token(self, frame: Frame) -> None:
        """A bare SASL token (after SaslHandshake v0); the reply goes back size-prefixed."""
        assert self.sasl is not None
        before = self.sasl.authentications
        try:
            reply, _ = self.sasl.authenticate(bytes(frame))
        except (SaslAuthenticationFailed, IllegalSaslState) as exc:
            self._reject(f"SASL authentication failed: {exc}")
            return
        if self.transport is not None and not self.closed:
            self.transport.write(len(reply).to_bytes(4, "big") + reply)
        if self.sasl.authentications > before:
            self.authenticated()

    def authenticated(self) -> None:
        """The SASL exchange completed: the registry learns who this is."""
        assert self.sasl is not None
        if self.info.authenticated_at is not None:
            self.info.reauthentications += 1
        self.info.principal = self.sasl.principal or self.info.principal
        self.info.sasl_mechanism = self.sasl.mechanism
        self.info.authenticated_at = time.time()
        self.info.session_expires_at = self.sasl.expires_at
        log.debug("broker %s: %s authenticated %s with %s", self.broker.node_id,
                  self.info.peer, self.info.principal, self.info.sasl_mechanism)

    def _resolve(self, topic_id: uuid.UUID) -> str | None:
        topic = self.broker.controller.topics_by_id.get(topic_id)
        return topic.name if topic is not None else None

    def _session_partitions(self, session_id: int) -> list[tuple[str, Any, int]]:
        """The partitions of a fetch session (KIP-227), for fault injection."""
        sessions = self.broker.fetch_sessions.sessions
        session = sessions.get(session_id) if session_id else None
        if session is None:
            return []
        return [(sp.topic, sp.topic_id, sp.partition) for sp in session.partitions.values()]

    def _send(self, api_key: int, version: int, correlation_id: int, body: Struct) -> None:
        if self.transport is None or self.closed:
            return
        chunks = encode_response(api_key, version, correlation_id, body)
        self.info.bytes_out += sum(len(c) for c in chunks)
        self.info.last_activity = time.time()
        self.transport.writelines(chunks)


def api_versions_error_body(ranges: dict[int, tuple[int, int]]) -> ApiVersionsResponse:
    return ApiVersionsResponse(
        error_code=UNSUPPORTED_VERSION,
        api_keys=[ApiVersion(k, lo, hi) for k, (lo, hi) in sorted(ranges.items())
                  if k == API_VERSIONS],
    )


__all__ += ["RequestHeader", "api_versions_error_body"]
