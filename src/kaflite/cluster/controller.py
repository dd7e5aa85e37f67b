"""The controller: the single owner of cluster metadata.

It holds what KRaft's metadata log holds in Kafka: the brokers and whether they
are alive, the topics with their ids and configs, and for every partition its
replicas, leader, leader epoch, ISR and partition epoch. Every change goes
through a method here, which bumps the epochs the way Kafka does and then
tells the affected brokers (``Listener.on_partition_change``), as KRaft brokers
learn of changes from the metadata log.

Elections follow Kafka's rules: a new leader comes from the ISR (unclean
election is off), preferring the order of the replica list; with no live ISR
member the partition is left leaderless (leader -1) and clients get
LEADER_NOT_AVAILABLE until a replica in the ISR comes back. Every leader change
bumps the leader epoch; every ISR change bumps the partition epoch.

It also keeps the users' SCRAM credentials (salt, iterations, stored and server
keys; never a password), as KRaft's UserScramCredentialRecord does, and the ACL
bindings (``acls``, a ``kaflite.cluster.acl.AclStore``), as its
AccessControlEntryRecords; both are shared by every broker, so a change applies
everywhere at once.

The metadata is persisted as JSON in ``<data_dir>/__cluster_metadata.json`` so a
restarted cluster comes back with the same topics, ids and assignments. Each
change writes the whole file, before the request that made it is answered; a
request that makes many changes (CreateTopics, DeleteTopics, CreatePartitions,
Metadata's auto-creation) runs them in ``batched()``, which writes it once at the
end, as KRaft's controller appends one request's records as one batch. (Written
once a topic, 1,000 topics in one Metadata request took 8 s, most of it writing
the file.)
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from collections.abc import Callable, Iterable, Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from kaflite.cluster.acl import AclStore
from kaflite.cluster.internal_topics import INTERNAL_TOPICS
from kaflite.cluster.quotas.entities import Entity, QuotaStore
from kaflite.protocol import errors
from kaflite.security.acl import AclBinding, AclBindingFilter
from kaflite.security.scram import ScramCredential

__all__ = ["MAX_PARTITIONS_PER_REQUEST", "MAX_RECORDS_PER_REQUEST", "TOO_LARGE_BATCH",
           "TOO_MANY_PARTITIONS", "BrokerInfo", "Controller", "Listener", "PartitionState",
           "TopicState"]

# Kafka's controller writes at most this many metadata records for one request
# (MAX_RECORDS_PER_USER_OP); a request that needs more fails with POLICY_VIOLATION
# and this message.
MAX_RECORDS_PER_REQUEST = 10_000
TOO_LARGE_BATCH = "Unable to perform excessively large batch operation."
# ... and creates at most this many partitions for one request (MAX_PARTITIONS_PER_BATCH)
MAX_PARTITIONS_PER_REQUEST = 10_000
TOO_MANY_PARTITIONS = "Excessively large number of partitions per request."



@dataclass
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None = None
    alive: bool = True
    fenced_replication: bool = False  # isolated from replication by fault injection
    # every listener's advertised (host, port); host/port above are the first one's
    endpoints: dict[str, tuple[str, int]] = field(default_factory=dict)

    def endpoint(self, listener: str | None) -> tuple[str, int] | None:
        """The (host, port) of ``listener`` on this broker; None if it has no such listener."""
        if listener is None or not self.endpoints:
            return self.host, self.port
        return self.endpoints.get(listener)


@dataclass
class PartitionState:
    topic: str
    partition: int
    replicas: list[int]
    leader: int
    leader_epoch: int = 0
    isr: list[int] = field(default_factory=list)
    partition_epoch: int = 0
    adding: list[int] = field(default_factory=list)
    removing: list[int] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        return {
            "replicas": self.replicas, "leader": self.leader, "leader_epoch": self.leader_epoch,
            "isr": self.isr, "partition_epoch": self.partition_epoch,
            "adding": self.adding, "removing": self.removing,
        }


@dataclass
class TopicState:
    name: str
    topic_id: uuid.UUID
    partitions: list[PartitionState]
    configs: dict[str, str] = field(default_factory=dict)

    @property
    def internal(self) -> bool:
        return self.name in INTERNAL_TOPICS


class Listener(Protocol):
    """What a broker must do when the controller changes a partition."""

    def on_partition_change(self, topic: TopicState, state: PartitionState) -> None: ...

    def on_topic_deleted(self, topic: TopicState) -> None: ...


class Controller:
    def __init__(self, data_dir: Path | None, cluster_id: str | None = None) -> None:
        self.data_dir = data_dir
        self.brokers: dict[int, BrokerInfo] = {}
        self.topics: dict[str, TopicState] = {}
        self.topics_by_id: dict[uuid.UUID, TopicState] = {}
        self.broker_configs: dict[str, str] = {}
        self.listeners: dict[int, Listener] = {}
        self.cluster_id = cluster_id or _new_cluster_id()
        self.next_producer_id = 1000
        # user -> mechanism -> credential (AlterUserScramCredentials)
        self.scram: dict[str, dict[str, ScramCredential]] = {}
        # client quotas (AlterClientQuotas), as KRaft's ClientQuotaRecord
        self.client_quotas = QuotaStore()
        # ACL bindings (CreateAcls/DeleteAcls), read by every broker's authorizer
        self.acls = AclStore()
        # group configs (ConfigResource GROUP, kaflite.cluster.group_configs): group -> configs
        self.group_configs: dict[str, dict[str, str]] = {}
        # Called after every persisted change: a multi-process cluster sends the
        # change to its broker processes (kaflite.cluster.controller_server).
        self.on_change: Callable[[], None] | None = None
        # times the metadata file was written (one per change, or per batched())
        self.writes = 0
        self._batch_depth = 0
        self._unsaved = False
        self._load()

    # -- persistence -----------------------------------------------------------
    @property
    def _path(self) -> Path | None:
        return None if self.data_dir is None else self.data_dir / "__cluster_metadata.json"

    def _load(self) -> None:
        path = self._path
        if path is None or not path.exists():
            return
        data = json.loads(path.read_text())
        self.cluster_id = data["cluster_id"]
        self.next_producer_id = int(data.get("next_producer_id", 1000))
        for user, creds in data.get("scram", {}).items():
            self.scram[user] = {mechanism: ScramCredential.from_kafka(mechanism, text)
                                for mechanism, text in creds.items()}
        self.client_quotas.load_json(data.get("client_quotas", []))
        self.acls.load(data.get("acls", []))
        self.group_configs = {g: dict(c) for g, c in data.get("group_configs", {}).items()}
        for name, t in data["topics"].items():
            parts = [PartitionState(name, i, **p) for i, p in enumerate(t["partitions"])]
            topic = TopicState(name, uuid.UUID(t["topic_id"]), parts, t.get("configs", {}))
            self.topics[name] = topic
            self.topics_by_id[topic.topic_id] = topic

    @contextlib.contextmanager
    def batched(self) -> Iterator[None]:
        """Changes made inside are saved once, when it ends. For one request's
        changes, made without an ``await`` between them: until it ends, no change
        of any request is persisted."""
        self._batch_depth += 1
        try:
            yield
        finally:
            self._batch_depth -= 1
            if not self._batch_depth and self._unsaved:
                self.save()

    def save(self) -> None:
        if self._batch_depth:
            self._unsaved = True
            return
        self._unsaved = False
        if self.on_change is not None:
            self.on_change()
        path = self._path
        if path is None:
            return
        data = {
            "cluster_id": self.cluster_id,
            "next_producer_id": self.next_producer_id,
            "scram": {user: {m: c.to_kafka() for m, c in creds.items()}
                      for user, creds in self.scram.items()},
            "client_quotas": self.client_quotas.to_json(),
            "acls": self.acls.to_json(),
            "group_configs": self.group_configs,
            "topics": {
                name: {
                    "topic_id": str(t.topic_id),
                    "configs": t.configs,
                    "partitions": [p.to_json() for p in t.partitions],
                }
                for name, t in self.topics.items()
            },
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1))
        os.replace(tmp, path)
        self.writes += 1

    def partition(self, topic: str, index: int) -> PartitionState | None:
        """The state of ``topic``-``index``; None if the cluster has no such partition."""
        t = self.topics.get(topic)
        return t.partitions[index] if t is not None and 0 <= index < len(t.partitions) else None

    def allocate_producer_id(self) -> int:
        """A producer id never handed out before, in this cluster's lifetime."""
        pid = self.next_producer_id
        self.next_producer_id += 1
        self.save()
        return pid

    # -- SCRAM credentials ---------------------------------------------------------
    def scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        return self.scram.get(user, {}).get(mechanism)

    def alter_scram(self, upserts: list[tuple[str, ScramCredential]],
                    deletions: list[tuple[str, str]]) -> None:
        """Apply a batch of checked changes, then persist them once."""
        for user, mechanism in deletions:
            creds = self.scram.get(user, {})
            creds.pop(mechanism, None)
            if not creds:
                self.scram.pop(user, None)
        for user, credential in upserts:
            self.scram.setdefault(user, {})[credential.mechanism] = credential
        self.save()

    # -- ACLs --------------------------------------------------------------------------
    def create_acls(self, bindings: list[AclBinding]) -> None:
        """Add validated bindings (CreateAcls)."""
        self.acls.add(bindings)
        self.save()

    def delete_acls(self, filters: list[AclBindingFilter]) -> list[list[AclBinding]]:
        """Delete what each filter matches (DeleteAcls); per filter, what it deleted."""
        deleted = self.acls.remove(filters)
        if any(deleted):
            self.save()
        return deleted

    # -- client quotas -------------------------------------------------------------
    def alter_client_quotas(self, changes: list[tuple[Entity, dict[str, float], set[str]]]
                            ) -> None:
        """Apply checked quota changes (sets and removals per entity), then persist."""
        for entity, sets, removals in changes:
            self.client_quotas.alter(entity, sets, removals)
        self.save()

    # -- brokers ----------------------------------------------------------------
    def register_broker(self, info: BrokerInfo, listener: Listener) -> None:
        self.brokers[info.node_id] = info
        self.listeners[info.node_id] = listener

    def live_brokers(self) -> list[BrokerInfo]:
        return [b for b in self.brokers.values() if b.alive]

    def broker_started(self, node_id: int) -> None:
        """A broker (re)joined: it becomes a follower of everything it replicates.

        It is not put back into any ISR here; its leaders add it once it has
        caught up, as Kafka's AlterPartition ISR expansion does. Leaderless
        partitions whose ISR contains it get it as their leader.
        """
        self.brokers[node_id].alive = True
        for topic in self.topics.values():
            for p in topic.partitions:
                if node_id not in p.replicas:
                    continue
                if p.leader == -1 and node_id in p.isr:
                    self._set_leader(topic, p, node_id)
                else:
                    self._notify(topic, p, only=node_id)
        self.save()

    def broker_stopped(self, node_id: int) -> None:
        """A broker died or shut down: move its leaderships, drop it from ISRs."""
        self.brokers[node_id].alive = False
        for topic in self.topics.values():
            for p in topic.partitions:
                if node_id not in p.replicas:
                    continue
                if p.leader == node_id:
                    self._elect(topic, p, exclude={node_id})
                elif node_id in p.isr and len(p.isr) > 1:
                    p.isr = [r for r in p.isr if r != node_id]
                    p.partition_epoch += 1
                    self._notify(topic, p)
        self.save()

    # -- topics -----------------------------------------------------------------
    def assign_replicas(self, partitions: int, replication_factor: int,
                        start: int | None = None) -> list[list[int]]:
        """Spread replicas across live brokers and racks, like Kafka's rack-aware assignor."""
        brokers = sorted(self.live_brokers(), key=lambda b: b.node_id)
        if replication_factor > len(brokers):
            raise errors.InvalidReplicationFactorError(
                f"replication factor {replication_factor} > {len(brokers)} available brokers"
            )
        # Interleave racks so consecutive brokers sit on different racks.
        by_rack: dict[str | None, list[BrokerInfo]] = {}
        for b in brokers:
            by_rack.setdefault(b.rack, []).append(b)
        ordered: list[int] = []
        while any(by_rack.values()):
            for rack in sorted(by_rack, key=str):
                if by_rack[rack]:
                    ordered.append(by_rack[rack].pop(0).node_id)
        n = len(ordered)
        rack_of = {b.node_id: b.rack for b in brokers}
        first = (start if start is not None else _stable_start(len(self.topics))) % n
        out = []
        for i in range(partitions):
            lead = (first + i) % n
            # Like Kafka, vary the follower shift between rounds so followers spread too.
            shift = 1 + ((first + i) // n) % max(1, n - 1)
            replicas = [ordered[lead]]
            candidates = [ordered[(lead + shift + j) % n] for j in range(n)]
            while len(replicas) < replication_factor:
                used = {rack_of[r] for r in replicas}
                pick = next((c for c in candidates if c not in replicas
                             and rack_of[c] not in used), None)
                if pick is None:  # every rack is used already: any broker will do
                    pick = next(c for c in candidates if c not in replicas)
                replicas.append(pick)
            out.append(replicas)
        return out

    def create_topic(self, name: str, assignments: list[list[int]],
                     configs: dict[str, str] | None = None,
                     topic_id: uuid.UUID | None = None) -> TopicState:
        if name in self.topics:
            raise errors.TopicAlreadyExistsError(f"topic '{name}' already exists")
        topic = TopicState(name, topic_id or uuid.uuid4(), [], dict(configs or {}))
        for i, replicas in enumerate(assignments):
            live = [r for r in replicas if self.brokers.get(r) and self.brokers[r].alive]
            leader = live[0] if live else -1
            topic.partitions.append(PartitionState(name, i, list(replicas), leader, 0, live))
        self.topics[name] = topic
        self.topics_by_id[topic.topic_id] = topic
        self.save()
        for p in topic.partitions:
            self._notify(topic, p)
        return topic

    def delete_topic(self, name: str) -> None:
        topic = self.topics.pop(name, None)
        if topic is None:
            raise errors.UnknownTopicOrPartitionError(name)
        self.topics_by_id.pop(topic.topic_id, None)
        self.save()
        for listener in self.listeners.values():
            listener.on_topic_deleted(topic)

    def create_partitions(self, name: str, new_assignments: list[list[int]]) -> None:
        topic = self.topics[name]
        for replicas in new_assignments:
            live = [r for r in replicas if self.brokers.get(r) and self.brokers[r].alive]
            p = PartitionState(name, len(topic.partitions), list(replicas),
                               live[0] if live else -1, 0, live)
            topic.partitions.append(p)
            self._notify(topic, p)
        self.save()

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        topic = self.topics[name]
        topic.configs = dict(configs)
        self.save()
        for p in topic.partitions:
            self._notify(topic, p)

    def set_group_configs(self, group: str, configs: dict[str, str]) -> None:
        """Replace a group's dynamic configs (already validated); none left removes it."""
        if configs:
            self.group_configs[group] = dict(configs)
        else:
            self.group_configs.pop(group, None)
        self.save()

    # -- leadership and ISR -------------------------------------------------------
    def _set_leader(self, topic: TopicState, p: PartitionState, leader: int) -> None:
        p.leader = leader
        p.leader_epoch += 1
        p.partition_epoch += 1
        self._notify(topic, p)

    def _elect(self, topic: TopicState, p: PartitionState, exclude: AbstractSet[int] = frozenset(),
               prefer: int | None = None) -> None:
        live_isr = [r for r in p.replicas if r in p.isr and r not in exclude
                    and self.brokers.get(r) is not None and self.brokers[r].alive]
        if prefer is not None and prefer in live_isr:
            new = prefer
        else:
            new = live_isr[0] if live_isr else -1
        if new == -1:
            # Kafka keeps the last leader in the ISR when no election is possible,
            # so it can come back as leader without losing acknowledged data.
            p.leader = -1
            p.leader_epoch += 1
            p.partition_epoch += 1
            self._notify(topic, p)
            return
        p.isr = [r for r in p.isr if r not in exclude] or [new]
        self._set_leader(topic, p, new)

    def move_leader(self, topic_name: str, partition: int, to: int | None = None) -> int:
        """Move leadership to ``to`` (an ISR member) or to another ISR member."""
        topic = self.topics[topic_name]
        p = topic.partitions[partition]
        if to is not None:
            if to not in p.isr or not self.brokers[to].alive:
                raise errors.NotLeaderOrFollowerError(f"broker {to} is not a live ISR member")
            self._elect(topic, p, prefer=to)
        else:
            others = {p.leader} if len([r for r in p.isr if self.brokers[r].alive]) > 1 else set()
            self._elect(topic, p, exclude=set(), prefer=next(
                (r for r in p.replicas if r in p.isr and r not in others
                 and self.brokers[r].alive), None))
        self.save()
        return p.leader

    def preferred_election(self, topic_name: str, partition: int) -> bool:
        topic = self.topics[topic_name]
        p = topic.partitions[partition]
        preferred = p.replicas[0]
        if p.leader == preferred:
            return False
        if preferred not in p.isr or not self.brokers[preferred].alive:
            raise errors.PreferredLeaderNotAvailableError(f"{topic_name}-{partition}")
        self._elect(topic, p, prefer=preferred)
        self.save()
        return True

    def alter_isr(self, topic_name: str, partition: int, leader: int, leader_epoch: int,
                  isr: list[int]) -> PartitionState:
        """A leader's request to change the ISR (Kafka's AlterPartition)."""
        topic = self.topics[topic_name]
        p = topic.partitions[partition]
        if p.leader != leader or p.leader_epoch != leader_epoch:
            raise errors.FencedLeaderEpochError(f"{topic_name}-{partition}")
        # As Kafka's controller (KIP-841): a broker that is down or shutting down does
        # not join an ISR, even if its last Fetch, still in flight, said it caught up.
        for r in isr:
            broker = self.brokers.get(r)
            if r not in p.isr and (broker is None or not broker.alive):
                raise errors.IneligibleReplicaError(
                    f"{topic_name}-{partition}: broker {r} is not alive")
        if sorted(isr) != sorted(p.isr):
            p.isr = [r for r in p.replicas if r in isr]
            p.partition_epoch += 1
            # Reassignment completes once every target replica is in the ISR.
            if p.adding and all(r in p.isr for r in p.adding):
                self._finish_reassignment(topic, p)
            self.save()
            self._notify(topic, p, skip=leader)
        return p

    def reassign(self, topic_name: str, partition: int, target: list[int] | None) -> None:
        """Start (or cancel, with ``None``) a partition reassignment (KIP-455)."""
        topic = self.topics[topic_name]
        p = topic.partitions[partition]
        if target is None:
            if not p.adding and not p.removing:
                raise errors.NoReassignmentInProgressError(f"{topic_name}-{partition}")
            p.replicas = [r for r in p.replicas if r not in p.adding]
            p.isr = [r for r in p.isr if r in p.replicas] or p.isr
            p.adding, p.removing = [], []
        else:
            for r in target:
                if r not in self.brokers:
                    raise errors.InvalidReplicaAssignmentError(f"unknown broker {r}")
            p.adding = [r for r in target if r not in p.replicas]
            p.removing = [r for r in p.replicas if r not in target]
            p.replicas = list(target) + [r for r in p.replicas if r not in target]
            if not p.adding:
                self._finish_reassignment(topic, p)
        p.partition_epoch += 1
        self.save()
        self._notify(topic, p)

    def _finish_reassignment(self, topic: TopicState, p: PartitionState) -> None:
        removed = list(p.removing)
        keep = [r for r in p.replicas if r not in p.removing]
        p.replicas, p.adding, p.removing = keep, [], []
        p.isr = [r for r in p.isr if r in keep]
        if p.leader not in keep:
            self._elect(topic, p, exclude={p.leader})
        # Brokers no longer hosting the partition learn it too, and drop their replica.
        for node in removed:
            self._notify(topic, p, only=node)

    def _notify(self, topic: TopicState, p: PartitionState, only: int | None = None,
                skip: int | None = None) -> None:
        """Tell the brokers hosting ``p`` (or just ``only``) its new state."""
        targets: Iterable[int] = [only] if only is not None else list(p.replicas)
        for node in targets:
            listener = self.listeners.get(node)
            if listener is not None and node != skip and self.brokers[node].alive:
                listener.on_partition_change(topic, p)


def _new_cluster_id() -> str:
    import base64

    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def _stable_start(n_topics: int) -> int:
    return n_topics
