"""Transactions v2 (KIP-890 part 2) and the leaders' verification (part 1), in raw requests.

A transactional producer of version 1 adds each partition itself (AddPartitionsToTxn)
and sends Produce up to v11; the leader checks with the coordinator that it did, so
a batch of a transaction that was never opened there (or already ended) is refused
instead of opening a transaction that nobody would end. A producer of version 2
sends Produce v12 and TxnOffsetCommit v5 and adds nothing: the leaders (and the group
coordinator) add the partitions, and EndTxn v5 bumps the epoch at every end and says
so. On a 3-broker cluster the partitions' leaders differ from the coordinator, so
the leaders ask it over the network.
"""

from __future__ import annotations

import asyncio
import time
import uuid

from kaflite.client import Consumer
from kaflite.cluster import Cluster
from kaflite.net.connection import BrokerConnection
from kaflite.protocol import errors
from kaflite.protocol.messages import (
    AddPartitionsToTxnRequest,
    DescribeTransactionsRequest,
    EndTxnRequest,
    FindCoordinatorRequest,
    InitProducerIdRequest,
    ProduceRequest,
    TxnOffsetCommitRequest,
)
from kaflite.protocol.messages import add_partitions_to_txn_request as apq
from kaflite.protocol.messages import produce_request as pq
from kaflite.protocol.messages import txn_offset_commit_request as toq
from kaflite.protocol.records import encode_batch

TOPIC = "v2-orders"
PARTITIONS = 3


async def open_to(cluster: Cluster, node: int) -> BrokerConnection:
    return await BrokerConnection("127.0.0.1", cluster.broker(node).port,
                                  client_id="txn-v2-test").open()


async def coordinator_of(conn: BrokerConnection, key: str, key_type: int) -> int:
    for _ in range(100):
        resp = await conn.request(FindCoordinatorRequest(key_type=key_type,
                                                         coordinator_keys=[key]))
        (c,) = resp.coordinators
        if c.error_code == 0:
            return int(c.node_id)
        await asyncio.sleep(0.1)
    raise AssertionError(f"no coordinator for {key}")


class Txn:
    """One transactional id, spoken to its coordinator and to the partitions' leaders."""

    def __init__(self, cluster: Cluster, tid: str) -> None:
        self.cluster, self.tid = cluster, tid
        self.conns: dict[int, BrokerConnection] = {}
        self.pid = self.epoch = -1
        self.seq: dict[int, int] = {}

    async def conn(self, node: int) -> BrokerConnection:
        if node not in self.conns:
            self.conns[node] = await open_to(self.cluster, node)
        return self.conns[node]

    async def coordinator(self) -> BrokerConnection:
        any_conn = await self.conn(next(iter(self.cluster.brokers)))
        return await self.conn(await coordinator_of(any_conn, self.tid, 1))

    async def init(self) -> None:
        conn = await self.coordinator()
        for _ in range(100):
            resp = await conn.request(InitProducerIdRequest(
                transactional_id=self.tid, transaction_timeout_ms=60_000))
            if resp.error_code != errors.ConcurrentTransactionsError.code:
                break
            await asyncio.sleep(0.05)
        assert resp.error_code == 0, resp
        self.pid, self.epoch = resp.producer_id, resp.producer_epoch
        self.seq.clear()

    def leader(self, partition: int) -> int:
        return self.cluster.controller.topics[TOPIC].partitions[partition].leader

    async def produce(self, partition: int, value: bytes, version: int,
                      by_id: bool = False) -> int:
        """One transactional record; the partition's error code."""
        seq = self.seq.get(partition, 0)
        records = encode_batch([value], timestamps=[int(time.time() * 1000)],
                               producer_id=self.pid, producer_epoch=self.epoch,
                               base_sequence=seq, transactional=True)
        topic = pq.TopicProduceData(name=TOPIC, partition_data=[
            pq.PartitionProduceData(partition, records)])
        if by_id:
            topic = pq.TopicProduceData(topic_id=self.cluster.controller.topics[TOPIC].topic_id,
                                        partition_data=topic.partition_data)
        conn = await self.conn(self.leader(partition))
        resp = await conn.request(ProduceRequest(
            transactional_id=self.tid, acks=-1, timeout_ms=10_000, topic_data=[topic]),
            version=version)
        part = resp.responses[0].partition_responses[0]
        if part.error_code == 0:
            self.seq[partition] = seq + 1
        return int(part.error_code)

    async def end(self, commit: bool, version: int, epoch: int | None = None
                  ) -> tuple[int, int, int]:
        conn = await self.coordinator()
        for _ in range(100):
            resp = await conn.request(EndTxnRequest(
                transactional_id=self.tid, producer_id=self.pid,
                producer_epoch=self.epoch if epoch is None else epoch, committed=commit),
                version=version)
            if resp.error_code != errors.ConcurrentTransactionsError.code:
                break
            await asyncio.sleep(0.05)
        return resp.error_code, resp.producer_id, resp.producer_epoch

    async def described(self) -> tuple[str, set[int]]:
        conn = await self.coordinator()
        resp = await conn.request(DescribeTransactionsRequest(transactional_ids=[self.tid]))
        (state,) = resp.transaction_states
        assert state.error_code == 0, state
        return state.transaction_state, {p for t in state.topics for p in t.partitions}

    def close(self) -> None:
        for conn in self.conns.values():
            conn.close()


