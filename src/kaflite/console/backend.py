"""What the console asks of a cluster, answered through kaflite's own clients.

``ClientBackend`` serves any Kafka cluster (Tansu, Apache Kafka, kaflite)
through an ``Admin``, a ``Producer`` and short-lived ``Consumer`` objects, so it
shows what the Kafka protocol can tell. ``EmbeddedBackend``
(``console/embedded.py``) is the same for a kaflite ``Cluster`` in this process,
plus what only the cluster knows: brokers that are down or isolated, log sizes,
the connection registry, metrics and faults. A feature a backend lacks raises
``NotAvailable`` (501).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import TYPE_CHECKING

from kaflite.client import Admin, ConfigResource, NewTopic, Producer, TopicPartition
from kaflite.client.consumer._offsets import LATEST, list_offsets
from kaflite.console.web import ApiError, Json
from kaflite.protocol import errors

if TYPE_CHECKING:
    from kaflite.cluster.cluster import Cluster

__all__ = ["CONSOLE_CLIENT_ID", "Backend", "ClientBackend", "NotAvailable", "is_console"]

CONSOLE_CLIENT_ID = "kaflite-console"

CREATED_VISIBLE_S = 10.0   # how long a created topic may take to show in Metadata


def is_console(client_id: object) -> bool:
    """Whether a connection is one of the console's own clients (its admin, its producer,
    its browsing consumers: client.id ``kaflite-console`` or ``kaflite-console-*``)."""
    return isinstance(client_id, str) and (
        client_id == CONSOLE_CLIENT_ID or client_id.startswith(CONSOLE_CLIENT_ID + "-"))
TOPIC = 2
READ_COMMITTED = 1


class NotAvailable(ApiError):
    """A feature this backend does not have (connections or chaos on a non-kaflite cluster)."""

    def __init__(self, what: str) -> None:
        super().__init__(501, f"{what} is not available: the console serves a Kafka cluster "
                              "through the Kafka protocol (kaflite console --bootstrap); "
                              "it shows only on a kaflite cluster (kaflite up)")


class ClientBackend:
    """Any Kafka cluster, through kaflite's clients."""

    kind = "kafka"

    def __init__(self, bootstrap: str, client_config: Mapping[str, object] | None = None
                 ) -> None:
        self.bootstrap = bootstrap
        self.client_config: dict[str, object] = dict(client_config or {})
        self._admin: Admin | None = None
        self._producer: Producer[bytes, bytes | None] | None = None
        self._lock = asyncio.Lock()

    # -- clients -----------------------------------------------------------------------
    def config(self, suffix: str = "", **extra: object) -> dict[str, object]:
        return {"bootstrap.servers": self.bootstrap,
                "client.id": CONSOLE_CLIENT_ID + (f"-{suffix}" if suffix else ""),
                **self.client_config, **extra}

    async def admin(self) -> Admin:
        async with self._lock:
            if self._admin is None:
                admin = Admin(self.config())
                try:
                    await admin.start()
                except BaseException:
                    await admin.close()
                    raise
                self._admin = admin
            return self._admin

    async def producer(self) -> Producer[bytes, bytes | None]:
        async with self._lock:
            if self._producer is None:
                producer: Producer[bytes, bytes | None] = Producer(self.config(
                    "producer", **{"linger.ms": 0}))
                self._producer = producer
            return self._producer

    async def close(self) -> None:
        for client in (self._producer, self._admin):
            if client is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(client.close(), 5)
        self._producer = self._admin = None

    # -- what the backend can do ---------------------------------------------------------
    @property
    def cluster_object(self) -> Cluster | None:
        """The kaflite cluster in this process, for chaos and the registry (None here)."""
        return None

    def features(self) -> dict[str, bool]:
        return {"connections": False, "chaos": False, "metrics": False, "internals": False}

    async def info(self) -> Json:
        admin = await self.admin()
        described = await admin.describe_cluster()
        return {"backend": self.kind, "cluster_id": described["cluster_id"],
                "bootstrap": self.bootstrap, "features": self.features()}

    # -- cluster -------------------------------------------------------------------------
    async def cluster_info(self) -> Json:
        admin = await self.admin()
        described = await admin.describe_cluster()
        topics = await self._described_topics(internal=True)
        partitions = [p for t in topics.values() for p in t.partitions]
        return {
            "cluster_id": described["cluster_id"], "controller": described["controller_id"],
            "brokers": [{"id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack,
                         "alive": True, "isolated": None, "running": None}
                        for b in sorted(described["brokers"], key=lambda b: b.node_id)],
            "topics": len(topics), "partitions": len(partitions),
            "under_replicated": sum(len(p.isr) < len(p.replicas) for p in partitions),
            "offline": sum(p.leader < 0 for p in partitions)}

    async def _described_topics(self, internal: bool) -> dict[str, TopicView]:
        admin = await self.admin()
        names = await admin.list_topics(internal=internal)
        described = await admin.describe_topics(names) if names else {}
        return {n: TopicView(n, str(t.topic_id), t.internal,
                          [PartitionView(p.partition, p.leader, p.leader_epoch, list(p.replicas),
                                 list(p.isr)) for p in sorted(t.partitions,
                                                              key=lambda p: p.partition)])
                for n, t in sorted(described.items())}

    async def _offsets(self, tps: list[TopicPartition], query: int | str,
                       isolation: int = 0) -> dict[TopicPartition, int | None]:
        if not tps:
            return {}
        admin = await self.admin()
        wanted: dict[TopicPartition, int] = {
            tp: (LATEST if query == "latest" else -2 if query == "earliest" else int(query))
            for tp in tps}
        found = await list_offsets(admin, wanted, isolation, admin.timeout_ms / 1000)
        return {tp: (o.offset if o is not None and o.offset >= 0 else None)
                for tp, o in found.items()}

    # -- topics --------------------------------------------------------------------------
    async def topics(self, internal: bool = False) -> list[Json]:
        topics = await self._described_topics(internal)
        tps = [TopicPartition(t.name, p.partition) for t in topics.values()
               for p in t.partitions]
        starts = await self._offsets(tps, "earliest")
        ends = await self._offsets(tps, "latest")
        out: list[Json] = []
        for t in topics.values():
            messages = 0
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition)
                start, end = starts.get(tp), ends.get(tp)
                if start is not None and end is not None:
                    messages += end - start
            out.append({"name": t.name, "internal": t.internal,
                        "partitions": len(t.partitions),
                        "replication_factor": max((len(p.replicas) for p in t.partitions),
                                                  default=0),
                        "under_replicated": sum(len(p.isr) < len(p.replicas)
                                                for p in t.partitions),
                        "messages": messages, "size_bytes": None})
        return out

    async def partitions(self, internal: bool = False) -> list[Json]:
        """Every topic with its partitions and their offsets (``topic()`` without the
        configs), in one answer."""
        topics = await self._described_topics(internal)
        tps = [TopicPartition(t.name, p.partition) for t in topics.values()
               for p in t.partitions]
        starts = await self._offsets(tps, "earliest")
        ends = await self._offsets(tps, "latest")
        stable = await self._offsets(tps, "latest", READ_COMMITTED)
        return [{"name": t.name, "topic_id": t.topic_id, "internal": t.internal,
                 "partitions": [{
                     "partition": p.partition, "leader": p.leader,
                     "leader_epoch": p.leader_epoch, "replicas": p.replicas, "isr": p.isr,
                     "log_start_offset": starts.get(TopicPartition(t.name, p.partition)),
                     "log_end_offset": ends.get(TopicPartition(t.name, p.partition)),
                     "high_watermark": ends.get(TopicPartition(t.name, p.partition)),
                     "last_stable_offset": stable.get(TopicPartition(t.name, p.partition)),
                     "size_bytes": None} for p in t.partitions]}
                for t in topics.values()]

    async def topic(self, name: str) -> Json:
        admin = await self.admin()
        described = await self.describe_one(name)
        tps = [TopicPartition(name, p.partition) for p in described.partitions]
        starts = await self._offsets(tps, "earliest")
        ends = await self._offsets(tps, "latest")
        stable = await self._offsets(tps, "latest", READ_COMMITTED)
        entries = (await admin.describe_config_entries([ConfigResource(TOPIC, name)]))
        configs = [{"name": e.name, "value": e.value, "source": e.source,
                    "sensitive": e.sensitive, "read_only": e.read_only,
                    "default": e.is_default}
                   for entries_ in entries.values() for e in entries_]
        return {"name": name, "topic_id": described.topic_id, "internal": described.internal,
                "partitions": [{
                    "partition": p.partition, "leader": p.leader,
                    "leader_epoch": p.leader_epoch, "replicas": p.replicas, "isr": p.isr,
                    "log_start_offset": starts.get(TopicPartition(name, p.partition)),
                    "log_end_offset": ends.get(TopicPartition(name, p.partition)),
                    "high_watermark": ends.get(TopicPartition(name, p.partition)),
                    "last_stable_offset": stable.get(TopicPartition(name, p.partition)),
                    "size_bytes": None} for p in described.partitions],
                "configs": configs}

    async def describe_one(self, name: str) -> TopicView:
        admin = await self.admin()
        try:
            found = (await admin.describe_topics([name]))[name]
        except errors.UnknownTopicOrPartitionError:
            raise ApiError(404, f"no topic {name!r}") from None
        return TopicView(name, str(found.topic_id), found.internal,
                      [PartitionView(p.partition, p.leader, p.leader_epoch, list(p.replicas),
                             list(p.isr))
                       for p in sorted(found.partitions, key=lambda p: p.partition)])

    async def partition_count(self, name: str) -> int:
        return len((await self.describe_one(name)).partitions)

    def check_configs(self, configs: Mapping[str, str | None]) -> None:
        """Check config values kaflite knows before anything is sent (400 on a bad one);
        names it does not know go to the cluster, which may know them."""
        from kaflite.cluster.configs import TOPIC_CONFIGS, validate_topic_configs

        validate_topic_configs({k: v for k, v in configs.items() if k in TOPIC_CONFIGS})

    async def create_topic(self, name: str, partitions: int, replication_factor: int,
                           configs: dict[str, str]) -> None:
        self.check_configs(configs)
        admin = await self.admin()
        topic = NewTopic(name, partitions, replication_factor, configs)
        await admin.create_topics([topic], validate_only=True)
        await admin.create_topics([topic])
        await self._until_visible(name)

    async def _until_visible(self, name: str) -> None:
        """Apache Kafka answers CreateTopics once its controller has the topic; a broker's
        metadata has it a moment later, and the answer's own describe said "no topic"
        (404 after a successful create, seen against a 3-node Kafka 4.4). Wait, bounded,
        until a Metadata request shows it with every partition led."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CREATED_VISIBLE_S
        while loop.time() < deadline:
            with contextlib.suppress(ApiError):
                if all(p.leader >= 0 for p in (await self.describe_one(name)).partitions):
                    return
            await asyncio.sleep(0.1)

    async def delete_topic(self, name: str) -> None:
        await self.describe_one(name)
        admin = await self.admin()
        await admin.delete_topics([name])

    async def add_partitions(self, name: str, count: int) -> None:
        current = await self.partition_count(name)
        if count <= current:
            raise ApiError(400, f"topic {name!r} has {current} partitions; the new count must "
                                f"be larger, got {count}")
        admin = await self.admin()
        await admin.create_partitions({name: count})

    async def alter_configs(self, name: str, changes: dict[str, str | None]) -> None:
        self.check_configs(changes)
        await self.describe_one(name)
        admin = await self.admin()
        await admin.alter_configs({ConfigResource(TOPIC, name): changes})

    # -- what only kaflite has -------------------------------------------------------------
    async def connections(self, include_replicas: bool, client_id: str | None,
                          broker: int | None, include_closed: bool) -> list[Json]:
        raise NotAvailable("the connection registry")

    async def clients(self) -> list[Json]:
        raise NotAvailable("the connection registry")

    async def fan_out(self, client_id: str) -> Json:
        raise NotAvailable("the connection registry")

    async def live_fan_out(self, include_console: bool) -> Json:
        """Every client connection with its roles and request and error counters
        (``console/fanout.py``)."""
        raise NotAvailable("the connection registry")

    async def share_in_flight(self, group: str, partitions: list[tuple[str, int]],
                              limit: int) -> dict[tuple[str, int], Json] | None:
        """Per partition, a share group's in-flight records (``ShareSnapshot.to_json``, or
        ``{"error": ...}``). None here: no Kafka API shows them (KIP-932 gives tools the
        start offset and lag only, DescribeShareGroupOffsets)."""
        return None


class PartitionView:
    __slots__ = ("isr", "leader", "leader_epoch", "partition", "replicas")

    def __init__(self, partition: int, leader: int, leader_epoch: int, replicas: list[int],
                 isr: list[int]) -> None:
        self.partition, self.leader, self.leader_epoch = partition, leader, leader_epoch
        self.replicas, self.isr = replicas, isr


class TopicView:
    __slots__ = ("internal", "name", "partitions", "topic_id")

    def __init__(self, name: str, topic_id: str, internal: bool, partitions: list[PartitionView]
                 ) -> None:
        self.name, self.topic_id, self.internal, self.partitions = (name, topic_id, internal,
                                                                    partitions)


Backend = ClientBackend
