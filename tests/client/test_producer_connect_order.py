"""A producer drains a leader's batches only once its connection is open (Java's
``NetworkClient.ready``).

Found by ``benchmarks/kafka_anchor.py`` against Apache Kafka: batches drained while the
leader's connection was still opening were numbered, then their Produce requests raced
for the connect; a request drained later could be written first, a broker with no state
for the producer took its sequence as the first (KIP-360), and the earlier batch was
then OUT_OF_ORDER_SEQUENCE_NUMBER. A slow handshake (ApiVersions delayed on the broker)
gives the sender time to drain many times before the connection is open.
"""

from __future__ import annotations

import asyncio

from kaflite.client import Producer
from kaflite.cluster import Cluster

PARTITIONS = 4


def test_batches_wait_for_the_leaders_connection() -> None:
    async def main() -> None:
        async with Cluster(brokers=1) as cluster:
            cluster.create_topic("ordered", PARTITIONS, 1)
            async with Producer(bootstrap_servers=cluster.bootstrap_servers,
                                batch_size=200, linger_ms=0) as p:
                await p.metadata.ensure_topic("ordered", 10)
                # the next connection to broker 0 (the producer's data connection) takes
                # 400 ms to get through ApiVersions; records pile up meanwhile
                cluster.faults.delay("ApiVersions", 400, count=1)
                p.pool.close_connection(0, why="test: reconnect slowly")
                sends = asyncio.gather(
                    *(p.send("ordered", b"v%04d" % i, partition=i % PARTITIONS)
                      for i in range(400)), return_exceptions=True)
                # while the connection opens, no Produce is drained (none is in flight,
                # no batch has its sequence yet); before the fix a few were, waiting
                await asyncio.sleep(0.2)
                sender = p._sender      # the sender's in-flight count has no public view
                assert sender is not None and sender.in_flight.get(0, 0) == 0
                results = await asyncio.wait_for(sends, 60)
                failed = [r for r in results if isinstance(r, BaseException)]
                assert not failed, failed[:3]
            for index in range(PARTITIONS):
                log = cluster.broker(0).partitions[("ordered", index)].log
                assert log.log_end_offset == 400 // PARTITIONS

    asyncio.run(main())
