"""Metadata (key 3) and DescribeCluster (key 60): the cluster map clients route by.

Any broker answers Metadata from the controller's state: the live brokers at
their advertised addresses on the listener the request came in on, and every requested topic's partitions with
leader, leader epoch, replicas, ISR and offline replicas. A partition without
a leader reports LEADER_NOT_AVAILABLE. Unknown topics are created when both the
request (v4+ ``allow_auto_topic_creation``) and the broker
(``auto.create.topics.enable``) allow it.

Auto-created topics are created at once, all of a request's in one write of the
metadata. As in Kafka, whose controller refuses a creation of more than 10,000
partitions, a request whose new topics would need more creates none of them:
they are answered LEADER_NOT_AVAILABLE, as Kafka answers every topic it asked
its controller to create.

Topic ids in the request are v12's: before it a topic needs a name and no id
(v10 and v11 carry the field but the response cannot name a topic by id).
Such a request gets INVALID_REQUEST for each topic, as Kafka's broker answers it.
From v12 a non-zero id is looked up whatever the name field holds (Java's admin
leaves it "", not null).

v13 adds a top-level error code (KIP-1102's REBOOTSTRAP_REQUIRED); Kafka 4.4's broker
never sets it in a Metadata answer, and neither does kaflite's: it is 0.

DescribeCluster v2 (KIP-1073) may ask for the fenced brokers too: every registered
broker, those that are not alive (stopped, or past their session) marked fenced.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from kaflite.cluster.acl import NOT_REQUESTED, authorized_operations
from kaflite.cluster.controller import MAX_PARTITIONS_PER_REQUEST, TopicState
from kaflite.cluster.handlers._base import Handler
from kaflite.protocol import errors
from kaflite.protocol.headers import RequestHeader
from kaflite.protocol.messages import (
    DescribeClusterRequest,
    DescribeClusterResponse,
    MetadataRequest,
    MetadataResponse,
)
from kaflite.protocol.messages import describe_cluster_response as dc
from kaflite.protocol.messages import metadata_request as mq
from kaflite.protocol.messages import metadata_response as mr
from kaflite.protocol.primitives import ZERO_UUID
from kaflite.security.acl import CLUSTER_NAME, ResourceType

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker
    from kaflite.cluster.metadata_state import BrokerInfo
    from kaflite.cluster.network import ServerConnection

__all__ = ["HANDLERS", "auto_create", "validate_topic_name"]

_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")
# Kafka's default for authorized operations when not requested.


def validate_topic_name(name: str) -> None:
    if not name or name in (".", "..") or len(name) > 249 or not _LEGAL.match(name):
        raise errors.InvalidTopicExceptionError(f"Topic name '{name}' is illegal")


def auto_create(broker: Broker, name: str) -> TopicState:
    controller = broker.controller
    validate_topic_name(name)
    rf = min(broker.config.int("default.replication.factor"), len(controller.live_brokers()))
    assignment = controller.assign_replicas(broker.config.int("num.partitions"), max(rf, 1))
    return controller.create_topic(name, assignment)


def listener_brokers(broker: Broker, conn: ServerConnection
                     ) -> list[tuple[int, str, int, str | None]]:
    """The live brokers at their endpoints of the listener ``conn`` came in on; as
    Kafka, a broker without that listener is left out."""
    return [(node, host, port, rack) for node, host, port, rack, _ in
            _endpoints(broker, conn, broker.controller.live_brokers())]


def _endpoints(broker: Broker, conn: ServerConnection, brokers: Iterable[BrokerInfo]
               ) -> list[tuple[int, str, int, str | None, bool]]:
    """(node, host, port, rack, fenced) of ``brokers`` on ``conn``'s listener."""
    out = []
    for b in sorted(brokers, key=lambda b: b.node_id):
        address = b.endpoint(conn.listener.name)
        if address is not None:
            out.append((b.node_id, address[0], address[1], b.rack, not b.alive))
    return out


def topic_metadata(broker: Broker, topic: TopicState) -> mr.MetadataResponseTopic:
    controller = broker.controller
    parts = []
    for p in topic.partitions:
        offline = [r for r in p.replicas
                   if r not in controller.brokers or not controller.brokers[r].alive]
        parts.append(mr.MetadataResponsePartition(
            error_code=errors.LeaderNotAvailableError.code if p.leader == -1 else 0,
            partition_index=p.partition,
            leader_id=p.leader,
            leader_epoch=p.leader_epoch,
            replica_nodes=list(p.replicas),
            isr_nodes=list(p.isr),
            offline_replicas=offline,
        ))
    return mr.MetadataResponseTopic(
        error_code=0, name=topic.name, topic_id=topic.topic_id, is_internal=topic.internal,
        partitions=parts,
    )


def _creatable(topics: Mapping[str, TopicState], wanted: list[mq.MetadataRequestTopic]
               ) -> set[str]:
    """The distinct names in ``wanted`` that auto-creation would create (unknown, valid)."""
    names: set[str] = set()
    for wt in wanted:
        if wt.name and wt.name not in topics and wt.name not in names:
            try:
                validate_topic_name(wt.name)
            except errors.KafkaError:
                continue
            names.add(wt.name)
    return names


