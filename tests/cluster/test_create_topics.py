"""CreateTopics opens the new logs on a worker thread, then commits the topics.

Between the two a topic's name is reserved: a second CreateTopics of it meanwhile is
TOPIC_ALREADY_EXISTS (Kafka's controller, one thread, answers the same), and the log
the first one made keeps its records.
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from kaflite.cluster import Cluster
from kaflite.cluster.log import LogManager
from kaflite.net.connection import BrokerConnection
from kaflite.protocol.messages import CreateTopicsRequest, CreateTopicsResponse
from kaflite.protocol.messages import create_topics_request as ctq

TOPIC_ALREADY_EXISTS = 36


def create(name: str, partitions: int, rf: int = 2) -> CreateTopicsRequest:
    return CreateTopicsRequest(timeout_ms=30000, topics=[
        ctq.CreatableTopic(name=name, num_partitions=partitions, replication_factor=rf)])


def test_new_logs_are_opened_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    threads: set[str] = set()
    prepare = LogManager.prepare

    def recording(self: LogManager, *args: object, **kwargs: object) -> int:
        threads.add(threading.current_thread().name)
        return prepare(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(LogManager, "prepare", recording)

    async def main() -> None:
        async with Cluster(brokers=2) as cluster:
            loop_thread = threading.current_thread().name
            conn = await BrokerConnection("127.0.0.1", cluster.broker(0).port).open()
            try:
                resp: CreateTopicsResponse = await conn.request(create("wide", 40))
                assert resp.topics[0].error_code == 0
            finally:
                conn.close()
            assert threads and loop_thread not in threads
            state = cluster.controller.topics["wide"]
            for node in (0, 1):
                logs = cluster.broker(node).logs
                assert logs is not None
                hosted = [p.partition for p in state.partitions if node in p.replicas]
                assert len(hosted) == 40
                for index in hosted:
                    plog = logs.get("wide", index)
                    assert plog is not None and plog.topic_id == state.topic_id

    asyncio.run(main())


def test_a_name_being_created_is_taken() -> None:
    async def main() -> None:
        async with Cluster(brokers=2) as cluster:
            port = cluster.broker(0).port
            a = await BrokerConnection("127.0.0.1", port).open()
            b = await BrokerConnection("127.0.0.1", cluster.broker(1).port).open()
            try:
                first, second = await asyncio.gather(
                    a.request(create("twice", 200)), b.request(create("twice", 200)))
            finally:
                a.close()
                b.close()
            codes = sorted([first.topics[0].error_code, second.topics[0].error_code])
            assert codes == [0, TOPIC_ALREADY_EXISTS]
            state = cluster.controller.topics["twice"]
            for node in (0, 1):
                logs = cluster.broker(node).logs
                assert logs is not None
                assert all(logs.get("twice", p.partition).topic_id == state.topic_id  # type: ignore[union-attr]
                           for p in state.partitions if node in p.replicas)

    asyncio.run(main())
