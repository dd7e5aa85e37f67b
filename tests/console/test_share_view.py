"""A share group's in-flight records in the console (KIP-932).

The snapshot of a share-partition on a fake clock; then, on a 3-broker cluster, a kaflite
share consumer that acquires records and holds them, releases them, takes them again and
acknowledges them, while ``GET /api/groups/{group}/share-partitions`` shows each step as
the partition's leader has it. Against the Kafka protocol alone (``ClientBackend``) the
answer has the start offset and lag, and says that the in-flight records cannot be shown.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator

import httpx
import pytest

from kaflite.client import AcknowledgeType, ShareConsumer, ShareRecord
from kaflite.cluster import Cluster
from kaflite.cluster.groups._timer import ManualTimer
from kaflite.cluster.share import AckType, BatchSpan, PersistedState, RecordState, SharePartition
from kaflite.cluster.share._manager import persisted_snapshot
from kaflite.cluster.share._partition import StateBatch
from kaflite.console import ClientBackend, ConsoleServer
from kaflite.console.share_groups import NOT_IN_KAFKA
from tests.client.share.conftest import join, produce

CONFIG = {
    "group.share.record.lock.duration.ms": "60000",   # no lock expires during a test
    "group.share.heartbeat.interval.ms": "200",
    "group.share.min.heartbeat.interval.ms": "100",
    "group.share.session.timeout.ms": "6000",
    "group.share.min.session.timeout.ms": "1000",
}
CLIENT_ID = "share-view-worker"
TOKEN = "share-view-token"      # state changes (a reset) need it


# -- the snapshot itself ------------------------------------------------------------------------
def test_snapshot_lists_states_holders_and_counts() -> None:
    sp = SharePartition("g", "t", 0, ManualTimer(), lock_duration_ms=30_000,
                        delivery_count_limit=2)
    sp.acquire("m1", [BatchSpan(0, 5)], 100)
    sp.acknowledge("m1", 0, 5, [AckType.ACCEPT, AckType.RELEASE, AckType.ACCEPT,
                                AckType.REJECT, AckType.RELEASE, AckType.RENEW])
    sp.acquire("m2", [BatchSpan(1, 1)], 1)
    snap = sp.snapshot(limit=10)
    assert (snap.start_offset, snap.end_offset, snap.in_flight, snap.live) == (1, 6, 5, True)
    assert [(r.offset, r.state, r.delivery_count, r.member_id) for r in snap.records] == [
        (1, RecordState.ACQUIRED, 2, "m2"), (2, RecordState.ACKNOWLEDGED, 1, None),
        (3, RecordState.ARCHIVED, 1, None), (4, RecordState.AVAILABLE, 1, None),
        (5, RecordState.ACQUIRED, 1, "m1")]
    assert snap.records[0].lock_remaining_ms == 30_000
    assert snap.counts == {RecordState.AVAILABLE: 1, RecordState.ACQUIRED: 2,
                           RecordState.ACKNOWLEDGED: 1, RecordState.ARCHIVED: 1}
    short = sp.snapshot(limit=2).to_json()
    assert [r["offset"] for r in short["records"]] == [1, 2]
    assert short["truncated"] is True and short["in_flight"] == 5
    assert short["counts"] == {"available": 1, "acquired": 2, "acknowledged": 1,
                               "archived": 1}


def test_persisted_snapshot_has_nothing_acquired() -> None:
    state = PersistedState(3, 10, [StateBatch(10, 11, RecordState.ACQUIRED, 2),
                                   StateBatch(13, 13, RecordState.ACKNOWLEDGED, 1)])
    snap = persisted_snapshot("g", "t", 0, state, 3, delivery_count_limit=5)
    assert (snap.start_offset, snap.end_offset, snap.live, snap.state_epoch) == (10, 14, False, 3)
    assert [(r.offset, r.state, r.delivery_count) for r in snap.records] == [
        (10, RecordState.AVAILABLE, 2), (11, RecordState.AVAILABLE, 2),
        (12, RecordState.AVAILABLE, 0)]
    assert snap.counts[RecordState.AVAILABLE] == 3
    assert snap.counts[RecordState.ACKNOWLEDGED] == 1
    assert snap.counts[RecordState.ACQUIRED] == 0


# -- on a cluster, over HTTP ----------------------------------------------------------------
@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(brokers=3, config=CONFIG) as c:
        yield c


@pytest.fixture(scope="module")
def console(cluster: Cluster) -> Iterator[str]:
    server = cluster.call(ConsoleServer(_embedded(cluster), "127.0.0.1", 0,
                                        token=TOKEN).start())
    try:
        yield server.url
    finally:
        cluster.call(server.stop())


def _embedded(cluster: Cluster) -> ClientBackend:
    from kaflite.console import EmbeddedBackend

    return EmbeddedBackend(cluster)


def _names() -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:8]
    return f"jobs-{suffix}", f"workers-{suffix}"


async def _poll_until(c: ShareConsumer, n: int) -> list[ShareRecord[bytes, bytes]]:
    got: list[ShareRecord[bytes, bytes]] = []
    deadline = time.monotonic() + 15
    while len(got) < n and time.monotonic() < deadline:
        got.extend(await c.poll(200))
    assert len(got) == n, got
    return got


async def _partition0(http: httpx.AsyncClient, group: str, **params: int) -> dict[str, object]:
    r = await http.get(f"/api/groups/{group}/share-partitions", params=params)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["in_flight_shown"] is True and body["note"] is None
    [row] = [p for p in body["partitions"] if p["partition"] == 0]
    assert row["error"] is None, row
    return dict(row)


def _states(row: dict[str, object]) -> list[tuple[int, str, int, str | None]]:
    flight = row["in_flight"]
    assert isinstance(flight, dict)
    return [(r["offset"], r["state"], r["delivery_count"], r["member_id"])
            for r in flight["records"]]


def test_in_flight_records_follow_acquire_release_and_acknowledge(
        cluster: Cluster, console: str) -> None:
    topic, group = _names()
    cluster.create_topic(topic, 1, 3)
    asyncio.run(_follow(cluster.bootstrap_servers, console, topic, group))


async def _follow(servers: str, console: str, topic: str, group: str) -> None:
    c = ShareConsumer({"bootstrap.servers": servers, "group.id": group, "client.id": CLIENT_ID,
                       "share.acknowledgement.mode": "explicit", "max.poll.records": 10})
    async with httpx.AsyncClient(base_url=console, timeout=30) as http:
        try:
            await c.start()
            c.subscribe([topic])
            await join([c], partitions=1)
            await produce(servers, topic, 3, partitions=1)
            records = await _poll_until(c, 3)
            me = c.member_id
            # acquired by this member, delivered once
            row = await _partition0(http, group)
            assert _states(row) == [(o, "acquired", 1, me) for o in range(3)]
            flight = row["in_flight"]
            assert isinstance(flight, dict)
            assert flight["live"] is True and flight["counts"] == {
                "available": 0, "acquired": 3, "acknowledged": 0, "archived": 0}
            assert {r["client_id"] for r in flight["records"]} == {CLIENT_ID}
            assert row["members"] == [me] and row["start_offset"] == 0
            # the first N listed, the counts over them all
            short = await _partition0(http, group, limit=1)
            assert _states(short) == [(0, "acquired", 1, me)]
            assert isinstance(short["in_flight"], dict)
            assert short["in_flight"]["truncated"] is True
            assert short["in_flight"]["counts"]["acquired"] == 3
            # released, then delivered again (the consumer fetches on at once, so the
            # records are seen available only once nobody fetches: the next test)
            for r in records:
                c.acknowledge(r, AcknowledgeType.RELEASE)
            assert all(e is None for e in (await c.commit_sync()).values())
            again = await _poll_until(c, 3)
            assert [r.delivery_count for r in again] == [2, 2, 2]
            assert _states(await _partition0(http, group)) == [
                (o, "acquired", 2, me) for o in range(3)]
            # 0 and 2 accepted, 1 released and delivered a third time: the start offset
            # moves past 0; 2 stays, acknowledged, until 1 is done with
            for r in again:
                c.acknowledge(r, AcknowledgeType.RELEASE if r.offset == 1
                              else AcknowledgeType.ACCEPT)
            await c.commit_sync()
            [last] = await _poll_until(c, 1)
            assert (last.offset, last.delivery_count) == (1, 3)
            row = await _partition0(http, group)
            assert _states(row) == [(1, "acquired", 3, me), (2, "acknowledged", 2, None)]
            assert isinstance(row["in_flight"], dict)
            assert row["in_flight"]["start_offset"] == 1
            assert row["in_flight"]["counts"] == {
                "available": 0, "acquired": 1, "acknowledged": 1, "archived": 0}
            # the last one accepted: nothing in flight, the start offset at the end
            c.acknowledge(last, AcknowledgeType.ACCEPT)
            await c.commit_sync()
            row = await _partition0(http, group)
            assert _states(row) == []
            assert isinstance(row["in_flight"], dict)
            assert (row["in_flight"]["start_offset"], row["in_flight"]["in_flight"]) == (3, 0)
        finally:
            await c.close()


def test_a_closed_member_leaves_its_records_available_in_the_persisted_state(
        cluster: Cluster, console: str) -> None:
    topic, group = _names()
    cluster.create_topic(topic, 1, 3)
    asyncio.run(_closed(cluster.bootstrap_servers, console, topic, group))


async def _closed(servers: str, console: str, topic: str, group: str) -> None:
    c = ShareConsumer({"bootstrap.servers": servers, "group.id": group,
                       "share.acknowledgement.mode": "explicit"})
    async with httpx.AsyncClient(base_url=console, timeout=30) as http:
        try:
            await c.start()
            c.subscribe([topic])
            await join([c], partitions=1)
            await produce(servers, topic, 2, partitions=1)
            await _poll_until(c, 2)
        finally:
            await c.close()       # the session closes: the leader releases both
        row = await _partition0(http, group)
        assert row["members"] == []
        assert isinstance(row["in_flight"], dict)
        assert row["in_flight"]["live"] is False     # no session: the persisted state
        assert _states(row) == [(0, "available", 1, None), (1, "available", 1, None)]


def test_not_a_share_group_and_no_group(cluster: Cluster, console: str) -> None:
    with httpx.Client(base_url=console, timeout=30) as http:
        assert http.get("/api/groups/no-such-group/share-partitions").status_code == 404
        assert http.get("/api/groups/g/share-partitions",
                        params={"limit": "-1"}).status_code == 400


def test_kafka_protocol_alone_says_in_flight_records_cannot_be_shown(cluster: Cluster) -> None:
    topic, group = _names()
    cluster.create_topic(topic, 1, 3)
    server = cluster.call(ConsoleServer(ClientBackend(cluster.bootstrap_servers),
                                        "127.0.0.1", 0).start())
    try:
        asyncio.run(_external(cluster.bootstrap_servers, server.url, topic, group))
    finally:
        cluster.call(server.stop())


async def _external(servers: str, console: str, topic: str, group: str) -> None:
    c = ShareConsumer({"bootstrap.servers": servers, "group.id": group,
                       "share.acknowledgement.mode": "explicit"})
    async with httpx.AsyncClient(base_url=console, timeout=30) as http:
        try:
            await c.start()
            c.subscribe([topic])
            await join([c], partitions=1)
            await produce(servers, topic, 2, partitions=1)
            await _poll_until(c, 2)
            body = (await http.get(f"/api/groups/{group}/share-partitions")).json()
        finally:
            await c.close()
    assert body["in_flight_shown"] is False and body["note"] == NOT_IN_KAFKA
    [row] = body["partitions"]
    assert row["in_flight"] is None and row["start_offset"] == 0
    assert row["members"] == [m["member_id"] for m in body["members"]]


def test_a_share_groups_reset_moves_its_start_offset(cluster: Cluster, console: str) -> None:
    """The console resets a share group as ``kaflite groups reset-offsets`` does: its
    start offsets (AlterShareGroupOffsets), not committed offsets it does not have."""
    topic, group = _names()
    cluster.create_topic(topic, 1, 3)
    asyncio.run(_accept_all(cluster.bootstrap_servers, topic, group))

    with httpx.Client(base_url=console, timeout=30) as http:
        before = http.get(f"/api/groups/{group}/share-partitions").json()
        [row] = before["partitions"]
        assert row["start_offset"] == 3
        reset = http.post(f"/api/groups/{group}/reset", json={"to": "earliest"},
                          headers={"Authorization": f"Bearer {TOKEN}"})
        assert reset.status_code == 200, reset.text
        assert [(o["partition"], o["offset"]) for o in reset.json()["offsets"]] == [(0, 0)]
        [row] = http.get(f"/api/groups/{group}/share-partitions").json()["partitions"]
        assert row["start_offset"] == 0 and row["lag"] == 3


async def _accept_all(servers: str, topic: str, group: str) -> None:
    c = ShareConsumer({"bootstrap.servers": servers, "group.id": group, "client.id": CLIENT_ID,
                       "share.acknowledgement.mode": "explicit"})
    try:
        await c.start()
        c.subscribe([topic])
        await join([c], partitions=1)
        await produce(servers, topic, 3, partitions=1)
        for r in await _poll_until(c, 3):
            c.acknowledge(r, AcknowledgeType.ACCEPT)
        assert all(e is None for e in (await c.commit_sync()).values())
    finally:
        await c.close()
