"""The controller's model as KRaft metadata records, and records replayed into it.

Theory of operation
-------------------
Every change the controller makes is described by the records Kafka's
controller writes for it (KIP-500, KIP-631), built here from the model objects
(``kaflite.cluster.metadata_state``):

* topics: TopicRecord, then its ConfigRecords and one PartitionRecord a
  partition; RemoveTopicRecord when deleted;
* a partition's later changes: one PartitionChangeRecord carrying only the
  fields that changed, when Kafka's replay rule reproduces the new state (the
  partition epoch goes up by one, the leader epoch by one exactly when a leader
  is named); otherwise a whole PartitionRecord, which replaces the partition on
  replay (kaflite bumps epochs twice in one call in a few paths, e.g. an ISR
  change that completes a reassignment and moves the leader);
* configs of topics and groups: ConfigRecord, a null value removing the key;
* brokers: RegisterBrokerRecord, FenceBrokerRecord, UnfenceBrokerRecord,
  UnregisterBrokerRecord;
* SCRAM credentials, delegation tokens, client quotas, ACLs, the producer id
  counter and the metadata.version: their own record types.

``snapshot_records`` writes a whole model as such records (a KIP-630 snapshot's
content) and ``replay`` applies one record to a model, so a model rebuilt from a
snapshot and the records after it equals the one that wrote them.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from kaflite.cluster import delegation_tokens
from kaflite.cluster.metadata_state import BrokerInfo, PartitionState, TopicState
from kaflite.cluster.metalog import _versions
from kaflite.cluster.quotas.entities import Entity, entity_from_pairs
from kaflite.protocol.messages._generated.access_control_entry_record import (
    AccessControlEntryRecord,
)
from kaflite.protocol.messages._generated.client_quota_record import ClientQuotaRecord, EntityData
from kaflite.protocol.messages._generated.config_record import ConfigRecord
from kaflite.protocol.messages._generated.delegation_token_record import DelegationTokenRecord
from kaflite.protocol.messages._generated.feature_level_record import FeatureLevelRecord
from kaflite.protocol.messages._generated.fence_broker_record import FenceBrokerRecord
from kaflite.protocol.messages._generated.partition_change_record import PartitionChangeRecord
from kaflite.protocol.messages._generated.partition_record import PartitionRecord
from kaflite.protocol.messages._generated.producer_ids_record import ProducerIdsRecord
from kaflite.protocol.messages._generated.register_broker_record import (
    BrokerEndpoint,
    RegisterBrokerRecord,
)
from kaflite.protocol.messages._generated.remove_access_control_entry_record import (
    RemoveAccessControlEntryRecord,
)
from kaflite.protocol.messages._generated.remove_delegation_token_record import (
    RemoveDelegationTokenRecord,
)
from kaflite.protocol.messages._generated.remove_topic_record import RemoveTopicRecord
from kaflite.protocol.messages._generated.remove_user_scram_credential_record import (
    RemoveUserScramCredentialRecord,
)
from kaflite.protocol.messages._generated.topic_record import TopicRecord
from kaflite.protocol.messages._generated.unfence_broker_record import UnfenceBrokerRecord
from kaflite.protocol.messages._generated.unregister_broker_record import UnregisterBrokerRecord
from kaflite.protocol.messages._generated.user_scram_credential_record import (
    UserScramCredentialRecord,
)
from kaflite.protocol.messages._runtime import Struct
from kaflite.security.acl import AclBinding
from kaflite.security.scram import MECHANISM_TYPES, ScramCredential

if TYPE_CHECKING:
    from kaflite.cluster.controller import Controller

__all__ = ["CONFIG_BROKER", "CONFIG_CLIENT_METRICS", "CONFIG_GROUP", "CONFIG_TOPIC", "METADATA_VERSION", "acl_record", "acl_removal",
           "broker_record", "config_changes", "partition_change", "partition_record",
           "producer_ids_record", "quota_records", "replay", "scram_record", "scram_removal",
           "snapshot_records", "topic_records"]

# ConfigResource.Type codes of ConfigRecord.ResourceType
CONFIG_TOPIC, CONFIG_BROKER, CONFIG_CLIENT_METRICS, CONFIG_GROUP = 2, 4, 16, 32
# a new cluster's metadata.version: Kafka 4.4's latest production one (4.4-IV2, see _versions)
METADATA_VERSION = _versions.DEFAULT
_NO_LEADER_CHANGE = -2
_MECHANISMS = {code: name for name, code in MECHANISM_TYPES.items()}
# A broker without named listeners keeps its one address under this name.
_UNNAMED = ""


# -- model -> records ----------------------------------------------------------------------
def partition_record(topic_id: uuid.UUID, p: PartitionState) -> PartitionRecord:
    return PartitionRecord(partition_id=p.partition, topic_id=topic_id,
                           replicas=list(p.replicas), isr=list(p.isr),
                           removing_replicas=list(p.removing), adding_replicas=list(p.adding),
                           leader=p.leader, leader_epoch=p.leader_epoch,
                           partition_epoch=p.partition_epoch,
                           directories=_directories(p.replicas))


def _directories(replicas: list[int]) -> list[uuid.UUID]:
    """Each replica's log directory (v1 and later): kaflite's brokers register none, so
    Kafka's ``DirectoryId.MIGRATING``, as its controller writes for such a broker."""
    return [_versions.MIGRATING_DIRECTORY] * len(replicas)


