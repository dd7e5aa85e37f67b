"""What each API needs, checked once per request around its handler (Kafka's KafkaApis).

With an authorizer configured, the connection asks ``check`` before calling a
handler. The answer (a ``Gate``) is one of:

* a whole response, when the request as a whole is refused: a cluster operation
  (CLUSTER_AUTHORIZATION_FAILED), a group (GROUP_...), a transactional id
  (TRANSACTIONAL_ID_...); the code goes where the API reports errors, at the
  top or on every partition or topic of the request;
* for a request that changes something per topic (Produce, OffsetCommit,
  CreateTopics, DeleteRecords...), the topics the caller may not touch taken out
  of the request before the handler runs, and put back into the response with
  TOPIC_AUTHORIZATION_FAILED after it;
* for a request that only reads (ListOffsets, OffsetFetch, DescribeGroups,
  ListGroups, DescribeConfigs...), the response rewritten afterwards: what the
  caller may not DESCRIBE gets the error code or is left out of a listing.

The table ``POLICIES`` says which API needs what; each entry is one small
function. Fetch is checked in its handler (a fetch session's partitions are not
all in the request), with ``fetch_denied``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kaflite.cluster.acl._context import allows, allows_cluster
from kaflite.cluster.acl._gate_admin import (
    add_partitions_to_txn,
    alter_client_quotas,
    alter_configs,
    alter_replica_log_dirs,
    alter_scram,
    describe_configs,
    end_txn,
    init_producer_id,
    txn_and_group,
    txn_offset_commit,
    write_txn_markers,
)
from kaflite.cluster.acl._gate_base import (
    CLUSTER_DENIED,
    GROUP_DENIED,
    RT,
    TOPIC_DENIED,
    TXN_DENIED,
    Ctx,
    Gate,
    Op,
    Policy,
    chain,
    cluster_op,
    group_op,
    group_rows,
    mark,
    mark_topics,
    refuse,
    strip,
    strip_topics,
    topic_op,
    txn_allowed,
)
from kaflite.cluster.acl._gate_groups import (
    consumer_group_heartbeat,
    delete_groups,
    describe_group_rows,
    find_coordinator,
    list_groups,
    offset_commit,
    offset_fetch,
)
from kaflite.protocol.messages import MetadataResponse, Struct

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker
    from kaflite.cluster.network import ServerConnection

__all__ = ["Gate", "check", "fetch_denied"]

TOPIC_IDS_PRODUCE = 13


# -- the APIs about topics (the others: _gate_groups, _gate_admin) ----------------------
def produce(ctx: Ctx) -> Gate | None:
    txn = ctx.request.transactional_id
    if txn is not None and not txn_allowed(ctx, txn):
        return refuse(ctx, TXN_DENIED)
    # The hot path: every topic allowed (decisions are cached), nothing to take out,
    # and no walk over the request's partitions.
    by_id = ctx.version >= TOPIC_IDS_PRODUCE      # v13: topics named by id (KIP-516)
    if all(ctx.allows(Op.WRITE, RT.TOPIC, (ctx.resolve(t.topic_id) or "") if by_id else t.name)
           for t in ctx.request.topic_data):
        return None
    return strip_topics(ctx, topic_op(Op.WRITE)(ctx))


def metadata(ctx: Ctx) -> Gate | None:
    req, broker = ctx.request, ctx.broker
    create = ctx.version >= 4 and req.allow_auto_topic_creation \
        and broker.config.bool("auto.create.topics.enable")
    may_create_any = ctx.cluster(Op.CREATE)
    named = [t.name for t in req.topics or [] if t.name]

    def denied(topic: str) -> int:
        if not ctx.allows(Op.DESCRIBE, RT.TOPIC, topic):
            return TOPIC_DENIED
        if create and topic not in broker.controller.topics and not may_create_any \
                and not ctx.allows(Op.CREATE, RT.TOPIC, topic):
            return TOPIC_DENIED
        return 0

    gate = strip_topics(ctx, denied) if named else Gate()
    emptied = bool(named) and not req.topics     # v0: an empty list would mean all

    def keep_described(response: Struct) -> None:
        assert isinstance(response, MetadataResponse)
        topics = response.topics
        topics[:] = [t for t in topics if (not emptied or t.name in named)
                     and (t.name is None or ctx.allows(Op.DESCRIBE, RT.TOPIC, t.name))]
    gate.after.insert(0, keep_described)
    return gate


def create_topics(ctx: Ctx) -> Gate | None:
    if ctx.cluster(Op.CREATE):
        return None
    return strip_topics(ctx, topic_op(Op.CREATE)(ctx))


def delete_topics(ctx: Ctx) -> Gate | None:
    req, version = ctx.request, ctx.version
    if version >= 6:
        return strip_topics(ctx, topic_op(Op.DELETE)(ctx))
    denied = [t for t in req.topic_names if not ctx.allows(Op.DELETE, RT.TOPIC, t)]
    if not denied:
        return None
    req.topic_names = [t for t in req.topic_names if t not in denied]
    return Gate(stripped=[({"name": t}, t, [], TOPIC_DENIED) for t in denied])


def for_broker(ctx: Ctx) -> bool:
    """A follower's request (replica id >= 0): it needs CLUSTER_ACTION."""
    return int(getattr(ctx.request, "replica_id", -1)) >= 0


def offset_for_leader_epoch(ctx: Ctx) -> Gate | None:
    if for_broker(ctx):
        return None if ctx.cluster(Op.CLUSTER_ACTION) else refuse(ctx, CLUSTER_DENIED)
    return Gate(after=[mark_topics(ctx, Op.DESCRIBE)])



