"""The protocol state of one client connection to a broker, sans I/O.

``ClientConnection`` knows Kafka's rules for a connection and nothing of
sockets, event loops or futures (as h11's ``Connection`` is for HTTP). The
transport hands it the bytes it receives and sends the bytes it gives back;
what happened comes out as events. ``kaflite.net.BrokerConnection`` is its
asyncio transport, and a test can drive it with plain bytes.

Theory of operation
-------------------
* **ApiVersions first.** ``start()`` gives the ApiVersions request at the newest
  version kaflite knows. A broker that does not know that version answers
  UNSUPPORTED_VERSION with a v0 body listing its own range (KIP-511); the
  connection then gives the same request again at the broker's newest version
  (an ``Outgoing`` event). A good answer is the ``Ready`` event, after which
  ``version_for`` picks, per API, the highest version both sides support.
* **Correlation ids.** ``send()`` numbers each request (wrapping at 2^31) and
  remembers its API and version, so that its response, matched by correlation
  id, is decoded at the right version. A response that matches nothing is a
  protocol error that ends the connection; so is the response to a request the
  caller gave up on (``abandon``), as Kafka's client closes a connection whose
  request timed out rather than read on.
* **In flight.** ``can_send`` is false while ``max_in_flight`` requests await
  their responses (``max.in.flight.requests.per.connection``). A Produce with
  acks=0 has no response and is never in flight.
* **Throttling (KIP-219).** A response with ``throttle_time_ms > 0`` sets a
  deadline before which the next request must not be sent;
  ``throttle_remaining()`` says how long that is.
* **Authentication.** ``start(sasl)`` with a SASL mechanism (an object that makes
  the mechanism's messages, such as ``kaflite.security.client_mechanism``'s) runs
  SaslHandshake v1 after ApiVersions, then SaslAuthenticate rounds (v2, or the
  broker's newest) until the mechanism has nothing more to say and has verified
  the broker's last message. Only then is the connection ``Ready``. A refusal
  ends the connection with an ``AuthenticationError`` carrying the broker's
  message: a wrong password is fatal, never retried as a network error.
* **Re-authentication (KIP-368).** The broker's ``session_lifetime_ms`` sets
  ``reauth_at``: a random point between 85 % and 95 % of the session, as Java's
  client picks. ``reauthenticate(sasl)`` then runs the same rounds on the open
  connection; responses to requests sent before still arrive and are matched as
  usual, and ``authenticating`` tells the transport to hold new requests until
  the ``Reauthenticated`` event.
* **Failure.** A frame that does not decode ends the connection: the
  ``Failed`` event names the request whose response it was, and ``closed()``
  hands back the correlation ids of every request still waiting.

Frames arrive through ``get_buffer``/``buffer_updated`` (shaped for asyncio's
``BufferedProtocol``, so a large response is written by the kernel straight into
its own buffer) or ``receive_data`` for plain bytes.
"""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from kaflite.protocol._exceptions import ProtocolError, RemoteProtocolError
from kaflite.protocol.errors import (
    IllegalSaslStateError,
    KafkaError,
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
    UnsupportedVersionError,
    error_for_code,
)
from kaflite.protocol.framing import (
    DEFAULT_MAX_FRAME_SIZE,
    Frame,
    FrameDecoder,
    decode_response,
    encode_request,
)
from kaflite.protocol.messages import (
    REGISTRY,
    ApiVersionsRequest,
    ApiVersionsResponse,
    ProduceRequest,
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
    Struct,
    TxnOffsetCommitRequest,
)
from kaflite.protocol.primitives import BytesLike

__all__ = [
    "AuthenticationError",
    "ClientConnection",
    "ConnectionStats",
    "Event",
    "Failed",
    "NoCommonVersion",
    "Outgoing",
    "Ready",
    "Reauthenticated",
    "Response",
    "SaslAuthenticationError",
    "SaslMechanism",
    "SaslMechanismError",
    "SaslStateError",
    "SslAuthenticationError",
]

