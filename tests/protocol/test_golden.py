"""Golden bytes: frames captured from real clients and a real broker round-trip exactly.

The fixtures in ``golden/`` were recorded by ``tools/capture_golden.py``: a proxy
between confluent-kafka (librdkafka), kafka-python, aiokafka and a Tansu broker.
Each ``.bin`` is one Kafka frame without its 4-byte size prefix (header + body);
``golden/index.json`` says which API, version, direction and client it is.

For every fixture the codec must decode the header and the body, consume every
byte, and write the same bytes back. A handful of tests then check that the
decoded values mean what the clients sent (topic names, group ids, the client
software name of KIP-511), so a codec that round-trips by accident (say, by
reading a field into the wrong slot and writing it back from there) still fails.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from kaflite.protocol.errors import RemoteProtocolError
from kaflite.protocol.headers import (
    RequestHeader,
    ResponseHeader,
    request_header_version,
    response_header_version,
)
from kaflite.protocol.messages import REGISTRY
from kaflite.protocol.primitives import Reader, Writer

GOLDEN = Path(__file__).parent / "golden"
FIXTURES = sorted(p.name for p in GOLDEN.glob("*.bin"))
CLIENTS = ("confluent", "kafkapython", "aiokafka")
API_VERSIONS = 18

# KIP-511 ClientSoftwareName each client sends in ApiVersions v3+.
SOFTWARE_NAMES = {
    "confluent": {"confluent-kafka-python", "librdkafka"},
    "kafkapython": {"kafka-python"},
    "aiokafka": {"aiokafka"},
}

# What each client's session must have produced (see tools/capture_golden.py):
# bootstrap, a topic, a produce, and a full classic consumer-group round.
CORE_APIS = {
    "api_versions", "metadata", "create_topics", "produce", "fetch", "list_offsets",
    "find_coordinator", "join_group", "sync_group", "heartbeat", "offset_commit",
    "offset_fetch", "leave_group",
}  # fmt: skip


@cache
def index() -> dict[str, dict[str, Any]]:
    data = json.loads((GOLDEN / "index.json").read_text())
    return {entry["file"]: entry for entry in data["fixtures"]}


class Decoded(NamedTuple):
    entry: dict[str, Any]
    frame: bytes
    header: Any
    header_version: int
    header_size: int
    body: Any
    version: int


def _hex_around(data: bytes, offset: int, width: int = 8) -> str:
    lo = max(0, offset - width)
    return f"[{lo}:{offset + width}] {data[lo : offset + width].hex(' ')}"


def decode(name: str) -> Decoded:
    """Decode a fixture's header and body with the versions from the index."""
    entry = index().get(name)
    assert entry is not None, f"{name} is not listed in golden/index.json"
    frame = (GOLDEN / name).read_bytes()
    api_key, version = entry["api_key"], entry["api_version"]
    info = REGISTRY.get(api_key)
    assert info is not None, f"{name}: api key {api_key} is not in REGISTRY"
    r = Reader(frame)
    if entry["direction"] == "request":
        hv = request_header_version(api_key, version)
        header_cls: Any = RequestHeader
        body_cls: Any = info.request
    else:
        hv = response_header_version(api_key, entry.get("request_api_version", version))
        header_cls, body_cls = ResponseHeader, info.response
    try:
        header = header_cls.read(r, hv)
        header_size = r.pos
        body = body_cls.read(r, version)
    except RemoteProtocolError as exc:
        pytest.fail(
            f"{name}: decoding {body_cls.__name__} v{version} (header v{hv}) failed "
            f"at byte {r.pos} of {len(frame)}: {exc}\n  {_hex_around(frame, r.pos)}"
        )
    assert r.at_end(), (
        f"{name}: {r.remaining()} bytes left after {body_cls.__name__} v{version} "
        f"(header v{hv}, {header_size} B): {_hex_around(frame, r.pos)}"
    )
    return Decoded(entry, frame, header, hv, header_size, body, version)


def _first_difference(a: bytes, b: bytes) -> int:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return min(len(a), len(b))


def _fixture_params() -> list[Any]:
    if not FIXTURES:
        return [pytest.param(None, id="no-fixtures")]
    return FIXTURES