POLICIES: dict[int, Policy] = {
    0: produce,
    2: mark(Op.DESCRIBE),                                     # ListOffsets
    3: metadata,
    8: offset_commit,
    9: offset_fetch,
    10: find_coordinator,
    11: group_op(Op.READ), 12: group_op(Op.READ),             # JoinGroup, Heartbeat
    13: group_op(Op.READ), 14: group_op(Op.READ),             # LeaveGroup, SyncGroup
    15: describe_group_rows,                                  # DescribeGroups
    16: list_groups,
    19: create_topics,
    20: delete_topics,
    21: strip(Op.DELETE),                                     # DeleteRecords
    22: init_producer_id,
    23: offset_for_leader_epoch,
    24: add_partitions_to_txn,
    25: txn_and_group,                                        # AddOffsetsToTxn
    26: end_txn,
    27: write_txn_markers,
    28: txn_offset_commit,
    32: describe_configs,
    33: alter_configs, 44: alter_configs,                     # and IncrementalAlterConfigs
    34: alter_replica_log_dirs,
    35: cluster_op(Op.DESCRIBE),                              # DescribeLogDirs
    37: strip(Op.ALTER),                                      # CreatePartitions
    42: delete_groups,
    43: cluster_op(Op.ALTER),                                 # ElectLeaders
    45: cluster_op(Op.ALTER),                                 # AlterPartitionReassignments
    46: cluster_op(Op.DESCRIBE),                              # ListPartitionReassignments
    47: chain(group_op(Op.DELETE), strip(Op.READ)),           # OffsetDelete
    48: cluster_op(Op.DESCRIBE_CONFIGS),                      # DescribeClientQuotas
    49: alter_client_quotas,
    50: cluster_op(Op.DESCRIBE),                              # DescribeUserScramCredentials
    51: alter_scram,
    55: cluster_op(Op.DESCRIBE),                              # DescribeQuorum
    57: cluster_op(Op.ALTER),                                 # UpdateFeatures
    64: cluster_op(Op.ALTER),                                 # UnregisterBroker
    65: group_rows("transaction_states", RT.TRANSACTIONAL_ID, TXN_DENIED, Op.DESCRIBE,
                   key="transactional_id"),                   # DescribeTransactions
    66: group_rows("transaction_states", RT.TRANSACTIONAL_ID, TXN_DENIED, Op.DESCRIBE,
                   key="transactional_id", drop=True),        # ListTransactions
    68: consumer_group_heartbeat,
    69: describe_group_rows,                                  # ConsumerGroupDescribe
    74: cluster_op(Op.DESCRIBE_CONFIGS),                      # ListConfigResources
    # Share groups (KIP-932), as Kafka's KafkaApis: the heartbeat as ConsumerGroupHeartbeat;
    # ShareFetch and ShareAcknowledge READ on the group (READ on each topic: in the handler);
    # the share coordinator's inter-broker APIs CLUSTER_ACTION.
    76: consumer_group_heartbeat,
    77: describe_group_rows,                                  # ShareGroupDescribe
    78: group_op(Op.READ), 79: group_op(Op.READ),             # ShareFetch, ShareAcknowledge
    83: cluster_op(Op.CLUSTER_ACTION), 84: cluster_op(Op.CLUSTER_ACTION),
    85: cluster_op(Op.CLUSTER_ACTION), 86: cluster_op(Op.CLUSTER_ACTION),
    87: cluster_op(Op.CLUSTER_ACTION),
    90: group_rows("groups", RT.GROUP, GROUP_DENIED, Op.DESCRIBE),   # DescribeShareGroupOffsets
    91: group_op(Op.READ),                                    # AlterShareGroupOffsets
    92: group_op(Op.DELETE),                                  # DeleteShareGroupOffsets
}
# The APIs a broker serves without a policy here, and why; every other API it serves
# must have one (tests/cluster/acl/test_policies.py): an API with neither would be open
# to any user.
UNGATED: dict[int, str] = {
    1: "Fetch: per partition, in its handler (fetch_denied)",
    17: "SaslHandshake: before anyone is known",
    18: "ApiVersions: before anyone is known",
    36: "SaslAuthenticate: before anyone is known",
    29: "DescribeAcls: in its handler", 30: "CreateAcls: in its handler",
    31: "DeleteAcls: in its handler",
    38: "CreateDelegationToken: in its handler (CREATE_TOKENS on another owner, KIP-373)",
    39: "RenewDelegationToken: in its handler (the owner and renewers)",
    40: "ExpireDelegationToken: in its handler (the owner and renewers)",
    41: "DescribeDelegationToken: in its handler (per token)",
    60: "DescribeCluster: Kafka checks nothing",
    61: "DescribeProducers: per topic, in its handler",
    71: "GetTelemetrySubscriptions: any client (KIP-714), as Kafka",
    72: "PushTelemetry: any client (KIP-714), as Kafka",
    75: "DescribeTopicPartitions: in its handler (a page counts only what may be described)",
}


def check(broker: Broker, conn: ServerConnection, api_key: int, version: int,
          request: Struct) -> Gate | None:
    """What the authorizer makes of one request; None when it passes untouched."""
    policy = POLICIES.get(api_key)
    if policy is None:
        return None
    return policy(Ctx(broker, conn, version, request))


def fetch_denied(broker: Broker, conn: ServerConnection, topic: str, replica_id: int) -> int:
    """Fetch's check for one partition: a follower needs CLUSTER_ACTION on the cluster,
    a consumer READ on the topic. The error code, or 0."""
    if broker.authorizer is None:
        return 0
    if replica_id >= 0:
        return 0 if allows_cluster(broker, conn, Op.CLUSTER_ACTION) else TOPIC_DENIED
    return 0 if allows(broker, conn, Op.READ, RT.TOPIC, topic) else TOPIC_DENIED
