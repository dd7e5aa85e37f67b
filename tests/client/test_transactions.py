"""The kaflite transactional producer: commit, abort, fencing, offsets in a transaction,
the sync façade, and its records read by librdkafka's read_committed consumer.

The main cases run in both transaction versions (KIP-890): at ``transaction.version``
2, what a new cluster finalizes, the producer adds no partition and no group itself
(its Produce v12 and TxnOffsetCommit v5 have the brokers do it) and each end bumps
its epoch; at 1 it sends AddPartitionsToTxn and AddOffsetsToTxn. The brokers' own
count of each API from the producer's client id tells which protocol ran."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kaflite.client import Consumer, Producer, TopicPartition
from kaflite.client import sync as ksync
from kaflite.client.producer import TransactionStateError
from kaflite.cluster import Cluster
from kaflite.protocol import errors


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(params=[2, 1], ids=["txn-v2", "txn-v1"])
def txn_version(request: pytest.FixtureRequest, cluster: Cluster) -> Iterator[int]:
    """The cluster at transaction.version ``param`` for one test (then back at 2)."""
    level: int = request.param
    with ksync.Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
        if level != 2:
            assert admin.update_features({"transaction.version": level}, downgrade="safe") \
                == {"transaction.version": None}
        try:
            yield level
        finally:
            if level != 2:
                admin.update_features({"transaction.version": 2})


def requests_from(cluster: Cluster, client_id: str) -> dict[str, int]:
    """How many requests of each API the brokers had from ``client_id``."""
    return next(c.requests for c in cluster.clients(include_closed=True)
                if c.client_id == client_id)


def assert_protocol(cluster: Cluster, client_id: str, version: int) -> None:
    """The producer spoke transaction version ``version``."""
    sent = requests_from(cluster, client_id)
    adds = sent.get("AddPartitionsToTxn", 0) + sent.get("AddOffsetsToTxn", 0)
    assert sent.get("EndTxn", 0) > 0, sent
    assert (adds == 0) if version == 2 else (adds > 0), sent


async def read(servers: str, topic: str, partitions: int, isolation: str,
               want: int | None = None) -> list[bytes]:
    """Every record a consumer with ``isolation`` sees, up to the end of each partition."""
    async with Consumer({"bootstrap.servers": servers, "isolation.level": isolation,
                         "auto.offset.reset": "earliest"}) as c:
        tps = [(topic, p) for p in range(partitions)]
        c.assign(tps)
        ends = await c.end_offsets(tps)  # read_committed: the last stable offsets
        got: list[bytes] = []
        deadline = time.monotonic() + 20
        while True:
            for records in (await c.getmany(timeout_ms=200)).values():
                got += [r.value for r in records]
            positions = [await c.position(tp) for tp in ends]
            if all(pos >= end for pos, end in zip(positions, ends.values(), strict=True)) \
                    and (want is None or len(got) >= want):
                return got
            assert time.monotonic() < deadline, f"stuck at {positions}, ends {ends}"


def test_commit_abort_and_read_committed(cluster: Cluster, txn_version: int) -> None:
    topic = _name("ktx")
    cluster.create_topic(topic, 2, 3)
    servers = cluster.bootstrap_servers

    async def run() -> tuple[list[bytes], list[bytes], Any]:
        async with Producer({"bootstrap.servers": servers, "transactional.id": _name("tid"),
                             "client.id": "ktx-producer"}) as p:
            with pytest.raises(TransactionStateError, match="needs: in transaction"):
                p.produce(topic, b"outside a transaction")
            await p.init_transactions()
            p.begin_transaction()
            await p.send(topic, b"c0", partition=0)
            for i in range(1, 10):
                p.produce(topic, f"c{i}".encode(), partition=i % 2)
            await p.commit_transaction()
            p.begin_transaction()
            sent = await p.send(topic, b"aborted-but-written", partition=1)
            # partition 0: committed data of the same producer follows this aborted record,
            # and must not be dropped with it
            await p.send(topic, b"aborted-too", partition=0)
            p.produce(topic, b"never-sent", partition=0)
            await p.abort_transaction()
            p.begin_transaction()
            await p.send_batch(topic, [b"batch0", b"batch1"], partition=0)
            await p.commit_transaction()
            roles = [r for c in p.connections() for r in c.roles]
            assert any(r.startswith("txn coordinator") for r in roles), roles
            assert sent.offset >= 0
        # EndTxn is answered before the markers are written: wait for all of them
        committed = await read(servers, topic, 2, "read_committed", want=12)
        everything = await read(servers, topic, 2, "read_uncommitted", want=14)
        return committed, everything, p

    committed, everything, _ = asyncio.run(run())
    assert_protocol(cluster, "ktx-producer", txn_version)
    want = {f"c{i}".encode() for i in range(10)} | {b"batch0", b"batch1"}
    assert sorted(committed) == sorted(want)
    assert sorted(everything) == sorted(want | {b"aborted-but-written", b"aborted-too"})
    # a third-party read_committed consumer agrees
    ck = pytest.importorskip("confluent_kafka")
    c = ck.Consumer({"bootstrap.servers": servers, "group.id": "unused",
                     "isolation.level": "read_committed", "enable.partition.eof": True})
    c.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(2)])
    seen: list[bytes] = []
    ended: set[int] = set()
    deadline = time.monotonic() + 20
    while len(ended) < 2 and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is not None:
            if m.error():
                ended.add(m.partition())
            else:
                seen.append(m.value())
    c.close()
    assert sorted(seen) == sorted(want)


def test_a_second_producer_fences_the_first(cluster: Cluster) -> None:
    topic, tid = _name("kfence"), _name("tid")
    cluster.create_topic(topic, 1, 3)
    servers = cluster.bootstrap_servers

    async def run() -> list[bytes]:
        old = Producer({"bootstrap.servers": servers, "transactional.id": tid})
        new = Producer({"bootstrap.servers": servers, "transactional.id": tid})
        try:
            await old.init_transactions()
            old.begin_transaction()
            await old.send(topic, b"zombie", partition=0)
            await new.init_transactions()  # aborts the zombie's transaction
            with pytest.raises(errors.ProducerFencedError):
                await old.commit_transaction()
            assert old.transaction_state == "fatal error"
            new.begin_transaction()
            await new.send(topic, b"fresh", partition=0)
            await new.commit_transaction()
        finally:
            await old.close()
            await new.close()
        return await read(servers, topic, 1, "read_committed", want=1)

    assert asyncio.run(run()) == [b"fresh"]


def test_offsets_commit_with_the_transaction(cluster: Cluster, txn_version: int) -> None:
    src, dst, group = _name("kin"), _name("kout"), _name("kgroup")
    cluster.create_topic(src, 1, 3)
    cluster.create_topic(dst, 1, 3)
    servers = cluster.bootstrap_servers

    async def run() -> tuple[int | None, int | None, list[bytes]]:
        async with Producer({"bootstrap.servers": servers}) as seed:
            await seed.send_batch(src, [f"in{i}".encode() for i in range(6)], partition=0)
        async with Consumer({"bootstrap.servers": servers, "group.id": group,
                             "auto.offset.reset": "earliest", "enable.auto.commit": False,
                             "isolation.level": "read_committed"}) as c, \
                Producer({"bootstrap.servers": servers, "client.id": f"koffsets-{txn_version}",
                          "transactional.id": _name("tid")}) as p:
            c.subscribe([src])
            records: list[Any] = []
            deadline = time.monotonic() + 30
            while len(records) < 6:
                assert time.monotonic() < deadline, "the input never arrived"
                for batch in (await c.getmany(timeout_ms=200)).values():
                    records += list(batch)
            await p.init_transactions()
            p.begin_transaction()
            for r in records[:3]:
                p.produce(dst, r.value.upper(), partition=0)
            await p.send_offsets_to_transaction({(src, 0): records[2].offset + 1},
                                                c.group_metadata())
            await p.abort_transaction()
            after_abort = await c.committed((src, 0))
            p.begin_transaction()
            for r in records:
                p.produce(dst, r.value.upper(), partition=0)
            await p.send_offsets_to_transaction({(src, 0): records[-1].offset + 1},
                                                c.group_metadata())
            await p.commit_transaction()
            after_commit = await c.committed((src, 0))
        return after_abort, after_commit, await read(servers, dst, 1, "read_committed", want=6)

    after_abort, after_commit, out = asyncio.run(run())
    assert_protocol(cluster, f"koffsets-{txn_version}", txn_version)
    assert after_abort is None
    assert after_commit == 6
    assert out == [f"IN{i}".encode() for i in range(6)]


def test_sync_facade(cluster: Cluster) -> None:
    topic = _name("ksync")
    cluster.create_topic(topic, 1, 3)
    with ksync.Producer({"bootstrap.servers": cluster.bootstrap_servers,
                         "transactional.id": _name("tid")}) as p:
        p.init_transactions()
        p.begin_transaction()
        p.produce(topic, b"one", partition=0)
        p.commit_transaction()
        p.begin_transaction()
        p.produce(topic, b"two", partition=0)
        p.abort_transaction()
    assert asyncio.run(read(cluster.bootstrap_servers, topic, 1, "read_committed",
                            want=1)) == [b"one"]


def test_admin_lists_and_describes_transactions(cluster: Cluster) -> None:
    topic, tid = _name("kadmin"), _name("tid")
    cluster.create_topic(topic, 2, 3)
    servers = cluster.bootstrap_servers
    with ksync.Producer({"bootstrap.servers": servers, "transactional.id": tid}) as p, \
            ksync.Admin({"bootstrap.servers": servers}) as admin:
        p.init_transactions()
        p.begin_transaction()
        p.send(topic, b"open", partition=1)
        ongoing = admin.describe_transactions([tid])[tid]
        assert ongoing.state == "Ongoing"
        assert ongoing.partitions == [TopicPartition(topic, 1)]
        assert (tid, ongoing.producer_id, "Ongoing") in admin.list_transactions()
        assert tid not in {t for t, _, _ in admin.list_transactions(states=["Empty"])}
        assert [t for t, _, _ in admin.list_transactions(producer_ids=[ongoing.producer_id])] \
            == [tid]
        p.commit_transaction()
        deadline = time.monotonic() + 20
        while admin.describe_transactions([tid])[tid].state != "CompleteCommit":
            assert time.monotonic() < deadline, "the commit never completed"
            time.sleep(0.05)
        with pytest.raises(errors.TransactionalIdNotFoundError):
            admin.describe_transactions([_name("nobody")])


@pytest.mark.parametrize("txn_version", [1], indirect=True, ids=["txn-v1"])
def test_a_refused_add_partitions_fails_the_records_instead_of_hanging(
        cluster: Cluster, txn_version: int) -> None:
    """Transaction version 1: the producer's own AddPartitionsToTxn is refused."""
    topic = _name("krefused")
    cluster.create_topic(topic, 1, 3)
    servers = cluster.bootstrap_servers

    async def run() -> list[bytes]:
        async with Producer({"bootstrap.servers": servers, "transactional.id": _name("tid"),
                             "client.id": "krefused"}) as p:
            await p.init_transactions()
            p.begin_transaction()
            cluster.faults.inject_error("AddPartitionsToTxn", "INVALID_TXN_STATE", 1,
                                        client_id="krefused", level="partition")
            with pytest.raises(errors.InvalidTxnStateError):
                await asyncio.wait_for(p.send(topic, b"refused", partition=0), 30)
            assert p.transaction_state == "abortable error"
            with pytest.raises(errors.KafkaError, match="must be aborted"):
                await p.commit_transaction()
            await p.abort_transaction()
            p.begin_transaction()
            await p.send(topic, b"after", partition=0)
            await p.commit_transaction()
        return await read(servers, topic, 1, "read_committed", want=1)

    try:
        assert asyncio.run(run()) == [b"after"]
    finally:
        cluster.faults.clear()
