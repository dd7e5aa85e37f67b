"""The console's monitor: cluster events from the controller's records, and only those.

A round reads again only the partitions whose change records the controller saved
(issue 36: walking and sorting every partition after each change cost the loop that
the brokers share). These tests pin what the events say, and that a round after one
partition's change looks at that partition alone.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from kaflite.client import sync
from kaflite.cluster import Cluster
from kaflite.console import monitor as monitor_module
from kaflite.console.monitor import ClientLog, Monitor
from kaflite.console.streams import Hub, Subscriber

ROUND_S = 0.05


@pytest.fixture()
def watched() -> Iterator[tuple[Cluster, Monitor, Subscriber]]:
    with Cluster(brokers=3, config={"offsets.topic.num.partitions": 1}) as cluster:
        cluster.create_topic("many", 20, 3)
        hub = Hub()
        sub = hub.subscribe({"cluster"})
        mon = Monitor(hub, ClientLog(hub), cluster, None, None, cluster_interval_s=ROUND_S)

        async def start() -> None:
            mon.start()
        cluster.call(start())
        try:
            yield cluster, mon, sub
        finally:
            cluster.call(mon.stop())


def _events(sub: Subscriber, want: int, timeout_s: float = 10.0) -> list[dict[str, object]]:
    """The cluster events published until ``want`` arrived (bounded wait)."""
    seen: list[dict[str, object]] = []
    deadline = time.monotonic() + timeout_s
    while len(seen) < want and time.monotonic() < deadline:
        while sub.queue:
            seen.append(sub.queue.popleft()[1])
        time.sleep(0.02)
    time.sleep(4 * ROUND_S)             # anything more that the rounds would add
    while sub.queue:
        seen.append(sub.queue.popleft()[1])
    return seen


def test_a_leader_move_is_one_event_for_that_partition(
        watched: tuple[Cluster, Monitor, Subscriber],
        monkeypatch: pytest.MonkeyPatch) -> None:
    cluster, _, sub = watched
    looked_at: list[set[tuple[str, int]]] = []
    updated = monitor_module._updated

    def spy(c: Cluster, before: monitor_module.Snapshot, changed: set[object]) -> object:
        snap, keys = updated(c, before, changed)  # type: ignore[arg-type]
        looked_at.append(keys)
        return snap, keys
    monkeypatch.setattr(monitor_module, "_updated", spy)

    state = cluster.controller.topics["many"].partitions[7]
    before = state.leader
    target = cluster.move_leader("many", 7)
    events = [e for e in _events(sub, 1) if e["change"] == "leader"]
    assert events == [{"t": events[0]["t"], "change": "leader", "topic": "many",
                       "partition": 7, "leader": target, "previous": before,
                       "leader_epoch": state.leader_epoch}]
    # the round read that partition again, not the 21 others
    assert {("many", 7)} in looked_at
    assert all(keys <= {("many", 7)} for keys in looked_at)


def test_topics_created_and_deleted_are_seen(
        watched: tuple[Cluster, Monitor, Subscriber]) -> None:
    cluster, _, sub = watched
    cluster.create_topic("fresh", 2, 3)
    created = [e for e in _events(sub, 1) if e["change"] == "topic"]
    assert [(e["topic"], e.get("created")) for e in created] == [("fresh", True)]
    with sync.Admin(bootstrap_servers=cluster.bootstrap_servers) as admin:
        admin.delete_topics(["fresh"])
    deleted = [e for e in _events(sub, 1) if e["change"] == "topic"]
    assert [(e["topic"], e.get("deleted")) for e in deleted] == [("fresh", True)]


def test_a_killed_broker_shows_with_the_leaders_it_lost(
        watched: tuple[Cluster, Monitor, Subscriber]) -> None:
    cluster, _, sub = watched
    led = {p.partition for p in cluster.controller.topics["many"].partitions if p.leader == 1}
    assert led
    cluster.call(cluster.kill_broker(1))
    events = _events(sub, 1 + len(led))
    assert any(e["change"] == "broker" and e["broker"] == 1 and e["alive"] is False
               for e in events)
    moved = {e["partition"] for e in events
             if e["change"] == "leader" and e["topic"] == "many"}
    assert moved == led
    assert all(e["previous"] == 1 for e in events
               if e["change"] == "leader" and e["topic"] == "many")
