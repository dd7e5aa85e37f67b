"""The feature levels (KIP-584): kaflite's ApiVersions answers (what ``kafka-features
describe`` and the Java clients read) and UpdateFeatures (``kafka-features
upgrade|downgrade``). A new cluster finalizes metadata.version, group.version 1 and
transaction.version 2; KIP-848 groups turned off by the broker's config take
``group.version`` out of the finalized ones; group.version 0 turns them off for all."""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from pathlib import Path
from typing import Any

import pytest

from kaflite.cluster import Cluster
from kaflite.cluster.handlers.update_features import ALL_FAILED, DESCRIPTION
from kaflite.cluster.metalog import METADATA_VERSION
from kaflite.net.connection import BrokerConnection
from kaflite.protocol import decode_response, encode_request, errors
from kaflite.protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    ConsumerGroupHeartbeatRequest,
    FindCoordinatorRequest,
    ShareGroupDescribeRequest,
    ShareGroupHeartbeatRequest,
    UpdateFeaturesRequest,
    UpdateFeaturesResponse,
)
from kaflite.protocol.messages import update_features_request as ufq


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
def test_api_versions_lists_the_feature_levels(protocols: str) -> None:
    with Cluster(brokers=1, config={"group.coordinator.rebalance.protocols": protocols}) as c:
        resp = api_versions(c.brokers[0].port, 4)
        v3 = api_versions(c.brokers[0].port, 3)
    supported = {f.name: (f.min_version, f.max_version) for f in resp.supported_features}
    finalized = {f.name: (f.min_version_level, f.max_version_level)
                 for f in resp.finalized_features}
    assert supported == {"group.version": (0, 1), "transaction.version": (0, 2),
                         "share.version": (0, 1), "kraft.version": (0, 0),
                         "streams.version": (0, 0),
                         "eligible.leader.replicas.version": (0, 0),
                         "metadata.version": (22, 33)}
    assert METADATA_VERSION == 33       # Kafka 4.4's latest production level, 4.4-IV2
    assert resp.finalized_features_epoch > 0      # above -1: clients keep the levels
    expected = {"transaction.version": (2, 2), "share.version": (1, 1),
                "metadata.version": (METADATA_VERSION, METADATA_VERSION)}
    if "consumer" in protocols:
        expected["group.version"] = (1, 1)
    assert finalized == expected
    # KIP-1022: before v4 a client cannot take a level 0, so Kafka leaves out every
    # feature whose supported range starts at 0 (the finalized ones stay)
    assert {f.name for f in v3.supported_features} == {"metadata.version"}
    assert {f.name: (f.min_version_level, f.max_version_level)
            for f in v3.finalized_features} == expected


def test_api_versions_v2_has_no_features() -> None:
    with Cluster(brokers=1) as c:
        resp = api_versions(c.brokers[0].port, 2)
    assert resp.supported_features == [] and resp.finalized_features == []


def update(port: int, version: int, *updates: tuple[str, int, int],
           validate_only: bool = False) -> UpdateFeaturesResponse:
    """UpdateFeatures of (feature, level, upgrade type) each."""
    req = UpdateFeaturesRequest(validate_only=validate_only, feature_updates=[
        ufq.FeatureUpdateKey(name, level, allow_downgrade=kind != 1 if version == 0 else False,
                             upgrade_type=kind if version > 0 else 1)
        for name, level, kind in updates])

    async def ask() -> UpdateFeaturesResponse:
        conn = await BrokerConnection("127.0.0.1", port).open()
        try:
            return await conn.request(req, version=version)
        finally:
            conn.close()
    return asyncio.run(ask())


def finalized_levels(port: int) -> dict[str, int]:
    return {f.name: f.max_version_level for f in api_versions(port, 3).finalized_features}


