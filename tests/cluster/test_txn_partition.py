"""The partition side of transactions, spoken to brokers in raw protocol requests.

Transactional batches are produced with a producer id from InitProducerId and
ended with WriteTxnMarkers, as a transaction coordinator would: the last
stable offset, read_committed Fetch and ListOffsets, the aborted-transaction
index across restarts and leader changes, and the marker checks.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from kaflite.cluster import Cluster
from kaflite.cluster.log._txn_index import TXNINDEX_SUFFIX, AbortedTxn
from kaflite.net.connection import BrokerConnection
from kaflite.protocol import errors
from kaflite.protocol.messages import (
    FetchRequest,
    InitProducerIdRequest,
    ListOffsetsRequest,
    ProduceRequest,
    WriteTxnMarkersRequest,
)
from kaflite.protocol.messages import fetch_request as fq
from kaflite.protocol.messages import fetch_response as fr
from kaflite.protocol.messages import list_offsets_request as loq
from kaflite.protocol.messages import produce_request as pq
from kaflite.protocol.messages import write_txn_markers_request as wq
from kaflite.protocol.records import RecordBatch, encode_batch, iter_batches
from tests.conftest import wait_for_async

READ_UNCOMMITTED, READ_COMMITTED = 0, 1
LATEST = -1
T_PLAIN = int(time.time() * 1000) - 60_000
T_TXN = T_PLAIN + 1_000


# -- raw protocol helpers ----------------------------------------------------------------


async def connect(cluster: Cluster, node: int) -> BrokerConnection:
    return await BrokerConnection("127.0.0.1", cluster.broker(node).port,
                                  client_id="txn-partition-test").open()


def leader_of(cluster: Cluster, topic: str) -> int:
    return cluster.controller.topics[topic].partitions[0].leader


async def init_producer_id(conn: BrokerConnection) -> tuple[int, int]:
    resp = await conn.request(InitProducerIdRequest(transactional_id=None,
                                                    transaction_timeout_ms=60_000))
    assert resp.error_code == 0
    return resp.producer_id, resp.producer_epoch


async def produce(conn: BrokerConnection, topic: str, values: list[bytes], *, pid: int = -1,
                  epoch: int = -1, seq: int = -1, transactional: bool = False,
                  ts: int = T_PLAIN) -> int:
    records = encode_batch(values, timestamps=[ts] * len(values), producer_id=pid,
                           producer_epoch=epoch, base_sequence=seq, transactional=transactional)
    req = ProduceRequest(acks=-1, timeout_ms=10_000, transactional_id=None,
                         topic_data=[pq.TopicProduceData(name=topic, partition_data=[pq.PartitionProduceData(
                             0, records)])])
    resp = await conn.request(req)
    part = resp.responses[0].partition_responses[0]
    assert part.error_code == 0, part
    return int(part.base_offset)


async def write_markers(conn: BrokerConnection, topic: str, pid: int, epoch: int, *,
                        commit: bool, coordinator_epoch: int = 0,
                        version: int | None = None) -> int:
    """One marker for partition 0 of ``topic``; returns that partition's error code."""
    req = WriteTxnMarkersRequest(markers=[wq.WritableTxnMarker(
        producer_id=pid, producer_epoch=epoch, transaction_result=commit,
        topics=[wq.WritableTxnMarkerTopic(topic, [0])], coordinator_epoch=coordinator_epoch)])
    resp = await conn.request(req, version=version)
    (marker,) = resp.markers
    assert marker.producer_id == pid
    (t,) = marker.topics
    assert t.name == topic and [p.partition_index for p in t.partitions] == [0]
    return int(t.partitions[0].error_code)


async def fetch(conn: BrokerConnection, topic_id: uuid.UUID, offset: int, isolation: int,
                *, max_wait_ms: int = 0) -> fr.PartitionData:
    req = FetchRequest(max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20,
                       isolation_level=isolation, topics=[fq.FetchTopic(
                           topic_id=topic_id, partitions=[fq.FetchPartition(
                               partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)])])
    resp = await conn.request(req, timeout=90)
    assert resp.error_code == 0
    part: fr.PartitionData = resp.responses[0].partitions[0]
    assert part.error_code == 0, part
    return part


async def list_offset(conn: BrokerConnection, topic: str, timestamp: int, isolation: int) -> int:
    req = ListOffsetsRequest(replica_id=-1, isolation_level=isolation, topics=[
        loq.ListOffsetsTopic(topic, [loq.ListOffsetsPartition(0, -1, timestamp)])])
    resp = await conn.request(req)
    part = resp.topics[0].partitions[0]
    assert part.error_code == 0
    return int(part.offset)