def topic_records(t: TopicState) -> list[Struct]:
    out: list[Struct] = [TopicRecord(t.name, t.topic_id)]
    out += config_changes(CONFIG_TOPIC, t.name, {}, t.configs)
    out += [partition_record(t.topic_id, p) for p in t.partitions]
    return out


def partition_change(topic_id: uuid.UUID, before: PartitionState, after: PartitionState
                     ) -> Struct | None:
    """The record that turns ``before`` into ``after``; None if nothing changed."""
    def changed(old: list[int], new: list[int]) -> list[int] | None:
        return None if old == new else list(new)

    rec = PartitionChangeRecord(
        partition_id=after.partition, topic_id=topic_id,
        isr=changed(before.isr, after.isr), replicas=changed(before.replicas, after.replicas),
        removing_replicas=changed(before.removing, after.removing),
        adding_replicas=changed(before.adding, after.adding))
    if rec.replicas is not None:
        rec.directories = _directories(rec.replicas)
    if after.leader_epoch != before.leader_epoch:
        rec.leader = after.leader
    if rec == PartitionChangeRecord(partition_id=after.partition, topic_id=topic_id) \
            and after.partition_epoch == before.partition_epoch \
            and after.leader == before.leader:
        return None
    # Kafka's replay (PartitionRegistration.merge): the partition epoch goes up by
    # one, the leader epoch by one when the record names a leader.
    leader_ok = (after.leader_epoch == before.leader_epoch + 1 if rec.leader != _NO_LEADER_CHANGE
                 else after.leader == before.leader)
    if after.partition_epoch == before.partition_epoch + 1 and leader_ok:
        return rec
    return partition_record(topic_id, after)


def config_changes(resource_type: int, name: str, old: dict[str, str], new: dict[str, str]
                   ) -> list[Struct]:
    out: list[Struct] = [ConfigRecord(resource_type, name, k, None) for k in old if k not in new]
    out += [ConfigRecord(resource_type, name, k, v) for k, v in new.items() if old.get(k) != v]
    return out


def broker_record(b: BrokerInfo) -> RegisterBrokerRecord:
    named = b.endpoints or {_UNNAMED: (b.host, b.port)}
    # The first endpoint is the broker's host/port (BrokerInfo's convention).
    if next(iter(named.values())) != (b.host, b.port):
        named = {_UNNAMED: (b.host, b.port), **named}
    return RegisterBrokerRecord(
        broker_id=b.node_id, incarnation_id=uuid.uuid4(), broker_epoch=b.epoch,
        end_points=[BrokerEndpoint(name, host, port, 0) for name, (host, port) in named.items()],
        rack=b.rack, fenced=not b.alive)


def scram_record(user: str, c: ScramCredential) -> UserScramCredentialRecord:
    return UserScramCredentialRecord(user, MECHANISM_TYPES[c.mechanism], c.salt, c.stored_key,
                                     c.server_key, c.iterations)


def scram_removal(user: str, mechanism: str) -> RemoveUserScramCredentialRecord:
    return RemoveUserScramCredentialRecord(user, MECHANISM_TYPES[mechanism])


def quota_records(entity: Entity, sets: dict[str, float], removals: set[str]) -> list[Struct]:
    data = [EntityData(t, n) for t, n in entity]
    out: list[Struct] = [ClientQuotaRecord(list(data), k, 0.0, True) for k in sorted(removals)
                         if k not in sets]
    out += [ClientQuotaRecord(list(data), k, v, False) for k, v in sets.items()]
    return out


