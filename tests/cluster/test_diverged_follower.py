"""A follower whose log diverged from the leader's is not counted as holding what it
claims: its fetch is answered with the diverging epoch, and, as Kafka's
``Partition.fetchRecords`` does, its position is recorded (for the ISR and the high
watermark) only by a fetch without divergence.

Found by the 30-minute confluent-kafka KIP-848 group soak (2026-11-30, seed 597617956):
nine acks=all writes acknowledged at offsets 14879-14887 of partition 0 were missing
from the final log. Partition 0's old leader had appended writes while isolated, lost
the leadership, and on healing fetched from the new leader at its own (diverged) log
end: the new leader took that offset as the follower's position, put it back into the
ISR, and advanced the high watermark over records the follower did not hold. The
acknowledged writes were then lost when the nemesis moved the leadership to it.
"""

from __future__ import annotations

import asyncio

from kaflite.cluster import Cluster
from kaflite.net.connection import BrokerConnection
from kaflite.protocol.messages import FetchRequest, ProduceRequest
from kaflite.protocol.messages import fetch_request as fq
from kaflite.protocol.messages import produce_request as pq
from kaflite.protocol.records import encode_batch


def test_a_diverged_follower_neither_rejoins_the_isr_nor_moves_the_high_watermark() -> None:
    with Cluster(brokers=3, config={"replica.lag.time.max.ms": 500}) as cluster:
        cluster.create_topic("diverged", 1, 3, configs={"min.insync.replicas": "2"})
        state = cluster.controller.partition("diverged", 0)
        assert state is not None
        leader, epoch = state.leader, state.leader_epoch
        follower = next(r for r in state.replicas if r != leader)
        cluster.faults.isolate_replication(follower)

        async def scenario() -> tuple[int, int, list[int], int]:
            conn = await BrokerConnection("127.0.0.1", cluster.broker(leader).port,
                                          client_id="diverged").open()
            try:
                # the follower leaves the ISR, then the others take ten writes
                for _ in range(200):
                    now = cluster.controller.partition("diverged", 0)
                    if now is not None and follower not in now.isr:
                        break
                    await asyncio.sleep(0.05)
                resp = await conn.request(ProduceRequest(acks=-1, timeout_ms=20000, topic_data=[
                    pq.TopicProduceData(name="diverged", partition_data=[
                        pq.PartitionProduceData(0, encode_batch([b"v"] * 10))])]), timeout=40)
                assert resp.responses[0].partition_responses[0].error_code == 0
                p = cluster.broker(leader).partitions[("diverged", 0)]
                hw_before = p.high_watermark
                # the follower fetches at an end its own log reached under this epoch
                # but the leader's did not: a tail the leader never wrote
                claimed = p.log_end_offset + 5
                fetched = await conn.request(FetchRequest(
                    replica_id=follower, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                    topics=[fq.FetchTopic(topic="diverged", partitions=[fq.FetchPartition(
                        partition=0, current_leader_epoch=epoch, fetch_offset=claimed,
                        last_fetched_epoch=epoch, log_start_offset=0,
                        partition_max_bytes=1 << 20)])]), version=12)
                (pd,) = fetched.responses[0].partitions
                assert pd.error_code == 0
                assert (pd.diverging_epoch.epoch, pd.diverging_epoch.end_offset) == (
                    epoch, p.log_end_offset)
                seen = p.followers[follower].log_end_offset if follower in p.followers else -1
                after = cluster.controller.partition("diverged", 0)
                assert after is not None
                return claimed, seen, list(after.isr), p.high_watermark - hw_before
            finally:
                conn.close()

        claimed, seen, isr, hw_moved = asyncio.run(asyncio.wait_for(scenario(), 60))
        assert seen != claimed, "the diverged fetch offset was taken as the follower's position"
        assert follower not in isr, f"the diverged follower rejoined the ISR {isr}"
        assert hw_moved == 0