API_VERSIONS = ApiVersionsRequest.API_KEY
PRODUCE = ProduceRequest.API_KEY
SASL_HANDSHAKE = SaslHandshakeRequest.API_KEY
SASL_AUTHENTICATE = SaslAuthenticateRequest.API_KEY
# The newest versions kaflite sends, where its codec reads and writes newer ones: Produce
# v13 and TxnOffsetCommit v6 name topics by id alone (KIP-516, KIP-1319), and kaflite's
# clients name them. Kafka 4.4's newer versions of the others (issue 38) are served by
# the broker; its clients keep to the versions below until they use what they add.
SENT_MAX = {
    PRODUCE: 12,
    TxnOffsetCommitRequest.API_KEY: 5,
    # v5 (the cluster and node the client means, KIP-1242) only to a cluster known to
    # serve it (``expect``): a broker that does not know v5 should answer it with
    # UNSUPPORTED_VERSION, and some (Tansu) close the connection instead
    API_VERSIONS: 4,
    1: 17,                  # Fetch v18: the follower's high watermark (KIP-1166)
    2: 10,                  # ListOffsets v11: earliest pending upload (KIP-1023)
    8: 9,                   # OffsetCommit v10: topics by id
    9: 9,                   # OffsetFetch v10: topics by id
    15: 5,                  # DescribeGroups v6: GROUP_ID_NOT_FOUND (KIP-1043)
    22: 5,                  # InitProducerId v6: two-phase commit (KIP-939)
    35: 4,                  # DescribeLogDirs v5: IsCordoned
    42: 2,                  # DeleteGroups v3: ErrorMessage
    45: 0,                  # AlterPartitionReassignments v1: AllowReplicationFactorChange
    60: 1,                  # DescribeCluster v2: fenced brokers (KIP-1073)
    66: 1,                  # ListTransactions v2: transactional id pattern (KIP-1152)
    69: 0,                  # ConsumerGroupDescribe v1: MemberType (KIP-1099)
}
# KIP-368: re-authenticate at a random point in this part of the session (Java's client)
REAUTH_WINDOW = (0.85, 0.95)


class SaslMechanism(Protocol):
    """The client side of one SASL exchange (``kaflite.security.sasl.SaslClient``)."""

    mechanism: str

    def start(self) -> bytes: ...

    def respond(self, challenge: bytes) -> bytes | None: ...

    @property
    def complete(self) -> bool: ...


class AuthenticationError(KafkaError):
    """The broker refused this client's credentials, or TLS could not be set up: fatal.

    As Java's ``AuthenticationException``, it is raised to the application rather
    than retried. The SASL subclasses are also the protocol's error of their code
    (``SaslAuthenticationFailedError`` and so on), with the broker's message."""


class SaslAuthenticationError(SaslAuthenticationFailedError, AuthenticationError):
    """SASL_AUTHENTICATION_FAILED: wrong credentials (or a broker that failed to prove
    it knows them, for SCRAM)."""


class SaslMechanismError(UnsupportedSaslMechanismError, AuthenticationError):
    """UNSUPPORTED_SASL_MECHANISM: the broker does not enable the configured mechanism."""


class SaslStateError(IllegalSaslStateError, AuthenticationError):
    """ILLEGAL_SASL_STATE: the exchange went out of order."""


class SslAuthenticationError(AuthenticationError):
    """The TLS handshake failed (an untrusted certificate, a host name mismatch...)."""

    name = "SSL_HANDSHAKE_FAILED"


_AUTH_ERRORS: dict[int, type[AuthenticationError]] = {
    SaslAuthenticationFailedError.code: SaslAuthenticationError,
    UnsupportedSaslMechanismError.code: SaslMechanismError,
    IllegalSaslStateError.code: SaslStateError,
}


def _auth_error(code: int, message: str) -> KafkaError:
    cls = _AUTH_ERRORS.get(code)
    return cls(message) if cls is not None else error_for_code(code, message)


class NoCommonVersion(KafkaError):
    """kaflite and the broker share no version of an API."""

    code = UnsupportedVersionError.code
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


@dataclass(frozen=True, slots=True)
class Outgoing:
    """A request to write: ``chunks`` in order (large payloads are not joined)."""

    correlation_id: int
    api_key: int
    version: int
    chunks: list[BytesLike]
    expects_response: bool


@dataclass(frozen=True, slots=True)
class Response:
    """The decoded response to request ``correlation_id``."""

    correlation_id: int
    api_key: int
    version: int
    body: Struct