async def committed_values(cluster: Cluster, want: int) -> list[bytes]:
    """What a read_committed consumer reads of the topic, once ``want`` records were read
    and it reached the end (the markers are written after EndTxn is answered)."""
    async with Consumer({"bootstrap.servers": cluster.bootstrap_servers,
                         "isolation.level": "read_committed",
                         "auto.offset.reset": "earliest"}) as c:
        tps = [(TOPIC, p) for p in range(PARTITIONS)]
        c.assign(tps)
        got: list[bytes] = []
        deadline = time.monotonic() + 20
        while True:
            for records in (await c.getmany(timeout_ms=200)).values():
                got += [r.value for r in records]
            ends = await c.end_offsets(tps)
            positions = [await c.position(tp) for tp in tps]
            if len(got) >= want and all(pos >= ends[tp] for pos, tp in zip(positions, tps,
                                                                          strict=True)):
                return sorted(got)
            assert time.monotonic() < deadline, (got, positions, ends)


def test_v1_batches_for_a_partition_never_added_are_refused() -> None:
    """KIP-890 part 1: no transaction opens in a partition the coordinator never added."""
    async def main() -> None:
        async with Cluster(brokers=3) as cluster:
            cluster.create_topic(TOPIC, PARTITIONS, 3)
            txn = Txn(cluster, f"v1-{uuid.uuid4().hex[:6]}")
            try:
                await txn.init()
                # Produce v11 knows TRANSACTION_ABORTABLE; older versions get INVALID_TXN_STATE
                assert await txn.produce(0, b"not added", version=11) == \
                    errors.TransactionAbortableError.code
                assert await txn.produce(0, b"not added", version=10) == \
                    errors.InvalidTxnStateError.code
                # the producer adds partition 0 itself, as a v1 producer does
                conn = await txn.coordinator()
                resp = await conn.request(AddPartitionsToTxnRequest(
                    v3_and_below_transactional_id=txn.tid, v3_and_below_producer_id=txn.pid,
                    v3_and_below_producer_epoch=txn.epoch, v3_and_below_topics=[
                        apq.AddPartitionsToTxnTopic(name=TOPIC, partitions=[0])]), version=3)
                assert resp.results_by_topic_v3_and_below[0].results_by_partition[0] \
                    .partition_error_code == 0
                assert await txn.produce(0, b"added", version=11) == 0
                assert await txn.produce(1, b"never added", version=11) == \
                    errors.TransactionAbortableError.code
                assert await txn.end(True, version=4) == (0, -1, -1)
                assert await committed_values(cluster, 1) == [b"added"]
            finally:
                txn.close()

    asyncio.run(main())


