"""``kaflite.proxy.Proxy`` in front of each three-broker target, Apache Kafka included:
kaflite's client, through it only, creates a replicated topic, produces with acks=all
(idempotent and in a transaction) and reads everything back in a consumer group. The
proxy's registry names every connection's roles from the traffic alone, reaches all
three brokers, and no answer a client got named a broker's own port."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kaflite.client import Consumer, Producer
from kaflite.proxy import Proxy
from kaflite.testing import ClusterUnderTest
from tests.interop._clients import create_topic, run, uid
from tests.proxy.conftest import AddressWatch

pytestmark = pytest.mark.interop

PARTITIONS = 3
RECORDS = 300


@pytest.fixture
def watched_proxy(target3: ClusterUnderTest) -> Iterator[tuple[Proxy, AddressWatch]]:
    watch = AddressWatch()
    with Proxy(target3.bootstrap_servers, filters=[watch]) as proxy:
        yield proxy, watch


def test_kaflite_client_through_the_proxy(target3: ClusterUnderTest,
                                          watched_proxy: tuple[Proxy, AddressWatch]) -> None:
    proxy, watch = watched_proxy
    topic, group = uid("proxied"), uid("proxied-group")
    servers = proxy.bootstrap_servers

    async def main() -> list[bytes]:
        await create_topic(servers, topic, PARTITIONS, 3)
        async with Producer(bootstrap_servers=servers, acks="all", enable_idempotence=True,
                            client_id="px-producer") as p:
            for i in range(RECORDS):
                p.produce(topic, f"p{i}".encode(), partition=i % PARTITIONS)
            await p.flush()
        async with Producer(bootstrap_servers=servers, transactional_id=uid("px-tid"),
                            client_id="px-txn") as t:
            await t.init_transactions()
            t.begin_transaction()
            await t.send(topic, b"txn", partition=0)
            await t.commit_transaction()
        got: list[bytes] = []
        async with Consumer(bootstrap_servers=servers, group_id=group, client_id="px-consumer",
                            auto_offset_reset="earliest",
                            isolation_level="read_committed") as c:
            c.subscribe([topic])
            for _ in range(300):
                got += [r.value or b"" for r in await c.poll(200)]
                if len(got) >= RECORDS + 1:
                    break
        return got

    got = run(main(), timeout=120)
    assert sorted(got) == sorted([f"p{i}".encode() for i in range(RECORDS)] + [b"txn"])
    conns = proxy.connections(include_closed=True)
    roles = {r for c in conns for r in c.roles}
    assert {"partition-leader", "group-coordinator", "txn-coordinator"} <= roles, roles
    assert {c.broker for c in conns if c.broker is not None and c.broker >= 0} \
        >= set(target3.node_ids)
    upstream = {int(a.rsplit(":", 1)[1]) for a in target3.bootstrap_servers.split(",")}
    assert watch.answers > 0 and watch.ports
    assert not watch.ports & upstream
    assert watch.ports <= set(proxy.node_ports.values()) | {proxy.port}
