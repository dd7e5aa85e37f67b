"""A cluster behind a stable bootstrap address, and the chaos action that replaces it.

``FrontedCluster`` runs a kaflite ``Cluster`` behind a ``Forwarder`` (a TCP
forwarder, ``kaflite.net.forwarder``): clients are given the forwarder's address
as ``bootstrap.servers``, and learn the brokers' own addresses from Metadata, as
they would behind a load balancer or a DNS name in front of a real cluster.

``replace()`` is the disaster a re-bootstrapping client (KIP-899, KIP-1102) is
for: a whole new cluster (the same number of brokers, the same settings, a new
cluster id, every broker on a new port, an empty new data directory) takes the
old one's place. The non-internal topics are created again with the same names,
partition counts, replication factors and configs (new topic ids, no records,
no groups, no offsets), the forwarder is re-pointed to the new brokers, and the
old cluster is retired:

* ``retire="stop"`` (the default): its brokers stop; their ports refuse connections;
* ``retire="hang"``: its brokers keep their ports and connections but answer no
  request ever again (a delay fault on every API), until this object stops. Clients
  holding connections to them see only timeouts: the case for
  ``metadata.recovery.rebootstrap.trigger.ms``.

Every generation's cluster is a real ``Cluster``; ``history`` keeps their ids.
Async (``async with FrontedCluster(...)``) or sync (``with``: a loop of its own in
a thread, as ``Cluster``'s sync mode, and ``fronted.cluster`` then has a working
sync façade too).
"""

from __future__ import annotations

from collections.abc import Coroutine, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal, TypeVar

from kaflite._loop import LoopThread
from kaflite.cluster.cluster import Cluster
from kaflite.net.forwarder import Forwarder

__all__ = ["RETIRE_MODES", "FrontedCluster", "Replacement"]

T = TypeVar("T")
Retire = Literal["stop", "hang"]
RETIRE_MODES: tuple[Retire, ...] = ("stop", "hang")
_FOREVER_MS = 10 ** 9   # a delay no client waits out


@dataclass(frozen=True)
class Replacement:
    """What ``replace`` did."""

    old_cluster_id: str
    new_cluster_id: str
    old_bootstrap: str          # the old brokers' own addresses
    new_bootstrap: str          # the new brokers'
    topics: list[str]           # created again on the new cluster
    dropped_connections: int    # forwarded connections the re-point closed
    retire: str

    def to_dict(self) -> dict[str, object]:
        return {"old_cluster_id": self.old_cluster_id, "new_cluster_id": self.new_cluster_id,
                "old_bootstrap": self.old_bootstrap, "new_bootstrap": self.new_bootstrap,
                "topics": self.topics, "dropped_connections": self.dropped_connections,
                "retire": self.retire}


class FrontedCluster:
    def __init__(self, brokers: int = 3, *, host: str = "127.0.0.1", front_port: int = 0,
                 config: Mapping[str, object] | None = None) -> None:
        self.num_brokers = brokers
        self.host = host
        self.config = dict(config or {})
        self.cluster = self._new_cluster()
        self.front = Forwarder([], host, front_port)
        self.history: list[str] = []           # every generation's cluster id, oldest first
        self._retired: list[Cluster] = []      # hung, stopped with this object
        self._loop_thread: LoopThread | None = None

    def _new_cluster(self) -> Cluster:
        return Cluster(brokers=self.num_brokers, host=self.host, base_port=0,
                       config=self.config)

    @property
    def bootstrap_servers(self) -> str:
        """The stable address: the forwarder's."""
        return self.front.address

    # -- lifecycle ------------------------------------------------------------------
    async def start(self) -> FrontedCluster:
        await self._start(self.cluster)
        self.front.targets = _targets(self.cluster)
        await self.front.start()
        return self

    async def _start(self, cluster: Cluster) -> None:
        await cluster.start()
        cluster.serve_sync_on(self._loop_thread)    # its sync façade runs on our loop
        self.history.append(cluster.cluster_id)

    async def stop(self) -> None:
        await self.front.stop()
        for cluster in [*self._retired, self.cluster]:
            if cluster.started:
                cluster.faults.clear()
                await cluster.stop()
        self._retired.clear()

    async def __aenter__(self) -> FrontedCluster:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- the chaos action -------------------------------------------------------------
    async def replace_async(self, retire: Retire = "stop") -> Replacement:
        """Replace the cluster behind the bootstrap address (see the module docstring)."""
        if retire not in RETIRE_MODES:
            raise ValueError(f"retire must be one of {', '.join(RETIRE_MODES)}, got {retire!r}")
        old = self.cluster
        new = self._new_cluster()
        await self._start(new)
        topics = []
        for t in list(old.controller.topics.values()):
            if t.internal or not t.partitions:
                continue
            plan = new.controller.assign_replicas(len(t.partitions), len(t.partitions[0].replicas))
            new.controller.create_topic(t.name, plan, dict(t.configs))
            topics.append(t.name)
        old_bootstrap = old.bootstrap_servers
        self.cluster = new
        dropped = self.front.repoint(_targets(new))
        if retire == "stop":
            await old.stop()
        else:
            old.faults.delay(None, _FOREVER_MS)
            self._retired.append(old)
        return Replacement(old.cluster_id, new.cluster_id, old_bootstrap, new.bootstrap_servers,
                           sorted(topics), dropped, retire)

    # -- sync façade --------------------------------------------------------------------
    def _run(self, coro: Coroutine[Any, Any, T], timeout: float = 120) -> T:
        assert self._loop_thread is not None, "not started as a sync context manager"
        return self._loop_thread.run(coro, timeout)

    def replace(self, retire: Retire = "stop") -> Replacement:
        """``replace_async`` from another thread (sync mode)."""
        return self._run(self.replace_async(retire))

    def __enter__(self) -> FrontedCluster:
        self._loop_thread = LoopThread("kaflite-fronted-cluster")
        try:
            self._run(self.start())
        except BaseException:
            self._loop_thread.stop()
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        assert self._loop_thread is not None
        try:
            self._run(self.stop())
        finally:
            self._loop_thread.stop()


def _targets(cluster: Cluster) -> list[tuple[str, int]]:
    out = []
    for server in cluster.bootstrap_servers.split(","):
        host, _, port = server.rpartition(":")
        out.append((host, int(port)))
    return out
