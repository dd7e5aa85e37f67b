"""DescribeLogDirs (key 35): each broker's data directory and the replicas in it."""

from __future__ import annotations

import asyncio

from kaflite.cluster import Cluster
from kaflite.net.connection import BrokerConnection
from kaflite.protocol import errors
from kaflite.protocol.messages import (
    AlterReplicaLogDirsRequest,
    DescribeLogDirsRequest,
    ProduceRequest,
)
from kaflite.protocol.messages import alter_replica_log_dirs_request as arq
from kaflite.protocol.messages import describe_log_dirs_request as dlq
from kaflite.protocol.messages import produce_request as pq
from kaflite.protocol.records import encode_batch


def test_each_broker_reports_its_directory_and_replica_sizes() -> None:
    async def main() -> None:
        async with Cluster(brokers=2) as cluster:
            cluster.create_topic("dirs", partitions=3, replication_factor=2)
            cluster.create_topic("other", partitions=1, replication_factor=1)
            leader0 = cluster.controller.topics["dirs"].partitions[0].leader
            conn = await BrokerConnection("127.0.0.1", cluster.broker(leader0).port).open()
            try:
                resp = await conn.request(ProduceRequest(acks=-1, timeout_ms=10000, topic_data=[
                    pq.TopicProduceData(name="dirs", partition_data=[pq.PartitionProduceData(
                        0, encode_batch([b"x" * 100] * 10))])]))
                assert resp.responses[0].partition_responses[0].error_code == 0
            finally:
                conn.close()
            for node in (0, 1):
                broker = cluster.broker(node)
                conn = await BrokerConnection("127.0.0.1", broker.port).open()
                try:
                    every = await conn.request(DescribeLogDirsRequest(topics=None), version=4)
                    some = await conn.request(DescribeLogDirsRequest(topics=[
                        dlq.DescribableLogDirTopic("dirs", [0, 7])]), version=1)
                finally:
                    conn.close()
                (result,) = every.results
                assert result.error_code == 0
                assert result.log_dir == str(broker.data_dir.resolve())
                assert result.total_bytes > 0 and 0 <= result.usable_bytes <= result.total_bytes
                hosted = {(t.name, p.partition_index): p for t in result.topics
                          for p in t.partitions}
                assert set(hosted) == set(broker.partitions)      # each replica it holds
                zero = hosted[("dirs", 0)]
                assert zero.partition_size > 1000 and zero.offset_lag == 0   # replicated
                assert not zero.is_future_key
                assert all(hosted[k].partition_size == 0 for k in hosted if k != ("dirs", 0)
                           and k[0] == "dirs")
                # named topics: only the partitions asked for that this broker hosts
                assert [(t.name, [p.partition_index for p in t.partitions])
                        for t in some.results[0].topics] == [("dirs", [0])]

    asyncio.run(main())


def test_alter_replica_log_dirs_answers_each_partition_as_kafka() -> None:
    """One directory per broker: a replica already in it has nothing to move (0), another
    directory is LOG_DIR_NOT_FOUND, a partition the broker holds no replica of is
    REPLICA_NOT_AVAILABLE."""
    async def main() -> None:
        async with Cluster(brokers=2) as cluster:
            cluster.create_topic("moved", partitions=2, replication_factor=1)
            placed = {p: cluster.controller.topics["moved"].partitions[p].replicas[0]
                      for p in (0, 1)}
            broker = cluster.broker(placed[0])
            here = str(broker.data_dir.resolve())
            conn = await BrokerConnection("127.0.0.1", broker.port).open()
            try:
                resp = await conn.request(AlterReplicaLogDirsRequest(dirs=[
                    arq.AlterReplicaLogDir(here, [arq.AlterReplicaLogDirTopic("moved", [0, 1])]),
                    arq.AlterReplicaLogDir("/nowhere/else", [
                        arq.AlterReplicaLogDirTopic("other", [0])])]), version=2)
            finally:
                conn.close()
            got = {(t.topic_name, p.partition_index): p.error_code for t in resp.results
                   for p in t.partitions}
            assert got == {
                ("moved", 0): 0,
                ("moved", 1): 0 if placed[1] == placed[0]
                else errors.ReplicaNotAvailableError.code,
                ("other", 0): errors.LogDirNotFoundError.code}

    asyncio.run(main())
