"""``kaflite chaos bump-epoch`` and ``fence-member`` against confluent-kafka consumers
using ``group.protocol=consumer`` (KIP-848), through the HTTP API.

A bumped group epoch makes the next OffsetCommit get STALE_MEMBER_EPOCH, and the client
recovers (its commits succeed again, the group is stable). A fenced member rejoins with
epoch 0 and the group ends with one owner per partition; no partition is owned by two
consumers at any time.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import pytest
from typer.testing import CliRunner

from kaflite.cli import app
from kaflite.cluster import Cluster
from kaflite.cluster.groups._consumer_group import ConsumerGroup
from kaflite.cluster.http import HttpApi
from kaflite.protocol import errors
from tests.conftest import wait_for

ck = pytest.importorskip("confluent_kafka")
runner = CliRunner()
TOPIC, N = "chaos848", 4
CONFIG = {
    "group.consumer.heartbeat.interval.ms": 500, "group.consumer.min.heartbeat.interval.ms": 100,
    "group.consumer.session.timeout.ms": 1500, "group.consumer.min.session.timeout.ms": 1000,
    "offsets.topic.num.partitions": 1,
}


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[Cluster, str]]:
    with Cluster(brokers=1, config=CONFIG) as cluster:
        cluster.create_topic(TOPIC, N, 1)
        producer = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers})
        for i in range(N * 50):
            producer.produce(TOPIC, b"x", partition=i % N)
        assert producer.flush(10) == 0
        api = cluster.call(HttpApi(cluster, sampling=False).start())
        before = os.environ.get("KAFLITE_TOKEN")
        os.environ["KAFLITE_TOKEN"] = api.token      # what the CLI sends
        try:
            yield cluster, api.url
        finally:
            if before is None:
                os.environ.pop("KAFLITE_TOKEN", None)
            else:
                os.environ["KAFLITE_TOKEN"] = before
            cluster.call(api.stop())


class Group:
    def __init__(self, cluster: Cluster, group: str) -> None:
        self.cluster, self.group = cluster, group
        self.consumers = {name: self._consumer(name) for name in ("c1", "c2")}
        self.last: dict[str, Any] = {}

    def _consumer(self, name: str) -> Any:
        c = ck.Consumer({"bootstrap.servers": self.cluster.bootstrap_servers,
                         "group.id": self.group, "group.protocol": "consumer",
                         "client.id": name, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 50})
        c.subscribe([TOPIC])
        return c

    def coordinator(self) -> ConsumerGroup:
        broker = next(iter(self.cluster.brokers.values()))
        assert broker.groups is not None
        try:
            shard = broker.groups.shard_for(self.group)
        except errors.KafkaError:   # __consumer_offsets not there yet
            return ConsumerGroup(self.group)
        return shard.consumer_groups.get(self.group) or ConsumerGroup(self.group)

    def poll(self) -> None:
        """Poll everyone; no partition may ever be owned twice, on either side."""
        for name, c in self.consumers.items():
            msg = c.poll(0.02)
            if msg is not None and msg.error() is None:
                self.last[name] = msg
        owned = [tp.partition for c in self.consumers.values() for tp in c.assignment()]
        assert len(owned) == len(set(owned)), f"a partition owned twice: {owned}"
        group = self.cluster.call(_checked(self))
        assert group == [], group

    def stable(self) -> bool:
        self.poll()
        group = self.coordinator()
        server = {m.client_id: {p for ps in m.assigned.values() for p in ps}
                  for m in group.members.values()}
        mine = {n: {tp.partition for tp in c.assignment()} for n, c in self.consumers.items()}
        return (str(group.state) == "Stable" and server == mine
                and sorted(p for ps in mine.values() for p in ps) == list(range(N)))

    def describe(self) -> object:
        group = self.coordinator()
        return (str(group.state), group.group_epoch, [
            (m.client_id, m.member_id, m.member_epoch, m.previous_member_epoch, str(m.state),
             sorted(p for ps in m.assigned.values() for p in ps))
            for m in group.members.values()],
            {n: [tp.partition for tp in c.assignment()] for n, c in self.consumers.items()})

    def member_id(self, name: str) -> str:
        return next(m.member_id for m in self.coordinator().members.values()
                    if m.client_id == name)

    def commit(self, name: str) -> int:
        """Commit the last record ``name`` read: 0, or the error code."""
        try:
            self.consumers[name].commit(message=self.last[name], asynchronous=False)
        except ck.KafkaException as exc:
            return int(exc.args[0].code())
        return 0

    def close(self) -> None:
        for c in self.consumers.values():
            c.close()


async def _checked(g: Group) -> list[str]:
    return g.coordinator().check()


def chaos(url: str, *args: str) -> Any:
    result = runner.invoke(app, ["chaos", *args, "--http", url, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_bumped_epoch_gives_stale_member_epoch_and_the_client_recovers(
        served: tuple[Cluster, str]) -> None:
    cluster, url = served
    g = Group(cluster, "chaos-bump")
    try:
        wait_for(lambda: g.stable() and len(g.last) == 2, "a stable group reading", 30)
        epoch = g.coordinator().group_epoch
        assert chaos(url, "bump-epoch", "chaos-bump") == {"group": "chaos-bump",
                                                          "members_moved": 2}
        assert g.coordinator().group_epoch == epoch + 1
        assert g.commit("c1") == ck.KafkaError.STALE_MEMBER_EPOCH
        # The client learns the new epoch (or rejoins) and commits again.
        wait_for(lambda: g.stable() and g.commit("c1") == 0 and g.commit("c2") == 0,
                 "commits accepted again", 30)
    finally:
        g.close()


def test_fenced_member_rejoins_with_epoch_zero(served: tuple[Cluster, str]) -> None:
    cluster, url = served
    g = Group(cluster, "chaos-fence")
    try:
        wait_for(g.stable, "a stable group", 30)
        victim = g.member_id("c1")
        before = g.coordinator().members[victim].member_epoch
        epoch = g.coordinator().group_epoch
        result = runner.invoke(app, ["chaos", "fence-member", "chaos-fence", victim,
                                     "--http", url])
        assert result.exit_code == 0 and result.output == \
            f"group chaos-fence: member {victim} fenced\n"
        assert g.coordinator().members[victim].member_epoch == before + 2

        def rejoined() -> bool:
            # librdkafka keeps its member id (KIP-1082) and rejoins with epoch 0. The
            # coordinator lets it in at once (KAFKA-19233): the same member, reconciled
            # to the group's assignment epoch, and no session expiry (no group bump).
            coordinator = g.coordinator()
            member = coordinator.members.get(victim)
            return g.stable() and member is not None and \
                member.member_epoch == coordinator.assignment_epoch
        wait_for(rejoined, "the fenced member back under its member id, one owner each", 30,
                 state=lambda: (victim, g.describe()))
        assert g.coordinator().group_epoch == epoch
        # An unknown member is a conflict (409), reported by the CLI.
        result = runner.invoke(app, ["chaos", "fence-member", "chaos-fence", "nobody",
                                     "--http", url])
        assert result.exit_code != 0 and "no member 'nobody'" in result.output
    finally:
        g.close()
