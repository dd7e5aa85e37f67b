"""KIP-227 incremental fetch sessions, spoken directly to a broker."""

from __future__ import annotations

import asyncio

from kaflite.cluster import Cluster
from kaflite.net.connection import BrokerConnection
from kaflite.protocol.messages import FetchRequest, ProduceRequest
from kaflite.protocol.messages import fetch_request as fq
from kaflite.protocol.messages import produce_request as pq
from kaflite.protocol.records import encode_batch


def fetch(topic_id, partitions, session_id, epoch, forgotten=None, max_wait=0):  # type: ignore[no-untyped-def]
    topics = [fq.FetchTopic(topic_id=topic_id, partitions=[
        fq.FetchPartition(partition=p, fetch_offset=o, partition_max_bytes=1 << 20)
        for p, o in partitions])] if partitions else []
    return FetchRequest(max_wait_ms=max_wait, min_bytes=1, max_bytes=1 << 24,
                        session_id=session_id, session_epoch=epoch, topics=topics,
                        forgotten_topics_data=forgotten or [])


async def produce(conn: BrokerConnection, topic: str, partition: int, n: int) -> None:
    req = ProduceRequest(acks=1, timeout_ms=5000, topic_data=[pq.TopicProduceData(
        topic, [pq.PartitionProduceData(partition, encode_batch([b"x"] * n))])])
    resp = await conn.request(req)
    assert resp.responses[0].partition_responses[0].error_code == 0


def test_incremental_fetch_session_round_trip() -> None:
    async def main() -> None:
        async with Cluster(brokers=1) as cluster:
            t = cluster.create_topic("sessions", partitions=3)
            conn = await BrokerConnection("127.0.0.1", cluster.broker(0).port).open()
            try:
                for p in range(3):
                    await produce(conn, "sessions", p, 2)
                full = await conn.request(fetch(t.topic_id, [(0, 0), (1, 0), (2, 0)], 0, 0))
                assert full.error_code == 0 and full.session_id > 0
                sid = full.session_id
                assert sorted(pd.partition_index for pd in full.responses[0].partitions) == [0, 1, 2]
                # Nothing changed: an incremental fetch answers no partition at all.
                quiet = await conn.request(fetch(t.topic_id, [(0, 2), (1, 2), (2, 2)], sid, 1))
                assert quiet.session_id == sid and quiet.responses == []
                # New data on partition 1 only: only partition 1 comes back.
                await produce(conn, "sessions", 1, 3)
                news = await conn.request(fetch(t.topic_id, [], sid, 2, max_wait=2000))
                assert [pd.partition_index for pd in news.responses[0].partitions] == [1]
                assert news.responses[0].partitions[0].high_watermark == 5
                # Forget partition 1: new data there is no longer reported.
                gone = [fq.ForgottenTopic(topic_id=t.topic_id, partitions=[1])]
                after = await conn.request(fetch(t.topic_id, [], sid, 3, forgotten=gone))
                await produce(conn, "sessions", 1, 1)
                again = await conn.request(fetch(t.topic_id, [], sid, 4))
                assert after.responses == [] and again.responses == []
                # A wrong epoch and an unknown session are refused.
                wrong = await conn.request(fetch(t.topic_id, [], sid, 9))
                assert wrong.error_code == 71  # INVALID_FETCH_SESSION_EPOCH
                unknown = await conn.request(fetch(t.topic_id, [], 424242, 1))
                assert unknown.error_code == 70  # FETCH_SESSION_ID_NOT_FOUND
                # Closing the session (epoch -1) turns the request into a plain full fetch.
                closed = await conn.request(fetch(t.topic_id, [(0, 0)], sid, -1))
                assert closed.session_id == 0 and closed.responses[0].partitions[0].records
                gone_now = await conn.request(fetch(t.topic_id, [], sid, 5))
                assert gone_now.error_code == 70
            finally:
                conn.close()

    asyncio.run(main())
