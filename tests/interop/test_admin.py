"""kaflite's admin client against each target: the describe and list methods for
topics, configs, consumer groups (classic and KIP-848), offsets and transactions, and
the changes whose results they show (partitions added, configs altered and reset,
group offsets altered, groups and topics deleted, records deleted)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest

from kaflite.client import Admin, ConfigResource, Consumer, Producer, TopicPartition
from kaflite.protocol import errors
from kaflite.testing import ClusterUnderTest
from tests.interop._clients import create_topic, replicas, run, uid
from tests.interop.conftest import limited, matrix_fixture

pytestmark = pytest.mark.interop

# kaflite, Apache Kafka, and the peers (Tansu, kfake), each test saying what a peer lacks
# (docs/compatibility.md, "The client x broker matrix").
target = matrix_fixture()

TOPIC, BROKER = 2, 4
# Kafka 4.4.0's broker configs, as one of its brokers described them
BROKER_CONFIGS = Path(__file__).parents[1] / "cluster" / "fixtures" / "kafka-4.4.0-broker-configs.json"
T = TypeVar("T")


async def eventually(what: str, get: Callable[[], Awaitable[T]], ok: Callable[[T], bool],
                     timeout: float = 30) -> T:
    """``await get()`` until ``ok`` holds of its answer (Kafka applies some admin changes
    after it answers: deletions, transaction markers)."""
    deadline = time.monotonic() + timeout
    while True:
        got = await get()
        if ok(got):
            return got
        assert time.monotonic() < deadline, f"{what}: still {got}"
        await asyncio.sleep(0.2)


def test_topics_and_cluster(target: ClusterUnderTest) -> None:
    limited(target, {"tansu": "Tansu 0.6 does not serve CreatePartitions"})
    topic = uid("admin-topic")
    servers = target.bootstrap_servers
    nodes = set(target.node_ids)

    async def main() -> None:
        await create_topic(servers, topic, 4, replicas(target))
        async with Admin(bootstrap_servers=servers) as admin:
            cluster = await admin.describe_cluster()
            assert {b.node_id for b in cluster["brokers"]} == nodes
            assert cluster["controller_id"] in nodes and cluster["cluster_id"]
            assert topic in await admin.list_topics()
            meta = (await admin.describe_topics([topic]))[topic]
            assert meta.topic_id is not None and not meta.internal
            assert [p.partition for p in meta.partitions] == [0, 1, 2, 3]
            for p in meta.partitions:
                assert p.leader in p.replicas and set(p.replicas) <= nodes
                assert len(p.replicas) == replicas(target)
                assert sorted(p.isr) == sorted(p.replicas)
            await admin.create_partitions({topic: 6})
            await eventually("6 partitions", lambda: admin.describe_topics([topic]),
                             lambda m: len(m[topic].partitions) == 6)
            await admin.delete_topics([topic])
            await eventually("topic deleted", admin.list_topics, lambda ts: topic not in ts)
            with pytest.raises(errors.UnknownTopicOrPartitionError):
                await admin.describe_topics([topic])

    run(main())


def test_topic_configs_described_altered_and_reset(target: ClusterUnderTest) -> None:
    limited(target, {"tansu": "Tansu 0.6 describes a config a topic was created with as "
                              "DEFAULT_CONFIG, not DYNAMIC_TOPIC_CONFIG"})
    topic = uid("admin-configs")
    servers = target.bootstrap_servers
    res = ConfigResource(TOPIC, topic)

    async def main() -> None:
        await create_topic(servers, topic, 1, replicas(target), {"retention.ms": "3600000"})
        async with Admin(bootstrap_servers=servers) as admin:
            async def entries() -> dict[str, tuple[str | None, str]]:
                got = await admin.describe_config_entries([res])
                return {e.name: (e.value, e.source) for e in got[res]}

            async def known() -> dict[str, tuple[str | None, str]]:
                # Kafka answers CreateTopics once its controller has the topic; the
                # broker a describe reaches may learn it a moment later (CI: kafka-3
                # answered UNKNOWN_TOPIC_OR_PARTITION right after the create)
                try:
                    return await entries()
                except errors.UnknownTopicOrPartitionError:
                    return {}
            first = await eventually("created", known, bool)
            assert first["retention.ms"] == ("3600000", "DYNAMIC_TOPIC_CONFIG")
            # a config nobody set is described with its default, not as set on the topic
            assert first["segment.bytes"][0] is not None
            assert first["segment.bytes"][1] != "DYNAMIC_TOPIC_CONFIG"
            assert (await admin.describe_configs([res]))[res]["retention.ms"] == "3600000"
            await admin.alter_configs({res: {"retention.ms": "7200000",
                                             "max.message.bytes": "2000000"}})
            altered = await eventually("altered", entries,
                                       lambda e: e["retention.ms"][0] == "7200000")
            assert altered["max.message.bytes"] == ("2000000", "DYNAMIC_TOPIC_CONFIG")
            await admin.alter_configs({res: {"retention.ms": None}})
            reset = await eventually("reset", entries,
                                     lambda e: e["retention.ms"][0] != "7200000")
            assert reset["retention.ms"] == (str(7 * 24 * 3600 * 1000), "DEFAULT_CONFIG")
            assert reset["max.message.bytes"] == ("2000000", "DYNAMIC_TOPIC_CONFIG")

    run(main())


def test_a_broker_describes_every_kafka_broker_config(target: ClusterUnderTest) -> None:
    """The names (with their read_only and is_sensitive) a broker describes: on kaflite
    and on Kafka alike, those of tests/cluster/fixtures (Kafka 4.4.0's), with the
    listeners a client reaches it by."""
    limited(target, {"tansu": "Tansu 0.6 describes the broker configs it has only",
                     "kfake": "kfake describes the broker configs it has only"})
    kafka = json.loads(BROKER_CONFIGS.read_text())["configs"]
    node = str(target.node_ids[0])
    res = ConfigResource(BROKER, node)

    async def main() -> None:
        async with Admin(bootstrap_servers=target.bootstrap_servers) as admin:
            got = {e.name: e for e in (await admin.describe_config_entries([res]))[res]}
        assert sorted(set(kafka) - set(got)) == []
        assert sorted(set(got) - set(kafka)) == []
        assert {n: (e.read_only, e.sensitive) for n, e in got.items()} == {
            n: (read_only, sensitive) for n, (_, _, read_only, sensitive) in kafka.items()}
        for name in ("listeners", "advertised.listeners"):
            assert got[name].source == "STATIC_BROKER_CONFIG", name
            assert "PLAINTEXT://127.0.0.1:" in (got[name].value or ""), name
        assert (got["node.id"].value, got["broker.id"].value) == (node, node)

    run(main())


def test_groups_listed_described_and_deleted(target: ClusterUnderTest) -> None:
    limited(target, {"tansu": "Tansu 0.6 does not serve ConsumerGroupHeartbeat (KIP-848)",
                     "kfake": "kfake lists a KIP-848 group with protocol type '' in "
                              "ListGroups (Kafka: 'consumer')"})
    topic, classic, modern = uid("admin-groups"), uid("classic"), uid("modern")
    servers = target.bootstrap_servers
    tps = {TopicPartition(topic, p) for p in range(2)}

    async def main() -> None:
        await create_topic(servers, topic, 2, replicas(target))
        async with Producer(bootstrap_servers=servers) as p:
            for i in range(10):
                p.produce(topic, b"x", partition=i % 2)
            await p.flush()
        members = {g: Consumer(bootstrap_servers=servers, group_id=g, group_protocol=proto,
                               client_id=f"admin-{proto}", auto_offset_reset="earliest",
                               enable_auto_commit=False)
                   for g, proto in ((classic, "classic"), (modern, "consumer"))}
        async with Admin(bootstrap_servers=servers) as admin:
            try:
                for c in members.values():
                    await c.start()
                    c.subscribe([topic])
                deadline = time.monotonic() + 60
                while not all([await read_all(c, tps) for c in members.values()]):
                    assert time.monotonic() < deadline, "the members did not read everything"
                for c in members.values():
                    await c.commit()
                await check_live_groups(admin, topic, classic, modern, tps)
            finally:
                for c in members.values():
                    await c.close()
            listed = await eventually(
                "groups empty", admin.list_group_listings,
                lambda gs: {g.group_id: g.state for g in gs if g.group_id in members}
                == {classic: "Empty", modern: "Empty"})
            assert {g.group_id: g.type for g in listed if g.group_id in members} == \
                {classic: "classic", modern: "consumer"}
            await admin.alter_group_offsets(classic, {TopicPartition(topic, 0): 1})
            assert (await admin.list_group_offsets(classic))[TopicPartition(topic, 0)].offset == 1
            await admin.delete_groups([classic, modern])
            assert not {g for g, _, _ in await admin.list_groups()} & set(members)

    run(main(), timeout=150)


async def read_all(c: Consumer, tps: set[TopicPartition]) -> bool:
    """Poll once; whether ``c`` owns ``tps`` and has read their five records each."""
    await c.poll(timeout_ms=50)
    return c.assignment() == tps and all([await c.position(tp) >= 5 for tp in tps])


async def check_live_groups(admin: Admin, topic: str, classic: str, modern: str,
                            tps: set[TopicPartition]) -> None:
    by_type = {kind: {g.group_id: g for g in await admin.list_group_listings(types=[kind])}
               for kind in ("classic", "consumer")}
    assert classic in by_type["classic"] and classic not in by_type["consumer"]
    assert modern in by_type["consumer"] and modern not in by_type["classic"]
    assert by_type["classic"][classic].state == "Stable"
    assert by_type["classic"][classic].protocol_type == "consumer"
    assert {(g, t, s) for g, t, s in await admin.list_groups()} >= {
        (classic, "consumer", "Stable"), (modern, "consumer", "Stable")}
    described = (await admin.describe_groups([classic]))[classic]
    assert (described.state, described.protocol_type) == ("Stable", "consumer")
    assert [(m.client_id, set(m.assignment)) for m in described.members] == \
        [("admin-classic", tps)]
    group = (await admin.describe_consumer_groups([modern]))[modern]
    assert group.state == "Stable"
    [member] = group.members
    assert member.client_id == "admin-consumer"
    assert member.subscribed_topic_names == (topic,)
    assert set(member.assignment) == set(member.target_assignment) == tps
    assert not group.reconciling(member)
    with pytest.raises(errors.GroupIdNotFoundError):    # a classic group is not one
        await admin.describe_consumer_groups([classic])
    for g in (classic, modern):
        offsets = await admin.list_group_offsets(g)
        assert {tp: o.offset for tp, o in offsets.items()} == \
            {TopicPartition(topic, 0): 5, TopicPartition(topic, 1): 5}


def test_offsets_records_and_transactions(target: ClusterUnderTest) -> None:
    limited(target, {"tansu": "Tansu 0.6 does not serve ListTransactions",
                     "kfake": "kfake lists every transaction on every broker, and a "
                              "committed one as Empty (Kafka: its coordinator alone, "
                              "CompleteCommit)"})
    topic, tid = uid("admin-offsets"), uid("admin-tid")
    servers = target.bootstrap_servers
    tp = TopicPartition(topic, 0)

    async def main() -> None:
        await create_topic(servers, topic, 1, replicas(target))
        async with Producer(bootstrap_servers=servers, transactional_id=tid) as p:
            await p.init_transactions()
            p.begin_transaction()
            for i in range(10):
                await p.send(topic, f"r{i}".encode(), partition=0, timestamp=1_000_000 + i)
            await p.commit_transaction()
        async with Admin(bootstrap_servers=servers) as admin:
            listings = await eventually(
                "transaction complete", admin.list_transaction_listings,
                lambda ts: any(t.transactional_id == tid and t.state == "CompleteCommit"
                               for t in ts))
            [listing] = [t for t in listings if t.transactional_id == tid]
            described = (await admin.describe_transactions([tid]))[tid]
            assert described.state == "CompleteCommit"
            assert described.producer_id == listing.producer_id
            assert described.partitions == []       # a completed transaction holds none
            assert await admin.list_transactions(states=["Ongoing"]) == []
            # ten records and the commit marker
            ends = await admin.list_offsets({tp: "earliest"})
            assert ends[tp] is not None and ends[tp].offset == 0
            latest = await admin.list_offsets({tp: "latest"})
            assert latest[tp] is not None and latest[tp].offset == 11
            at = await admin.list_offsets({tp: 1_000_004})
            assert at[tp] is not None and at[tp].offset == 4
            assert await admin.delete_records({tp: 6}) == {tp: 6}
            after = await admin.list_offsets({tp: "earliest"})
            assert after[tp] is not None and after[tp].offset == 6

    run(main())
