"""Metadata v13's top-level error (KIP-1102), on kaflite's client: REBOOTSTRAP_REQUIRED
applies nothing and sends the next refresh to the bootstrap servers, as Java's client
does with ``metadata.recovery.strategy=rebootstrap``; with ``none`` it only refreshes
again. kaflite's broker never sends it: fault injection puts it where Kafka would."""

from __future__ import annotations

import asyncio

import pytest

from kaflite.client import Producer
from kaflite.cluster import Cluster


@pytest.mark.parametrize("strategy", ["rebootstrap", "none"])
def test_rebootstrap_required_in_a_metadata_answer(strategy: str) -> None:
    async def main() -> None:
        async with Cluster(brokers=2) as cluster:
            cluster.create_topic("rb", 2, 2)
            async with Producer(bootstrap_servers=cluster.bootstrap_servers,
                                metadata_recovery_strategy=strategy) as p:
                await p.metadata.ensure_topic("rb", 10)
                before = p.metadata.version
                rule = cluster.faults.inject_error("Metadata", "REBOOTSTRAP_REQUIRED", 1,
                                                   level="top")
                await p.metadata.refresh("test")
                assert rule.remaining == 0                  # the answer carried it
                assert p.metadata.version == before        # and nothing was applied
                events = [str(e) for e in p.events()]
                assert any("REBOOTSTRAP_REQUIRED" in e for e in events), events
                asked = any("re-bootstrap" in e and "REBOOTSTRAP_REQUIRED" in e
                            for e in events)
                assert asked == (strategy == "rebootstrap"), events
                await p.metadata.refresh("again")          # (from the bootstrap servers)
                assert "rb" in p.metadata.topics
                p.produce("rb", b"after", partition=0)
                await asyncio.wait_for(p.flush(), 30)

    asyncio.run(main())
