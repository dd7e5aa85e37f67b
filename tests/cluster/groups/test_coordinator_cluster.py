"""The coordinator inside a real cluster, driven with raw protocol requests.

FindCoordinator (single and batched keys, GROUP and TRANSACTION, creating the
internal topics), the errors of a request sent to the wrong broker or to a
coordinator still loading, OffsetFetch's per-version error shapes and v8
multi-group requests, and offset expiry run by the broker's own timer.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from kaflite.cluster import Cluster
from kaflite.cluster.groups import GroupCoordinator
from kaflite.cluster.handlers.groups import handle_heartbeat
from kaflite.protocol import decode_response, encode_request, errors
from kaflite.protocol.hashing import coordinator_partition
from kaflite.protocol.messages import (
    ApiVersionsRequest,
    FindCoordinatorRequest,
    HeartbeatRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    RequestHeader,
)
from kaflite.protocol.messages import offset_commit_request as ocq
from kaflite.protocol.messages import offset_fetch_request as ofq

OFFSETS = "__consumer_offsets"
N = 5
CONFIG = {"group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": N,
          "transaction.state.log.num.partitions": 4, "offsets.retention.check.interval.ms": 100,
          "replica.lag.time.max.ms": 10000}


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(brokers=3, config=CONFIG) as c:
        c.create_topic("t", 2, 3)
        yield c


def call(port: int, api_key: int, version: int, body: Any) -> Any:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"".join(encode_request(api_key, version, 7, "raw", body)))
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack_from(">i", data)[0]:
            chunk = s.recv(65536)
            assert chunk, "connection closed"
            data += chunk
        return decode_response(data[4:], api_key, version)[1]


def find(cluster: Cluster, key: str, key_type: int = 0) -> Any:
    port = cluster.brokers[0].port
    deadline = time.monotonic() + 10
    while True:
        resp = call(port, 10, 3, FindCoordinatorRequest(key=key, key_type=key_type))
        if resp.error_code == 0 or time.monotonic() > deadline:
            return resp
        time.sleep(0.1)


def commit(port: int, group: str, offsets: dict[int, int], version: int = 8,
           retention_ms: int = -1) -> Any:
    parts = [ocq.OffsetCommitRequestPartition(partition_index=p, committed_offset=o)
             for p, o in offsets.items()]
    return call(port, 8, version, OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=-1, member_id="",
        retention_time_ms=retention_ms,
        topics=[ocq.OffsetCommitRequestTopic(name="t", partitions=parts)]))


def test_api_versions_list_the_kip848_apis(cluster: Cluster) -> None:
    resp = call(cluster.brokers[0].port, 18, 3, ApiVersionsRequest("raw", "1"))
    versions = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert versions[68] == (0, 1)       # ConsumerGroupHeartbeat, as Kafka 4.0
    assert versions[69] == (0, 1)       # ConsumerGroupDescribe, as Kafka 4.4 (KIP-1099)


def test_find_coordinator_creates_the_internal_topics(cluster: Cluster) -> None:
    port = cluster.brokers[1].port
    if OFFSETS not in cluster.controller.topics:
        first = call(port, 10, 1, FindCoordinatorRequest(key="g1", key_type=0))
        assert first.error_code == errors.CoordinatorNotAvailableError.code
        assert first.error_message == "The coordinator is not available."
        assert (first.node_id, first.host, first.port) == (-1, "", -1)
    topic = cluster.controller.topics[OFFSETS]
    assert len(topic.partitions) == N and all(len(p.replicas) == 3 for p in topic.partitions)
    assert topic.configs["cleanup.policy"] == "compact"
    resp = find(cluster, "g1")
    leader = topic.partitions[coordinator_partition("g1", N)].leader
    broker = cluster.brokers[leader]
    assert (resp.error_code, resp.node_id, resp.port) == (0, leader, broker.port)
    # v4+: a batch of keys, each answered on its own.
    batch = call(port, 10, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=["g1", "g2"]))
    assert [(co.key, co.error_code, co.node_id) for co in batch.coordinators] == [
        ("g1", 0, leader),
        ("g2", 0, topic.partitions[coordinator_partition("g2", N)].leader)]
    # TRANSACTION keys live on __transaction_state.
    txn = find(cluster, "txn-1", key_type=1)
    state = cluster.controller.topics["__transaction_state"]
    assert txn.error_code == 0
    assert txn.node_id == state.partitions[coordinator_partition("txn-1", 4)].leader
    assert state.configs["min.insync.replicas"] == "2"
    bad = call(port, 10, 3, FindCoordinatorRequest(key="x", key_type=9))
    assert bad.error_code == errors.InvalidRequestError.code


def test_wrong_broker_and_loading_coordinator(cluster: Cluster) -> None:
    group = "moving"
    assert find(cluster, group).error_code == 0
    index = coordinator_partition(group, N)
    leader = cluster.controller.topics[OFFSETS].partitions[index].leader
    other = next(b for b in cluster.brokers.values() if b.node_id != leader)
    assert commit(cluster.brokers[leader].port, group, {0: 4}).topics[0].partitions[0] \
        .error_code == 0
    # The wrong broker: NOT_COORDINATOR, at the level each API reports it.
    hb = call(other.port, 12, 4, HeartbeatRequest(group_id=group, generation_id=1, member_id="m"))
    assert hb.error_code == errors.NotCoordinatorError.code
    v1 = call(other.port, 9, 1, OffsetFetchRequest(
        group_id=group, topics=[ofq.OffsetFetchRequestTopic(name="t", partition_indexes=[0])]))
    assert v1.topics[0].partitions[0].error_code == errors.NotCoordinatorError.code
    v5 = call(other.port, 9, 5, OffsetFetchRequest(group_id=group, topics=None))
    assert v5.error_code == errors.NotCoordinatorError.code and v5.topics == []

    async def move_and_probe() -> tuple[int, int, int, int]:
        new = cluster.controller.move_leader(OFFSETS, index)
        conn = SimpleNamespace(info=SimpleNamespace(groups=set(), peer="127.0.0.1:1"))
        header = RequestHeader(request_api_key=12, request_api_version=4, client_id="probe")
        req = HeartbeatRequest(group_id=group, generation_id=1, member_id="m")
        # Same loop turn as the move: the new leader has not read its log yet.
        loading = (await handle_heartbeat(cluster.brokers[new], conn, header,  # type: ignore[arg-type]
                                          req)).error_code
        old = (await handle_heartbeat(cluster.brokers[leader], conn, header,  # type: ignore[arg-type]
                                      req)).error_code
        await asyncio.sleep(0.2)
        loaded = (await handle_heartbeat(cluster.brokers[new], conn, header,  # type: ignore[arg-type]
                                         req)).error_code
        return new, loading, old, loaded

    new, loading, old, loaded = cluster.call(move_and_probe())
    assert loading == errors.CoordinatorLoadInProgressError.code
    assert old == errors.NotCoordinatorError.code
    assert loaded == errors.UnknownMemberIdError.code  # served: the group has no such member
    fetched = call(cluster.brokers[new].port, 9, 5, OffsetFetchRequest(group_id=group, topics=None))
    assert fetched.error_code == 0
    assert [(t.name, p.partition_index, p.committed_offset)
            for t in fetched.topics for p in t.partitions] == [("t", 0, 4)]


def test_offset_fetch_v8_multi_group_and_require_stable(cluster: Cluster) -> None:
    groups = ["multi-a", "multi-b", "multi-none"]
    for i, g in enumerate(groups[:2]):
        port = cluster.brokers[find(cluster, g).node_id].port
        assert commit(port, g, {0: 10 + i, 1: 20 + i}).topics[0].partitions[1].error_code == 0
    # One request to one broker: groups coordinated elsewhere get NOT_COORDINATOR each.
    for broker in cluster.brokers.values():
        resp = call(broker.port, 9, 8, OffsetFetchRequest(require_stable=True, groups=[
            ofq.OffsetFetchRequestGroup(group_id=g, topics=None) for g in groups]))
        for g, res in zip(groups, resp.groups, strict=True):
            assert res.group_id == g
            here = cluster.controller.topics[OFFSETS].partitions[
                coordinator_partition(g, N)].leader == broker.node_id
            if not here:
                assert res.error_code == errors.NotCoordinatorError.code
                continue
            assert res.error_code == 0
            got = {p.partition_index: p.committed_offset for t in res.topics for p in t.partitions}
            i = groups.index(g)
            assert got == ({0: 10 + i, 1: 20 + i} if g != "multi-none" else {})


def test_offsets_expire_on_the_brokers_own_schedule(cluster: Cluster) -> None:
    """OffsetCommit v2-v4 retention: an explicit expiry, enforced by the periodic cleanup."""
    group = "short-lived"
    port = cluster.brokers[find(cluster, group).node_id].port
    assert commit(port, group, {0: 1}, version=2, retention_ms=300).topics[0].partitions[0] \
        .error_code == 0
    coordinator = cluster.brokers[find(cluster, group).node_id].groups
    assert isinstance(coordinator, GroupCoordinator)
    deadline = time.monotonic() + 10
    while True:
        fetched = call(port, 9, 5, OffsetFetchRequest(group_id=group, topics=None))
        if not fetched.topics:
            break
        assert time.monotonic() < deadline, "offsets never expired"
        time.sleep(0.1)
    # The group had nothing left and no members: it is gone too.
    assert group not in cluster.call(_groups_of(coordinator))


async def _groups_of(coordinator: GroupCoordinator) -> list[str]:
    return [g for s in coordinator.active_shards() for g in s.groups]


def test_join_group_v0_and_v1_as_kafka_4_4_serves_them(cluster: Cluster) -> None:
    """Kafka 4.4 serves JoinGroup v0-v1 (found by the differential conformance test):
    v0 has no rebalance timeout (the session timeout serves), v1 has one."""
    from kaflite.protocol.messages import JoinGroupRequest, SyncGroupRequest
    from kaflite.protocol.messages import join_group_request as jgq
    from kaflite.protocol.messages import sync_group_request as sgq

    for version in (0, 1):
        group = f"oldest-v{version}"
        port = cluster.brokers[find(cluster, group).node_id].port
        join = call(port, 11, version, JoinGroupRequest(
            group_id=group, session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
            member_id="", protocol_type="consumer",
            protocols=[jgq.JoinGroupRequestProtocol("range", b"meta")]))
        assert (join.error_code, join.generation_id) == (0, 1), join
        assert join.leader == join.member_id and join.protocol_name == "range"
        sync = call(port, 14, 0, SyncGroupRequest(
            group_id=group, generation_id=1, member_id=join.member_id,
            assignments=[sgq.SyncGroupRequestAssignment(join.member_id, b"mine")]))
        assert (sync.error_code, bytes(sync.assignment)) == (0, b"mine")


def test_old_versions_join_sync_heartbeat_leave(cluster: Cluster) -> None:
    """JoinGroup v3 (before KIP-394) joins at once; LeaveGroup v1 reports at the top."""
    from kaflite.protocol.messages import (
        JoinGroupRequest,
        LeaveGroupRequest,
        ListGroupsRequest,
        SyncGroupRequest,
    )
    from kaflite.protocol.messages import join_group_request as jgq
    from kaflite.protocol.messages import sync_group_request as sgq

    group = "old-timer"
    port = cluster.brokers[find(cluster, group).node_id].port
    join = call(port, 11, 3, JoinGroupRequest(
        group_id=group, session_timeout_ms=10_000, rebalance_timeout_ms=10_000, member_id="",
        protocol_type="consumer", protocols=[jgq.JoinGroupRequestProtocol("range", b"meta")]))
    assert join.error_code == 0 and join.generation_id == 1
    assert join.member_id.startswith("raw-") and join.leader == join.member_id
    assert [(m.member_id, bytes(m.metadata)) for m in join.members] == [(join.member_id, b"meta")]
    sync = call(port, 14, 1, SyncGroupRequest(
        group_id=group, generation_id=1, member_id=join.member_id,
        assignments=[sgq.SyncGroupRequestAssignment(join.member_id, b"mine")]))
    assert (sync.error_code, bytes(sync.assignment)) == (0, b"mine")
    assert call(port, 12, 1, HeartbeatRequest(group_id=group, generation_id=1,
                                              member_id=join.member_id)).error_code == 0
    listed = call(port, 16, 5, ListGroupsRequest(states_filter=["stable"],
                                                 types_filter=["Classic"]))
    assert (group, "Stable", "classic") in [(g.group_id, g.group_state, g.group_type)
                                            for g in listed.groups]
    assert call(port, 16, 5, ListGroupsRequest(types_filter=["consumer"])).groups == []
    # A v5 error response still carries a (non-null) protocol name.
    bad = call(port, 11, 5, JoinGroupRequest(
        group_id=group, session_timeout_ms=10, member_id="", protocol_type="consumer",
        protocols=[]))
    assert bad.error_code == errors.InvalidSessionTimeoutError.code and bad.protocol_name == ""
    left = call(port, 13, 1, LeaveGroupRequest(group_id=group, member_id=join.member_id))
    assert left.error_code == 0
    again = call(port, 13, 1, LeaveGroupRequest(group_id=group, member_id=join.member_id))
    assert again.error_code == errors.UnknownMemberIdError.code
