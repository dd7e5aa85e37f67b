"""SASL on the sans-I/O client connection: handshake, rounds, failures and KIP-368."""

from __future__ import annotations

import pytest

from kaflite.protocol.connection import (
    AuthenticationError,
    ClientConnection,
    Failed,
    Outgoing,
    Ready,
    Reauthenticated,
    Response,
    SaslAuthenticationError,
    SaslMechanismError,
    SaslStateError,
)
from kaflite.protocol.errors import SaslAuthenticationFailedError
from kaflite.protocol.framing import decode_request, encode_response
from kaflite.protocol.messages import (
    REGISTRY,
    ApiVersionsResponse,
    MetadataRequest,
    MetadataResponse,
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
    Struct,
)
from kaflite.protocol.messages._generated import api_versions_response as avr

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36


class Scripted:
    """A two-round mechanism: sends "first", expects "challenge", sends "final",
    expects "ok" (as SCRAM's shape)."""

    mechanism = "SCRAM-SHA-256"

    def __init__(self) -> None:
        self.done = False
        self.seen: list[bytes] = []

    def start(self) -> bytes:
        return b"first"

    def respond(self, challenge: bytes) -> bytes | None:
        self.seen.append(challenge)
        if challenge == b"challenge":
            return b"final"
        if challenge == b"ok":
            self.done = True
            return None
        raise ValueError("bad server signature")

    @property
    def complete(self) -> bool:
        return self.done


def _answer(out: Outgoing, body: Struct) -> bytes:
    return b"".join(bytes(c) for c in encode_response(out.api_key, out.version,
                                                       out.correlation_id, body))


def _request(out: Outgoing) -> Struct:
    _, body = decode_request(b"".join(bytes(c) for c in out.chunks)[4:])
    return body


def _versions(handshake: int = 1) -> ApiVersionsResponse:
    keys = [avr.ApiVersion(k, REGISTRY[k].min_version, REGISTRY[k].max_version)
            for k in (18, 3, 36)]
    keys.append(avr.ApiVersion(SASL_HANDSHAKE, 0, handshake))
    return ApiVersionsResponse(error_code=0, api_keys=keys)


def _one(events: list[object]) -> object:
    assert len(events) == 1
    return events[0]


def _to_first_authenticate(conn: ClientConnection, sasl: Scripted) -> Outgoing:
    start = conn.start(sasl)
    hs = _one(conn.receive_data(_answer(start, _versions())))
    assert isinstance(hs, Outgoing) and (hs.api_key, hs.version) == (SASL_HANDSHAKE, 1)
    req = _request(hs)
    assert isinstance(req, SaslHandshakeRequest) and req.mechanism == "SCRAM-SHA-256"
    assert conn.authenticating and not conn.ready and not conn.can_send
    auth = _one(conn.receive_data(_answer(hs, SaslHandshakeResponse(0, ["SCRAM-SHA-256"]))))
    assert isinstance(auth, Outgoing) and (auth.api_key, auth.version) == (SASL_AUTHENTICATE, 2)
    first = _request(auth)
    assert isinstance(first, SaslAuthenticateRequest) and bytes(first.auth_bytes) == b"first"
    return auth


def _authenticated(conn: ClientConnection, lifetime_ms: int = 0) -> Scripted:
    sasl = Scripted()
    auth = _to_first_authenticate(conn, sasl)
    final = _one(conn.receive_data(_answer(auth, SaslAuthenticateResponse(
        auth_bytes=b"challenge"))))
    assert isinstance(final, Outgoing) and bytes(_request(final).auth_bytes) == b"final"  # type: ignore[attr-defined]
    ready = _one(conn.receive_data(_answer(final, SaslAuthenticateResponse(
        auth_bytes=b"ok", session_lifetime_ms=lifetime_ms))))
    assert isinstance(ready, Ready)
    assert ready.mechanism == "SCRAM-SHA-256" and ready.session_lifetime_ms == lifetime_ms
    return sasl


def test_apiversions_then_handshake_then_rounds_then_ready() -> None:
    conn = ClientConnection()
    sasl = _authenticated(conn)
    assert sasl.seen == [b"challenge", b"ok"]
    assert conn.ready and conn.authenticated and conn.can_send and not conn.authenticating
    assert conn.mechanism == "SCRAM-SHA-256" and conn.reauth_at is None
    assert not conn.reauth_due()