def test_v2_leaders_add_partitions_and_every_end_bumps_the_epoch() -> None:
    async def main() -> None:
        async with Cluster(brokers=3) as cluster:
            cluster.create_topic(TOPIC, PARTITIONS, 3)
            txn = Txn(cluster, f"v2-{uuid.uuid4().hex[:6]}")
            try:
                await txn.init()
                coordinator = await coordinator_of(await txn.coordinator(), txn.tid, 1)
                # at least one partition is led by another broker: asked over the network
                assert any(txn.leader(p) != coordinator for p in range(PARTITIONS))
                for p in range(PARTITIONS):
                    assert await txn.produce(p, b"first-%d" % p, version=12) == 0
                state, parts = await txn.described()
                assert (state, parts) == ("Ongoing", set(range(PARTITIONS)))
                # offsets without AddOffsetsToTxn (TxnOffsetCommit v5)
                group = f"g-{txn.tid}"
                gconn = await txn.conn(await coordinator_of(await txn.coordinator(), group, 0))
                resp = await gconn.request(TxnOffsetCommitRequest(
                    transactional_id=txn.tid, group_id=group, producer_id=txn.pid,
                    producer_epoch=txn.epoch, topics=[toq.TxnOffsetCommitRequestTopic(
                        name=TOPIC, partitions=[toq.TxnOffsetCommitRequestPartition(
                            partition_index=0, committed_offset=5)])]), version=5)
                assert resp.topics[0].partitions[0].error_code == 0
                old = txn.epoch
                code, pid, epoch = await txn.end(True, version=5)
                assert (code, pid, epoch) == (0, txn.pid, old + 1)
                # a retry of that EndTxn (the answer was lost): the same new epoch
                assert await txn.end(True, version=5, epoch=old) == (0, txn.pid, old + 1)
                assert (await txn.end(False, version=5, epoch=old))[0] == \
                    errors.InvalidTxnStateError.code
                # the old epoch is fenced; the new one starts its sequences at 0
                assert await txn.produce(0, b"stale", version=12) == \
                    errors.InvalidProducerEpochError.code
                txn.epoch, txn.seq = epoch, {}
                assert await txn.produce(0, b"second", version=12) == 0
                assert await txn.produce(1, b"second-by-id", version=13, by_id=True) == 0
                code, _, epoch = await txn.end(False, version=5)
                assert (code, epoch) == (0, old + 2)
                assert await committed_values(cluster, PARTITIONS) == \
                    [b"first-%d" % p for p in range(PARTITIONS)]
                assert (await txn.described())[0] == "CompleteAbort"
            finally:
                txn.close()

    asyncio.run(main())


def test_produce_v13_names_topics_by_id() -> None:
    async def main() -> None:
        async with Cluster(brokers=1) as cluster:
            cluster.create_topic(TOPIC, 1, 1)
            conn = await open_to(cluster, 0)
            try:
                topic_id = cluster.controller.topics[TOPIC].topic_id
                records = encode_batch([b"by id"])
                resp = await conn.request(ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[
                    pq.TopicProduceData(topic_id=topic_id, partition_data=[
                        pq.PartitionProduceData(0, records)]),
                    pq.TopicProduceData(topic_id=uuid.uuid4(), partition_data=[
                        pq.PartitionProduceData(0, records)])]), version=13)
                known, unknown = resp.responses
                assert known.topic_id == topic_id
                assert known.partition_responses[0].error_code == 0
                assert unknown.partition_responses[0].error_code == \
                    errors.UnknownTopicIdError.code
            finally:
                conn.close()

    asyncio.run(main())