def _matching(api: str, direction: str) -> list[str]:
    return [n for n in FIXTURES if n.startswith(f"{api}_{direction}_v")]


# ---------------------------------------------------------------------------- round trip


@pytest.mark.parametrize("name", _fixture_params())
def test_round_trip_is_byte_identical(name: str | None) -> None:
    if name is None:
        pytest.skip(f"no golden fixtures in {GOLDEN}")
    d = decode(name)
    w = Writer()
    d.header.write(w, d.header_version)
    header_out = len(w)
    d.body.write(w, d.version)
    out = w.getvalue()
    if out != d.frame:
        at = _first_difference(out, d.frame)
        part = "header" if at < d.header_size else f"body (byte {at - d.header_size})"
        # Same values, other bytes: the sender chose an encoding the codec does not
        # reproduce (say, default-valued tagged fields written out explicitly).
        try:
            same = type(d.body).decode(out[header_out:], d.version)
            hint = "decoded values equal" if same == d.body else "decoded values differ"
        except RemoteProtocolError as exc:
            hint = f"re-encoded body does not decode: {exc}"
        pytest.fail(
            f"{name}: re-encoded {len(out)} B vs {len(d.frame)} B captured; first difference "
            f"at byte {at}, in the {part}; {hint}\n  captured {_hex_around(d.frame, at)}\n"
            f"  encoded  {_hex_around(out, at)}"
        )


@pytest.mark.parametrize("name", _fixture_params())
def test_body_decode_encode_api(name: str | None) -> None:
    """``cls.decode`` takes the whole body and ``encode`` gives it back."""
    if name is None:
        pytest.skip(f"no golden fixtures in {GOLDEN}")
    d = decode(name)
    body_bytes = d.frame[d.header_size :]
    again = type(d.body).decode(body_bytes, d.version)
    assert again == d.body
    assert again.encode(d.version) == body_bytes
    # One byte more than the body is a protocol error, not a silent success.
    with pytest.raises(RemoteProtocolError):
        type(d.body).decode(body_bytes + b"\x00", d.version)


@pytest.mark.parametrize("name", _fixture_params())
def test_header_matches_index(name: str | None) -> None:
    if name is None:
        pytest.skip(f"no golden fixtures in {GOLDEN}")
    d = decode(name)
    if d.entry["direction"] == "request":
        assert d.header.request_api_key == d.entry["api_key"]
        assert d.header.request_api_version == d.entry["api_version"]
        assert d.header.client_id == f"golden-{d.entry['client']}"
    else:
        assert d.header.correlation_id >= 0
    if d.entry["api_key"] == API_VERSIONS and d.entry["direction"] == "response":
        assert d.header_version == 0  # KIP-511: always header v0


def test_api_versions_response_header_is_always_v0() -> None:
    for v in range(REGISTRY[API_VERSIONS].min_version, REGISTRY[API_VERSIONS].max_version + 1):
        assert response_header_version(API_VERSIONS, v) == 0


# ---------------------------------------------------------------------------- fixture set


def test_every_client_covers_the_core_apis() -> None:
    if not FIXTURES:
        pytest.skip(f"no golden fixtures in {GOLDEN}")
    for client in CLIENTS:
        apis = {e["api_name"] for e in index().values() if e["client"] == client}
        assert apis >= CORE_APIS, f"{client} is missing {sorted(CORE_APIS - apis)}"
    responded = {e["api_name"] for e in index().values() if e["direction"] == "response"}
    assert responded >= CORE_APIS, f"no responses for {sorted(CORE_APIS - responded)}"


def test_index_lists_exactly_the_files() -> None:
    if not FIXTURES:
        pytest.skip(f"no golden fixtures in {GOLDEN}")
    assert sorted(index()) == FIXTURES
    for name, e in index().items():
        assert name == f"{e['api_name']}_{e['direction']}_v{e['api_version']}_{e['client']}.bin"
        assert REGISTRY[e["api_key"]].min_version <= e["api_version"]
        assert e["api_version"] <= REGISTRY[e["api_key"]].max_version
        assert (e["client"] == "tansu") == (e["direction"] == "response")


