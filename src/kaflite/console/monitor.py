"""The console's background work: what changed, said once, to the live streams.

- cluster changes: the brokers and partitions are compared with the last look
  (the controller's state every ``cluster_interval_s`` on a kaflite cluster in
  this process; Metadata through the console's admin client every
  ``metadata_interval_s`` on any other); a broker up or down or isolated, a new
  leader, an ISR change, a topic created or deleted becomes a ``cluster``
  event;
- the client log: connections opened and closed in the registry (compared the
  same way) and every control-plane event of every kaflite client in this
  process (``client.events.observe_all``), kept in a bounded ring;
- metrics samples and group lag (``sampler.py``).

Every loop sleeps between rounds and stops when the console stops; a failed
round is logged and the next one tries again.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeAlias

from kaflite.client.events import Event, observe_all
from kaflite.console.streams import Hub
from kaflite.protocol.messages._generated.partition_change_record import PartitionChangeRecord
from kaflite.protocol.messages._generated.partition_record import PartitionRecord
from kaflite.protocol.messages._generated.remove_topic_record import RemoveTopicRecord
from kaflite.protocol.messages._generated.topic_record import TopicRecord
from kaflite.protocol.messages._runtime import Struct

if TYPE_CHECKING:
    from kaflite.cluster.cluster import Cluster
    from kaflite.console.backend import ClientBackend
    from kaflite.console.sampler import LagSampler, MetricsSampler

__all__ = ["ClientLog", "Monitor", "cluster_changes", "metadata_snapshot"]

log = logging.getLogger("kaflite.console")

Row: TypeAlias = dict[str, object]
Snapshot: TypeAlias = tuple[dict[int, tuple[bool, bool, bool]],
                      dict[tuple[str, int], tuple[int, int, tuple[int, ...]]]]


class ClientLog:
    """The last ``keep`` client-log rows, each with an increasing id."""

    def __init__(self, hub: Hub, keep: int = 2000) -> None:
        self.hub = hub
        self.rows: deque[Row] = deque(maxlen=keep)
        self._ids = itertools.count(1)

    def add(self, source: str, kind: str, message: str, *, client_id: str | None = None,
            broker: int | None = None, cause: str | None = None, t: float | None = None
            ) -> Row:
        row: Row = {"id": next(self._ids), "t": round(t if t is not None else time.time(), 3),
                    "source": source, "client_id": client_id, "broker": broker, "kind": kind,
                    "message": message, "cause": cause}
        self.rows.append(row)
        self.hub.publish("log", row)
        return row

    def client_event(self, client_id: str, event: Event) -> None:
        self.add("client", event.kind, event.message, client_id=client_id, cause=event.cause,
                 t=event.timestamp)

    def since(self, after: int | None, client_id: str | None = None,
              kind: str | None = None) -> list[Row]:
        return [r for r in self.rows
                if (after is None or int(str(r["id"])) > after)
                and (client_id is None or r["client_id"] == client_id)
                and (kind is None or r["kind"] == kind)]


def _snapshot(cluster: Cluster, parts: dict[tuple[str, int], tuple[int, int, tuple[int, ...]]]
              | None = None) -> Snapshot:
    """The brokers' states, and the partitions' (``parts``: given when already known)."""
    controller = cluster.controller
    brokers = {b.node_id: (b.alive, b.fenced_replication, cluster.broker_running(b.node_id))
               for b in list(controller.brokers.values())}
    if parts is None:
        parts = {(t.name, p.partition): (p.leader, p.leader_epoch, tuple(p.isr))
                 for t in list(controller.topics.values()) for p in t.partitions}
    return brokers, parts


class _PartitionFeed:
    """Which partitions the controller changed since the last ``take``, from the records
    it saves (every partition change is one): a round then looks at those alone.
    Walking and sorting every partition after each change was most of the console's
    cost while a broker crashed and returned at 20,000 partitions (issue 36)."""

    def __init__(self, cluster: Cluster) -> None:
        self._changed: set[tuple[uuid.UUID, int]] = set()
        self._everything = False
        self.stop = cluster.controller.observe_records(self._note)

    def _note(self, records: list[Struct]) -> None:
        for r in records:
            if isinstance(r, (PartitionChangeRecord, PartitionRecord)):
                self._changed.add((r.topic_id, r.partition_id))
            elif isinstance(r, (TopicRecord, RemoveTopicRecord)):
                self._everything = True

    def take(self) -> set[tuple[uuid.UUID, int]] | None:
        """The partitions changed since the last call (None: walk them all)."""
        changed, everything = self._changed, self._everything
        self._changed, self._everything = set(), False
        return None if everything else changed


def _updated(cluster: Cluster, before: Snapshot, changed: set[tuple[uuid.UUID, int]]
             ) -> tuple[Snapshot, set[tuple[str, int]]]:
    """``before`` with the ``changed`` partitions read again, and their names."""
    parts = before[1]
    keys: set[tuple[str, int]] = set()
    if changed:
        parts = dict(parts)
        by_id = cluster.controller.topics_by_id
        for topic_id, index in changed:
            topic = by_id.get(topic_id)
            if topic is None or index >= len(topic.partitions):
                continue
            p = topic.partitions[index]
            parts[(topic.name, index)] = (p.leader, p.leader_epoch, tuple(p.isr))
            keys.add((topic.name, index))
    return _snapshot(cluster, parts), keys


async def metadata_snapshot(backend: ClientBackend) -> Snapshot:
    """The same picture as ``_snapshot``, from DescribeCluster and Metadata: a broker
    is alive while the cluster lists it (isolation and processes are unknown)."""
    admin = await backend.admin()
    described = await admin.describe_cluster()
    brokers = {b.node_id: (True, False, True) for b in described["brokers"]}
    names = await admin.list_topics(internal=True)
    topics = await admin.describe_topics(names) if names else {}
    parts = {(t.name, p.partition): (p.leader, p.leader_epoch, tuple(p.isr))
             for t in topics.values() for p in t.partitions}
    return brokers, parts


def cluster_changes(before: Snapshot, after: Snapshot,
                    changed: set[tuple[str, int]] | None = None) -> list[Row]:
    """The ``cluster`` events between two snapshots (``changed``: the only partitions
    that may differ, when the round knows them; no topic came or went then)."""
    now = round(time.time(), 3)
    out: list[Row] = []
    for node, (alive, isolated, running) in sorted(after[0].items()):
        if before[0].get(node) != (alive, isolated, running):
            out.append({"t": now, "change": "broker", "broker": node, "alive": alive,
                        "isolated": isolated, "running": running})
    for node in sorted(before[0].keys() - after[0].keys()):   # gone from the metadata
        out.append({"t": now, "change": "broker", "broker": node, "alive": False,
                    "isolated": None, "running": None})
    if after[1] is before[1]:      # the partitions' part was not taken again: unchanged
        return out
    if changed is not None:
        return out + _partition_changes(before, after, sorted(changed), now)
    old_topics = {t for t, _ in before[1]}
    new_topics = {t for t, _ in after[1]}
    out += [{"t": now, "change": "topic", "topic": t, "created": True}
            for t in sorted(new_topics - old_topics)]
    out += [{"t": now, "change": "topic", "topic": t, "deleted": True}
            for t in sorted(old_topics - new_topics)]
    return out + _partition_changes(before, after, sorted(after[1]), now)


def _partition_changes(before: Snapshot, after: Snapshot, keys: list[tuple[str, int]],
                       now: float) -> list[Row]:
    out: list[Row] = []
    for key in keys:
        prev, cur = before[1].get(key), after[1].get(key)
        if prev is None or cur is None:
            continue
        leader, epoch, isr = cur
        if prev[0] != leader or prev[1] != epoch:
            out.append({"t": now, "change": "leader", "topic": key[0], "partition": key[1],
                        "leader": leader, "previous": prev[0], "leader_epoch": epoch})
        if prev[2] != isr:
            out.append({"t": now, "change": "isr", "topic": key[0], "partition": key[1],
                        "isr": list(isr)})
    return out


class Monitor:
    def __init__(self, hub: Hub, client_log: ClientLog, cluster: Cluster | None,
                 metrics: MetricsSampler | None, lag: LagSampler | None,
                 cluster_interval_s: float = 0.5, backend: ClientBackend | None = None,
                 metadata_interval_s: float = 2.0) -> None:
        self.hub, self.client_log, self.cluster = hub, client_log, cluster
        self.metrics, self.lag = metrics, lag
        self.cluster_interval_s = cluster_interval_s
        self.backend, self.metadata_interval_s = backend, metadata_interval_s
        self.tasks: list[asyncio.Task[None]] = []
        self._unobserve: Callable[[], None] | None = None
        self._stopping = asyncio.Event()
        self._snapshot: Snapshot | None = None
        self._feed: _PartitionFeed | None = None
        self._connections: dict[tuple[int, int], Row] = {}
        self._rounds = 0

    def start(self) -> None:
        self._unobserve = observe_all(self.client_log.client_event)
        if self.cluster is not None:
            self._feed = _PartitionFeed(self.cluster)
            self._snapshot = _snapshot(self.cluster)
            self._connections = self._open_connections()
            self._every(self.cluster_interval_s, self._cluster_round)
        elif self.backend is not None:
            self._every(self.metadata_interval_s, self._metadata_round)
        metrics = self.metrics
        if metrics is not None:
            self._every(metrics.interval_s, self._metrics_round)
        lag = self.lag
        if lag is not None:
            self._every(lag.interval_s, lag.sample)

    def _every(self, interval: float, work: Callable[[], Awaitable[None]]) -> None:
        async def loop() -> None:
            while not self._stopping.is_set():
                try:
                    await work()
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.debug("console background round failed", exc_info=True)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), interval)

        self.tasks.append(asyncio.get_running_loop().create_task(loop()))

    async def stop(self) -> None:
        self._stopping.set()
        if self._unobserve is not None:
            self._unobserve()
        if self._feed is not None:
            self._feed.stop()
        for task in self.tasks:
            task.cancel()
        for task in self.tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self.tasks.clear()

    async def _metadata_round(self) -> None:
        assert self.backend is not None
        now = await metadata_snapshot(self.backend)
        if self._snapshot is not None:
            for change in cluster_changes(self._snapshot, now):
                self.hub.publish("cluster", change)
        self._snapshot = now

    async def _metrics_round(self) -> None:
        assert self.metrics is not None
        await self.metrics.refresh()
        sample = self.metrics.sample()
        if sample is not None:
            self.hub.publish("metrics", sample)

    def _open_connections(self) -> dict[tuple[int, int], Row]:
        assert self.cluster is not None
        return {(i.broker_id, i.connection_id): {"client_id": i.client_id,
                                                 "broker": i.broker_id, "peer": i.peer,
                                                 "from_broker": i.broker_role is not None}
                for i in self.cluster.registry.infos(include_replicas=True)}

    async def _cluster_round(self) -> None:
        cluster = self.cluster
        assert cluster is not None and self._snapshot is not None and self._feed is not None
        # A walk of every partition every 0.5 s was a tenth of the event loop at 20,000
        # partitions with nothing changing (issue 36): a round reads again only the
        # partitions whose records the controller saved since the last one.
        changed = self._feed.take()
        keys: set[tuple[str, int]] | None = None
        if changed is None:
            now = _snapshot(cluster)
        else:
            now, keys = _updated(cluster, self._snapshot, changed)
        for change in cluster_changes(self._snapshot, now, keys):
            self.hub.publish("cluster", change)
        self._snapshot = now
        if cluster.use_processes:
            # broker processes send their registry rows over the controller
            # connection: every 4th round (2 s), not every 0.5 s
            self._rounds += 1
            if self._rounds % 4:
                return
            await cluster.registry.refresh()
        conns = self._open_connections()
        for key in conns.keys() - self._connections.keys():
            c = conns[key]
            if not c["from_broker"]:   # a broker's own connection, not a client's
                self.client_log.add("registry", "connect",
                                    f"{c['client_id']} connected to broker {key[0]} "
                                    f"from {c['peer']}", client_id=_str(c["client_id"]),
                                    broker=key[0])
        for key in self._connections.keys() - conns.keys():
            c = self._connections[key]
            if not c["from_broker"]:   # a broker's own connection, not a client's
                self.client_log.add("registry", "disconnect",
                                    f"{c['client_id']}'s connection to broker {key[0]} "
                                    f"from {c['peer']} closed", client_id=_str(c["client_id"]),
                                    broker=key[0])
        self._connections = conns


def _str(value: object) -> str | None:
    return None if value is None else str(value)
