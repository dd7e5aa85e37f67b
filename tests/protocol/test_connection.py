"""The sans-I/O client connection, driven with plain bytes: no socket, no event loop."""

from __future__ import annotations

import pytest

from kaflite.protocol import RemoteProtocolError
from kaflite.protocol.connection import (
    ClientConnection,
    Failed,
    NoCommonVersion,
    Outgoing,
    Ready,
    Response,
)
from kaflite.protocol.framing import decode_request, encode_response
from kaflite.protocol.messages import (
    REGISTRY,
    ApiVersionsResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
)
from kaflite.protocol.messages._generated import api_versions_response as avr

API_VERSIONS = 18
METADATA = MetadataRequest.API_KEY


def _bytes(out: Outgoing) -> bytes:
    return b"".join(bytes(c) for c in out.chunks)


def _answer(out: Outgoing, body: object, version: int | None = None) -> bytes:
    v = out.version if version is None else version
    return b"".join(bytes(c) for c in encode_response(out.api_key, v, out.correlation_id,
                                                       body))  # type: ignore[arg-type]


def _ranges(**keys: tuple[int, int]) -> list[avr.ApiVersion]:
    return [avr.ApiVersion(REGISTRY_KEY[name], lo, hi) for name, (lo, hi) in keys.items()]


REGISTRY_KEY = {info.name: key for key, info in REGISTRY.items()}


def _ready(conn: ClientConnection, **keys: tuple[int, int]) -> None:
    start = conn.start()
    events = conn.receive_data(_answer(start, ApiVersionsResponse(
        error_code=0, api_keys=_ranges(**keys))))
    assert isinstance(events[0], Ready)


def test_apiversions_first_at_the_newest_version_kaflite_sends() -> None:
    """v4: v5's cluster and node check (KIP-1242) is the broker's; the client does not
    send them yet, so it stays at the version that has none."""
    conn = ClientConnection("me")
    out = conn.start()
    header, body = decode_request(_bytes(out)[4:])
    assert (header.request_api_key, header.request_api_version) == (API_VERSIONS, 4)
    assert REGISTRY[API_VERSIONS].max_version == 5
    assert header.client_id == "me" and header.correlation_id == out.correlation_id
    assert body.client_software_name == "kaflite"  # type: ignore[attr-defined]
    assert not conn.ready and conn.in_flight == 1


def test_kip511_fallback_repeats_apiversions_at_the_brokers_version() -> None:
    conn = ClientConnection()
    first = conn.start()
    # An older broker answers UNSUPPORTED_VERSION in a v0 body with its own range.
    [again] = conn.receive_data(_answer(first, ApiVersionsResponse(
        error_code=35, api_keys=_ranges(ApiVersions=(0, 2))), version=0))
    assert isinstance(again, Outgoing) and again.version == 2
    assert again.correlation_id != first.correlation_id
    [ready] = conn.receive_data(_answer(again, ApiVersionsResponse(
        error_code=0, api_keys=_ranges(ApiVersions=(0, 2), Metadata=(0, 9)))))
    assert isinstance(ready, Ready) and conn.ready
    assert conn.version_for(METADATA) == 9
    with pytest.raises(NoCommonVersion):
        conn.version_for(ProduceRequest.API_KEY)


def test_responses_are_matched_by_correlation_id_in_any_order() -> None:
    conn = ClientConnection()
    _ready(conn, Metadata=(0, 12))
    a = conn.send(MetadataRequest(topics=None), METADATA, 12)
    b = conn.send(MetadataRequest(topics=[]), METADATA, 1)
    assert conn.in_flight == 2
    events = conn.receive_data(_answer(b, MetadataResponse()) + _answer(a, MetadataResponse()))
    assert [(type(e), e.correlation_id, e.version) for e in events] == [  # type: ignore[union-attr]
        (Response, b.correlation_id, 1), (Response, a.correlation_id, 12)]
    assert conn.in_flight == 0


def test_bytes_may_arrive_one_at_a_time() -> None:
    conn = ClientConnection()
    _ready(conn, Metadata=(0, 12))
    out = conn.send(MetadataRequest(topics=None), METADATA, 12)
    data = _answer(out, MetadataResponse(cluster_id="c1"))
    events = [e for i in range(len(data)) for e in conn.receive_data(data[i:i + 1])]
    assert len(events) == 1 and isinstance(events[0], Response)
    assert events[0].body.cluster_id == "c1"  # type: ignore[attr-defined]


def test_an_unknown_correlation_id_fails_the_connection() -> None:
    conn = ClientConnection()
    _ready(conn, Metadata=(0, 12))
    out = conn.send(MetadataRequest(topics=None), METADATA, 12)
    conn.abandon(out.correlation_id)   # timed out: its late answer is not read on
    [failed] = conn.receive_data(_answer(out, MetadataResponse()))
    assert isinstance(failed, Failed) and isinstance(failed.error, RemoteProtocolError)
    assert not conn.can_send
    with pytest.raises(RemoteProtocolError):
        conn.send(MetadataRequest(topics=None), METADATA, 12)


def test_a_response_that_does_not_decode_names_its_request() -> None:
    conn = ClientConnection()
    _ready(conn, Metadata=(0, 12))
    out = conn.send(MetadataRequest(topics=None), METADATA, 12)
    waiting = conn.send(MetadataRequest(topics=None), METADATA, 12)
    frame = _answer(out, MetadataResponse())
    broken = (len(frame) - 4 - 2).to_bytes(4, "big") + frame[4:-2]
    [failed] = conn.receive_data(broken)
    assert isinstance(failed, Failed) and failed.correlation_id == out.correlation_id
    assert conn.closed() == [waiting.correlation_id]


def test_in_flight_limit_and_acks0_produce() -> None:
    conn = ClientConnection(max_in_flight=2)
    _ready(conn, Metadata=(0, 12), Produce=(3, 11))
    fire = conn.send(ProduceRequest(acks=0, timeout_ms=1000, topic_data=[]),
                     ProduceRequest.API_KEY, 9)
    assert not fire.expects_response and conn.in_flight == 0
    conn.send(MetadataRequest(topics=None), METADATA, 12)
    assert conn.can_send
    conn.send(MetadataRequest(topics=None), METADATA, 12)
    assert not conn.can_send and conn.in_flight == 2
    assert conn.stats.requests_by_api == {API_VERSIONS: 1, ProduceRequest.API_KEY: 1,
                                          METADATA: 2}


def test_a_throttled_response_sets_a_deadline() -> None:
    now = [100.0]
    conn = ClientConnection(clock=lambda: now[0])
    _ready(conn, Metadata=(0, 12))
    out = conn.send(MetadataRequest(topics=None), METADATA, 12)
    conn.receive_data(_answer(out, MetadataResponse(throttle_time_ms=250)))
    assert conn.throttle_remaining() == pytest.approx(0.25)
    now[0] += 0.2
    assert conn.throttle_remaining() == pytest.approx(0.05)
    now[0] += 0.1
    assert conn.throttle_remaining() == 0
    assert conn.stats.throttled_ms == 250


def test_apiversions_error_fails_the_connection() -> None:
    conn = ClientConnection()
    start = conn.start()
    [failed] = conn.receive_data(_answer(start, ApiVersionsResponse(error_code=1)))
    assert isinstance(failed, Failed) and not conn.ready
