"""A coordinator shard for KIP-848 tests: fake clock, fake log, a topic registry of our own."""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Any

from kaflite.cluster.groups import CoordinatorShard, GroupConfig
from kaflite.cluster.groups._config import ConsumerGroupConfig
from kaflite.cluster.groups._consumer import TopicView
from kaflite.cluster.groups._consumer_group import ConsumerGroup, TopicMeta
from kaflite.cluster.groups._timer import ManualTimer
from kaflite.protocol.messages import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse
from kaflite.protocol.messages import consumer_group_heartbeat_request as cghq
from tests.cluster.groups.helpers import FakeLog, settle


class Topics:
    """A mutable topic registry: create a topic and the coordinator sees it."""

    def __init__(self, **partitions: int) -> None:
        self.meta: dict[str, TopicMeta] = {}
        for name, n in partitions.items():
            self.create(name, n)

    def create(self, name: str, partitions: int) -> uuid.UUID:
        topic_id = uuid.uuid5(uuid.NAMESPACE_DNS, name)
        self.meta[name] = TopicMeta(topic_id, name, partitions)
        return topic_id

    def id(self, name: str) -> uuid.UUID:
        return self.meta[name].topic_id

    def view(self) -> TopicView:
        by_id = {t.topic_id: t.name for t in self.meta.values()}
        return TopicView(self.meta.get, lambda: list(self.meta),
                         lambda i: by_id.get(i) or next(
                             (t.name for t in self.meta.values() if t.topic_id == i), None))


def make_consumer_shard(topics: Topics, log: FakeLog | None = None,
                        **consumer: Any) -> tuple[CoordinatorShard, ManualTimer, FakeLog]:
    settings: dict[str, Any] = {"session_timeout_ms": 10_000, "heartbeat_interval_ms": 1000}
    settings.update(consumer)
    timer = ManualTimer()
    log = log or FakeLog()
    config = GroupConfig(consumer=replace(ConsumerGroupConfig(), **settings))
    shard = CoordinatorShard(0, 0, log, timer, config, lambda t: t in topics.meta, topics.view())
    shard.finish_loading()
    return shard, timer, log


def reload(topics: Topics, log: FakeLog) -> CoordinatorShard:
    """A new shard that loads what ``log`` holds, as a coordinator move or restart does."""
    shard, _, _ = make_consumer_shard(topics)
    shard.state = shard.state.LOADING
    for key, value in log.records:
        shard.replay(key, value)
    shard.finish_loading()
    return shard


def owned(topics: Topics, assignment: dict[str, list[int]]) -> list[cghq.TopicPartitions]:
    return [cghq.TopicPartitions(topic_id=topics.id(t), partitions=ps)
            for t, ps in assignment.items()]


def join(group: str, member_id: str, *topic_names: str, instance_id: str | None = None,
         regex: str | None = None, assignor: str | None = None,
         rebalance_ms: int = 30_000) -> ConsumerGroupHeartbeatRequest:
    return ConsumerGroupHeartbeatRequest(
        group_id=group, member_id=member_id, member_epoch=0, instance_id=instance_id,
        rebalance_timeout_ms=rebalance_ms,
        subscribed_topic_names=None if regex is not None and not topic_names else list(topic_names),
        subscribed_topic_regex=regex, server_assignor=assignor, topic_partitions=[])


def beat(group: str, member_id: str, epoch: int,
         partitions: list[cghq.TopicPartitions] | None = None,
         instance_id: str | None = None) -> ConsumerGroupHeartbeatRequest:
    return ConsumerGroupHeartbeatRequest(group_id=group, member_id=member_id, member_epoch=epoch,
                                         instance_id=instance_id, topic_partitions=partitions)


async def send(shard: CoordinatorShard, req: ConsumerGroupHeartbeatRequest,
               version: int = 1) -> ConsumerGroupHeartbeatResponse:
    resp = await shard.consumer.heartbeat("client", "/127.0.0.1", req, version)
    await settle()
    return resp


def assigned(topics: Topics, resp: ConsumerGroupHeartbeatResponse) -> dict[str, list[int]] | None:
    """The response's assignment by topic name (None when the response carries none)."""
    if resp.assignment is None:
        return None
    names = {t.topic_id: t.name for t in topics.meta.values()}
    return {names[tp.topic_id]: sorted(tp.partitions) for tp in resp.assignment.topic_partitions}


def owners_ok(group: ConsumerGroup) -> None:
    assert group.check() == [], group.check()
