"""The kaflite client against the kaflite cluster: exactness, leader moves, broker kills.

Every test checks the records read back are exactly the records written: no
loss, no duplicates, per-partition order kept.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Coroutine
from typing import Any

from kaflite.client import Admin, Consumer, NewTopic, Producer, TopicPartition
from kaflite.client.sync import Admin as SyncAdmin
from kaflite.client.sync import Consumer as SyncConsumer
from kaflite.client.sync import Producer as SyncProducer
from kaflite.cluster import Cluster
from kaflite.protocol.hashing import murmur2_partition


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 90))


def topic_name() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


async def read_all(servers: str, topic: str, partitions: int, expected: int
                   ) -> dict[int, list[bytes]]:
    out: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    async with Consumer(bootstrap_servers=servers, auto_offset_reset="earliest") as c:
        c.assign([TopicPartition(topic, p) for p in range(partitions)])
        got = 0
        for _ in range(200):
            for tp, records in (await c.getmany(timeout_ms=500)).items():
                out[tp.partition] += [r.value for r in records]
                got += len(records)
            if got >= expected:
                break
        # Nothing beyond what we expect (no duplicates written).
        extra = await c.getmany(timeout_ms=300)
        for tp, records in extra.items():
            out[tp.partition] += [r.value for r in records]
    return out


def test_produce_consume_exact(cluster: Cluster) -> None:
    topic = topic_name()
    cluster.create_topic(topic, partitions=3, replication_factor=3)

    async def main() -> None:
        async with Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=1) as p:
            md = await p.send(topic, b"first", key=b"k1")
            assert md.offset == 0 and md.topic == topic
            values = [f"v{i}".encode() for i in range(3000)]
            keys = [f"k{i % 17}".encode() for i in range(3000)]
            result = await p.send_batch(topic, values, keys=keys)
            assert len(result) == 3000
            delivered: list[Any] = []
            for i in range(500):
                p.produce(topic, f"p{i}".encode(), on_delivery=lambda e, m: delivered.append(e))
            await p.flush()
            assert delivered == [None] * 500
            # keyed records land where Java's murmur2 puts them
            assert result[5].partition == murmur2_partition(b"k5", 3)
        data = await read_all(cluster.bootstrap_servers, topic, 3, 3501)
        # send_batch's metadata says where each record went (by its key, in call order)
        for i, value in enumerate(values):
            assert result[i].partition == murmur2_partition(keys[i], 3)
            assert data[result[i].partition][result[i].offset] == value
        allv = [v for vs in data.values() for v in vs]
        assert len(allv) == 3501 and len(set(allv)) == 3501
        # order per key is preserved
        for p, vs in data.items():
            seq = [int(v[1:]) for v in vs if v.startswith(b"v")]
            assert seq == sorted(seq), p

    run(main())


def test_leader_moves_during_produce_and_consume(cluster: Cluster) -> None:
    topic = topic_name()
    cluster.create_topic(topic, partitions=3, replication_factor=3)
    n = 4000

    async def main() -> None:
        async with Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=2,
                            batch_size=2000) as p:
            sent = []
            for i in range(n):
                p.produce(topic, f"{i}".encode(), partition=i % 3)
                sent.append(i)
                if i % 500 == 250:
                    await asyncio.to_thread(cluster.move_leader, topic, i % 3)
                    await asyncio.sleep(0.01)
                if i % 100 == 0:
                    await asyncio.sleep(0)
            await p.flush()
            events = [str(e) for e in p.events()]
            assert any("NOT_LEADER_OR_FOLLOWER" in e or "leader" in e for e in events), events
        async with Consumer(bootstrap_servers=cluster.bootstrap_servers,
                            auto_offset_reset="earliest") as c:
            c.assign([TopicPartition(topic, p) for p in range(3)])
            seen: list[int] = []
            moved = 0
            while len(seen) < n:
                got = await c.poll(timeout_ms=1000, max_records=300)
                seen += [int(r.value) for r in got]
                if moved < 3 and len(seen) > (moved + 1) * 900:
                    await asyncio.to_thread(cluster.move_leader, topic, moved)
                    moved += 1
            assert sorted(seen) == list(range(n))

            # 4,000 small records fit in the first fetch of each partition: the last poll
            # can come from the buffer before any fetch reached a moved leader (CI,
            # 2026-11-30: all read, no event yet). Fetching on at the end shows the moves.
            def noticed() -> bool:
                return any("NOT_LEADER_OR_FOLLOWER" in str(e) or "moved" in str(e)
                           for e in c.events())
            deadline = time.monotonic() + 15
            while not noticed() and time.monotonic() < deadline:
                assert await c.poll(timeout_ms=200) == []
            assert noticed(), [str(e) for e in c.events()]

    run(main())


def test_broker_kill_during_produce_and_consume(cluster: Cluster) -> None:
    topic = topic_name()
    cluster.create_topic(topic, partitions=3, replication_factor=3)
    n = 3000

    async def main() -> None:
        victim = cluster.controller.topics[topic].partitions[0].leader
        async with Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=2,
                            batch_size=1500, request_timeout_ms=3000,
                            delivery_timeout_ms=60000) as p:
            for i in range(n):
                p.produce(topic, f"{i}".encode(), partition=i % 3)
                if i == n // 2:
                    await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(
                        cluster.kill_broker(victim), cluster._loop))  # type: ignore[arg-type]
                if i % 100 == 0:
                    await asyncio.sleep(0.001)
            await p.flush()
        async with Consumer(bootstrap_servers=cluster.bootstrap_servers,
                            auto_offset_reset="earliest", request_timeout_ms=3000) as c:
            c.assign([TopicPartition(topic, p) for p in range(3)])
            seen: list[int] = []
            for _ in range(300):
                seen += [int(r.value) for r in await c.poll(timeout_ms=500)]
                if len(seen) >= n:
                    break
            assert sorted(seen) == list(range(n))
        await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(
            cluster.restart_broker(victim), cluster._loop))  # type: ignore[arg-type]

    run(main())


def test_connections_one_per_broker_with_roles(cluster: Cluster) -> None:
    topic = topic_name()
    cluster.create_topic(topic, partitions=3, replication_factor=1,
                         assignments=[[0], [1], [2]])

    async def main() -> None:
        async with Producer(bootstrap_servers=cluster.bootstrap_servers) as p:
            for i in range(3):
                await p.send(topic, b"x", partition=i)
            conns = p.connections()
            assert sorted(c.broker for c in conns) == [0, 1, 2]
            for c in conns:
                assert c.channel == "data"
                assert c.roles == [f"leader for {topic}-{c.broker}"]
                assert c.api_versions["Produce"] >= 3
                assert c.in_flight == 0 and c.bytes_sent > 0
            # every connection is at the broker's advertised address
            addrs = {b.node_id: f"{b.advertised_host}:{b.advertised_port}"
                     for b in cluster.brokers.values()}
            assert {c.broker: c.address for c in conns} == addrs

    run(main())


def test_admin_topics_configs_records(cluster: Cluster) -> None:
    topic = topic_name()

    async def main() -> None:
        async with Admin(bootstrap_servers=cluster.bootstrap_servers) as admin:
            await admin.create_topics([NewTopic(topic, 2, 2, {"retention.ms": "3600000"})])
            described = await admin.describe_topics([topic])
            assert len(described[topic].partitions) == 2
            await admin.create_partitions({topic: 4})
            assert len((await admin.describe_topics([topic]))[topic].partitions) == 4
            from kaflite.client.admin import ConfigResource
            res = ConfigResource(2, topic)
            assert (await admin.describe_configs([res]))[res]["retention.ms"] == "3600000"
            await admin.alter_configs({res: {"retention.ms": "7200000"}})
            assert (await admin.describe_configs([res]))[res]["retention.ms"] == "7200000"
            cluster_info = await admin.describe_cluster()
            assert len(cluster_info["brokers"]) == 3
            async with Producer(bootstrap_servers=cluster.bootstrap_servers) as p:
                await p.send_batch(topic, [b"a"] * 10, partition=0)
            tp = TopicPartition(topic, 0)
            offs = await admin.list_offsets({tp: "latest"})
            assert offs[tp] is not None and offs[tp].offset == 10
            assert await admin.delete_records({tp: 4}) == {tp: 4}
            offs = await admin.list_offsets({tp: "earliest"})
            assert offs[tp] is not None and offs[tp].offset == 4
            await admin.delete_topics([topic])
            assert topic not in await admin.list_topics()

    run(main())


def test_sync_facade(cluster: Cluster) -> None:
    topic = topic_name()
    cluster.create_topic(topic, partitions=2, replication_factor=1)
    with SyncProducer(bootstrap_servers=cluster.bootstrap_servers) as p:
        md = p.send(topic, b"one", partition=1)
        assert md.partition == 1 and md.offset == 0
        for i in range(100):
            p.produce(topic, str(i).encode(), partition=0)
        p.flush()
        assert p.partitions_for(topic) == [0, 1]
    with SyncConsumer(bootstrap_servers=cluster.bootstrap_servers,
                      auto_offset_reset="earliest") as c:
        c.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        got: list[bytes] = []
        for _ in range(20):
            got += [r.value for r in c.poll(500)]
            if len(got) >= 101:
                break
        assert sorted(got) == sorted([b"one"] + [str(i).encode() for i in range(100)])
        assert c.end_offsets([TopicPartition(topic, 0)]) == {TopicPartition(topic, 0): 100}
        assert c.position(TopicPartition(topic, 0)) == 100
    made = topic_name()
    with SyncAdmin(bootstrap_servers=cluster.bootstrap_servers) as a:
        a.create_topics([NewTopic(made, 1, 1)])
        assert made in a.list_topics()
        a.create_partitions({made: 3})
        assert len(a.describe_topics([made])[made].partitions) == 3
        tp0 = TopicPartition(topic, 0)
        assert a.delete_records({tp0: 40}) == {tp0: 40}
        earliest = a.list_offsets({tp0: "earliest"})[tp0]
        assert earliest is not None and earliest.offset == 40
        a.delete_topics([made])
        assert made not in a.list_topics()


def test_seek_pause_offsets_for_times(cluster: Cluster) -> None:
    topic = topic_name()
    cluster.create_topic(topic, partitions=1, replication_factor=1)

    # Recent timestamps: records stamped in 1970 are past retention.ms at once, and the
    # broker's retention check (as Kafka's) deletes them while the test runs.
    base = int(time.time() * 1000) - 60_000

    async def main() -> None:
        async with Producer(bootstrap_servers=cluster.bootstrap_servers) as p:
            for i in range(10):
                await p.send(topic, str(i).encode(), timestamp=base + i * 10)
        tp = TopicPartition(topic, 0)
        async with Consumer(bootstrap_servers=cluster.bootstrap_servers,
                            auto_offset_reset="latest") as c:
            c.assign([tp])
            assert await c.position(tp) == 10
            c.seek(tp, 3)
            recs = await c.poll(timeout_ms=2000)
            assert [r.offset for r in recs][:1] == [3]
            found = await c.offsets_for_times({tp: base + 55})
            assert found[tp] is not None and found[tp].offset == 6
            c.seek_to_beginning(tp)
            assert await c.position(tp) == 0
            c.pause(tp)
            assert await c.poll(timeout_ms=200) == []
            c.resume(tp)
            assert len(await c.poll(timeout_ms=2000)) > 0
            assert c.lag(tp) is not None

    run(main())


def test_socket_buffer_configs_size_the_sockets(cluster: Cluster) -> None:
    import socket

    def buffers(p: Producer) -> list[tuple[int, int]]:
        out = []
        for _, _, conn in p.pool.open_connections():
            assert conn._protocol is not None and conn._protocol.transport is not None
            sock = conn._protocol.transport.get_extra_info("socket")
            out.append((sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF),
                        sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)))
        return out

    topic = topic_name()
    cluster.create_topic(topic, partitions=1, replication_factor=1)

    async def main() -> None:
        # Linux reports twice the size asked for (it reserves room for its bookkeeping).
        async with Producer(bootstrap_servers=cluster.bootstrap_servers,
                            send_buffer_bytes=96_000, receive_buffer_bytes=48_000) as p:
            await p.send(topic, b"x", partition=0)
            sized = buffers(p)
            assert sized and all(s == (192_000, 96_000) for s in sized)
        async with Producer(bootstrap_servers=cluster.bootstrap_servers) as p:  # -1: the OS's
            await p.send(topic, b"x", partition=0)
            assert all(s != (192_000, 96_000) for s in buffers(p))

    run(main())
