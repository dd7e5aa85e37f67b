"""Metadata v13's top-level error (KIP-1102), on kaflite's client: REBOOTSTRAP_REQUIRED
applies nothing and sends the next refresh to the bootstrap servers, as Java's client
does with ``metadata.recovery.strategy=rebootstrap``; with ``none`` it only refreshes
again. kaflite's broker never sends it: fault injection puts it where Kafka would."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from kaflite.client import Producer
from kaflite.cluster import Cluster
from kaflite.verify.control import free_ports


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


@pytest.mark.parametrize("check", [True, False])
def test_a_broker_of_another_cluster_at_a_known_address(check: bool) -> None:
    """KIP-1242: a known broker's address now served by another cluster. With
    ``metadata.cluster.check.enable`` (the default) the reconnect's ApiVersions v5 names
    the cluster and node it means; the other cluster's broker answers
    REBOOTSTRAP_REQUIRED and the client bootstraps again, learning the new cluster
    before it sends it anything. Without the check it sends its next request to the
    stranger and learns only from a later Metadata answer."""
    async def main() -> None:
        base = free_ports(1)
        async with contextlib.AsyncExitStack() as stack:
            first = await stack.enter_async_context(Cluster(brokers=1, base_port=base))
            first.create_topic("kip1242", 1, 1)
            first_id = first.cluster_id
            p = await stack.enter_async_context(Producer(
                bootstrap_servers=f"127.0.0.1:{base}", metadata_cluster_check_enable=check,
                reconnect_backoff_ms=20, reconnect_backoff_max_ms=100))
            p.produce("kip1242", b"to the first", partition=0)
            await asyncio.wait_for(p.flush(), 30)
            await first.__aexit__(None, None, None)
            async with Cluster(brokers=1, base_port=base) as second:
                assert second.cluster_id != first_id
                second.create_topic("kip1242", 1, 1)
                p.produce("kip1242", b"to the second", partition=0)
                await asyncio.wait_for(p.flush(), 60)
                events = [str(e) for e in p.events()]
                refused = [e for e in events if "re-bootstrap" in e
                           and "REBOOTSTRAP_REQUIRED" in e and f"cluster {first_id}" in e]
                assert bool(refused) == check, "\n".join(events)
                # the record is in the second cluster either way; with the check the client
                # knew whose broker it was before it sent it
                log = second.broker(0).partitions[("kip1242", 0)].log
                assert log.log_end_offset == 1
                if check:
                    assert p.metadata.cluster_id == second.cluster_id

    asyncio.run(main())
