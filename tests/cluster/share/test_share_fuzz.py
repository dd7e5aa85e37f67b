"""Bad input to the share APIs: random sequences of ShareFetch and ShareAcknowledge (any
epochs, members, acknowledgement batches, types, limits and modes, in every version)
against a live broker. Each gets an answer with Kafka's errors, no handler raises, and
the share-partitions' invariants hold throughout."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kaflite.cluster import Cluster
from kaflite.net.connection import BrokerConnection
from kaflite.protocol.messages import (
    ProduceRequest,
    ShareAcknowledgeRequest,
    ShareFetchRequest,
)
from kaflite.protocol.messages import produce_request as pq
from kaflite.protocol.messages import share_acknowledge_request as saq
from kaflite.protocol.messages import share_fetch_request as sfq
from kaflite.protocol.records import encode_batch
from tests.cluster.test_fuzz_frames import Failures

GROUP, TOPIC = "fuzz-share", "fuzz-share"


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    failures = Failures()
    logging.getLogger("kaflite").addHandler(failures)
    try:
        with Cluster(brokers=1, config={"group.share.record.lock.duration.ms": 15000}) as c:
            broker = c.broker(0)
            assert broker.share is not None
            broker.share.group_configs[GROUP] = {"share.auto.offset.reset": "earliest"}
            c.create_topic(TOPIC, 1, 1)

            async def produce() -> None:
                conn = await BrokerConnection("127.0.0.1", broker.port).open()
                try:
                    for _ in range(10):
                        resp = await conn.request(ProduceRequest(
                            acks=1, timeout_ms=5000, topic_data=[pq.TopicProduceData(
                                name=TOPIC, partition_data=[pq.PartitionProduceData(0, encode_batch([b"x"] * 5))])]))
                        assert resp.responses[0].partition_responses[0].error_code == 0
                finally:
                    conn.close()
            asyncio.run(produce())
            yield c
    finally:
        logging.getLogger("kaflite").removeHandler(failures)
    assert failures.messages == []


OFFSETS = st.integers(-3, 60) | st.sampled_from([2**62, -(2**62)])
BATCHES = st.lists(st.tuples(OFFSETS, st.integers(0, 12),
                             st.lists(st.integers(-2, 6), max_size=4)), max_size=3)
REQUESTS = st.lists(st.tuples(
    st.sampled_from(["fetch", "ack"]), st.integers(0, 2),            # API, version
    st.sampled_from(["a", "b", ""]), st.integers(-2, 4),             # member, epoch
    BATCHES, st.integers(-5, 200), st.integers(-1, 3), st.booleans(),  # max records, mode
    st.booleans(), st.booleans()),                                    # forget?, known topic?
    min_size=1, max_size=8)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(REQUESTS)
def test_random_share_requests_get_answers(cluster: Cluster, requests: list[tuple[object, ...]]
                                           ) -> None:
    broker = cluster.broker(0)
    topic_id = cluster.controller.topics[TOPIC].topic_id

    async def run() -> None:
        conn = await BrokerConnection("127.0.0.1", broker.port).open()
        try:
            for (api, version, member, epoch, batches, max_records, mode, renew, forget,
                 known) in requests:
                assert isinstance(version, int) and isinstance(member, str)
                assert isinstance(epoch, int) and isinstance(batches, list)
                assert isinstance(max_records, int) and isinstance(mode, int)
                tid = topic_id if known else uuid.UUID(int=7)
                acks = [(first, first + length, types) for first, length, types in batches]
                if api == "fetch":
                    req = ShareFetchRequest(
                        group_id=GROUP, member_id=member, share_session_epoch=epoch,
                        max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                        topics=[sfq.FetchTopic(tid, [sfq.FetchPartition(
                            partition_index=0, acknowledgement_batches=[
                                sfq.AcknowledgementBatch(a, b, t) for a, b, t in acks])])],
                        forgotten_topics_data=[sfq.ForgottenTopic(tid, [0])] if forget else [])
                    if version >= 1:
                        req.max_records, req.batch_size = max_records, max(max_records, 0)
                    if version >= 2:
                        req.share_acquire_mode, req.is_renew_ack = mode, bool(renew)
                    fetched = await conn.request(req, version=version, timeout=10)
                    assert fetched.error_code >= 0
                else:
                    areq = ShareAcknowledgeRequest(
                        group_id=GROUP, member_id=member, share_session_epoch=epoch,
                        topics=[saq.AcknowledgeTopic(tid, [saq.AcknowledgePartition(0, [
                            saq.AcknowledgementBatch(a, b, t) for a, b, t in acks])])])
                    if version >= 2:
                        areq.is_renew_ack = bool(renew)
                    acked = await conn.request(areq, version=version, timeout=10)
                    assert acked.error_code >= 0
        finally:
            conn.close()

    asyncio.run(run())

    def check() -> list[str]:
        assert broker.share is not None
        return [p for sp in broker.share.partitions.values() for p in sp.check()]

    assert cluster._on_loop(check) == []
