"""Online migration with confluent-kafka: a classic group upgraded in place by rolling
each member to ``group.protocol=consumer``, then downgraded back the same way.

After each step every partition has exactly one owner; at no moment (checked on every
poll) is a partition owned by two consumers, from the clients' side or on the
coordinator.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from kaflite.cluster import Cluster
from kaflite.cluster.groups._consumer_group import ConsumerGroup
from kaflite.cluster.groups._group import ClassicGroup
from kaflite.protocol import errors
from tests.conftest import wait_for

ck = pytest.importorskip("confluent_kafka")
TOPIC, N, GROUP = "migrate", 6, "migrating"
CONFIG = {
    "group.consumer.heartbeat.interval.ms": 200, "group.consumer.min.heartbeat.interval.ms": 100,
    "group.consumer.session.timeout.ms": 3000, "group.consumer.min.session.timeout.ms": 1000,
    "group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": 1,
}


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(brokers=1, config=CONFIG) as c:
        c.create_topic(TOPIC, N, 1)
        yield c


class Roll:
    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.consumers: dict[str, tuple[str, Any]] = {}

    def start(self, name: str, protocol: str) -> None:
        extra = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 200} \
            if protocol == "classic" else {}
        c = ck.Consumer({"bootstrap.servers": self.cluster.bootstrap_servers,
                         "group.id": GROUP, "group.protocol": protocol, "client.id": name,
                         "auto.offset.reset": "earliest", **extra})
        c.subscribe([TOPIC])
        self.consumers[name] = (protocol, c)

    def stop(self, name: str) -> None:
        self.consumers.pop(name)[1].close()

    def groups(self) -> tuple[ClassicGroup | None, ConsumerGroup | None]:
        broker = next(iter(self.cluster.brokers.values()))
        assert broker.groups is not None
        try:
            shard = broker.groups.shard_for(GROUP)
        except errors.KafkaError:
            return None, None
        return shard.groups.get(GROUP), shard.consumer_groups.get(GROUP)

    def poll(self) -> dict[str, set[int]]:
        for _, c in self.consumers.values():
            c.poll(0.02)
        mine = {n: {tp.partition for tp in c.assignment()} for n, (_, c) in self.consumers.items()}
        flat = [p for ps in mine.values() for p in ps]
        assert len(flat) == len(set(flat)), f"a partition owned twice: {mine}"
        _, modern = self.groups()
        if modern is not None:
            assert modern.check() == [], modern.check()
        return mine

    def settled(self, kind: str) -> bool:
        """Every partition owned once, the group of ``kind`` settled and agreeing."""
        mine = self.poll()
        if sorted(p for ps in mine.values() for p in ps) != list(range(N)):
            return False
        classic, modern = self.groups()
        if kind == "classic":
            return modern is None and classic is not None and str(classic.state) == "Stable" \
                and len(classic.members) == len(self.consumers)
        if modern is None or str(modern.state) != "Stable" or \
                len(modern.members) != len(self.consumers):
            return False
        server = {m.client_id: {p for ps in m.assigned.values() for p in ps}
                  for m in modern.members.values()}
        return server == mine

    def close(self) -> None:
        for name in list(self.consumers):
            self.stop(name)


def test_upgrade_in_place_then_downgrade(cluster: Cluster) -> None:
    roll = Roll(cluster)
    names = ["a", "b", "c"]
    try:
        for name in names:
            roll.start(name, "classic")
        wait_for(lambda: roll.settled("classic"), "a stable classic group", 60)
        # Roll each member to the consumer protocol: the group is upgraded when the first
        # one joins, and serves the classic members left through JoinGroup/SyncGroup.
        for i, name in enumerate(names):
            roll.stop(name)
            roll.start(name, "consumer")
            wait_for(lambda: roll.settled("consumer"), f"settled after rolling {name}", 60)
            _, modern = roll.groups()
            assert modern is not None
            assert sum(m.classic is not None for m in modern.members.values()) == 2 - i
        # And back: the group stays a consumer group while a consumer-protocol member is
        # left, and is downgraded when the last one leaves.
        for i, name in enumerate(names):
            roll.stop(name)
            roll.start(name, "classic")
            kind = "classic" if i == len(names) - 1 else "consumer"
            wait_for(lambda k=kind: roll.settled(k), f"settled after rolling {name} back", 60)
        classic, modern = roll.groups()
        assert modern is None and classic is not None and classic.protocol_type == "consumer"
    finally:
        roll.close()
