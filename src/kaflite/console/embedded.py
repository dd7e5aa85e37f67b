"""The console's backend for a kaflite ``Cluster`` running in this process.

Everything ``ClientBackend`` does (through the cluster's own bootstrap), plus
what only the cluster knows: brokers down or isolated, each partition's log
start and end, high watermark, last stable offset and size on disk (read from
the leader's ``Partition``, when the leader runs in this process), the
connection registry, metrics and faults.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING

from kaflite.client import TopicPartition
from kaflite.console.backend import ClientBackend, is_console
from kaflite.console.web import ApiError, Json

if TYPE_CHECKING:
    from kaflite.cluster.cluster import Cluster
    from kaflite.cluster.controller import PartitionState, TopicState
    from kaflite.cluster.partition import Partition

__all__ = ["EmbeddedBackend", "ReplaceCluster", "cluster_view"]

# Replaces the cluster behind the bootstrap address (``kaflite up --front-port``), given
# how to retire the old one; answers what it did (``Replacement.to_dict()``).
ReplaceCluster = Callable[[str], Awaitable[Json]]


class EmbeddedBackend(ClientBackend):
    kind = "kaflite"

    def __init__(self, cluster: Cluster,
                 client_config: Mapping[str, object] | None = None) -> None:
        """``client_config``: the console's own clients' properties; by default, when the
        first listener needs SASL, the user the cluster's configuration names for it
        (``console/credentials.py``)."""
        from kaflite.console.credentials import client_security

        super().__init__(cluster.bootstrap_servers,
                         client_security(cluster) if client_config is None else client_config)
        self.cluster = cluster
        self.replace_cluster: ReplaceCluster | None = None

    @property
    def cluster_object(self) -> Cluster:
        return self.cluster

    def features(self) -> dict[str, bool]:
        return {"connections": True, "chaos": True, "metrics": True, "internals": True}

    async def info(self) -> Json:
        return {"backend": self.kind, "cluster_id": self.cluster.cluster_id,
                "bootstrap": self.cluster.bootstrap_servers, "features": self.features()}

    # -- cluster and topics, from the controller and the leaders' partitions -----------------
    def _leader_partition(self, p: PartitionState) -> Partition | None:
        broker = self.cluster.brokers.get(p.leader)
        if broker is None or not broker.running:
            return None
        return broker.partitions.get((p.topic, p.partition))

    async def cluster_info(self) -> Json:
        controller = self.cluster.controller
        live = [b.node_id for b in controller.live_brokers()]
        partitions = [p for t in controller.topics.values() for p in t.partitions]
        return {"cluster_id": controller.cluster_id, "controller": min(live, default=-1),
                "brokers": brokers_view(self.cluster),
                "topics": len(controller.topics), "partitions": len(partitions),
                "under_replicated": sum(len(p.isr) < len(p.replicas) for p in partitions),
                "offline": sum(p.leader < 0 for p in partitions)}

    def _topic_state(self, name: str) -> TopicState:
        topic = self.cluster.controller.topics.get(name)
        if topic is None:
            raise ApiError(404, f"no topic {name!r}")
        return topic

    async def partition_count(self, name: str) -> int:
        return len(self._topic_state(name).partitions)

    async def _partition_rows(self, topic: TopicState) -> list[Json]:
        rows: list[Json] = []
        missing: list[TopicPartition] = []
        for p in sorted(topic.partitions, key=lambda p: p.partition):
            local = self._leader_partition(p)
            row: Json = {"partition": p.partition, "leader": p.leader,
                         "leader_epoch": p.leader_epoch, "replicas": list(p.replicas),
                         "isr": list(p.isr), "log_start_offset": None, "log_end_offset": None,
                         "high_watermark": None, "last_stable_offset": None,
                         "size_bytes": None}
            if local is not None:
                row.update(log_start_offset=local.log_start_offset,
                           log_end_offset=local.log_end_offset,
                           high_watermark=local.high_watermark,
                           last_stable_offset=local.last_stable_offset,
                           size_bytes=local.log.size_bytes)
            elif p.leader >= 0:
                missing.append(TopicPartition(topic.name, p.partition))
            rows.append(row)
        if missing:      # brokers in processes of their own: ask them over the protocol
            starts = await self._offsets(missing, "earliest")
            ends = await self._offsets(missing, "latest")
            stable = await self._offsets(missing, "latest", 1)
            for row in rows:
                tp = TopicPartition(topic.name, int(str(row["partition"])))
                if tp in ends:
                    row.update(log_start_offset=starts.get(tp), log_end_offset=ends.get(tp),
                               high_watermark=ends.get(tp), last_stable_offset=stable.get(tp))
        return rows

    async def topics(self, internal: bool = False) -> list[Json]:
        chosen = [t for t in sorted(self.cluster.controller.topics.values(),
                                    key=lambda t: t.name) if internal or not t.internal]
        # leaders in processes of their own: their offsets over the protocol, in one go
        remote = [TopicPartition(t.name, p.partition) for t in chosen for p in t.partitions
                  if self._leader_partition(p) is None and p.leader >= 0]
        starts = await self._offsets(remote, "earliest") if remote else {}
        ends = await self._offsets(remote, "latest") if remote else {}
        out: list[Json] = []
        for topic in chosen:
            messages, size = 0, 0
            sizes_known = True
            for p in topic.partitions:
                local = self._leader_partition(p)
                if local is not None:
                    messages += local.log_end_offset - local.log_start_offset
                    size += local.log.size_bytes
                    continue
                sizes_known = False
                tp = TopicPartition(topic.name, p.partition)
                start, end = starts.get(tp), ends.get(tp)
                if start is not None and end is not None:
                    messages += end - start
            out.append({"name": topic.name, "internal": topic.internal,
                        "partitions": len(topic.partitions),
                        "replication_factor": max((len(p.replicas) for p in topic.partitions),
                                                  default=0),
                        "under_replicated": sum(len(p.isr) < len(p.replicas)
                                                for p in topic.partitions),
                        "messages": messages, "size_bytes": size if sizes_known else None})
        return out

    async def partitions(self, internal: bool = False) -> list[Json]:
        out: list[Json] = []
        for topic in sorted(self.cluster.controller.topics.values(), key=lambda t: t.name):
            if topic.internal and not internal:
                continue
            out.append({"name": topic.name, "topic_id": str(topic.topic_id),
                        "internal": topic.internal,
                        "partitions": await self._partition_rows(topic)})
        return out

    async def topic(self, name: str) -> Json:
        topic = self._topic_state(name)
        rows = await self._partition_rows(topic)
        from kaflite.cluster.configs import effective_topic_configs
        from kaflite.cluster.dynamic_configs import DEFAULT

        defaults = self.cluster.controller.broker_configs.get(DEFAULT, {})

        def dynamic(key: str) -> tuple[str, str] | None:      # the cluster-wide values
            return (defaults[key], "DYNAMIC_DEFAULT_BROKER_CONFIG") if key in defaults else None
        configs = [{"name": k, "value": v, "source": source, "sensitive": False,
                    "read_only": False, "default": source == "DEFAULT_CONFIG"}
                   for k, (v, source) in sorted(effective_topic_configs(
                       topic.configs, self.cluster.config, dynamic).items())]
        return {"name": name, "topic_id": str(topic.topic_id), "internal": topic.internal,
                "partitions": rows, "configs": configs}

    def check_configs(self, configs: Mapping[str, str | None]) -> None:
        from kaflite.cluster.configs import validate_topic_configs

        validate_topic_configs(configs)     # kaflite knows every config it takes

    # -- the registry ------------------------------------------------------------------------
    async def connections(self, include_replicas: bool, client_id: str | None,
                          broker: int | None, include_closed: bool) -> list[Json]:
        registry = self.cluster.registry
        await registry.refresh()
        return [{**c.to_dict(), "console": is_console(c.client_id)}
                for c in registry.connections(
                    include_replicas=include_replicas, client_id=client_id, broker=broker,
                    include_closed=include_closed)]

    async def clients(self) -> list[Json]:
        registry = self.cluster.registry
        await registry.refresh()
        return [{**c.to_dict(), "console": is_console(c.client_id)}
                for c in registry.clients()]

    async def live_fan_out(self, include_console: bool) -> Json:
        from kaflite.console.fanout import fanout_view

        registry = self.cluster.registry
        await registry.refresh()
        return fanout_view(registry, brokers_view(self.cluster), include_console)

    async def fan_out(self, client_id: str) -> Json:
        """One client's connections drawn to their brokers: the seeds' fan-out picture."""
        registry = self.cluster.registry
        await registry.refresh()
        conns = registry.connections(client_id=client_id)
        if not conns:
            raise ApiError(404, f"no open connection with client.id {client_id!r}")
        by_role: dict[str, int] = {}
        for c in conns:
            for role in c.roles:
                by_role[role] = by_role.get(role, 0) + 1
        return {
            "client_id": client_id, "console": is_console(client_id),
            "summary": [c.to_dict() for c in registry.clients() if c.client_id == client_id],
            "brokers": [b["id"] for b in brokers_view(self.cluster)],
            "roles": dict(sorted(by_role.items())),
            "connections": [{"connection_id": c.connection_id, "broker": c.broker,
                             "peer": c.peer, "roles": c.roles, "partitions": c.partitions,
                             "groups": c.groups, "principal": c.principal,
                             "requests": c.requests,
                             "last_activity": c.last_activity} for c in conns]}

    # -- share groups: the leaders' in-flight records --------------------------------------
    async def share_in_flight(self, group: str, partitions: list[tuple[str, int]],
                              limit: int) -> dict[tuple[str, int], Json]:
        """Asked of each partition's leader: its share-partition, or the persisted state
        when no member fetches there (``SharePartitionManager.snapshot``)."""
        out: dict[tuple[str, int], Json] = {}
        for topic, index in partitions:
            try:
                found = await self._share_snapshot(group, topic, index, limit)
            except Exception as exc:  # a leader moving or down: say so on that row
                found = {"error": str(exc) or type(exc).__name__}
            if found is not None:
                out[(topic, index)] = found
        return out

    async def _share_snapshot(self, group: str, topic: str, index: int, limit: int
                              ) -> Json | None:
        state = self._topic_state(topic)
        p = next((p for p in state.partitions if p.partition == index), None)
        if p is None or p.leader < 0:
            return {"error": f"{topic}-{index} has no leader"}
        server = self.cluster.controller_server
        if self.cluster.use_processes and server is not None:
            got = await server.call_broker(p.leader, "share_in_flight", {
                "group": group, "topic": topic, "partition": index, "limit": limit})
            return got if isinstance(got, dict) else None
        local = self._leader_partition(p)
        broker = self.cluster.brokers.get(p.leader)
        if local is None or broker is None or broker.share is None:
            return {"error": f"the leader of {topic}-{index} (broker {p.leader}) is not "
                             "running"}
        snap = await broker.share.snapshot(group, local, limit)
        return None if snap is None else snap.to_json()


def brokers_view(cluster: Cluster) -> list[Json]:
    return [{"id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack,
             "alive": b.alive, "isolated": b.fenced_replication,
             "running": cluster.broker_running(b.node_id), "pid": cluster.broker_pid(b.node_id)}
            for b in sorted(cluster.controller.brokers.values(), key=lambda b: b.node_id)]


def cluster_view(cluster: Cluster) -> Json:
    """Brokers, topics and partitions (leader, ISR, replicas): ``GET /cluster``."""
    controller = cluster.controller
    return {
        "cluster_id": controller.cluster_id,
        "brokers": brokers_view(cluster),
        "topics": [{"name": t.name, "topic_id": str(t.topic_id), "internal": t.internal,
                    "partitions": [{"partition": p.partition, "leader": p.leader,
                                    "leader_epoch": p.leader_epoch, "isr": list(p.isr),
                                    "replicas": list(p.replicas)} for p in t.partitions]}
                   for t in sorted(controller.topics.values(), key=lambda t: t.name)],
    }