def batches(part: fr.PartitionData) -> list[RecordBatch]:
    return list(iter_batches(part.records or b"", allow_partial=False))


def aborted(part: fr.PartitionData) -> list[tuple[int, int]]:
    return [(t.producer_id, t.first_offset) for t in part.aborted_transactions or []]


def run(main: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(main())


# -- tests ---------------------------------------------------------------------------------


def test_lso_read_committed_fetch_and_list_offsets_around_an_aborted_transaction() -> None:
    async def main() -> None:
        async with Cluster(brokers=3, config={"replica.lag.time.max.ms": 10000}) as cluster:
            t = cluster.create_topic("txn-lso", partitions=1, replication_factor=3)
            conn = await connect(cluster, leader_of(cluster, "txn-lso"))
            try:
                pid, epoch = await init_producer_id(conn)
                assert await produce(conn, "txn-lso", [b"a", b"b"]) == 0
                first = await produce(conn, "txn-lso", [b"t1", b"t2", b"t3"], pid=pid,
                                      epoch=epoch, seq=0, transactional=True, ts=T_TXN)
                assert first == 2
                # Open transaction: read_uncommitted sees it, read_committed stops at it.
                ru = await fetch(conn, t.topic_id, 0, READ_UNCOMMITTED)
                assert (ru.high_watermark, ru.last_stable_offset) == (5, 2)
                assert [b.last_offset for b in batches(ru)] == [1, 4]
                rc = await fetch(conn, t.topic_id, 0, READ_COMMITTED)
                assert (rc.high_watermark, rc.last_stable_offset) == (5, 2)
                assert [b.last_offset for b in batches(rc)] == [1]
                assert aborted(rc) == []
                assert batches(await fetch(conn, t.topic_id, 2, READ_COMMITTED)) == []
                assert await list_offset(conn, "txn-lso", LATEST, READ_UNCOMMITTED) == 5
                assert await list_offset(conn, "txn-lso", LATEST, READ_COMMITTED) == 2
                # A timestamp only the transaction's records reach: hidden from read_committed.
                assert await list_offset(conn, "txn-lso", T_TXN, READ_UNCOMMITTED) == 2
                assert await list_offset(conn, "txn-lso", T_TXN, READ_COMMITTED) == -1
                assert await list_offset(conn, "txn-lso", T_PLAIN, READ_COMMITTED) == 0

                # The coordinator aborts: the marker lands at 5, the LSO moves past it.
                assert await write_markers(conn, "txn-lso", pid, epoch, commit=False) == 0
                ru = await fetch(conn, t.topic_id, 0, READ_UNCOMMITTED)
                assert (ru.high_watermark, ru.last_stable_offset) == (6, 6)
                rc = await fetch(conn, t.topic_id, 0, READ_COMMITTED)
                assert rc.last_stable_offset == 6
                got = batches(rc)
                assert [b.last_offset for b in got] == [1, 4, 5] and got[-1].is_control
                assert aborted(rc) == [(pid, 2)]
                assert aborted(await fetch(conn, t.topic_id, 5, READ_COMMITTED)) == [(pid, 2)]
                assert await list_offset(conn, "txn-lso", LATEST, READ_COMMITTED) == 6
                assert await list_offset(conn, "txn-lso", T_TXN, READ_COMMITTED) == 2

                # A committed transaction is not reported as aborted.
                await produce(conn, "txn-lso", [b"c1", b"c2"], pid=pid, epoch=epoch, seq=3,
                              transactional=True)
                assert (await fetch(conn, t.topic_id, 6, READ_COMMITTED)).last_stable_offset == 6
                assert await write_markers(conn, "txn-lso", pid, epoch, commit=True) == 0
                rc = await fetch(conn, t.topic_id, 6, READ_COMMITTED)
                assert rc.last_stable_offset == 9
                assert [b.last_offset for b in batches(rc)] == [7, 8]
                assert aborted(rc) == []
                # Read from the start, the old abort is still there (and only it).
                assert aborted(await fetch(conn, t.topic_id, 0, READ_COMMITTED)) == [(pid, 2)]
            finally:
                conn.close()

    run(main)


def test_a_waiting_read_committed_fetch_is_woken_when_the_marker_is_written() -> None:
    async def main() -> None:
        async with Cluster(brokers=1) as cluster:
            # One replica: no replica fetcher waits on the partition, so the only
            # data waiter is the consumer's fetch.
            t = cluster.create_topic("txn-wake", partitions=1, replication_factor=1)
            conn = await connect(cluster, 0)
            try:
                pid, epoch = await init_producer_id(conn)
                await produce(conn, "txn-wake", [b"t1", b"t2"], pid=pid, epoch=epoch, seq=0,
                              transactional=True)
                p = cluster.broker(0).partitions[("txn-wake", 0)]
                assert (p.high_watermark, p.last_stable_offset) == (2, 0)
                # A read_committed fetch with nothing stable to read waits (up to 60 s).
                waiting = asyncio.ensure_future(
                    fetch(conn, t.topic_id, 0, READ_COMMITTED, max_wait_ms=60_000))
                await wait_for_async(lambda: bool(p._data_waiters), "the fetch to wait")
                assert not waiting.done()
                markers = await connect(cluster, 0)
                try:
                    assert await write_markers(markers, "txn-wake", pid, epoch,
                                               commit=True) == 0
                finally:
                    markers.close()
                # Answered because the marker moved the LSO, long before its 60 s wait.
                rc = await asyncio.wait_for(waiting, 30)
                assert rc.last_stable_offset == 3
                assert [b.last_offset for b in batches(rc)] == [1, 2]
            finally:
                conn.close()

    run(main)


def test_marker_checks_errors_and_hooks() -> None:
    async def main() -> None:
        async with Cluster(brokers=3, config={"replica.lag.time.max.ms": 10000}) as cluster:
            cluster.create_topic("txn-checks", partitions=1, replication_factor=2)
            leader = leader_of(cluster, "txn-checks")
            others = [n for n in range(3) if n != leader]
            calls: list[tuple[str, int, int, int, bool]] = []
            cluster.broker(leader).marker_hooks.append(
                lambda *args: calls.append(args))
            conn = await connect(cluster, leader)
            other = await connect(cluster, others[0])
            try:
                pid, _ = await init_producer_id(conn)
                # The producer moves to epoch 1: a marker from epoch 0 is fenced.
                await produce(conn, "txn-checks", [b"x"], pid=pid, epoch=1, seq=0,
                              transactional=True)
                code = await write_markers(conn, "txn-checks", pid, 0, commit=False)
                assert code == errors.InvalidProducerEpochError.code
                assert calls == []
                # The right epoch, at coordinator epoch 5 (v0, the non-flexible version).
                assert await write_markers(conn, "txn-checks", pid, 1, commit=True,
                                           coordinator_epoch=5, version=0) == 0
                assert calls == [("txn-checks", 0, pid, 1, True)]
                # An older coordinator (epoch 4) is fenced by the one that wrote epoch 5.
                code = await write_markers(conn, "txn-checks", pid, 1, commit=False,
                                           coordinator_epoch=4)
                assert code == errors.TransactionCoordinatorFencedError.code
                # Only the leader writes markers; an unknown topic has no partition.
                code = await write_markers(other, "txn-checks", pid, 1, commit=False,
                                           coordinator_epoch=5)
                assert code == errors.NotLeaderOrFollowerError.code
                code = await write_markers(conn, "no-such-topic", pid, 1, commit=False)
                assert code == errors.UnknownTopicOrPartitionError.code
                assert calls == [("txn-checks", 0, pid, 1, True)]
                # The connection that sent WriteTxnMarkers still serves ordinary requests.
                assert await list_offset(conn, "txn-checks", LATEST, READ_COMMITTED) == 2
            finally:
                conn.close()
                other.close()

    run(main)


def _entries(cluster: Cluster, node: int, topic: str) -> list[AbortedTxn]:
    return cluster.broker(node).partitions[(topic, 0)].log.txn_index.entries


def _isr_full(cluster: Cluster, topic: str) -> bool:
    p = cluster.controller.topics[topic].partitions[0]
    return p.leader >= 0 and sorted(p.isr) == sorted(p.replicas)


def test_the_aborted_index_is_replicated_survives_restarts_and_serves_new_leaders(
        tmp_path: Path) -> None:
    topic = "txn-restart"

    async def read_committed_from(cluster: Cluster, node: int) -> fr.PartitionData:
        # A new leader learns the high watermark from its followers' next fetches.
        p = cluster.broker(node).partitions[(topic, 0)]
        await wait_for_async(lambda: p.is_leader and p.high_watermark == 5, "the leader's HW")
        conn = await connect(cluster, node)
        try:
            return await fetch(conn, cluster.controller.topics[topic].topic_id, 0,
                               READ_COMMITTED)
        finally:
            conn.close()

    async def main() -> None:
        async with Cluster(brokers=3, data_dir=tmp_path,
                           config={"replica.lag.time.max.ms": 10000}) as cluster:
            cluster.create_topic(topic, partitions=1, replication_factor=3)
            first_leader = leader_of(cluster, topic)
            conn = await connect(cluster, first_leader)
            try:
                pid, epoch = await init_producer_id(conn)
                await produce(conn, topic, [b"p"])
                await produce(conn, topic, [b"t1", b"t2"], pid=pid, epoch=epoch, seq=0,
                              transactional=True)
                assert await write_markers(conn, topic, pid, epoch, commit=False) == 0
                await produce(conn, topic, [b"q"])
            finally:
                conn.close()
            expected = [AbortedTxn(pid, 1, 3, 4)]
            # Every replica builds the same index from the replicated marker.
            await wait_for_async(lambda: all(
                cluster.broker(n).partitions[(topic, 0)].log_end_offset == 5
                for n in range(3)), "the followers to catch up")
            assert all(_entries(cluster, n, topic) == expected for n in range(3))

            # A follower that becomes leader answers read_committed with the same abort.
            await wait_for_async(lambda: _isr_full(cluster, topic), "a full ISR")
            follower = next(n for n in range(3) if n != first_leader)
            assert cluster.move_leader(topic, 0, to=follower) == follower
            rc = await read_committed_from(cluster, follower)
            assert (rc.last_stable_offset, aborted(rc)) == (5, [(pid, 1)])

            # A clean restart reads the index back from its .txnindex file.
            await cluster.restart_broker(first_leader)
            assert _entries(cluster, first_leader, topic) == expected
            # A crash that lost the index file: it is rebuilt from the log.
            crashed = next(n for n in range(3) if n not in (first_leader, follower))
            await cluster.kill_broker(crashed)
            part_dir = cluster.broker(crashed).data_dir / f"{topic}-0"
            files = [f for f in part_dir.iterdir() if f.name.endswith(TXNINDEX_SUFFIX)]
            assert files
            for f in files:
                f.unlink()
            await cluster.restart_broker(crashed)
            assert _entries(cluster, crashed, topic) == expected

            # Both restarted brokers lead in turn and report the abort.
            for node in (first_leader, crashed):
                await wait_for_async(lambda: _isr_full(cluster, topic), "a full ISR")
                assert cluster.move_leader(topic, 0, to=node) == node
                rc = await read_committed_from(cluster, node)
                assert aborted(rc) == [(pid, 1)]
                assert [b.last_offset for b in batches(rc)] == [0, 2, 3, 4]

        # And after a restart of the whole cluster.
        async with Cluster(brokers=3, data_dir=tmp_path) as cluster:
            await wait_for_async(lambda: leader_of(cluster, topic) >= 0, "a leader")
            leader = leader_of(cluster, topic)
            assert _entries(cluster, leader, topic) == expected

    run(main)


def test_follower_truncation_drops_the_entry_and_replication_brings_it_back() -> None:
    topic = "txn-truncate"

    async def main() -> None:
        async with Cluster(brokers=2, config={"replica.lag.time.max.ms": 10000}) as cluster:
            cluster.create_topic(topic, partitions=1, replication_factor=2)
            leader = leader_of(cluster, topic)
            follower = 1 - leader
            conn = await connect(cluster, leader)
            try:
                pid, epoch = await init_producer_id(conn)
                await produce(conn, topic, [b"t1", b"t2"], pid=pid, epoch=epoch, seq=0,
                              transactional=True)
                assert await write_markers(conn, topic, pid, epoch, commit=False) == 0
            finally:
                conn.close()
            broker = cluster.broker(follower)
            p = broker.partitions[(topic, 0)]
            await wait_for_async(lambda: p.log_end_offset == 3, "the follower to catch up")
            assert p.log.txn_index.entries == [AbortedTxn(pid, 0, 2, 3)]
            # Stop fetching, cut the marker off, and fetch again.
            broker._unfollow(p)
            p.log.truncate_to(2)
            assert p.log.txn_index.entries == []
            assert p.log.first_unstable_offset() == 0  # the transaction is open again
            broker._follow(p, leader)
            await wait_for_async(lambda: p.log_end_offset == 3, "the follower to refetch")
            assert p.log.txn_index.entries == [AbortedTxn(pid, 0, 2, 3)]
            assert p.log.first_unstable_offset() is None

    run(main)
