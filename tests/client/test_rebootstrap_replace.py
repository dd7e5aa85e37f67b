"""Re-bootstrap (KIP-899, KIP-1102) when the whole cluster behind the bootstrap address
is replaced: a new cluster, new cluster id, every broker on a new port, the old brokers
gone (``FrontedCluster.replace``). A client under ``metadata.recovery.strategy=
rebootstrap`` finds the new cluster through ``bootstrap.servers`` and keeps working, its
event log saying why; under ``none`` it keeps asking the old brokers and its records
fail at delivery.timeout.ms. With ``retire="hang"`` the old brokers keep their
ports but answer nothing, and only ``metadata.recovery.rebootstrap.trigger.ms`` gets
the client out."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Sequence

import pytest

from kaflite.client import Consumer, Event, Producer, TopicPartition, sync
from kaflite.client.producer._sender import DeliveryTimeout
from kaflite.cluster.replace import FrontedCluster

TOPIC = "rb"
PARTITIONS = 2
ROUNDS = 300            # bound on every polling loop (each poll waits at most 200 ms)


def _rebootstraps(events: Sequence[Event]) -> list[Event]:
    return [e for e in events if e.kind == "bootstrap" and e.message == "re-bootstrap"]


def _shows_the_move(events: Sequence[Event], old_id: str, new_id: str) -> bool:
    """A re-bootstrap, then a metadata answer from the new cluster."""
    texts = [f"{e.kind}:{e.message}" for e in events]
    moved = f"metadata:cluster id {old_id}→{new_id}"
    return "bootstrap:re-bootstrap" in texts and moved in texts \
        and texts.index("bootstrap:re-bootstrap") < texts.index(moved)


def _refused(servers: str) -> bool:
    """Does every ``host:port`` in ``servers`` refuse connections?"""
    for server in servers.split(","):
        host, _, port = server.rpartition(":")
        with socket.socket() as s:
            s.settimeout(5)
            if s.connect_ex((host, int(port))) == 0:
                return False
    return True


def _replaced(old_id: str, fronted: FrontedCluster) -> None:
    assert fronted.history == [old_id, fronted.cluster.cluster_id]
    assert fronted.cluster.cluster_id != old_id


async def _drain(c: Consumer[bytes, bytes], want: set[bytes]) -> set[bytes]:
    got: set[bytes] = set()
    for _ in range(ROUNDS):
        for records in (await c.getmany(timeout_ms=200)).values():
            got |= {bytes(r.value) for r in records if r.value is not None}
        if want <= got:
            break
    return got


async def _positions_reset(c: Consumer[bytes, bytes], cluster_id: str) -> None:
    """Poll until the consumer is a member on the new cluster with every partition at
    the new log's start (its old positions were past the new logs' ends)."""
    tps = {TopicPartition(TOPIC, p) for p in range(PARTITIONS)}
    for _ in range(ROUNDS):
        await c.getmany(timeout_ms=200)
        if c.metadata.cluster_id == cluster_id and c.assignment() == tps \
                and all(await asyncio.gather(*(_at_zero(c, tp) for tp in tps))):
            return
    raise AssertionError(f"the consumer did not settle on {cluster_id}: "
                         + "; ".join(str(e) for e in c.events()[-20:]))


async def _at_zero(c: Consumer[bytes, bytes], tp: TopicPartition) -> bool:
    return await c.position(tp) == 0


def test_async_producer_and_group_consumer_follow_a_replaced_cluster() -> None:
    async def main() -> None:
        async with FrontedCluster(brokers=2) as fronted:
            fronted.cluster.create_topic(TOPIC, PARTITIONS, 2)
            old_id = fronted.cluster.cluster_id
            opts = dict(bootstrap_servers=fronted.bootstrap_servers)
            async with Producer(**opts) as p, \
                    Consumer(**opts, group_id="g", auto_offset_reset="earliest") as c:
                c.subscribe([TOPIC])
                before = {f"before-{i}".encode() for i in range(PARTITIONS)}
                for i in range(PARTITIONS):
                    await p.send(TOPIC, f"before-{i}".encode(), partition=i)
                assert await _drain(c, before) == before

                replacement = await fronted.replace_async()
                _replaced(old_id, fronted)
                assert replacement.topics == [TOPIC]
                assert _refused(replacement.old_bootstrap)      # the old brokers are gone

                await _positions_reset(c, fronted.cluster.cluster_id)
                after = {f"after-{i}".encode() for i in range(6)}
                for v in sorted(after):
                    md = await asyncio.wait_for(p.send(TOPIC, v), 60)
                    assert md.offset >= 0
                assert p.metadata.cluster_id == fronted.cluster.cluster_id
                assert await _drain(c, after) == after
                for client in (p, c):
                    assert _shows_the_move(client.events(), old_id, fronted.cluster.cluster_id), \
                        [str(e) for e in client.events()]

    asyncio.run(main())


def test_sync_producer_and_group_consumer_follow_a_replaced_cluster() -> None:
    with FrontedCluster(brokers=2) as fronted:
        fronted.cluster.create_topic(TOPIC, PARTITIONS, 2)
        old_id = fronted.cluster.cluster_id
        opts = dict(bootstrap_servers=fronted.bootstrap_servers)
        tps = [TopicPartition(TOPIC, i) for i in range(PARTITIONS)]
        with sync.Producer(**opts, client_id="sync-p") as p, \
                sync.Consumer(**opts, client_id="sync-c", group_id="g",
                              auto_offset_reset="earliest") as c:
            c.subscribe([TOPIC])
            before = {f"before-{i}".encode() for i in range(PARTITIONS)}
            for i in range(PARTITIONS):
                p.send(TOPIC, f"before-{i}".encode(), partition=i, timeout=60)
            assert _sync_drain(c, before) == before

            fronted.replace()
            _replaced(old_id, fronted)

            # every position was 1: at 0 again means a member reading the new cluster
            for _ in range(ROUNDS):
                c.poll(timeout_ms=200)
                if c.assignment() == set(tps) and all(c.position(tp) == 0 for tp in tps):
                    break
            else:
                raise AssertionError([str(e) for e in c.events()[-20:]])
            after = {f"after-{i}".encode() for i in range(4)}
            for v in sorted(after):
                p.send(TOPIC, v, timeout=60)
            assert _sync_drain(c, after) == after
            for client in (p, c):
                assert _shows_the_move(client.events(), old_id, fronted.cluster.cluster_id), \
                    [str(e) for e in client.events()]
            assert {cl.client_id for cl in fronted.cluster.clients()} >= {"sync-p", "sync-c"}


def _sync_drain(c: sync.Consumer[bytes, bytes], want: set[bytes]) -> set[bytes]:
    got: set[bytes] = set()
    for _ in range(ROUNDS):
        got |= {bytes(r.value) for r in c.poll(timeout_ms=200) if r.value is not None}
        if want <= got:
            break
    return got


def test_strategy_none_does_not_follow_the_new_cluster() -> None:
    async def main() -> None:
        async with FrontedCluster(brokers=1) as fronted:
            fronted.cluster.create_topic(TOPIC, 1, 1)
            old_id = fronted.cluster.cluster_id
            async with Producer(bootstrap_servers=fronted.bootstrap_servers,
                                metadata_recovery_strategy="none", client_id="stuck",
                                request_timeout_ms=2000, delivery_timeout_ms=4000) as p:
                await p.send(TOPIC, b"before")
                await fronted.replace_async()
                # The record fails once delivery.timeout.ms has passed, as Java's expires
                # the batch: a DeliveryTimeout (TimeoutException) that names the refused
                # connection to the old broker.
                with pytest.raises(DeliveryTimeout) as failed:
                    await asyncio.wait_for(p.send(TOPIC, b"after"), 60)
                assert "cannot connect" in str(failed.value)
                assert p.metadata.cluster_id == old_id
                assert not _rebootstraps(p.events())
                # the new cluster never heard from it
                assert "stuck" not in {cl.client_id for cl in fronted.cluster.clients(True)}

    asyncio.run(main())


def test_trigger_rebootstraps_away_from_brokers_that_never_answer() -> None:
    """The trigger (500 ms) is well inside request.timeout.ms (5 s), which bounds the
    wait for the hung brokers' answers: without the trigger the client would give them up
    as unreachable after that, and re-bootstrap for that reason instead."""
    async def main() -> None:
        async with FrontedCluster(brokers=1) as fronted:
            fronted.cluster.create_topic(TOPIC, 1, 1)
            async with Producer(bootstrap_servers=fronted.bootstrap_servers,
                                metadata_recovery_rebootstrap_trigger_ms=500,
                                request_timeout_ms=5000) as p:
                await p.send(TOPIC, b"before")
                replacement = await fronted.replace_async(retire="hang")
                assert not _refused(replacement.old_bootstrap)   # still listening
                md = await asyncio.wait_for(p.send(TOPIC, b"after"), 90)
                assert (md.partition, md.offset) == (0, 0)       # the new cluster's log
                assert p.metadata.cluster_id == fronted.cluster.cluster_id
                causes = [e.cause or "" for e in _rebootstraps(p.events())]
                assert any("metadata.recovery.rebootstrap.trigger.ms" in c for c in causes), \
                    [str(e) for e in p.events()]

    asyncio.run(main())
