"""KIP-227 incremental fetch sessions, spoken directly to a broker."""

from __future__ import annotations

import asyncio

from kaflite.client import Admin
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
        name=topic, partition_data=[pq.PartitionProduceData(partition, encode_batch([b"x"] * n))])])
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


def test_a_deleted_topic_is_forgotten_by_its_id() -> None:
    """A client forgets a deleted topic by its id, which no longer names a topic: the
    session drops it. Kept, it answered an error at every fetch, and an error ends a long
    poll at once (franz-go's suite left a 3-broker cluster spinning at 100 % CPU)."""
    async def main() -> None:
        async with Cluster(brokers=1) as cluster:
            kept = cluster.create_topic("kept", partitions=1)
            doomed = cluster.create_topic("doomed", partitions=2)
            conn = await BrokerConnection("127.0.0.1", cluster.broker(0).port).open()
            try:
                full = await conn.request(FetchRequest(
                    max_wait_ms=0, min_bytes=1, max_bytes=1 << 24, session_id=0,
                    session_epoch=0, topics=[
                        fq.FetchTopic(topic_id=t.topic_id, partitions=[
                            fq.FetchPartition(partition=p, fetch_offset=0,
                                              partition_max_bytes=1 << 20)
                            for p in range(n)])
                        for t, n in ((kept, 1), (doomed, 2))]))
                sid = full.session_id
                assert full.error_code == 0 and sid > 0
                async with Admin(bootstrap_servers=cluster.bootstrap_servers) as admin:
                    await admin.delete_topics(["doomed"])
                erring = await conn.request(fetch(kept.topic_id, [], sid, 1))
                assert [(r.topic_id, sorted(p.partition_index for p in r.partitions))
                        for r in erring.responses] == [(doomed.topic_id, [0, 1])]
                assert all(p.error_code for p in erring.responses[0].partitions)
                gone = [fq.ForgottenTopic(topic_id=doomed.topic_id, partitions=[0, 1])]
                forgot = await conn.request(fetch(kept.topic_id, [], sid, 2, forgotten=gone))
                after = await conn.request(fetch(kept.topic_id, [], sid, 3))
                assert forgot.error_code == 0 and forgot.responses == []
                assert after.error_code == 0 and after.responses == []
            finally:
                conn.close()

    asyncio.run(main())


def test_followers_forget_a_deleted_topic_on_their_leaders() -> None:
    """Each follower's fetch session on a leader drops a deleted topic's partitions."""
    from tests.conftest import wait_for_async

    async def main() -> None:
        async with Cluster(brokers=3) as cluster:
            doomed = cluster.create_topic("doomed", partitions=6, replication_factor=3)
            cluster.create_topic("kept", partitions=3, replication_factor=3)

            def held() -> set[tuple[int, str]]:
                return {(b.node_id, sp.topic) for b in cluster.brokers.values()
                        for s in b.fetch_sessions.sessions.values()
                        for sp in s.partitions.values() if sp.topic_id == doomed.topic_id}

            await wait_for_async(lambda: len({n for n, _ in held()}) == 3,
                                 "every leader serving the topic to its followers")
            async with Admin(bootstrap_servers=cluster.bootstrap_servers) as admin:
                await admin.delete_topics(["doomed"])
            await wait_for_async(lambda: not held(), "the deleted topic forgotten",
                                 timeout=20, state=held)

    asyncio.run(main())
