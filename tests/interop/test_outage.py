"""kaflite's idempotent producer (acks=all) through an outage of the partition's leader,
on every target that can take one: what it acknowledges is there exactly once, at the
offset it was told, and what it sent during the outage is acknowledged once the broker
is back.

The outage is each target's own ``kill``/``restart``: a SIGKILL of the broker's process
(kaflite with a process per broker, Apache Kafka), a crash of the broker inside this
process (kaflite), kfake's RemoveNode/AddNode. Tansu keeps its data only in memory, so
it runs behind kaflite's proxy, which cuts the broker off from the clients instead
(``tansu-1+proxy``, ``kaflite.testing.Proxied``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from kaflite.client import Admin, Producer, RecordMetadata
from kaflite.testing import ClusterUnderTest
from tests.interop._clients import create_topic, read_to_end, replicas, run, uid
from tests.interop.conftest import ONE_BROKER, PEERS, make_target, started

pytestmark = pytest.mark.interop

BEFORE = 50
DURING = 50
OUTAGE_S = 2.0


@pytest.fixture(scope="module", params=[*ONE_BROKER, *(
    f"{t}+proxy" if t.startswith("tansu") else t for t in PEERS)])
def target(request: pytest.FixtureRequest) -> Iterator[ClusterUnderTest]:
    yield from started(make_target(request.param, request))


async def leader_of(servers: str, topic: str) -> int:
    async with Admin(bootstrap_servers=servers) as admin:
        await admin.metadata.refresh("outage test")
        return (await admin.describe_topics([topic]))[topic].partitions[0].leader


def test_idempotent_producer_rides_out_a_leader_outage(target: ClusterUnderTest) -> None:
    topic = uid("outage")
    servers = target.bootstrap_servers

    async def main() -> tuple[list[RecordMetadata], list[tuple[int, bytes]]]:
        await create_topic(servers, topic, 1, replicas(target))
        leader = await leader_of(servers, topic)
        if leader in target.unkillable():       # kfake's controller: lead elsewhere
            leader = await asyncio.to_thread(target.move_leader, topic, 0, None)
        async with Producer(bootstrap_servers=servers, enable_idempotence=True, acks="all",
                            linger_ms=2, retry_backoff_ms=100,
                            delivery_timeout_ms=90_000) as p:
            sent = list(await asyncio.gather(*(p.send(topic, f"r{i}".encode(), partition=0)
                                               for i in range(BEFORE))))
            await asyncio.to_thread(target.kill, leader)
            during = [asyncio.ensure_future(p.send(topic, f"r{i}".encode(), partition=0))
                      for i in range(BEFORE, BEFORE + DURING)]
            await asyncio.sleep(OUTAGE_S)
            await asyncio.to_thread(target.restart, leader)
            sent += await asyncio.gather(*during)
        got = await read_to_end(servers, topic, 1, want=BEFORE + DURING)
        return sent, [(r.offset, r.value or b"") for r in got]

    sent, got = run(main(), timeout=150)
    at = {v: o for o, v in got}
    assert len(at) == len(got) == BEFORE + DURING, "a record is there twice, or missing"
    assert {f"r{i}".encode(): m.offset for i, m in enumerate(sent)} == at