def test_wrong_password_is_an_authentication_error_with_the_brokers_message() -> None:
    conn = ClientConnection()
    auth = _to_first_authenticate(conn, Scripted())
    failed = _one(conn.receive_data(_answer(auth, SaslAuthenticateResponse(
        error_code=58, error_message="Authentication failed during authentication due "
                                     "to invalid credentials with SASL mechanism SCRAM-SHA-256"))))
    assert isinstance(failed, Failed)
    err = failed.error
    assert isinstance(err, SaslAuthenticationError)
    assert isinstance(err, SaslAuthenticationFailedError) and isinstance(err, AuthenticationError)
    assert err.code == 58 and "invalid credentials" in str(err)
    assert not conn.ready and conn.error is err


def test_mechanism_not_enabled_names_the_enabled_ones() -> None:
    conn = ClientConnection()
    start = conn.start(Scripted())
    hs = _one(conn.receive_data(_answer(start, _versions())))
    assert isinstance(hs, Outgoing)
    failed = _one(conn.receive_data(_answer(hs, SaslHandshakeResponse(33, ["PLAIN"]))))
    assert isinstance(failed, Failed) and isinstance(failed.error, SaslMechanismError)
    assert "SCRAM-SHA-256" in str(failed.error) and "enabled: PLAIN" in str(failed.error)


def test_a_bad_server_signature_fails_on_the_client() -> None:
    conn = ClientConnection()
    auth = _to_first_authenticate(conn, Scripted())
    failed = _one(conn.receive_data(_answer(auth, SaslAuthenticateResponse(
        auth_bytes=b"forged"))))
    assert isinstance(failed, Failed) and isinstance(failed.error, SaslAuthenticationError)
    assert "bad server signature" in str(failed.error)


def test_ending_before_the_final_message_is_verified_is_refused() -> None:
    class Lazy(Scripted):
        def respond(self, challenge: bytes) -> bytes | None:
            return None          # claims to be done, never verified anything

    conn = ClientConnection()
    auth = _to_first_authenticate(conn, Lazy())
    failed = _one(conn.receive_data(_answer(auth, SaslAuthenticateResponse(auth_bytes=b"x"))))
    assert isinstance(failed, Failed) and isinstance(failed.error, SaslStateError)


def test_a_broker_without_handshake_v1_is_refused() -> None:
    conn = ClientConnection()
    start = conn.start(Scripted())
    failed = _one(conn.receive_data(_answer(start, _versions(handshake=0))))
    assert isinstance(failed, Failed) and isinstance(failed.error, SaslMechanismError)


def test_reauthentication_point_is_85_to_95_percent_of_the_session() -> None:
    now = [100.0]
    picked: list[tuple[float, float]] = []

    def rng(lo: float, hi: float) -> float:
        picked.append((lo, hi))
        return 0.9

    conn = ClientConnection(clock=lambda: now[0], rng=rng)
    _authenticated(conn, lifetime_ms=10_000)
    assert picked == [(0.85, 0.95)]
    assert conn.reauth_at == pytest.approx(109.0)
    now[0] = 108.9
    assert not conn.reauth_due()
    now[0] = 109.0
    assert conn.reauth_due()


def test_reauthentication_keeps_responses_to_earlier_requests() -> None:
    now = [0.0]
    conn = ClientConnection(clock=lambda: now[0], rng=lambda lo, hi: lo)
    _authenticated(conn, lifetime_ms=1000)
    metadata = conn.send(MetadataRequest(topics=[]), 3, 12)
    now[0] = 0.9
    assert conn.reauth_due()
    sasl = Scripted()
    hs = conn.reauthenticate(sasl)
    assert hs.api_key == SASL_HANDSHAKE and conn.authenticating and not conn.can_send
    assert not conn.reauth_due()
    # the broker answers in order: the Metadata sent before, then the handshake
    data = _answer(metadata, MetadataResponse()) + _answer(
        hs, SaslHandshakeResponse(0, ["SCRAM-SHA-256"]))
    got = conn.receive_data(data)
    assert isinstance(got[0], Response) and got[0].correlation_id == metadata.correlation_id
    auth = got[1]
    assert isinstance(auth, Outgoing) and auth.api_key == SASL_AUTHENTICATE
    final = _one(conn.receive_data(_answer(auth, SaslAuthenticateResponse(
        auth_bytes=b"challenge"))))
    assert isinstance(final, Outgoing)
    done = _one(conn.receive_data(_answer(final, SaslAuthenticateResponse(
        auth_bytes=b"ok", session_lifetime_ms=2000))))
    assert isinstance(done, Reauthenticated) and done.session_lifetime_ms == 2000
    assert conn.reauth_count == 1 and conn.can_send and conn.reauth_at == pytest.approx(0.9 + 1.7)


def test_reauthenticate_needs_a_ready_idle_session() -> None:
    conn = ClientConnection()
    conn.start(Scripted())
    with pytest.raises(SaslStateError):
        conn.reauthenticate(Scripted())
