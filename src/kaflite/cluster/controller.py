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
keys; never a password), as KRaft's UserScramCredentialRecord does, the
delegation tokens (never their HMAC), as its DelegationTokenRecords, and the ACL
bindings (``acls``, a ``kaflite.cluster.acl.AclStore``), as its
AccessControlEntryRecords; both are shared by every broker, so a change applies
everywhere at once.

Persistence (KIP-500, KIP-630): the in-memory model stays the source of truth
for reads; every change is also described by Kafka's metadata records
(``kaflite.cluster.metalog``) and appended, one batch a ``save()``, to the
metadata log ``<data_dir>/__cluster_metadata-0``, which snapshots itself in the
background. A change costs what its records cost: an ISR change is one
PartitionChangeRecord of a few dozen bytes, whatever the number of partitions
(issue 36: rewriting the whole metadata as JSON on every change, on the event
loop, wedged a cluster of 1,435 partitions). A restart replays the newest
snapshot and the records after it. A request that makes many changes
(CreateTopics, DeleteTopics, CreatePartitions, Metadata's auto-creation) runs
them in ``batched()``, which appends them as one batch at the end, as KRaft's
controller does.

Partition changes are recorded by comparison: a mutating path calls ``_touch``
before it changes a partition, and ``save()`` writes, for each touched
partition, the record that turns the state it had into the state it has.
Broker registrations are in the log too, but a restarted controller does not
restore them: brokers register again when they start, as before.
"""

from __future__ import annotations

import contextlib
import dataclasses
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from kaflite.cluster import delegation_tokens, features, metalog
from kaflite.cluster.acl import AclStore
from kaflite.cluster.dynamic_configs import BrokerConfigStore
from kaflite.cluster.leadership import Leadership, Listener
from kaflite.cluster.metadata_state import AclIds, BrokerInfo, PartitionState, TopicState
from kaflite.cluster.quotas.entities import Entity, QuotaStore
from kaflite.protocol import errors
from kaflite.protocol.messages._generated.feature_level_record import FeatureLevelRecord
from kaflite.protocol.messages._generated.remove_topic_record import RemoveTopicRecord
from kaflite.protocol.messages._runtime import Struct
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



class Controller(Leadership):
    def __init__(self, data_dir: Path | None, cluster_id: str | None = None, *,
                 snapshot_records: int = metalog.SNAPSHOT_RECORDS) -> None:
        self.data_dir = data_dir
        self.brokers: dict[int, BrokerInfo] = {}
        self.topics: dict[str, TopicState] = {}
        self.topics_by_id: dict[uuid.UUID, TopicState] = {}
        self.listeners: dict[int, Listener] = {}
        # topic names a CreateTopics is creating (between its validation and its commit)
        self.creating: set[str] = set()
        self.cluster_id = cluster_id or _new_cluster_id()
        self.next_producer_id = 1000
        # finalized feature levels (FeatureLevelRecord): metadata.version
        self.features: dict[str, int] = {}
        # user -> mechanism -> credential (AlterUserScramCredentials)
        self.scram: dict[str, dict[str, ScramCredential]] = {}
        # delegation tokens by id (DelegationTokenRecord; kaflite.cluster.delegation_tokens)
        self.tokens: dict[str, delegation_tokens.TokenInfo] = {}
        # client quotas (AlterClientQuotas), as KRaft's ClientQuotaRecord
        self.client_quotas = QuotaStore()
        # ACL bindings (CreateAcls/DeleteAcls), read by every broker's authorizer,
        # and their ids (AccessControlEntryRecord.Id)
        self.acls = AclStore()
        self.acl_ids = AclIds()
        # group configs (ConfigResource GROUP, kaflite.cluster.group_configs): group -> configs
        self.group_configs: dict[str, dict[str, str]] = {}
        # client metrics subscriptions (ConfigResource CLIENT_METRICS, KIP-714,
        # kaflite.cluster.client_metrics): subscription name -> configs
        self.client_metrics: dict[str, dict[str, str]] = {}
        # dynamic broker configs (kaflite.cluster.dynamic_configs): "" (every broker) or a
        # broker id -> configs; ``broker_config_changes`` counts the changes (caches key on it)
        self.broker_configs: BrokerConfigStore = {}
        self.broker_config_changes = 0
        # Called after every persisted change: a multi-process cluster sends the
        # change to its broker processes (kaflite.cluster.controller_server).
        self.on_change: Callable[[], None] | None = None
        # Called first, with the records of every save: the change feed a
        # multi-process cluster derives its deltas from, and the console's monitor
        # (``observe_records``).
        self._record_observers: list[Callable[[list[Struct]], None]] = []
        # batches appended to the metadata log (one per change, or per batched())
        self.writes = 0
        self.records_saved = 0      # records saved with no metadata log (see metadata_offset)
        self._batch_depth = 0
        self._unsaved = False
        self._pending: list[Struct] = []       # records of the changes not saved yet
        # partitions changed since the last save, with the state they had then
        self._touched: dict[tuple[uuid.UUID, int], tuple[TopicState, PartitionState]] = {}
        self.log: metalog.MetadataLog | None = None
        if data_dir is not None:
            self._open_log(data_dir, cluster_id, snapshot_records)

    # -- persistence -----------------------------------------------------------
    def _open_log(self, data_dir: Path, cluster_id: str | None, snapshot_records: int) -> None:
        self.log = metalog.MetadataLog(data_dir / metalog.DIRECTORY,
                                       snapshot_records=snapshot_records)
        found = self.log.recover(lambda record: metalog.replay(self, record))
        legacy = data_dir / metalog.LEGACY_JSON
        if found:
            self.cluster_id = metalog.read_cluster_id(data_dir) or self.cluster_id
        elif legacy.exists():
            # an older kaflite's data: read the JSON once, continue with the log
            metalog.load_legacy_json(self, legacy)
            self.features["metadata.version"] = metalog.METADATA_VERSION
            self.log.write_snapshot_now(metalog.snapshot_records(self))
            legacy.rename(legacy.with_name(legacy.name + ".migrated"))
        else:
            self._record(FeatureLevelRecord("metadata.version", metalog.METADATA_VERSION))
            self.features["metadata.version"] = metalog.METADATA_VERSION
            for name, level in features.DEFAULTS.items():
                self._record(FeatureLevelRecord(name, level))
                self.features[name] = level
            self.save()
        metalog.write_cluster_id(data_dir, self.cluster_id)
        # Registrations are not restored: brokers register again when they start.
        self.brokers.clear()

    @property
    def records_appended(self) -> int:
        """Metadata records appended to the log since this controller started."""
        return 0 if self.log is None else self.log.records_appended

    @property
    def bytes_appended(self) -> int:
        return 0 if self.log is None else self.log.bytes_appended

    @property
    def last_change_bytes(self) -> int:
        """Bytes of the last batch appended: what the last change cost on disk."""
        return 0 if self.log is None else self.log.last_batch_bytes

    @property
    def snapshots_written(self) -> int:
        return 0 if self.log is None else self.log.snapshots_written

    def flush(self, timeout: float | None = None) -> bool:
        """Block until the metadata log is fsynced and its snapshots written (tests,
        shutdown; never on a running event loop)."""
        return True if self.log is None else self.log.flush(timeout)

    def close(self) -> None:
        if self.log is not None:
            self.log.close()

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
        """Append the records of the changes made since the last save, as one batch."""
        if self._batch_depth:
            self._unsaved = True
            return
        self._unsaved = False
        self._flush_touched()
        records, self._pending = self._pending, []
        if records and self.log is not None:
            self.log.append(records)
            self.writes += 1
        elif records:
            self.records_saved += len(records)
        if records:
            for observer in list(self._record_observers):
                observer(records)
        if self.on_change is not None:
            self.on_change()

    def observe_records(self, observer: Callable[[list[Struct]], None]) -> Callable[[], None]:
        """Call ``observer`` with the records of every save from now on (in order, before
        ``on_change``); returns the function that stops it."""
        self._record_observers.append(observer)

        def stop() -> None:
            with contextlib.suppress(ValueError):
                self._record_observers.remove(observer)
        return stop

    def _record(self, *records: Struct) -> None:
        self._flush_touched()     # keep the records in the order of the changes
        self._pending.extend(records)

    def _touch(self, topic: TopicState, p: PartitionState) -> None:
        """``p`` is about to change: remember the state it has now."""
        key = (topic.topic_id, p.partition)
        if key not in self._touched:
            self._touched[key] = (topic, dataclasses.replace(
                p, replicas=list(p.replicas), isr=list(p.isr), adding=list(p.adding),
                removing=list(p.removing)))

    def _flush_touched(self) -> None:
        for topic, before in self._touched.values():
            if before.partition < len(topic.partitions):
                record = metalog.partition_change(topic.topic_id, before,
                                                  topic.partitions[before.partition])
                if record is not None:
                    self._pending.append(record)
        self._touched.clear()

    def partition(self, topic: str, index: int) -> PartitionState | None:
        """The state of ``topic``-``index``; None if the cluster has no such partition."""
        t = self.topics.get(topic)
        return t.partitions[index] if t is not None and 0 <= index < len(t.partitions) else None

    def allocate_producer_id(self) -> int:
        """A producer id never handed out before, in this cluster's lifetime."""
        pid = self.next_producer_id
        self.next_producer_id += 1
        self._record(metalog.producer_ids_record(self.next_producer_id))
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
            if creds.pop(mechanism, None) is not None:
                self._record(metalog.scram_removal(user, mechanism))
            if not creds:
                self.scram.pop(user, None)
        for user, credential in upserts:
            self.scram.setdefault(user, {})[credential.mechanism] = credential
            self._record(metalog.scram_record(user, credential))
        self.save()

    # -- delegation tokens -----------------------------------------------------------------
    def put_token(self, info: delegation_tokens.TokenInfo) -> None:
        """Add or change a token (already checked: CreateDelegationToken, a renewal)."""
        self.tokens[info.token_id] = info
        self._record(delegation_tokens.record(info))
        self.save()

    def remove_tokens(self, token_ids: list[str]) -> None:
        """Remove these tokens (those still present): an expiry, or the sweep."""
        gone = [t for t in token_ids if self.tokens.pop(t, None) is not None]
        if gone:
            self._record(*(delegation_tokens.removal(t) for t in gone))
            self.save()

    # -- ACLs --------------------------------------------------------------------------
    def create_acls(self, bindings: list[AclBinding]) -> None:
        """Add validated bindings (CreateAcls)."""
        for b in bindings:
            if self.acl_ids.id_of(b) is None:
                acl_id = uuid.uuid4()
                self.acl_ids.add(b, acl_id)
                self._record(metalog.acl_record(acl_id, b))
        self.acls.add(bindings)
        self.save()

    def delete_acls(self, filters: list[AclBindingFilter]) -> list[list[AclBinding]]:
        """Delete what each filter matches (DeleteAcls); per filter, what it deleted."""
        deleted = self.acls.remove(filters)
        if any(deleted):
            self._forget_acls(b for gone in deleted for b in gone)
            self.save()
        return deleted

    def remove_acls(self, bindings: list[AclBinding]) -> None:
        """Delete exactly these bindings (those still present)."""
        present = [b for b in bindings if b in self.acls]
        if present:
            self.acls.remove_exact(present)
            self._forget_acls(present)
            self.save()

    def _forget_acls(self, bindings: Iterable[AclBinding]) -> None:
        for b in bindings:
            acl_id = self.acl_ids.pop_binding(b)
            if acl_id is not None:
                self._record(metalog.acl_removal(acl_id))

    # -- client quotas -------------------------------------------------------------
    def alter_client_quotas(self, changes: list[tuple[Entity, dict[str, float], set[str]]]
                            ) -> None:
        """Apply checked quota changes (sets and removals per entity), then persist."""
        for entity, sets, removals in changes:
            self.client_quotas.alter(entity, sets, removals)
            self._record(*metalog.quota_records(entity, sets, removals))
        self.save()

    # -- brokers ----------------------------------------------------------------
    def register_broker(self, info: BrokerInfo, listener: Listener) -> None:
        self._flush_touched()
        # Kafka's broker epoch: the offset of the broker's RegisterBrokerRecord
        info.epoch = (0 if self.log is None else self.log.next_offset) + len(self._pending)
        self.brokers[info.node_id] = info
        self.listeners[info.node_id] = listener
        self._record(metalog.broker_record(info))
        self.save()

    @property
    def metadata_offset(self) -> int:
        """The next offset of the metadata log (without a data directory, of the records
        saved so far; in a broker process, as its controller last said)."""
        return self.log.next_offset if self.log is not None else self.records_saved

    def set_feature(self, name: str, level: int) -> None:
        """Finalize feature ``name`` at ``level`` (``kaflite.cluster.features`` checks it)."""
        self._record(FeatureLevelRecord(name, level))
        self.features[name] = level
        self.save()

    def live_brokers(self) -> list[BrokerInfo]:
        return [b for b in self.brokers.values() if b.alive]

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
        self._record(*metalog.topic_records(topic))
        self.save()
        for p in topic.partitions:
            self._notify(topic, p)
        return topic

    def delete_topic(self, name: str) -> None:
        topic = self.topics.pop(name, None)
        if topic is None:
            raise errors.UnknownTopicOrPartitionError(name)
        self.topics_by_id.pop(topic.topic_id, None)
        self._record(RemoveTopicRecord(topic.topic_id))
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
            self._record(metalog.partition_record(topic.topic_id, p))
            self._notify(topic, p)
        self.save()

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        topic = self.topics[name]
        self._record(*metalog.config_changes(metalog.CONFIG_TOPIC, name, topic.configs, configs))
        topic.configs = dict(configs)
        self.save()
        for p in topic.partitions:
            self._notify(topic, p)

    def set_broker_configs(self, name: str, configs: dict[str, str]) -> None:
        """Replace the dynamic configs of broker ``name`` ("": every broker's default;
        already validated), then tell each broker about every partition, whose log
        configs may follow them."""
        self._record(*metalog.config_changes(metalog.CONFIG_BROKER, name,
                                             self.broker_configs.get(name, {}), configs))
        if configs:
            self.broker_configs[name] = dict(configs)
        else:
            self.broker_configs.pop(name, None)
        self.broker_config_changes += 1
        self.save()
        for topic in list(self.topics.values()):
            for p in topic.partitions:
                self._notify(topic, p)

    def set_group_configs(self, group: str, configs: dict[str, str]) -> None:
        """Replace a group's dynamic configs (already validated); none left removes it."""
        self._record(*metalog.config_changes(metalog.CONFIG_GROUP, group,
                                             self.group_configs.get(group, {}), configs))
        if configs:
            self.group_configs[group] = dict(configs)
        else:
            self.group_configs.pop(group, None)
        self.save()

    def set_client_metrics(self, name: str, configs: dict[str, str]) -> None:
        """Replace a client metrics subscription's configs (already validated); none
        left deletes the subscription."""
        self._record(*metalog.config_changes(metalog.CONFIG_CLIENT_METRICS, name,
                                             self.client_metrics.get(name, {}), configs))
        if configs:
            self.client_metrics[name] = dict(configs)
        else:
            self.client_metrics.pop(name, None)
        self.save()


def _new_cluster_id() -> str:
    import base64

    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def _stable_start(n_topics: int) -> int:
    return n_topics