def _wanted(broker: Broker, wanted: list[mq.MetadataRequestTopic], create: bool | None
            ) -> list[mr.MetadataResponseTopic]:
    """The metadata of each wanted topic. A topic that does not exist is created when
    ``create`` is True; when it is False (creation refused) it is answered
    LEADER_NOT_AVAILABLE, when None (not asked) UNKNOWN_TOPIC_OR_PARTITION. An invalid
    name that creation would have met is INVALID_TOPIC_EXCEPTION."""
    controller = broker.controller
    out = []
    for wt in wanted:
        # A topic id names the topic whatever the name says: Java's admin asks by id with
        # the name left at its default, "" (Kafka's KafkaApis looks up every non-zero id).
        if wt.topic_id != ZERO_UUID:
            t = controller.topics_by_id.get(wt.topic_id)
            if t is None:
                out.append(mr.MetadataResponseTopic(
                    error_code=errors.UnknownTopicIdError.code, name=None,
                    topic_id=wt.topic_id))
                continue
        else:
            name = wt.name or ""
            t = controller.topics.get(name)
            if t is None:
                code = errors.UnknownTopicOrPartitionError.code if create is None \
                    else errors.LeaderNotAvailableError.code
                try:
                    if create:
                        t = auto_create(broker, name)
                    elif create is not None:
                        validate_topic_name(name)
                except errors.KafkaError as exc:
                    code = exc.code
                if t is None:
                    out.append(mr.MetadataResponseTopic(error_code=code, name=name))
                    continue
        out.append(topic_metadata(broker, t))
    return out


async def handle_metadata(broker: Broker, conn: ServerConnection, header: RequestHeader,
                          req: MetadataRequest) -> MetadataResponse:
    controller = broker.controller
    version = header.request_api_version
    topics: list[mr.MetadataResponseTopic] = []
    wanted = req.topics
    if wanted is None or (version == 0 and not wanted):
        for t in controller.topics.values():
            topics.append(topic_metadata(broker, t))
    elif version < 12 and any(wt.name is None or wt.topic_id != ZERO_UUID for wt in wanted):
        return MetadataResponse(throttle_time_ms=0, topics=[mr.MetadataResponseTopic(
            error_code=errors.InvalidRequestError.code, name=wt.name or "",
            topic_id=wt.topic_id) for wt in wanted])
    else:
        create: bool | None = None
        if req.allow_auto_topic_creation and broker.config.bool("auto.create.topics.enable"):
            create = len(_creatable(controller.topics, wanted)) \
                * broker.config.int("num.partitions") <= MAX_PARTITIONS_PER_REQUEST
        with controller.batched():   # (one write of the metadata)
            topics += _wanted(broker, wanted, create)
    brokers = [mr.MetadataResponseBroker(node, host, port, rack)
               for node, host, port, rack in listener_brokers(broker, conn)]
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=brokers,
        cluster_id=controller.cluster_id,
        controller_id=min((b.node_id for b in controller.live_brokers()), default=-1),
        topics=_with_operations(broker, conn, req, topics),
        cluster_authorized_operations=authorized_operations(
            broker, conn, ResourceType.CLUSTER, CLUSTER_NAME)
        if version <= 10 and req.include_cluster_authorized_operations
        else NOT_REQUESTED,
        error_code=0,
    )


def _with_operations(broker: Broker, conn: ServerConnection, req: MetadataRequest,
                     topics: list[mr.MetadataResponseTopic]) -> list[mr.MetadataResponseTopic]:
    """v8+: each known topic with the operations the caller may do on it, if asked."""
    if req.include_topic_authorized_operations:
        for t in topics:
            if t.name is not None and t.name in broker.controller.topics:
                t.topic_authorized_operations = authorized_operations(
                    broker, conn, ResourceType.TOPIC, t.name)
    return topics


async def handle_describe_cluster(broker: Broker, conn: ServerConnection, header: RequestHeader,
                                  req: DescribeClusterRequest) -> DescribeClusterResponse:
    controller = broker.controller
    registered = controller.brokers.values() if req.include_fenced_brokers \
        else controller.live_brokers()
    return DescribeClusterResponse(
        throttle_time_ms=0,
        error_code=0,
        endpoint_type=req.endpoint_type,
        cluster_id=controller.cluster_id,
        controller_id=min((b.node_id for b in controller.live_brokers()), default=-1),
        brokers=[dc.DescribeClusterBroker(node, host, port, rack, is_fenced=fenced)
                 for node, host, port, rack, fenced in _endpoints(broker, conn, registered)],
        cluster_authorized_operations=authorized_operations(
            broker, conn, ResourceType.CLUSTER, CLUSTER_NAME)
        if req.include_cluster_authorized_operations else NOT_REQUESTED,
    )


HANDLERS = [Handler(MetadataRequest, 0, 13, handle_metadata),
            Handler(DescribeClusterRequest, 0, 2, handle_describe_cluster)]
