"""ApiVersions through the proxy, against a fake upstream that advertises more than
the codec knows: a known API is narrowed to the versions the codec decodes, an
API key the codec does not know is kept and its requests pass through as bytes,
SaslHandshake starts at v1, and a key the upstream never advertised closes the
connection. The proxy's answer leaves out the tagged fields that hold their
defaults (as Kafka writes it), which the fake sends as Tansu 0.6 does."""

from __future__ import annotations

import socket
import socketserver
import struct
import threading
from collections.abc import Iterator

import pytest

from kaflite.protocol import decode_response, encode_request, encode_response
from kaflite.protocol.messages import REGISTRY, ApiVersionsRequest, ApiVersionsResponse
from kaflite.protocol.messages._generated.api_versions_response import (
    ApiVersion,
    FinalizedFeatureKey,
    SupportedFeatureKey,
)
from kaflite.proxy import Proxy
from kaflite.proxy.versions import intersect

UNKNOWN = 999
ADVERTISED = [ApiVersion(api_key=3, min_version=0, max_version=99),    # Metadata, beyond us
              ApiVersion(api_key=17, min_version=0, max_version=1),    # SaslHandshake
              ApiVersion(api_key=18, min_version=0, max_version=4),    # ApiVersions
              ApiVersion(api_key=UNKNOWN, min_version=0, max_version=2)]
# Tansu 0.6 sends every ApiVersions v3 tag, defaults included: SupportedFeatures [],
# FinalizedFeaturesEpoch -1, FinalizedFeatures [], ZkMigrationReady false; 9 is unknown
DEFAULT_TAGS = ((0, b"\x01"), (1, b"\xff" * 8), (2, b"\x01"), (3, b"\x00"))
UNKNOWN_TAG = (9, b"kept")


def read_frame(sock: socket.socket) -> bytes:
    def exactly(n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("closed")
            out += chunk
        return out

    return exactly(struct.unpack(">i", exactly(4))[0])


class FakeBroker(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        sock: socket.socket = self.request
        try:
            while True:
                frame = read_frame(sock)
                key, version, corr = struct.unpack(">hhi", frame[:8])
                if key == 18:
                    body = ApiVersionsResponse(api_keys=list(ADVERTISED),
                                               unknown_tagged_fields=(*DEFAULT_TAGS, UNKNOWN_TAG))
                    sock.sendall(b"".join(bytes(c) for c in encode_response(18, version, corr,
                                                                            body)))
                elif key == UNKNOWN:
                    payload = struct.pack(">i", corr) + b"opaque answer"
                    sock.sendall(struct.pack(">i", len(payload)) + payload)
        except (ConnectionError, OSError):
            return


@pytest.fixture
def fake() -> Iterator[str]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), FakeBroker)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_api_versions_intersection_and_unknown_keys(fake: str) -> None:
    with Proxy(fake) as proxy:
        host, port = proxy.bootstrap_servers.split(":")
        sock = socket.create_connection((host, int(port)))
        sock.settimeout(10)
        try:
            sock.sendall(b"".join(bytes(c) for c in encode_request(
                18, 3, 1, "t", ApiVersionsRequest(client_software_name="t",
                                                  client_software_version="1"))))
            _, body = decode_response(read_frame(sock), 18, 3)
            assert isinstance(body, ApiVersionsResponse)
            got = {a.api_key: (a.min_version, a.max_version) for a in body.api_keys}
            assert got[3] == (0, REGISTRY[3].max_version)      # narrowed to the codec
            assert got[17] == (1, 1)                            # no v0 SASL handshake
            assert got[UNKNOWN] == (0, 2)                       # kept, passed as bytes
            # a request with the unknown key passes through; its answer comes back as is
            header = struct.pack(">hhih", UNKNOWN, 1, 2, 1) + b"t" + b"payload"
            sock.sendall(struct.pack(">i", len(header)) + header)
            assert read_frame(sock) == struct.pack(">i", 2) + b"opaque answer"
            # a key nobody advertised: the proxy closes the connection
            other = struct.pack(">hhih", 998, 0, 3, -1)
            sock.sendall(struct.pack(">i", len(other)) + other)
            assert sock.recv(1) == b""
        finally:
            sock.close()


