"""The controller's metadata rules: assignment, elections, epochs and persistence."""

from __future__ import annotations

from pathlib import Path

import pytest

from kaflite.cluster.controller import BrokerInfo, Controller, PartitionState, TopicState
from kaflite.protocol import errors


class Recorder:
    def __init__(self) -> None:
        self.changes: list[tuple[str, int, int, int]] = []

    def on_partition_change(self, topic: TopicState, state: PartitionState) -> None:
        self.changes.append((topic.name, state.partition, state.leader, state.leader_epoch))

    def on_topic_deleted(self, topic: TopicState) -> None:
        self.changes.append((topic.name, -1, -1, -1))


def make(tmp_path: Path, n: int = 3, racks: list[str | None] | None = None) -> Controller:
    c = Controller(tmp_path)
    for i in range(n):
        c.register_broker(BrokerInfo(i, "127.0.0.1", 9092 + i, (racks or [None] * n)[i]),
                          Recorder())
    return c


def test_assignment_spreads_leaders_and_replicas(tmp_path: Path) -> None:
    c = make(tmp_path, 3)
    plan = c.assign_replicas(6, 3)
    assert all(len(set(r)) == 3 for r in plan)
    leaders = [r[0] for r in plan]
    assert sorted(leaders) == [0, 0, 1, 1, 2, 2]


def test_assignment_puts_replicas_on_different_racks(tmp_path: Path) -> None:
    c = make(tmp_path, 4, racks=["a", "a", "b", "b"])
    for replicas in c.assign_replicas(8, 2):
        racks = {c.brokers[r].rack for r in replicas}
        assert racks == {"a", "b"}, replicas


def test_replication_factor_above_broker_count_is_refused(tmp_path: Path) -> None:
    with pytest.raises(errors.InvalidReplicationFactorError):
        make(tmp_path, 2).assign_replicas(1, 3)


def test_failover_elects_from_isr_and_bumps_epochs(tmp_path: Path) -> None:
    c = make(tmp_path, 3)
    t = c.create_topic("t", [[0, 1, 2]])
    p = t.partitions[0]
    assert (p.leader, p.leader_epoch, p.isr) == (0, 0, [0, 1, 2])
    c.broker_stopped(0)
    assert p.leader == 1 and p.leader_epoch == 1 and p.isr == [1, 2]
    c.broker_stopped(1)
    assert p.leader == 2 and p.leader_epoch == 2 and p.isr == [2]
    # No live ISR member left: no unclean election, the last ISR stays recorded.
    c.broker_stopped(2)
    assert p.leader == -1 and p.isr == [2]
    c.broker_started(0)
    assert p.leader == -1  # broker 0 is not in the ISR
    c.broker_started(2)
    assert p.leader == 2


def test_move_leader_only_to_live_isr_members(tmp_path: Path) -> None:
    c = make(tmp_path, 3)
    c.create_topic("t", [[0, 1, 2]])
    assert c.move_leader("t", 0, 2) == 2
    assert c.move_leader("t", 0) != 2
    c.broker_stopped(1)
    with pytest.raises(errors.NotLeaderOrFollowerError):
        c.move_leader("t", 0, 1)


def test_metadata_survives_a_restart(tmp_path: Path) -> None:
    c = make(tmp_path, 3)
    t = c.create_topic("t", [[0, 1], [1, 2]], {"retention.ms": "1000"})
    pid = c.allocate_producer_id()
    again = Controller(tmp_path)
    t2 = again.topics["t"]
    assert t2.topic_id == t.topic_id and t2.configs == {"retention.ms": "1000"}
    assert [p.replicas for p in t2.partitions] == [[0, 1], [1, 2]]
    assert again.cluster_id == c.cluster_id
    assert again.allocate_producer_id() > pid


def test_alter_isr_is_fenced_by_leader_epoch(tmp_path: Path) -> None:
    c = make(tmp_path, 3)
    c.create_topic("t", [[0, 1, 2]])
    with pytest.raises(errors.FencedLeaderEpochError):
        c.alter_isr("t", 0, leader=0, leader_epoch=5, isr=[0])
    state = c.alter_isr("t", 0, leader=0, leader_epoch=0, isr=[0, 2])
    assert state.isr == [0, 2] and state.partition_epoch == 1


def test_alter_isr_refuses_a_broker_that_is_down(tmp_path: Path) -> None:
    c = make(tmp_path, 3)
    c.create_topic("t", [[0, 1, 2]])
    c.broker_stopped(1)
    state = c.partition("t", 0)
    assert state is not None and state.isr == [0, 2]
    # The stopped broker's last Fetch, answered after it stopped, must not bring it back.
    with pytest.raises(errors.IneligibleReplicaError):
        c.alter_isr("t", 0, leader=0, leader_epoch=state.leader_epoch, isr=[0, 2, 1])
    assert state.isr == [0, 2]
    assert c.alter_isr("t", 0, leader=0, leader_epoch=state.leader_epoch, isr=[0]).isr == [0]
    c.broker_started(1)
    assert c.alter_isr("t", 0, leader=0, leader_epoch=state.leader_epoch,
                       isr=[0, 1]).isr == [0, 1]