@dataclass(frozen=True, slots=True)
class Ready:
    """ApiVersions (and authentication, if any) is done: ``api_versions`` holds the
    broker's range per API; ``mechanism`` the SASL mechanism used (None: none) and
    ``session_lifetime_ms`` the session the broker granted (0: unlimited)."""

    api_versions: dict[int, tuple[int, int]]
    mechanism: str | None = None
    session_lifetime_ms: int = 0


@dataclass(frozen=True, slots=True)
class Reauthenticated:
    """A KIP-368 re-authentication succeeded; the new session's lifetime."""

    mechanism: str
    session_lifetime_ms: int


@dataclass(frozen=True, slots=True)
class Failed:
    """The connection is broken; ``correlation_id`` names the request whose response
    failed to decode (None: no one request)."""

    error: Exception
    correlation_id: int | None = None


Event = Response | Ready | Reauthenticated | Failed | Outgoing


@dataclass(frozen=True, slots=True)
class _Awaiting:
    api_key: int
    version: int


class ClientConnection:
    """Kafka's rules for one client connection, driven by bytes in and events out."""

    def __init__(
        self,
        client_id: str | None = "kaflite",
        *,
        max_in_flight: int = 5,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        software: tuple[str, str] = ("kaflite", "0.1.0"),
        clock: Callable[[], float] = time.monotonic,
        rng: Callable[[float, float], float] = random.uniform,
    ) -> None:
        self.client_id = client_id
        self.max_in_flight = max_in_flight
        self.software = software
        self.decoder = FrameDecoder(max_frame_size)
        self.api_versions: dict[int, tuple[int, int]] = {}
        # the feature levels the cluster finalized (KIP-584), from ApiVersions v3+
        self.finalized_features: dict[str, int] = {}
        self.stats = ConnectionStats()
        self.ready = False
        self.error: Exception | None = None
        # clock() before which no request may be sent (KIP-219 throttling)
        self.throttled_until = 0.0
        self._clock = clock
        self._ids = itertools.count(1)
        self._awaiting: dict[int, _Awaiting] = {}
        self._negotiation: int | None = None   # the ApiVersions request's correlation id
        # (cluster id, node id) this connection means to reach, sent in ApiVersions v5
        # (KIP-1242) to a cluster whose brokers serve it; None: a bootstrap connection,
        # or the check is off
        self.expect: tuple[str, int] | None = None
        # -- SASL ------------------------------------------------------------------------
        self._rng = rng
        self._sasl: SaslMechanism | None = None    # the exchange under way
        self._auth_cid: int | None = None          # its request in flight
        self.mechanism: str | None = None          # the mechanism of the current session
        self.authenticated = False
        self.session_lifetime_ms = 0
        self.reauth_at: float | None = None        # clock() to re-authenticate at (KIP-368)
        self.reauth_count = 0
        self._last_lifetime = 0
        self.last_auth: float | None = None        # time.time() of the last authentication

    # -- state -------------------------------------------------------------------
    @property
    def in_flight(self) -> int:
        return len(self._awaiting)

    @property
    def can_send(self) -> bool:
        return (self.error is None and self._sasl is None
                and len(self._awaiting) < self.max_in_flight)

    @property
    def authenticating(self) -> bool:
        """A SASL exchange is under way: other requests must wait for its end."""
        return self._sasl is not None

    def reauth_due(self) -> bool:
        """KIP-368: the session should be renewed now."""
        return (self.reauth_at is not None and self._sasl is None and self.error is None
                and self._clock() >= self.reauth_at)

    def throttle_remaining(self) -> float:
        """Seconds to wait before the next request (0: none)."""
        return max(self.throttled_until - self._clock(), 0.0)

    def version_for(self, api_key: int) -> int:
        """The highest version of ``api_key`` that kaflite and the broker share."""
        info = REGISTRY[api_key]
        theirs = self.api_versions.get(api_key)
        if theirs is None:
            raise NoCommonVersion(f"the broker does not support {info.name}")
        top = min(info.max_version, theirs[1], SENT_MAX.get(api_key, info.max_version))
        if top < max(info.min_version, theirs[0]):
            raise NoCommonVersion(f"no common version of {info.name} with the broker")
        return top

    # -- sending -----------------------------------------------------------------
    def start(self, sasl: SaslMechanism | None = None) -> Outgoing:
        """The first request of every connection: ApiVersions at the newest kaflite sends.
        With ``sasl``, the connection authenticates with it before it is ready."""
        self._sasl = sasl
        return self._api_versions(5 if self.expect is not None else SENT_MAX[API_VERSIONS])

    def reauthenticate(self, sasl: SaslMechanism) -> Outgoing:
        """Start a KIP-368 re-authentication on this ready connection."""
        if self.error is not None:
            raise self.error
        if not self.ready or self._sasl is not None:
            raise SaslStateError("re-authentication needs an authenticated, idle session")
        self._sasl = sasl
        return self._handshake()

    def _api_versions(self, version: int) -> Outgoing:
        body = ApiVersionsRequest(*self.software)
        if self.expect is not None and version >= 5:
            body.cluster_id, body.node_id = self.expect
        out = self.send(body, API_VERSIONS, version)
        self._negotiation = out.correlation_id
        return out

    def send(self, body: Struct, api_key: int, version: int) -> Outgoing:
        """Encode a request; its response is awaited unless it is a Produce with acks=0."""
        if self.error is not None:
            raise self.error
        cid = next(self._ids) & 0x7FFFFFFF
        chunks = encode_request(api_key, version, cid, self.client_id, body)
        expects = not (api_key == PRODUCE and isinstance(body, ProduceRequest)
                       and body.acks == 0)
        if expects:
            self._awaiting[cid] = _Awaiting(api_key, version)
        stats = self.stats
        stats.requests += 1
        stats.requests_by_api[api_key] = stats.requests_by_api.get(api_key, 0) + 1
        stats.bytes_sent += sum(len(c) for c in chunks)
        stats.last_activity = time.time()
        return Outgoing(cid, api_key, version, chunks, expects)

    def abandon(self, correlation_id: int) -> None:
        """The caller no longer wants this response (timed out or cancelled)."""
        self._awaiting.pop(correlation_id, None)

    # -- receiving ---------------------------------------------------------------
    def get_buffer(self, sizehint: int) -> memoryview:
        return self.decoder.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> list[Event]:
        """``nbytes`` were written into the last ``get_buffer``: the events they make."""
        self.stats.bytes_received += nbytes
        try:
            frames = self.decoder.buffer_updated(nbytes)
        except ProtocolError as exc:
            return [self._fail(exc)]
        return self._on_frames(frames)

    def receive_data(self, data: BytesLike) -> list[Event]:
        """Plain bytes received (for callers without a BufferedProtocol)."""
        events: list[Event] = []
        view = memoryview(data)
        while view:
            buf = self.get_buffer(len(view))
            n = min(len(buf), len(view))
            buf[:n] = view[:n]
            view = view[n:]
            events += self.buffer_updated(n)
        return events

    def closed(self) -> list[int]:
        """The transport closed: the correlation ids still waiting for a response."""
        waiting = list(self._awaiting)
        self._awaiting.clear()
        self.decoder.close()
        return waiting

    def _on_frames(self, frames: list[Frame]) -> list[Event]:
        events: list[Event] = []
        for frame in frames:
            if self.error is not None:
                break
            events.append(self._on_frame(frame))
        return events

    def _on_frame(self, frame: Frame) -> Event:
        self.stats.last_activity = time.time()
        if len(frame) < 4:
            return self._fail(RemoteProtocolError("response frame shorter than its header"))
        cid = int.from_bytes(frame[:4], "big", signed=True)
        awaiting = self._awaiting.pop(cid, None)
        if awaiting is None:
            return self._fail(RemoteProtocolError(
                f"response with unknown correlation id {cid}"))
        try:
            if awaiting.api_key == API_VERSIONS:
                # A broker that rejects our ApiVersions version answers with v0.
                try:
                    _, body = decode_response(frame, API_VERSIONS, awaiting.version)
                except ProtocolError:
                    _, body = decode_response(frame, API_VERSIONS, 0)
            else:
                _, body = decode_response(frame, awaiting.api_key, awaiting.version)
        except ProtocolError as exc:
            return self._fail(exc, cid)
        throttle = getattr(body, "throttle_time_ms", 0)
        if throttle and throttle > 0:
            self.stats.throttled_ms += throttle
            self.throttled_until = max(self.throttled_until, self._clock() + throttle / 1000)
        if cid == self._negotiation and isinstance(body, ApiVersionsResponse):
            return self._negotiated(body, awaiting.version)
        if cid == self._auth_cid:
            self._auth_cid = None
            return self._on_auth(body)
        return Response(cid, awaiting.api_key, awaiting.version, body)

    def _negotiated(self, resp: ApiVersionsResponse, version: int) -> Event:
        self._negotiation = None
        ranges = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
        if resp.error_code == UnsupportedVersionError.code and API_VERSIONS in ranges:
            theirs = ranges[API_VERSIONS][1]
            if theirs < version:
                return self._api_versions(theirs)
        if resp.error_code:
            return self._fail(error_for_code(resp.error_code, "ApiVersions"))
        self.api_versions = ranges
        self.finalized_features = {f.name: f.max_version_level for f in resp.finalized_features}
        if self._sasl is not None:
            handshake = ranges.get(SASL_HANDSHAKE)
            if handshake is None or handshake[1] < 1 or SASL_AUTHENTICATE not in ranges:
                # v0 framed the exchange without Kafka headers (Kafka 4 dropped it)
                return self._fail(SaslMechanismError(
                    "the broker does not support SaslHandshake v1 and SaslAuthenticate"))
            return self._handshake()
        self.ready = True
        return Ready(ranges)

    # -- SASL ------------------------------------------------------------------------
    def _handshake(self) -> Outgoing:
        assert self._sasl is not None
        out = self.send(SaslHandshakeRequest(self._sasl.mechanism), SASL_HANDSHAKE, 1)
        self._auth_cid = out.correlation_id
        return out

    def _authenticate(self, data: bytes) -> Outgoing:
        out = self.send(SaslAuthenticateRequest(data), SASL_AUTHENTICATE,
                        self.version_for(SASL_AUTHENTICATE))
        self._auth_cid = out.correlation_id
        return out

    def _on_auth(self, body: Struct) -> Event:
        sasl = self._sasl
        assert sasl is not None
        if isinstance(body, SaslHandshakeResponse):
            if body.error_code:
                enabled = ", ".join(body.mechanisms) or "none"
                return self._fail(_auth_error(body.error_code, (
                    f"the broker does not enable SASL mechanism {sasl.mechanism} "
                    f"(enabled: {enabled})")))
            return self._step(sasl.start)
        assert isinstance(body, SaslAuthenticateResponse)
        if body.error_code:
            return self._fail(_auth_error(body.error_code, body.error_message
                                          or f"{sasl.mechanism} authentication failed"))
        self._last_lifetime = body.session_lifetime_ms
        challenge = bytes(body.auth_bytes)
        return self._step(lambda: sasl.respond(challenge))

    def _step(self, make: Callable[[], bytes | None]) -> Event:
        """The mechanism's next message, or the end of the exchange."""
        sasl = self._sasl
        assert sasl is not None
        try:
            data = make()
        except Exception as exc:  # the mechanism refused the broker's message
            return self._fail(SaslAuthenticationError(f"{sasl.mechanism}: {exc}"))
        if data is not None:
            return self._authenticate(data)
        if not sasl.complete:
            return self._fail(SaslStateError(
                f"{sasl.mechanism} ended before the broker's final message was verified"))
        return self._authenticated(sasl.mechanism)

    def _authenticated(self, mechanism: str) -> Event:
        lifetime = self._last_lifetime
        again = self.authenticated
        self._sasl = None
        self.mechanism = mechanism
        self.authenticated = True
        self.session_lifetime_ms = lifetime
        self.last_auth = time.time()
        self.reauth_at = (self._clock() + lifetime / 1000 * self._rng(*REAUTH_WINDOW)
                          if lifetime > 0 else None)
        if again:
            self.reauth_count += 1
            return Reauthenticated(mechanism, lifetime)
        self.ready = True
        return Ready(self.api_versions, mechanism, lifetime)

    def _fail(self, exc: Exception, correlation_id: int | None = None) -> Failed:
        if self.error is None:
            self.error = exc
        return Failed(exc, correlation_id)
