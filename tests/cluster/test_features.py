"""The feature levels (KIP-584) in kaflite's ApiVersions answers: what
``kafka-features describe`` and the Java clients read. Levels are fixed by what kaflite
implements; KIP-848 groups turned off take ``group.version`` out of the finalized ones."""

from __future__ import annotations

import socket
import struct

import pytest

from kaflite.cluster import Cluster
from kaflite.protocol import decode_response, encode_request
from kaflite.protocol.messages import ApiVersionsRequest, ApiVersionsResponse


def api_versions(port: int, version: int) -> ApiVersionsResponse:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"".join(encode_request(18, version, 1, "t", ApiVersionsRequest("t", "1"))))
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack_from(">i", data)[0]:
            chunk = s.recv(65536)
            assert chunk, "connection closed"
            data += chunk
    body = decode_response(data[4:], 18, version)[1]
    assert isinstance(body, ApiVersionsResponse)
    return body


@pytest.mark.parametrize("protocols", ["classic,consumer", "classic"])
def test_api_versions_v3_lists_the_feature_levels(protocols: str) -> None:
    with Cluster(brokers=1, config={"group.coordinator.rebalance.protocols": protocols}) as c:
        resp = api_versions(c.brokers[0].port, 3)
    supported = {f.name: (f.min_version, f.max_version) for f in resp.supported_features}
    finalized = {f.name: (f.min_version_level, f.max_version_level)
                 for f in resp.finalized_features}
    assert supported == {"group.version": (0, 1), "transaction.version": (0, 1)}
    assert resp.finalized_features_epoch == 0      # above -1: clients keep the levels
    expected = {"transaction.version": (1, 1)}
    if "consumer" in protocols:
        expected["group.version"] = (1, 1)
    assert finalized == expected


def test_api_versions_v2_has_no_features() -> None:
    with Cluster(brokers=1) as c:
        resp = api_versions(c.brokers[0].port, 2)
    assert resp.supported_features == [] and resp.finalized_features == []