def acl_record(acl_id: uuid.UUID, b: AclBinding) -> AccessControlEntryRecord:
    return AccessControlEntryRecord(acl_id, int(b.resource_type), b.name, int(b.pattern_type),
                                    b.principal, b.host, int(b.operation), int(b.permission))


def acl_removal(acl_id: uuid.UUID) -> RemoveAccessControlEntryRecord:
    return RemoveAccessControlEntryRecord(acl_id)


def producer_ids_record(next_producer_id: int) -> ProducerIdsRecord:
    # kaflite hands out one id at a time, not blocks to brokers: no broker asked.
    return ProducerIdsRecord(broker_id=-1, broker_epoch=-1, next_producer_id=next_producer_id)


def snapshot_records(c: Controller) -> Iterator[Struct]:
    """The whole of ``c`` as records, in an order ``replay`` accepts."""
    yield FeatureLevelRecord("metadata.version", c.features.get("metadata.version",
                                                               METADATA_VERSION))
    for name, level in c.features.items():
        if name != "metadata.version":
            yield FeatureLevelRecord(name, level)
    for b in c.brokers.values():
        yield broker_record(b)
    for t in c.topics.values():
        yield from topic_records(t)
    for group, configs in c.group_configs.items():
        yield from config_changes(CONFIG_GROUP, group, {}, configs)
    for name, configs in c.client_metrics.items():
        yield from config_changes(CONFIG_CLIENT_METRICS, name, {}, configs)
    for name, configs in c.broker_configs.items():
        yield from config_changes(CONFIG_BROKER, name, {}, configs)
    for user, creds in c.scram.items():
        for cred in creds.values():
            yield scram_record(user, cred)
    for token in c.tokens.values():
        yield delegation_tokens.record(token)
    for entity, values in c.client_quotas.entries.items():
        yield from quota_records(entity, values, set())
    for acl_id, binding in c.acl_ids.items():
        yield acl_record(acl_id, binding)
    yield producer_ids_record(c.next_producer_id)


# -- records -> model ----------------------------------------------------------------------
def replay(c: Controller, record: Struct) -> None:
    """Apply one metadata record to ``c``'s model (not to its brokers or listeners)."""
    handler = _REPLAY.get(type(record))
    if handler is not None:      # record types kaflite does not model are skipped
        handler(c, record)


def _topic(c: Controller, r: TopicRecord) -> None:
    t = TopicState(r.name, r.topic_id, [])
    c.topics[r.name] = t
    c.topics_by_id[r.topic_id] = t


def _partition(c: Controller, r: PartitionRecord) -> None:
    t = c.topics_by_id[r.topic_id]
    p = PartitionState(t.name, r.partition_id, list(r.replicas), r.leader, r.leader_epoch,
                       list(r.isr), r.partition_epoch, list(r.adding_replicas),
                       list(r.removing_replicas))
    if r.partition_id < len(t.partitions):
        t.partitions[r.partition_id] = p
    elif r.partition_id == len(t.partitions):
        t.partitions.append(p)
    else:
        raise ValueError(f"{t.name}: PartitionRecord {r.partition_id} after "
                         f"{len(t.partitions)} partitions")


def _partition_change(c: Controller, r: PartitionChangeRecord) -> None:
    p = c.topics_by_id[r.topic_id].partitions[r.partition_id]
    if r.isr is not None:
        p.isr = list(r.isr)
    if r.replicas is not None:
        p.replicas = list(r.replicas)
    if r.removing_replicas is not None:
        p.removing = list(r.removing_replicas)
    if r.adding_replicas is not None:
        p.adding = list(r.adding_replicas)
    if r.leader != _NO_LEADER_CHANGE:
        p.leader = r.leader
        p.leader_epoch += 1
    p.partition_epoch += 1


def _remove_topic(c: Controller, r: RemoveTopicRecord) -> None:
    t = c.topics_by_id.pop(r.topic_id, None)
    if t is not None:
        c.topics.pop(t.name, None)


