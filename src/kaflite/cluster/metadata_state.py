"""The controller's metadata model: brokers, topics, partitions, ACL ids.

Theory of operation: these plain dataclasses are the in-memory state that the
``Controller`` mutates and every reader (handlers, brokers) sees; the metadata
log (``kaflite.cluster.metalog``) is their persistence and change feed, and
replaying its records into empty ones rebuilds them (KIP-500). They live apart
from the controller so the log's codec can build and replay them without
importing the controller.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from kaflite.cluster.internal_topics import INTERNAL_TOPICS
from kaflite.security.acl import AclBinding

__all__ = ["AclIds", "BrokerInfo", "PartitionState", "TopicState"]


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
    # the offset of its RegisterBrokerRecord in the metadata log, as Kafka's broker epoch
    epoch: int = -1

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



class AclIds:
    """The id of every ACL binding: AccessControlEntryRecord carries one, and
    RemoveAccessControlEntryRecord names the binding it removes by it."""

    def __init__(self) -> None:
        self._by_id: dict[uuid.UUID, AclBinding] = {}
        self._of: dict[AclBinding, uuid.UUID] = {}

    def __len__(self) -> int:
        return len(self._by_id)

    def items(self) -> list[tuple[uuid.UUID, AclBinding]]:
        return list(self._by_id.items())

    def clear(self) -> None:
        self._by_id.clear()
        self._of.clear()

    def add(self, binding: AclBinding, acl_id: uuid.UUID) -> None:
        self._by_id[acl_id] = binding
        self._of[binding] = acl_id

    def id_of(self, binding: AclBinding) -> uuid.UUID | None:
        return self._of.get(binding)

    def pop_id(self, acl_id: uuid.UUID) -> AclBinding | None:
        binding = self._by_id.pop(acl_id, None)
        if binding is not None:
            self._of.pop(binding, None)
        return binding

    def pop_binding(self, binding: AclBinding) -> uuid.UUID | None:
        acl_id = self._of.pop(binding, None)
        if acl_id is not None:
            self._by_id.pop(acl_id, None)
        return acl_id