# ---------------------------------------------------------------------------- meaning


def semantic(api: str, direction: str) -> Callable[[Callable[..., None]], Any]:
    """Parametrize a check over every fixture of one API and direction."""
    names = _matching(api, direction)
    return pytest.mark.parametrize("name", names or [pytest.param(None, id="none")])


def _need(name: str | None) -> Decoded:
    if name is None:
        if not FIXTURES:
            pytest.skip(f"no golden fixtures in {GOLDEN}")
        pytest.fail("no fixture of this kind was captured")
    return decode(name)


def _topic(client: str) -> str:
    return f"golden-{client}"


def _group(client: str) -> str:
    return f"golden-{client}-group"


@semantic("api_versions", "request")
def test_api_versions_request_names_the_client(name: str | None) -> None:
    d = _need(name)
    if d.version < 3:
        assert d.body.client_software_name == ""  # not on the wire before v3
        return
    assert d.body.client_software_name in SOFTWARE_NAMES[d.entry["client"]]
    assert d.body.client_software_version


@semantic("api_versions", "response")
def test_api_versions_response_lists_the_core_apis(name: str | None) -> None:
    body = _need(name).body
    assert body.error_code == 0
    keys = {k.api_key for k in body.api_keys}
    assert {0, 1, 3, 10, 11, 12, 14, 18} <= keys


@semantic("metadata", "response")
def test_metadata_response_lists_the_broker_and_topics(name: str | None) -> None:
    body = _need(name).body
    assert [b.host for b in body.brokers] == ["127.0.0.1"]
    names = {t.name for t in body.topics}
    assert any(n and n.startswith("golden-") for n in names), names


@semantic("create_topics", "request")
def test_create_topics_request_names_the_topic(name: str | None) -> None:
    d = _need(name)
    topics = {t.name: t for t in d.body.topics}
    assert set(topics) & {_topic(d.entry["client"]), _topic(d.entry["client"]) + "-tmp"}


@semantic("produce", "request")
def test_produce_request_carries_keyed_records(name: str | None) -> None:
    d = _need(name)
    [topic] = d.body.topic_data
    assert topic.name == _topic(d.entry["client"])
    batches = [bytes(p.records) for p in topic.partition_data if p.records is not None]
    assert batches
    for raw in batches:
        assert raw[16] == 2  # record batch magic (offset 8 + length 4 + epoch 4)
    joined = b"".join(batches)
    assert b"key-" in joined and b"value-" in joined and b"trace" in joined


@semantic("fetch", "response")
def test_fetch_response_returns_the_records(name: str | None) -> None:
    d = _need(name)
    raws = [
        bytes(p.records)
        for t in d.body.responses
        for p in t.partitions
        if p.records is not None and len(p.records)
    ]
    assert raws, "the kept fetch response carries no records"
    assert all(raw[16] == 2 for raw in raws)
    assert b"value-" in b"".join(raws)


@semantic("find_coordinator", "request")
def test_find_coordinator_request_names_the_group(name: str | None) -> None:
    d = _need(name)
    keys = [d.body.key] if d.version < 4 else list(d.body.coordinator_keys)
    assert _group(d.entry["client"]) in keys or d.body.key_type == 1


@semantic("join_group", "request")
def test_join_group_request_is_a_consumer_join(name: str | None) -> None:
    d = _need(name)
    assert d.body.group_id == _group(d.entry["client"])
    assert d.body.protocol_type == "consumer"
    assert d.body.protocols and all(p.name for p in d.body.protocols)


@semantic("offset_commit", "request")
def test_offset_commit_request_commits_the_topic(name: str | None) -> None:
    d = _need(name)
    assert d.body.group_id == _group(d.entry["client"])
    assert {t.name for t in d.body.topics} == {_topic(d.entry["client"])}
    offsets = [p.committed_offset for t in d.body.topics for p in t.partitions]
    assert offsets and all(o >= 0 for o in offsets)


@semantic("init_producer_id", "response")
def test_init_producer_id_response_grants_an_id(name: str | None) -> None:
    body = _need(name).body
    assert body.error_code == 0
    assert body.producer_id >= 0