def _config(c: Controller, r: ConfigRecord) -> None:
    if r.resource_type == CONFIG_TOPIC:
        t = c.topics.get(r.resource_name)
        if t is None:
            return
        configs = t.configs
    elif r.resource_type == CONFIG_GROUP:
        configs = c.group_configs.setdefault(r.resource_name, {})
    elif r.resource_type == CONFIG_CLIENT_METRICS:
        configs = c.client_metrics.setdefault(r.resource_name, {})
    elif r.resource_type == CONFIG_BROKER:
        configs = c.broker_configs.setdefault(r.resource_name, {})
        c.broker_config_changes += 1
    else:
        return
    if r.value is None:
        configs.pop(r.name, None)
    else:
        configs[r.name] = r.value
    if r.resource_type == CONFIG_GROUP and not configs:
        c.group_configs.pop(r.resource_name, None)
    if r.resource_type == CONFIG_CLIENT_METRICS and not configs:
        c.client_metrics.pop(r.resource_name, None)
    if r.resource_type == CONFIG_BROKER and not configs:
        c.broker_configs.pop(r.resource_name, None)


def _register_broker(c: Controller, r: RegisterBrokerRecord) -> None:
    named = {e.name: (e.host, e.port) for e in r.end_points}
    first = next(iter(named.values()), ("", 0))
    named.pop(_UNNAMED, None)
    c.brokers[r.broker_id] = BrokerInfo(r.broker_id, first[0], first[1], r.rack,
                                        alive=not r.fenced, endpoints=named,
                                        epoch=r.broker_epoch)


def _unregister_broker(c: Controller, r: UnregisterBrokerRecord) -> None:
    c.brokers.pop(r.broker_id, None)


def _fence(c: Controller, r: FenceBrokerRecord | UnfenceBrokerRecord) -> None:
    b = c.brokers.get(r.id)
    if b is not None:
        b.alive = isinstance(r, UnfenceBrokerRecord)


def _scram(c: Controller, r: UserScramCredentialRecord) -> None:
    mechanism = _MECHANISMS[r.mechanism]
    c.scram.setdefault(r.name, {})[mechanism] = ScramCredential(
        mechanism, bytes(r.salt), r.iterations, bytes(r.stored_key), bytes(r.server_key))


def _remove_scram(c: Controller, r: RemoveUserScramCredentialRecord) -> None:
    creds = c.scram.get(r.name, {})
    creds.pop(_MECHANISMS[r.mechanism], None)
    if not creds:
        c.scram.pop(r.name, None)


def _token(c: Controller, r: DelegationTokenRecord) -> None:
    c.tokens[r.token_id] = delegation_tokens.from_record(r)


def _remove_token(c: Controller, r: RemoveDelegationTokenRecord) -> None:
    c.tokens.pop(r.token_id, None)


def _quota(c: Controller, r: ClientQuotaRecord) -> None:
    entity = entity_from_pairs([(e.entity_type, e.entity_name) for e in r.entity])
    if r.remove:
        c.client_quotas.alter(entity, {}, {r.key})
    else:
        c.client_quotas.alter(entity, {r.key: r.value}, set())


def _acl(c: Controller, r: AccessControlEntryRecord) -> None:
    b = AclBinding.of(r.resource_type, r.resource_name, r.pattern_type, r.principal, r.host,
                      r.operation, r.permission_type)
    c.acls.add([b])
    c.acl_ids.add(b, r.id)


def _remove_acl(c: Controller, r: RemoveAccessControlEntryRecord) -> None:
    b = c.acl_ids.pop_id(r.id)
    if b is not None:
        c.acls.remove_exact([b])


def _producer_ids(c: Controller, r: ProducerIdsRecord) -> None:
    c.next_producer_id = max(c.next_producer_id, r.next_producer_id)


def _feature(c: Controller, r: FeatureLevelRecord) -> None:
    c.features[r.name] = r.feature_level


_REPLAY: dict[type[Struct], Callable[[Controller, Any], None]] = {
    TopicRecord: _topic, PartitionRecord: _partition, PartitionChangeRecord: _partition_change,
    RemoveTopicRecord: _remove_topic, ConfigRecord: _config,
    RegisterBrokerRecord: _register_broker, FenceBrokerRecord: _fence,
    UnregisterBrokerRecord: _unregister_broker,
    UnfenceBrokerRecord: _fence, UserScramCredentialRecord: _scram,
    RemoveUserScramCredentialRecord: _remove_scram, ClientQuotaRecord: _quota,
    AccessControlEntryRecord: _acl, RemoveAccessControlEntryRecord: _remove_acl,
    ProducerIdsRecord: _producer_ids, FeatureLevelRecord: _feature,
    DelegationTokenRecord: _token, RemoveDelegationTokenRecord: _remove_token,
}
