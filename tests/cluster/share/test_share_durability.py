"""Share-partition state survives a leader move and a full cluster restart: what was
acknowledged is never delivered again, what was held comes back, nothing is lost."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kaflite.cluster import Cluster
from kaflite.cluster.share import RecordState
from tests.conftest import wait_for

confluent_kafka = pytest.importorskip("confluent_kafka")
if not hasattr(confluent_kafka, "ShareConsumer"):
    pytest.skip("confluent-kafka has no ShareConsumer", allow_module_level=True)

CONFIG = {"group.share.record.lock.duration.ms": 3000,
          "group.share.min.record.lock.duration.ms": 1000}
GROUP, TOPIC, COUNT = "durable", "durable", 60


def earliest(cluster: Cluster) -> None:
    for broker in cluster.brokers.values():
        assert broker.share is not None
        broker.share.group_configs[GROUP] = {"share.auto.offset.reset": "earliest"}


def new_consumer(cluster: Cluster) -> confluent_kafka.ShareConsumer:
    c = confluent_kafka.ShareConsumer({
        "bootstrap.servers": cluster.bootstrap_servers, "group.id": GROUP,
        "share.acknowledgement.mode": "explicit", "max.poll.records": "10"})
    c.subscribe([TOPIC])
    return c


def accept(c: confluent_kafka.ShareConsumer, want: int, accepted: list[str],
           counts: dict[str, list[int]]) -> None:
    """Poll and accept until ``want`` more records are accepted (committed each poll)."""
    goal = len(accepted) + want
    deadline = time.monotonic() + 30
    while len(accepted) < goal and time.monotonic() < deadline:
        msgs = [m for m in c.poll(0.5) if m.error() is None]
        for m in msgs:
            v = m.value().decode()
            counts.setdefault(v, []).append(m.delivery_count())
            c.acknowledge(m)
            accepted.append(v)
        if msgs:
            assert all(e is None for e in c.commit_sync(30).values())
    assert len(accepted) >= goal


def persisted(cluster: Cluster, offsets: set[int]) -> bool:
    """The share coordinator holds a delivery count for every offset of ``offsets``."""
    for broker in cluster.brokers.values():
        if broker.share_coordinator is None:
            continue
        for (group, _, _), state in broker.share_coordinator.states().items():
            if group == GROUP:
                counted = {o for b in state.batches if b.delivery_count >= 1
                           and b.state is RecordState.AVAILABLE
                           for o in range(b.first, b.last + 1)}
                return offsets <= counted
    return False


def loaded_group_epoch(cluster: Cluster) -> int:
    for broker in cluster.brokers.values():
        if broker.groups is None:
            continue
        for shard in broker.groups.active_shards():
            group = shard.share_groups.get(GROUP)
            if group is not None:
                return group.group_epoch
    return -1


def test_state_survives_a_leader_move_and_a_restart(tmp_path: Path) -> None:
    from confluent_kafka import Producer

    values = [f"r{i:03d}" for i in range(COUNT)]
    accepted: list[str] = []
    counts: dict[str, list[int]] = {}
    with Cluster(brokers=3, data_dir=tmp_path, config=CONFIG) as cluster:
        cluster.create_topic(TOPIC, 1, 3)
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers,
                             "batch.num.messages": 5, "linger.ms": 5})
        for v in values:
            producer.produce(TOPIC, v.encode(), partition=0)
        assert producer.flush(30) == 0
        earliest(cluster)
        first = new_consumer(cluster)
        accept(first, 20, accepted, counts)
        held = []
        deadline = time.monotonic() + 30
        while not held and time.monotonic() < deadline:
            held = [m for m in first.poll(0.5) if m.error() is None]
        assert held
        held_offsets = {m.offset() for m in held}
        # the acquisition (delivery count 1) is written in the background
        wait_for(lambda: persisted(cluster, held_offsets), "the held records' state")
        cluster.move_leader(TOPIC, 0)
        second = new_consumer(cluster)
        accept(second, 20, accepted, counts)
        second.close()
        first.close()
        for m in held:
            v = m.value().decode()
            if v in counts:     # taken again by the second consumer after the move
                assert counts[v][-1] >= 2, (v, counts[v])
        epoch = loaded_group_epoch(cluster)
        assert epoch >= 4     # two members joined and left
    with Cluster(brokers=3, data_dir=tmp_path, config=CONFIG) as cluster:
        earliest(cluster)
        # The group itself was loaded back from __consumer_offsets.
        wait_for(lambda: loaded_group_epoch(cluster) == epoch, "the share group to load")
        third = new_consumer(cluster)
        try:
            accept(third, COUNT - len(accepted), accepted, counts)
            assert not [m for m in third.poll(1.0) if m.error() is None]
        finally:
            third.close()
    assert sorted(accepted) == values                       # nothing lost, nothing twice
    assert {v for v, c in counts.items() if len(c) > 1} <= {m.value().decode() for m in held}
