"""``Admin``: topics, partitions, configs, groups, transactions, offsets and records.

    async with Admin({"bootstrap.servers": servers}) as admin:
        await admin.create_topics([NewTopic("t", 6, 3)])
        print(await admin.describe_topics(["t"]))

ACLs: ``create_acls``, ``describe_acls`` and ``delete_acls`` (``_acl_admin``).
Typed group listings and KIP-848 groups: ``list_group_listings`` and
``describe_consumer_groups`` (``_group_admin``).

Topic changes go to the controller named in Metadata (any broker forwards
them in KRaft, but the controller answers first-hand); group operations go to
the group's coordinator (FindCoordinator); ListGroups asks every broker;
offset and record operations go to the partition leaders. Errors are raised
as the ``kaflite.protocol.errors`` class of their code; a per-item error in a
multi-item call is raised for the first failing item.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TypedDict

from kaflite.client import _quotas
from kaflite.client._acl_admin import AclAdmin
from kaflite.client._admin_base import check as _check
from kaflite.client._config_resources_admin import ConfigResource, ConfigResourcesAdmin
from kaflite.client._find_coordinator import GROUP, TRANSACTION, find_coordinator
from kaflite.client._group_admin import (
    ConsumerGroupDescription,
    ConsumerGroupMemberDescription,
    GroupAdmin,
    GroupListing,
)
from kaflite.client._quotas import ClientQuotaAlteration, QuotaEntity, QuotaFilterComponent
from kaflite.client._scram_admin import ScramAdmin
from kaflite.client._token_admin import TokenAdmin
from kaflite.client.consumer._assignors import decode_assignment
from kaflite.client.consumer._offsets import EARLIEST, LATEST, list_offsets
from kaflite.client.consumer._types import OffsetAndMetadata, OffsetAndTimestamp, TopicPartition
from kaflite.client.metadata import TopicMetadata
from kaflite.client.pool import COORDINATOR, BrokerAddress
from kaflite.net.connection import ConnectionClosed
from kaflite.protocol import errors
from kaflite.protocol.messages import (
    ApiVersionsRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteGroupsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
    DescribeClusterRequest,
    DescribeConfigsRequest,
    DescribeGroupsRequest,
    DescribeQuorumRequest,
    DescribeTransactionsRequest,
    IncrementalAlterConfigsRequest,
    ListGroupsRequest,
    ListTransactionsRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    UnregisterBrokerRequest,
    UpdateFeaturesRequest,
)
from kaflite.protocol.messages import create_partitions_request as cpq
from kaflite.protocol.messages import create_topics_request as ctq
from kaflite.protocol.messages import delete_records_request as drq
from kaflite.protocol.messages import delete_topics_request as dtq
from kaflite.protocol.messages import describe_configs_request as dcq
from kaflite.protocol.messages import describe_quorum_request as dqq
from kaflite.protocol.messages import describe_quorum_response as dqs
from kaflite.protocol.messages import incremental_alter_configs_request as iacq
from kaflite.protocol.messages import offset_commit_request as ocq
from kaflite.protocol.messages import offset_fetch_request as ofq
from kaflite.protocol.messages import update_features_request as ufq

__all__ = ["Admin", "ClientQuotaAlteration", "ClusterDescription", "ConfigEntry", "ConfigResource",
           "ConfigSynonym", "ConsumerGroupDescription", "ConsumerGroupMemberDescription",
           "FeatureMetadata", "GroupDescription", "GroupListing", "MemberDescription", "NewTopic",
           "QuorumInfo",
           "QuorumReplica", "QuotaFilterComponent", "TransactionDescription", "TransactionListing"]

TOPIC, BROKER = 2, 4
SET, DELETE = 0, 1
# DescribeConfigs' config_source codes, by Java's ConfigEntry.ConfigSource names
CONFIG_SOURCES = {0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
                  3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG",
                  5: "DEFAULT_CONFIG", 6: "DYNAMIC_BROKER_LOGGER_CONFIG",
                  7: "DYNAMIC_CLIENT_METRICS_CONFIG", 8: "DYNAMIC_GROUP_CONFIG"}


@dataclass
class NewTopic:
    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    configs: dict[str, str] = field(default_factory=dict)
    assignments: dict[int, list[int]] | None = None


@dataclass(frozen=True)
class ConfigSynonym:
    name: str
    value: str | None
    source: str         # a CONFIG_SOURCES name


@dataclass(frozen=True)
class ConfigEntry:
    """One config as DescribeConfigs reports it (Java's ``ConfigEntry``)."""

    name: str
    value: str | None   # None when sensitive
    source: str         # a CONFIG_SOURCES name
    sensitive: bool
    read_only: bool
    synonyms: tuple[ConfigSynonym, ...] = ()

    @property
    def is_default(self) -> bool:
        return self.source == "DEFAULT_CONFIG"


@dataclass
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    assignment: list[TopicPartition]


@dataclass
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[MemberDescription]
    coordinator: BrokerAddress | None = None


@dataclass
class TransactionDescription:
    transactional_id: str
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_ms: int
    partitions: list[TopicPartition]
    coordinator_id: int = -1


@dataclass(frozen=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str
    coordinator_id: int


class ClusterDescription(TypedDict):
    """What ``describe_cluster`` answers (DescribeCluster's fields)."""

    cluster_id: str
    controller_id: int
    brokers: list[BrokerAddress]


@dataclass(frozen=True)
class QuorumReplica:
    """A voter or an observer of the metadata quorum (Java's ``QuorumInfo.ReplicaState``);
    timestamps in ms, -1 when the broker does not say."""

    replica_id: int
    log_end_offset: int
    last_fetch_timestamp: int = -1
    last_caught_up_timestamp: int = -1


@dataclass(frozen=True)
class FeatureMetadata:
    """What ``describe_features`` answers (Java's ``FeatureMetadata``): each feature's
    finalized level and the (min, max) levels the broker supports, and the finalized
    levels' epoch."""

    finalized: dict[str, int]
    supported: dict[str, tuple[int, int]]
    epoch: int


@dataclass(frozen=True)
class QuorumInfo:
    """What ``describe_metadata_quorum`` answers (Java's ``QuorumInfo``)."""

    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: list[QuorumReplica]
    observers: list[QuorumReplica]


class Admin(AclAdmin, GroupAdmin, ConfigResourcesAdmin, TokenAdmin, ScramAdmin):
    ROLE = "admin"

    def __init__(self, config: Mapping[str, object] | None = None, **kwargs: object) -> None:
        super().__init__(config, **kwargs)
        self.timeout_ms = self.config.int("default.api.timeout.ms")
        self.metadata.auto_create = False   # as Java's AdminClient: describing never creates

    # -- topics ------------------------------------------------------------------------------
    async def create_topics(self, topics: Iterable[NewTopic], validate_only: bool = False) -> None:
        req = CreateTopicsRequest(topics=[
            ctq.CreatableTopic(
                name=t.name, num_partitions=t.num_partitions if not t.assignments else -1,
                replication_factor=t.replication_factor if not t.assignments else -1,
                assignments=[ctq.CreatableReplicaAssignment(partition_index=p, broker_ids=b)
                             for p, b in (t.assignments or {}).items()],
                configs=[ctq.CreatableTopicConfig(name=k, value=v) for k, v in t.configs.items()])
            for t in topics], timeout_ms=self.timeout_ms, validate_only=validate_only)
        resp = await self._request(await self._controller(), req)
        for r in resp.topics:
            _check(r.error_code, f"create topic {r.name}", r.error_message)
        self.metadata.request_update("topics created")

    async def delete_topics(self, names: Iterable[str]) -> None:
        names = list(names)
        req = DeleteTopicsRequest(topics=[dtq.DeleteTopicState(name=n) for n in names],
                                  topic_names=names, timeout_ms=self.timeout_ms)
        resp = await self._request(await self._controller(), req)
        for r in resp.responses:
            _check(r.error_code, f"delete topic {r.name}", r.error_message)
        self.metadata.request_update("topics deleted")

    async def list_topics(self, internal: bool = False) -> list[str]:
        await self.start()
        self.metadata.all_topics = True
        await self.metadata.refresh("list topics")
        return sorted(n for n, t in self.metadata.topics.items() if internal or not t.internal)

    async def describe_topics(self, names: Iterable[str]) -> dict[str, TopicMetadata]:
        await self.start()
        names = list(names)
        self.metadata.add_topics(names)
        await self.metadata.refresh("describe topics")
        out = {}
        for n in names:
            t = self.metadata.topics.get(n)
            if t is None:
                code = self.metadata.topic_errors.get(n, errors.UnknownTopicOrPartitionError.code)
                _check(code, f"describe topic {n}")
            else:
                out[n] = t
        return out

    async def create_partitions(self, counts: Mapping[str, int]) -> None:
        req = CreatePartitionsRequest(topics=[cpq.CreatePartitionsTopic(name=t, count=c,
                                                                         assignments=None)
                                              for t, c in counts.items()],
                                      timeout_ms=self.timeout_ms)
        resp = await self._request(await self._controller(), req)
        for r in resp.results:
            _check(r.error_code, f"create partitions for {r.name}", r.error_message)
        self.metadata.request_update("partitions created")

    async def describe_cluster(self) -> ClusterDescription:
        await self.start()
        resp = await self._request_any(DescribeClusterRequest())
        _check(resp.error_code, "describe cluster", resp.error_message)
        return {"cluster_id": resp.cluster_id, "controller_id": resp.controller_id,
                "brokers": [BrokerAddress(b.broker_id, b.host, b.port, b.rack)
                            for b in resp.brokers]}

    async def unregister_broker(self, node_id: int) -> None:
        """Remove a broker's registration (``kafka-cluster unregister``, Java's
        ``Admin.unregisterBroker``): it leaves the cluster's metadata until it registers
        again. BrokerIdNotRegisteredError for an id that is not registered."""
        await self.start()
        resp = await self._request_any(UnregisterBrokerRequest(broker_id=node_id))
        _check(resp.error_code, f"unregister broker {node_id}", resp.error_message)

    async def describe_features(self) -> FeatureMetadata:
        """The cluster's feature levels, from a broker's ApiVersions (v3+), as
        ``Admin.describeFeatures`` and ``kafka-features describe`` read them."""
        await self.start()
        resp = await self._request_any(ApiVersionsRequest(
            client_software_name="kaflite", client_software_version="0"))
        _check(resp.error_code, "describe features")
        return FeatureMetadata(
            {f.name: f.max_version_level for f in resp.finalized_features},
            {f.name: (f.min_version, f.max_version) for f in resp.supported_features},
            resp.finalized_features_epoch)

    async def update_features(self, levels: Mapping[str, int], *, downgrade: str | None = None,
                              validate_only: bool = False) -> dict[str, str | None]:
        """Finalize ``levels`` (UpdateFeatures): ``downgrade`` None for upgrades, "safe"
        or "unsafe" to go lower. None for each feature changed (or, ``validate_only``,
        that would be). Kafka 4's controller, as kaflite's, refuses the whole request at
        its first refusal and names it at the top level: that raises
        (INVALID_UPDATE_VERSION), as Java's Admin fails every feature's future with it.
        A broker before Kafka 3.9 answered each feature: its refusals are returned, by
        feature."""
        await self.start()
        kind = {None: 1, "safe": 2, "unsafe": 3}[downgrade]
        resp = await self._request_any(UpdateFeaturesRequest(validate_only=validate_only,
                                                             feature_updates=[
            ufq.FeatureUpdateKey(name, level, upgrade_type=kind)     # v1+ (Kafka 3.3 on)
            for name, level in levels.items()]))
        _check(resp.error_code, "update features", resp.error_message)
        if not resp.results:    # v2: no refusal
            return dict.fromkeys(levels)
        return {r.feature: r.error_message if r.error_code else None for r in resp.results}

    async def describe_metadata_quorum(self) -> QuorumInfo:
        """The KRaft metadata quorum (DescribeQuorum on ``__cluster_metadata``), as
        ``Admin.describeMetadataQuorum`` and ``kafka-metadata-quorum describe`` show it."""
        await self.start()
        resp = await self._request_any(DescribeQuorumRequest(topics=[dqq.TopicData(
            "__cluster_metadata", [dqq.PartitionData(partition_index=0)])]))
        _check(resp.error_code, "describe metadata quorum", resp.error_message)
        (p,) = [p for t in resp.topics for p in t.partitions]
        _check(p.error_code, "describe metadata quorum", p.error_message)

        def replicas(states: Iterable[dqs.ReplicaState]) -> list[QuorumReplica]:
            return [QuorumReplica(r.replica_id, r.log_end_offset, r.last_fetch_timestamp,
                                  r.last_caught_up_timestamp) for r in states]
        return QuorumInfo(p.leader_id, p.leader_epoch, p.high_watermark,
                          replicas(p.current_voters), replicas(p.observers))

    # -- configs ----------------------------------------------------------------------------
    async def describe_configs(self, resources: Iterable[ConfigResource]
                               ) -> dict[ConfigResource, dict[str, str | None]]:
        return {res: {e.name: e.value for e in entries}
                for res, entries in (await self.describe_config_entries(resources)).items()}

    async def describe_config_entries(self, resources: Iterable[ConfigResource],
                                      include_synonyms: bool = False
                                      ) -> dict[ConfigResource, list[ConfigEntry]]:
        """Every config of each resource with its source, sensitivity and (if asked)
        synonyms, in the broker's order."""
        await self.start()
        out: dict[ConfigResource, list[ConfigEntry]] = {}
        for res in resources:
            req = DescribeConfigsRequest(resources=[dcq.DescribeConfigsResource(
                resource_type=res.type, resource_name=res.name, configuration_keys=None)],
                include_synonyms=include_synonyms)
            node = int(res.name) if res.type == BROKER and res.name else None
            resp = await (self._request(node, req) if node is not None
                          else self._request_any(req))
            for r in resp.results:
                _check(r.error_code, f"describe configs {res.name}", r.error_message)
                out[res] = [ConfigEntry(
                    c.name, c.value,
                    CONFIG_SOURCES.get(c.config_source, "UNKNOWN") if c.config_source >= 0
                    else ("DEFAULT_CONFIG" if c.is_default else "UNKNOWN"),
                    c.is_sensitive, c.read_only,
                    tuple(ConfigSynonym(s.name, s.value, CONFIG_SOURCES.get(s.source, "UNKNOWN"))
                          for s in c.synonyms)) for c in r.configs]
        return out

    async def alter_configs(self, changes: Mapping[ConfigResource, Mapping[str, str | None]]
                            ) -> None:
        """Incrementally set (or, with ``None``, delete) configs."""
        await self.start()
        for res, configs in changes.items():
            req = IncrementalAlterConfigsRequest(resources=[iacq.AlterConfigsResource(
                resource_type=res.type, resource_name=res.name,
                configs=[iacq.AlterableConfig(name=k, config_operation=SET if v is not None
                                              else DELETE, value=v)
                         for k, v in configs.items()])])
            node = int(res.name) if res.type == BROKER and res.name else None
            resp = await (self._request(node, req) if node is not None
                          else self._request_any(req))
            for r in resp.responses:
                _check(r.error_code, f"alter configs {res.name}", r.error_message)

    # -- groups -----------------------------------------------------------------------------
    async def _coordinator(self, key: str, key_type: int = GROUP) -> int:
        await self.start()
        last: BaseException | None = None
        for _ in range(10):
            try:
                return await find_coordinator(self, key, key_type)
            except errors.KafkaError as exc:
                if not exc.retriable:
                    raise
                last = exc
            except (ConnectionClosed, TimeoutError, OSError) as exc:
                last = exc
            await asyncio.sleep(0.2)
        raise errors.CoordinatorNotAvailableError(f"no coordinator for {key}: {last!r}")

    async def list_groups(self) -> list[tuple[str, str, str]]:
        """(group id, protocol type, state) of every group on every broker."""
        await self.start()
        out = []
        for node in list(self.pool.brokers):
            resp = await self._request(node, ListGroupsRequest())
            _check(resp.error_code, f"list groups on broker {node}")
            out += [(g.group_id, g.protocol_type, g.group_state) for g in resp.groups]
        return sorted(out)

    async def describe_groups(self, groups: Iterable[str]) -> dict[str, GroupDescription]:
        out = {}
        for group in groups:
            node = await self._coordinator(group)
            resp = await self._request(node, DescribeGroupsRequest(groups=[group]),
                                       channel=COORDINATOR)
            for g in resp.groups:
                _check(g.error_code, f"describe group {g.group_id}")
                members = [MemberDescription(
                    m.member_id, m.group_instance_id, m.client_id, m.client_host,
                    [TopicPartition(t, p) for t, p in decode_assignment(m.member_assignment)]
                    if g.protocol_type == "consumer" and len(m.member_assignment) >= 2 else [])
                    for m in g.members]
                out[g.group_id] = GroupDescription(g.group_id, g.group_state, g.protocol_type,
                                                   g.protocol_data, members,
                                                   self.pool.brokers.get(node))
        return out

    async def delete_groups(self, groups: Iterable[str]) -> None:
        for group in groups:
            node = await self._coordinator(group)
            resp = await self._request(node, DeleteGroupsRequest(groups_names=[group]),
                                       channel=COORDINATOR)
            for r in resp.results:
                _check(r.error_code, f"delete group {r.group_id}")

    async def list_group_offsets(self, group: str) -> dict[TopicPartition, OffsetAndMetadata]:
        node = await self._coordinator(group)
        conn = await self.pool.get(node, COORDINATOR)
        version = conn.version_for(9)
        if version >= 8:
            req = OffsetFetchRequest(groups=[ofq.OffsetFetchRequestGroup(group_id=group,
                                                                         topics=None)])
        else:
            req = OffsetFetchRequest(group_id=group, topics=None)
        resp = await self._request(node, req, channel=COORDINATOR)
        if version >= 8:        # one group's answer; its topics are another struct
            g = resp.groups[0]
            _check(g.error_code, f"list offsets of group {group}")
            rows = [(t.name, p.partition_index, p.committed_offset, p.metadata,
                     p.committed_leader_epoch) for t in g.topics for p in t.partitions]
        else:
            _check(resp.error_code, f"list offsets of group {group}")
            rows = [(t.name, p.partition_index, p.committed_offset, p.metadata,
                     p.committed_leader_epoch) for t in resp.topics for p in t.partitions]
        return {TopicPartition(name, index): OffsetAndMetadata(offset, metadata or "", epoch)
                for name, index, offset, metadata, epoch in rows if offset >= 0}

    async def alter_group_offsets(self, group: str,
                                  offsets: Mapping[TopicPartition, int]) -> None:
        node = await self._coordinator(group)
        by_topic: dict[str, list[ocq.OffsetCommitRequestPartition]] = {}
        for tp, off in offsets.items():
            by_topic.setdefault(tp.topic, []).append(ocq.OffsetCommitRequestPartition(
                partition_index=tp.partition, committed_offset=off))
        req = OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1,
                                  member_id="", topics=[ocq.OffsetCommitRequestTopic(
                                      name=t, partitions=ps) for t, ps in by_topic.items()])
        resp = await self._request(node, req, channel=COORDINATOR)
        for t in resp.topics:
            for p in t.partitions:
                _check(p.error_code, f"alter offset {t.name}-{p.partition_index} of {group}")

    # -- offsets and records -------------------------------------------------------------------
    # -- transactions -----------------------------------------------------------------------
    async def list_transactions(self, states: Iterable[str] = (),
                                producer_ids: Iterable[int] = ()
                                ) -> list[tuple[str, int, str]]:
        """(transactional id, producer id, state) of every transactional id on every broker."""
        return [(t.transactional_id, t.producer_id, t.state)
                for t in await self.list_transaction_listings(states, producer_ids)]

    async def list_transaction_listings(self, states: Iterable[str] = (),
                                        producer_ids: Iterable[int] = ()
                                        ) -> list[TransactionListing]:
        """Every transactional id on every broker, with the broker (its coordinator)."""
        await self.start()
        out = []
        req = ListTransactionsRequest(state_filters=list(states),
                                      producer_id_filters=list(producer_ids))
        for node in list(self.pool.brokers):
            resp = await self._request(node, req)
            _check(resp.error_code, f"list transactions on broker {node}")
            out += [TransactionListing(t.transactional_id, t.producer_id, t.transaction_state,
                                       node) for t in resp.transaction_states]
        return sorted(out, key=lambda t: (t.transactional_id, t.producer_id, t.state))

    async def describe_transactions(self, ids: Iterable[str]
                                    ) -> dict[str, TransactionDescription]:
        out = {}
        for tid in ids:
            node = await self._coordinator(tid, TRANSACTION)
            resp = await self._request(node, DescribeTransactionsRequest(transactional_ids=[tid]),
                                       channel=COORDINATOR)
            for t in resp.transaction_states:
                _check(t.error_code, f"describe transaction {t.transactional_id}")
                out[t.transactional_id] = TransactionDescription(
                    t.transactional_id, t.transaction_state, t.producer_id, t.producer_epoch,
                    t.transaction_timeout_ms, t.transaction_start_time_ms,
                    [TopicPartition(d.topic, p) for d in t.topics for p in d.partitions], node)
        return out

    async def list_offsets(self, query: Mapping[TopicPartition, int | str]
                           ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """``{tp: "earliest" | "latest" | timestamp}`` → offsets."""
        await self.start()
        q = {TopicPartition(*tp): (EARLIEST if v == "earliest" else LATEST if v == "latest"
                                   else int(v)) for tp, v in query.items()}
        return await list_offsets(self, q, 0, self.timeout_ms / 1000)

    async def delete_records(self, before: Mapping[TopicPartition, int]
                             ) -> dict[TopicPartition, int]:
        """Delete records before the given offsets; returns the new low watermarks."""
        await self.start()
        md = self.metadata
        for topic in {tp.topic for tp in before}:
            await md.ensure_topic(topic, self.timeout_ms / 1000)
        by_node: dict[int, dict[str, list[drq.DeleteRecordsPartition]]] = {}
        for tp, off in before.items():
            leader = md.leader(tp.topic, tp.partition)
            if leader is None:
                raise errors.LeaderNotAvailableError(str(tp))
            by_node.setdefault(leader.leader, {}).setdefault(tp.topic, []).append(
                drq.DeleteRecordsPartition(partition_index=tp.partition, offset=off))
        out = {}
        for node, topics in by_node.items():
            req = DeleteRecordsRequest(topics=[drq.DeleteRecordsTopic(name=t, partitions=ps)
                                               for t, ps in topics.items()],
                                       timeout_ms=self.timeout_ms)
            resp = await self._request(node, req)
            for t in resp.topics:
                for p in t.partitions:
                    _check(p.error_code, f"delete records {t.name}-{p.partition_index}")
                    out[TopicPartition(t.name, p.partition_index)] = p.low_watermark
        return out

    # -- client quotas (KIP-546) -------------------------------------------------------------
    async def describe_client_quotas(self, components: Iterable[QuotaFilterComponent] = (),
                                     strict: bool = False
                                     ) -> dict[QuotaEntity, dict[str, float]]:
        """``{((type, name or None for <default>), ...): {key: value}}`` matching the filter
        (no component: every entity)."""
        await self.start()
        resp = await self._request(await self._controller(),
                                   _quotas.describe_request(components, strict))
        _check(resp.error_code, "describe client quotas", resp.error_message)
        return _quotas.parse_describe(resp)

    async def alter_client_quotas(self, alterations: Iterable[ClientQuotaAlteration],
                                  validate_only: bool = False) -> None:
        """Set or remove (``None``) quota keys; raises the first entity's error."""
        await self.start()
        resp = await self._request(await self._controller(),
                                   _quotas.alter_request(alterations, validate_only))
        for entity, code, message in _quotas.alter_errors(resp):
            _check(code, f"alter client quotas of {dict(entity)}", message)