def api_versions(address: str) -> tuple[ApiVersionsResponse, bytes]:
    host, port = address.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(b"".join(bytes(c) for c in encode_request(
            18, 3, 1, "t", ApiVersionsRequest(client_software_name="t",
                                              client_software_version="1"))))
        frame = read_frame(sock)
    _, body = decode_response(frame, 18, 3)
    assert isinstance(body, ApiVersionsResponse)
    return body, frame


def test_api_versions_answer_leaves_out_default_tags(fake: str) -> None:
    direct, direct_frame = api_versions(fake)
    assert direct.unknown_tagged_fields == (*DEFAULT_TAGS, UNKNOWN_TAG)
    assert b"\xff" * 8 in direct_frame
    with Proxy(fake) as proxy:
        body, frame = api_versions(proxy.bootstrap_servers)
    assert body.unknown_tagged_fields == (UNKNOWN_TAG,)
    assert body.finalized_features_epoch == -1 and not body.zk_migration_ready
    assert b"\xff" * 8 not in frame            # no eight-byte FinalizedFeaturesEpoch


def test_transaction_version_2_only_where_the_narrowed_versions_carry_it() -> None:
    """Kafka 4.4 finalizes transaction.version 2; the proxy's codec reads Produce only
    to v11, so a client told version 2 would send records to partitions it never
    added (Kafka's Java client then failed TRANSACTION_ABORTABLE through the proxy,
    tests/interop/test_conformance.py): the proxy says 1."""
    response = ApiVersionsResponse(
        api_keys=[ApiVersion(0, 3, 13), ApiVersion(26, 0, 5)],
        supported_features=[SupportedFeatureKey("transaction.version", 0, 2),
                            SupportedFeatureKey("metadata.version", 7, 33)],
        finalized_features=[FinalizedFeatureKey("transaction.version", 2, 2),
                            FinalizedFeatureKey("metadata.version", 33, 33)])
    intersect(response)
    produce = next(a for a in response.api_keys if a.api_key == 0)
    assert produce.max_version == REGISTRY[0].max_version
    if produce.max_version >= 12:   # the codec reads transactions v2: nothing to lower
        assert response.finalized_features[0].max_version_level == 2
        return
    assert [(f.name, f.min_version_level, f.max_version_level)
            for f in response.finalized_features] == [("transaction.version", 1, 1),
                                                      ("metadata.version", 33, 33)]
    assert [(f.name, f.min_version, f.max_version) for f in response.supported_features] \
        == [("transaction.version", 0, 1), ("metadata.version", 7, 33)]


def test_an_api_versions_the_proxy_cannot_read_is_answered_v0_unsupported(
        fake: str) -> None:
    """KIP-511: Kafka 4.4's Java client sends ApiVersions v5. Forwarded, its answer went
    through unread, the client saw the upstream's versions and its Metadata was never
    rewritten. The proxy answers v0 UNSUPPORTED_VERSION with the range it reads."""
    version = REGISTRY[18].max_version + 1
    with Proxy(fake) as proxy:
        host, port = proxy.bootstrap_servers.split(":")
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            # header v2 (client id "j", no tags), then two empty compact strings, no tags
            frame = struct.pack(">hhi", 18, version, 7) + b"\x00\x01j\x00" + b"\x01\x01\x00"
            sock.sendall(struct.pack(">i", len(frame)) + frame)
            _, body = decode_response(read_frame(sock), 18, 0)
    assert isinstance(body, ApiVersionsResponse)
    assert body.error_code == 35                                    # UNSUPPORTED_VERSION
    assert [(a.api_key, a.min_version, a.max_version) for a in body.api_keys] == \
        [(18, REGISTRY[18].min_version, REGISTRY[18].max_version)]
