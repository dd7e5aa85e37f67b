"""Per-record errors (KIP-467): a batch refused for some of its records names them.

Ten keyless records in a batch of 100 for a compacted topic: Kafka's LogValidator
refuses the batch with INVALID_RECORD and lists the ten by their index in the batch,
each with its message; the producer fails those ten with INVALID_RECORD and the other
90 with a retriable "innocent bystander" error (Java's ProducerBatch), so the
application is told which records were wrong. Nothing of the batch is appended.
"""

from __future__ import annotations

import asyncio

from kaflite.client import Producer
from kaflite.client.producer import BatchRejectedError
from kaflite.cluster import Cluster
from kaflite.protocol import errors
from tests.client._recovery_helpers import uid

KEYLESS = set(range(5, 100, 10))     # ten records without a key


def test_the_producer_is_told_which_records_were_invalid(cluster: Cluster) -> None:
    topic = uid("compacted")
    cluster.create_topic(topic, 1, 1, configs={"cleanup.policy": "compact"})

    async def run() -> list[BaseException | None]:
        async with Producer({"bootstrap.servers": cluster.bootstrap_servers,
                             "linger.ms": 200, "batch.size": 1 << 20}) as p:
            sends = [p.send(topic, b"v%d" % i, None if i in KEYLESS else b"k%d" % i,
                            partition=0) for i in range(100)]
            results = await asyncio.gather(*sends, return_exceptions=True)
        return [r if isinstance(r, BaseException) else None for r in results]

    outcomes = asyncio.run(run())
    for i, outcome in enumerate(outcomes):
        if i in KEYLESS:
            assert isinstance(outcome, errors.InvalidRecordError), (i, outcome)
            assert "without key" in str(outcome)
        else:
            assert isinstance(outcome, BatchRejectedError), (i, outcome)
    assert cluster.brokers[0].partitions[(topic, 0)].log_end_offset == 0