def test_group_version_goes_down_and_up_and_kip848_groups_follow(tmp_path: Path) -> None:
    invalid = errors.InvalidUpdateVersionError.code
    with Cluster(brokers=2, data_dir=tmp_path) as c:
        port = c.brokers[1].port
        before = api_versions(port, 3).finalized_features_epoch
        # a downgrade needs a downgrade type; a level kaflite lacks is refused; neither changes
        resp = update(port, 1, ("group.version", 0, 1), ("transaction.version", 3, 1),
                      ("no.such.feature", 1, 1))
        assert [(r.feature, r.error_code, r.error_message) for r in resp.results] == [
            ("group.version", invalid, DESCRIPTION), ("transaction.version", invalid, DESCRIPTION),
            ("no.such.feature", invalid, DESCRIPTION)]
        # the first failure fails the request, at the top level too (Kafka 4.4)
        assert resp.error_code == invalid
        assert (resp.error_message or "").startswith(ALL_FAILED + "Invalid update version 0 "
                                                     "for feature group.version.")
        assert "safe or unsafe downgrade" in (resp.error_message or "")
        # one change: a valid downgrade beside an unknown feature is not made either
        resp = update(port, 1, ("group.version", 0, 2), ("sarama.unsupported.feature", 1, 1))
        assert resp.error_code == invalid
        assert [r.error_code for r in resp.results] == [invalid, invalid]
        assert "sarama.unsupported.feature" in (resp.error_message or "")
        assert finalized_levels(port)["group.version"] == 1
        assert api_versions(port, 3).finalized_features_epoch == before
        # v2: the first failure at the top level
        resp = update(port, 2, ("group.version", 0, 1))
        assert resp.error_code == invalid and "group.version" in (resp.error_message or "")
        assert update(port, 1, ("group.version", 0, 2), validate_only=True).results[0] \
            .error_code == 0
        assert finalized_levels(port)["group.version"] == 1     # validate only: unchanged
        assert update(port, 1, ("group.version", 0, 2)).results[0].error_code == 0
        assert "group.version" not in finalized_levels(port)
        assert api_versions(port, 3).finalized_features_epoch > before
        assert heartbeat_error(c) == errors.UnsupportedVersionError.code
        # back up (v0: allow_downgrade false is an upgrade)
        assert update(port, 0, ("group.version", 1, 1)).results[0].error_code == 0
        assert finalized_levels(port)["group.version"] == 1
        assert heartbeat_error(c) == 0
        assert update(port, 1, ("group.version", 0, 3)).results[0].error_code == 0
    # the level is in the metadata log: a restarted cluster keeps it
    with Cluster(brokers=2, data_dir=tmp_path) as c:
        assert "group.version" not in finalized_levels(c.brokers[0].port)
        assert heartbeat_error(c) == errors.UnsupportedVersionError.code


def test_share_version_0_turns_share_groups_off(tmp_path: Path) -> None:
    with Cluster(brokers=1, data_dir=tmp_path) as c:
        port = c.brokers[0].port
        assert share_heartbeat_error(c) == 0
        assert update(port, 1, ("share.version", 2, 1)).results[0].error_code == \
            errors.InvalidUpdateVersionError.code     # level 2 (dead-letter queues): no
        assert update(port, 1, ("share.version", 0, 2)).results[0].error_code == 0
        assert "share.version" not in finalized_levels(port)
        assert share_heartbeat_error(c) == errors.UnsupportedVersionError.code
        assert share_describe_error(c) == errors.UnsupportedVersionError.code
        assert update(port, 1, ("kraft.version", 1, 1)).results[0].error_code == \
            errors.InvalidUpdateVersionError.code     # one static controller
    with Cluster(brokers=1, data_dir=tmp_path) as c:   # kept in the metadata log
        assert share_heartbeat_error(c) == errors.UnsupportedVersionError.code
        assert update(c.brokers[0].port, 1, ("share.version", 1, 1)).results[0] \
            .error_code == 0
        assert share_heartbeat_error(c) == 0


