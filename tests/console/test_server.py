"""The console server's life: it runs on the cluster's loop and stops cleanly, live
streams included; its queues are bounded."""

from __future__ import annotations

import asyncio
import threading

import httpx
import pytest

from kaflite.cluster import Cluster
from kaflite.cluster.http import HttpApi
from kaflite.console import ClientBackend, ConsoleServer
from kaflite.console.streams import Hub


def test_stop_ends_open_streams_and_frees_the_port() -> None:
    with Cluster(brokers=1) as cluster:
        api = cluster.call(HttpApi(cluster, sampling=False).start())
        assert api._task is not None and api._task.get_loop() is cluster._loop
        lines: list[str] = []
        opened = threading.Event()

        def read() -> None:
            with httpx.Client(base_url=api.url, timeout=30) as c, \
                    c.stream("GET", "/api/stream") as stream:
                for line in stream.iter_lines():
                    lines.append(line)
                    opened.set()

        reader = threading.Thread(target=read)
        reader.start()
        assert opened.wait(30)
        cluster.call(api.stop())
        reader.join(30)
        assert not reader.is_alive(), "the stream did not end when the console stopped"
        assert lines[0] == "event: hello"
        # the port is free again: a new console can take it
        again = cluster.call(HttpApi(cluster, port=api.port, sampling=False).start())
        assert again.port == api.port
        cluster.call(again.stop())


def test_a_slow_subscriber_loses_the_oldest_events_not_memory() -> None:
    async def run() -> list[bytes]:
        hub = Hub(maxlen=3)
        sub = hub.subscribe(["log"])
        for i in range(10):
            hub.publish("log", {"n": i})
        hub.publish("metrics", {"ignored": True})       # not a kind it asked for
        assert len(sub.queue) == 3
        frames = hub.sse(sub, {"hello": 1})
        out = [await anext(frames) for _ in range(4)]
        hub.close()
        out += [frame async for frame in frames]
        return out

    frames = asyncio.run(run())
    assert frames[0].startswith(b"event: hello")
    assert [f.split(b"data: ")[1].strip() for f in frames[1:]] == [
        b'{"n": 7, "dropped": 7}', b'{"n": 8}', b'{"n": 9}']


def test_the_kafka_backend_streams_leader_changes_from_metadata() -> None:
    with Cluster(brokers=3) as cluster:
        cluster.create_topic("moving", 1, 3)
        server = cluster.call(ConsoleServer(ClientBackend(cluster.bootstrap_servers)).start())
        try:
            with httpx.Client(base_url=server.url, timeout=30) as c, \
                    c.stream("GET", "/api/stream", params={"kinds": "cluster"}) as stream:
                lines = stream.iter_lines()
                assert next(lines) == "event: hello"
                assert c.get("/api/info").json()["backend"] == "kafka"
                old = cluster.controller.topics["moving"].partitions[0].leader
                for _ in range(50):       # the first metadata look is the baseline
                    if server.console.monitor._snapshot is not None:
                        break
                    threading.Event().wait(0.1)
                new = cluster.move_leader("moving", 0)
                assert new != old
                found = None
                for line, _ in zip(lines, range(100), strict=False):
                    if line.startswith("data: ") and '"change": "leader"' in line:
                        found = line
                        break
                assert found is not None and f'"leader": {new}' in found
                assert f'"previous": {old}' in found
        finally:
            cluster.call(server.stop())


def test_lag_history_and_a_consumer_protocol_group() -> None:
    ck = pytest.importorskip("confluent_kafka")
    with Cluster(brokers=1, config={"offsets.topic.num.partitions": 1}) as cluster:
        cluster.create_topic("hist", 2, 1)
        producer = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers})
        for i in range(20):
            producer.produce("hist", b"%d" % i, partition=i % 2)
        assert producer.flush(10) == 0
        api = cluster.call(HttpApi(cluster, lag_interval_s=0.2).start())
        consumer = ck.Consumer({"bootstrap.servers": cluster.bootstrap_servers,
                                "group.id": "modern", "group.protocol": "consumer",
                                "auto.offset.reset": "earliest", "enable.auto.commit": False})
        try:
            consumer.subscribe(["hist"])
            got = 0
            for _ in range(100):
                msg = consumer.poll(0.1)
                if msg is not None and msg.error() is None:
                    got += 1
                    if got == 5:
                        consumer.commit(msg, asynchronous=False)
                        break
            with httpx.Client(base_url=api.url, timeout=30) as c:
                listed = {g["group_id"]: g for g in c.get("/api/groups").json()}
                assert listed["modern"]["type"] == "consumer"
                group = c.get("/api/groups/modern").json()
                assert group["type"] == "consumer" and group["group_epoch"] >= 1
                assert len(group["members"]) == 1
                # KIP-848: one member that has taken both partitions, at the target epoch
                [member] = group["members"]
                both = [{"topic": "hist", "partition": p} for p in (0, 1)]
                assert member["assignment"] == member["target_assignment"] == both
                assert member["member_epoch"] == group["assignment_epoch"]
                assert (member["member_state"], member["waiting_for"]) == ("stable", [])
                assert member["subscribed_topics"] == ["hist"]
                assert (group["assignor"], group["reconciling"]) == ("uniform", 0)
                points: list[dict[str, float]] = []
                for _ in range(100):          # the sampler runs every 0.2 s here
                    points = c.get("/api/groups/modern/lag-history").json()["points"]
                    if len(points) >= 2:
                        break
                    threading.Event().wait(0.1)
                assert len(points) >= 2
                committed = [o for o in group["offsets"] if o["committed"] is not None]
                assert committed and all(o["log_end_offset"] == 10 for o in committed)
                assert points[-1]["lag"] == group["lag"] == sum(
                    10 - o["committed"] for o in committed)
        finally:
            consumer.close()
            cluster.call(api.stop())