def test_metadata_version_goes_up_and_not_down_across_changed_metadata(tmp_path: Path) -> None:
    """kafka-features' upgrade --metadata and downgrade, as Kafka 4.4's controller answers
    them: a cluster an older kaflite formatted (at 22, 4.0-IV0) goes up; not down across
    a level whose metadata changed (23, 30, 32, 33), safe or unsafe; within levels that
    changed nothing, down too."""
    invalid = errors.InvalidUpdateVersionError.code
    with Cluster(brokers=1, data_dir=tmp_path) as c:
        port = c.brokers[0].port
        assert finalized_levels(port)["metadata.version"] == 33
        resp = update(port, 2, ("metadata.version", 32, 2))
        assert (resp.error_code, resp.error_message) == (invalid, (
            "Unsupported metadata.version downgrade from 33 to 32. Refusing to perform the "
            "requested downgrade because it might delete metadata information."))
        resp = update(port, 1, ("metadata.version", 29, 3))
        assert resp.error_message == (
            ALL_FAILED + "Unsupported metadata.version downgrade from 33 to 29. Unsafe "
            "metadata downgrade is not supported in this version.")
        assert [(r.error_code, r.error_message) for r in resp.results] == [(invalid, DESCRIPTION)]
        resp = update(port, 2, ("metadata.version", 34, 1))
        assert resp.error_message == ("Invalid update version 34 for feature metadata.version. "
                                      "kaflite supports levels 22 to 33 of this feature.")
        c.controller.set_feature("metadata.version", 22)     # as an older kaflite wrote it
    with Cluster(brokers=1, data_dir=tmp_path) as c:
        port = c.brokers[0].port
        assert finalized_levels(port)["metadata.version"] == 22
        assert update(port, 2, ("metadata.version", 29, 1)).error_code == 0
        assert update(port, 2, ("metadata.version", 24, 2)).error_code == 0     # nothing lost
        assert update(port, 2, ("metadata.version", 22, 2)).error_code == invalid
        assert update(port, 2, ("metadata.version", 33, 1)).error_code == 0
        assert finalized_levels(port)["metadata.version"] == 33
    with Cluster(brokers=1, data_dir=tmp_path) as c:
        assert finalized_levels(c.brokers[0].port)["metadata.version"] == 33


def _ask(c: Cluster, req: Any) -> Any:
    async def ask() -> Any:
        conn = await BrokerConnection("127.0.0.1", c.brokers[0].port).open()
        try:
            return await conn.request(req)
        finally:
            conn.close()
    return asyncio.run(ask())


def share_heartbeat_error(c: Cluster) -> int:
    """A new share member's first ShareGroupHeartbeat: its error code (one broker: it
    is every group's coordinator)."""
    for _ in range(50):
        # FindCoordinator makes __consumer_offsets, as a client's first step does
        _ask(c, FindCoordinatorRequest(key_type=0, coordinator_keys=["features-share"]))
        resp = _ask(c, ShareGroupHeartbeatRequest(
            group_id="features-share", member_id="m-share-features", member_epoch=0,
            subscribed_topic_names=["t"]))
        if resp.error_code not in (errors.CoordinatorLoadInProgressError.code,
                                   errors.NotCoordinatorError.code):
            return int(resp.error_code)
        time.sleep(0.1)       # __consumer_offsets on its way
    raise AssertionError("no coordinator answered")


def share_describe_error(c: Cluster) -> int:
    resp = _ask(c, ShareGroupDescribeRequest(group_ids=["features-share"]))
    return int(resp.groups[0].error_code)


def heartbeat_error(c: Cluster) -> int:
    """A new KIP-848 member's first ConsumerGroupHeartbeat: its error code."""
    async def beat() -> int:
        for _ in range(50):
            coordinator = await find_group_coordinator(c, "features-group")
            if coordinator < 0:     # __consumer_offsets on its way
                await asyncio.sleep(0.1)
                continue
            conn = await BrokerConnection("127.0.0.1", c.brokers[coordinator].port).open()
            try:
                resp = await conn.request(ConsumerGroupHeartbeatRequest(
                    group_id="features-group", member_id="m-features", member_epoch=0,
                    rebalance_timeout_ms=10000, subscribed_topic_names=["t"],
                    server_assignor=None, topic_partitions=[]), version=0)
            finally:
                conn.close()
            if resp.error_code not in (errors.CoordinatorLoadInProgressError.code,
                                       errors.NotCoordinatorError.code):
                return resp.error_code
            await asyncio.sleep(0.1)
        raise AssertionError("no coordinator answered")
    return asyncio.run(beat())


async def find_group_coordinator(c: Cluster, group: str) -> int:
    conn = await BrokerConnection("127.0.0.1", c.brokers[0].port).open()
    try:
        resp = await conn.request(FindCoordinatorRequest(key_type=0, coordinator_keys=[group]),
                                  version=4)
    finally:
        conn.close()
    return int(resp.coordinators[0].node_id)
