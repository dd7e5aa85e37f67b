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

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kaflite.cluster._inject import mark_error
from kaflite.cluster._msgscope import (
    Slot,
    identity_of,
    levels_at,
    splice_partition,
    splice_topic,
    walk,
)
from kaflite.cluster.acl._context import allows, allows_any, allows_cluster
from kaflite.protocol import errors
from kaflite.protocol.messages import (
    REGISTRY,
    AlterConfigsResponse,
    AlterUserScramCredentialsResponse,
    ConsumerGroupDescribeResponse,
    DeleteGroupsResponse,
    DescribeConfigsResponse,
    DescribeGroupsResponse,
    FindCoordinatorResponse,
    IncrementalAlterConfigsResponse,
    MetadataResponse,
    OffsetFetchResponse,
    ShareGroupDescribeResponse,
    Struct,
    WriteTxnMarkersResponse,
)
from kaflite.protocol.messages import alter_configs_response as acr
from kaflite.protocol.messages import alter_user_scram_credentials_response as ausr
from kaflite.protocol.messages import consumer_group_describe_response as cgdr
from kaflite.protocol.messages import delete_groups_response as dgr
from kaflite.protocol.messages import incremental_alter_configs_response as iacr
from kaflite.protocol.messages import share_group_describe_response as sgdr
from kaflite.protocol.messages import write_txn_markers_response as wr
from kaflite.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker
    from kaflite.cluster.network import ServerConnection

__all__ = ["Gate", "check", "fetch_denied"]

Op, RT = AclOperation, ResourceType
TOPIC_DENIED = errors.TopicAuthorizationFailedError.code
GROUP_DENIED = errors.GroupAuthorizationFailedError.code
CLUSTER_DENIED = errors.ClusterAuthorizationFailedError.code
TXN_DENIED = errors.TransactionalIdAuthorizationFailedError.code
NOT_ATTEMPTED = errors.OperationNotAttemptedError.code


@dataclass
class Gate:
    response: Struct | None = None     # refused as a whole: the handler is not called
    # (topic identity, topic, partitions) taken out of the request, with their code
    stripped: list[tuple[dict[str, object], str, list[int], int]] = field(default_factory=list)
    after: list[Callable[[Struct], None]] = field(default_factory=list)

    def finish(self, response: Struct, version: int) -> None:
        """Rewrite what the handler answered, then put the stripped topics back with
        their errors."""
        for rewrite in self.after:
            rewrite(response)
        for ident, topic, partitions, code in self.stripped:
            if partitions:
                for index in partitions:
                    entry = splice_partition(response, version, ident, topic, index, None)
                    if entry is not None:
                        mark_error(entry, code, "partition", version)
            else:
                holder = splice_topic(response, version, ident, topic, None)
                if holder is not None:
                    mark_error(holder, code, "topic", version)


@dataclass
class Ctx:
    broker: Broker
    conn: ServerConnection
    version: int
    request: Any        # the request struct; each policy knows its fields

    def allows(self, op: AclOperation, rt: ResourceType, name: str) -> bool:
        return allows(self.broker, self.conn, op, rt, name)

    def cluster(self, op: AclOperation) -> bool:
        return allows_cluster(self.broker, self.conn, op)

    def resolve(self, topic_id: Any) -> str | None:
        topic = self.broker.controller.topics_by_id.get(topic_id)
        return topic.name if topic is not None else None


Policy = Callable[[Ctx], Gate | None]


# -- building blocks -------------------------------------------------------------------
def refuse(ctx: Ctx, code: int) -> Gate:
    """The whole request refused with ``code``, where the API puts its errors."""
    info = REGISTRY[type(ctx.request).API_KEY]
    response = info.response()
    version = ctx.version
    if "top" in levels_at(info.response, version):
        mark_error(response, code, "top", version)
        return Gate(response)
    slots = list(walk(ctx.request, version, ctx.resolve))
    partitions = [s for s in slots if s.level == "partition" and s.topic is not None]
    for s in partitions:
        ident = identity_of(s.parent, version) if s.parent is not None else {}
        assert s.topic is not None and s.partition is not None
        entry = splice_partition(response, version, ident, s.topic, s.partition, None)
        if entry is not None:
            mark_error(entry, code, "partition", version)
    if not partitions:
        for s in slots:
            if s.level == "topic" and s.depth == 1 and s.topic is not None:
                holder = splice_topic(response, version, identity_of(s, version), s.topic, None)
                if holder is not None:
                    mark_error(holder, code, "topic", version)
    return Gate(response)


def strip_topics(ctx: Ctx, denied: Callable[[str], int], gate: Gate | None = None) -> Gate:
    """Take out of the request every (top-level) topic ``denied`` gives a code for."""
    gate = gate if gate is not None else Gate()
    version = ctx.version
    slots = list(walk(ctx.request, version, ctx.resolve))
    for s in slots:
        if s.level != "topic" or s.depth != 1 or s.topic is None or s.container is None:
            continue
        code = denied(s.topic)
        if not code:
            continue
        parts = [c.partition for c in slots if c.parent is s and c.partition is not None]
        gate.stripped.append((identity_of(s, version), s.topic, parts, code))
        s.container.remove(s.obj)
    return gate


def mark_topics(ctx: Ctx, op: AclOperation, drop: bool = False) -> Callable[[Struct], None]:
    """A rewrite: every topic of the response the caller may not ``op`` gets
    TOPIC_AUTHORIZATION_FAILED (on its partitions, or itself), or is left out."""
    def rewrite(response: Struct) -> None:
        version = ctx.version
        slots = list(walk(response, version, ctx.resolve))
        partitions: dict[int, list[Slot]] = {}   # id(topic slot) -> its partition slots
        for c in slots:
            if c.level == "partition" and c.parent is not None:
                partitions.setdefault(id(c.parent), []).append(c)
        for s in slots:
            if s.level != "topic" or s.topic is None or ctx.allows(op, RT.TOPIC, s.topic):
                continue
            if drop and s.container is not None:
                s.container.remove(s.obj)
                continue
            children = partitions.get(id(s), [])
            for c in children:
                mark_error(c.obj, TOPIC_DENIED, "partition", version)
            if not children and s.error_at(version):
                mark_error(s.obj, TOPIC_DENIED, "topic", version)
    return rewrite


def topic_op(op: AclOperation) -> Callable[[Ctx], Callable[[str], int]]:
    def denied_for(ctx: Ctx) -> Callable[[str], int]:
        return lambda topic: 0 if ctx.allows(op, RT.TOPIC, topic) else TOPIC_DENIED
    return denied_for


def cluster_op(op: AclOperation) -> Policy:
    def policy(ctx: Ctx) -> Gate | None:
        return None if ctx.cluster(op) else refuse(ctx, CLUSTER_DENIED)
    return policy


def group_op(op: AclOperation) -> Policy:
    def policy(ctx: Ctx) -> Gate | None:
        ok = ctx.allows(op, RT.GROUP, ctx.request.group_id)
        return None if ok else refuse(ctx, GROUP_DENIED)
    return policy


def txn_allowed(ctx: Ctx, txn_id: str | None) -> bool:
    return txn_id is not None and ctx.allows(Op.WRITE, RT.TRANSACTIONAL_ID, txn_id)


def chain(*policies: Policy) -> Policy:
    """The first refusal wins; else the strips and rewrites of all."""
    def policy(ctx: Ctx) -> Gate | None:
        merged = Gate()
        for p in policies:
            gate = p(ctx)
            if gate is None:
                continue
            if gate.response is not None:
                return gate
            merged.stripped += gate.stripped
            merged.after += gate.after
        return merged if merged.stripped or merged.after else None
    return policy


def strip(op: AclOperation) -> Policy:
    return lambda ctx: strip_topics(ctx, topic_op(op)(ctx))


def mark(op: AclOperation, drop: bool = False) -> Policy:
    return lambda ctx: Gate(after=[mark_topics(ctx, op, drop)])


# -- the APIs --------------------------------------------------------------------------
def produce(ctx: Ctx) -> Gate | None:
    txn = ctx.request.transactional_id
    if txn is not None and not txn_allowed(ctx, txn):
        return refuse(ctx, TXN_DENIED)
    # The hot path: every topic allowed (decisions are cached), nothing to take out,
    # and no walk over the request's partitions.
    if all(ctx.allows(Op.WRITE, RT.TOPIC, t.name) for t in ctx.request.topic_data):
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


def offset_commit(ctx: Ctx) -> Gate | None:
    if not ctx.allows(Op.READ, RT.GROUP, ctx.request.group_id):
        return refuse(ctx, GROUP_DENIED)
    return strip_topics(ctx, topic_op(Op.READ)(ctx))


def offset_fetch(ctx: Ctx) -> Gate | None:
    req = ctx.request
    if ctx.version < 8:
        if not ctx.allows(Op.DESCRIBE, RT.GROUP, req.group_id):
            return refuse(ctx, GROUP_DENIED)
        return Gate(after=[mark_topics(ctx, Op.DESCRIBE, drop=req.topics is None)])
    denied = {g.group_id for g in req.groups
              if not ctx.allows(Op.DESCRIBE, RT.GROUP, g.group_id)}
    everything = {g.group_id for g in req.groups if g.topics is None}

    def rewrite(response: Struct) -> None:
        assert isinstance(response, OffsetFetchResponse)
        for g in response.groups:
            if g.group_id in denied:
                mark_error(g, GROUP_DENIED, "group", ctx.version)
                continue
            kept = []
            for t in g.topics:
                if ctx.allows(Op.DESCRIBE, RT.TOPIC, t.name):
                    kept.append(t)
                elif g.group_id not in everything:
                    for p in t.partitions:
                        mark_error(p, TOPIC_DENIED, "partition", ctx.version)
                    kept.append(t)
            g.topics = kept
    return Gate(after=[rewrite])


KEY_TYPES = {0: (RT.GROUP, GROUP_DENIED), 1: (RT.TRANSACTIONAL_ID, TXN_DENIED)}


def find_coordinator(ctx: Ctx) -> Gate | None:
    req = ctx.request
    rt, code = KEY_TYPES.get(req.key_type, (RT.GROUP, GROUP_DENIED))
    if ctx.version < 4:
        return None if ctx.allows(Op.DESCRIBE, rt, req.key) else refuse(ctx, code)

    def rewrite(response: Struct) -> None:
        assert isinstance(response, FindCoordinatorResponse)
        for c in response.coordinators:
            if not ctx.allows(Op.DESCRIBE, rt, c.key):
                mark_error(c, code, "group", ctx.version)
                c.error_message = None
    return Gate(after=[rewrite])


def group_rows(field_name: str, rt: ResourceType, code: int, op: AclOperation,
               key: str = "group_id", drop: bool = False) -> Policy:
    """Each row of a response list about a group (or transactional id) the caller may
    not ``op`` gets ``code``, or (``drop``) is left out."""
    def policy(ctx: Ctx) -> Gate | None:
        def rewrite(response: Struct) -> None:
            rows = getattr(response, field_name)
            kept = []
            for row in rows:
                if ctx.allows(op, rt, getattr(row, key)):
                    kept.append(row)
                elif not drop:
                    mark_error(row, code, "group", ctx.version)
                    kept.append(row)
            rows[:] = kept
        return Gate(after=[rewrite])
    return policy


def list_groups(ctx: Ctx) -> Gate | None:
    if ctx.cluster(Op.DESCRIBE):
        return None
    return group_rows("groups", RT.GROUP, GROUP_DENIED, Op.DESCRIBE, drop=True)(ctx)


def delete_groups(ctx: Ctx) -> Gate | None:
    req = ctx.request
    denied = [g for g in req.groups_names if not ctx.allows(Op.DELETE, RT.GROUP, g)]
    if not denied:
        return None
    req.groups_names = [g for g in req.groups_names if g not in denied]

    def rewrite(response: Struct) -> None:
        assert isinstance(response, DeleteGroupsResponse)
        for g in denied:
            row = dgr.DeletableGroupResult(group_id=g)
            mark_error(row, GROUP_DENIED, "group", ctx.version)
            response.results.append(row)
    return Gate(after=[rewrite])


GROUP_OPS = (Op.READ, Op.DELETE, Op.DESCRIBE)   # what describing a group reports


def group_operations(ctx: Ctx, group_id: str) -> int:
    """The ``authorized_operations`` bit field of a group (Kafka's ``authorizedOperations``)."""
    bits = 0
    for op in GROUP_OPS:
        if ctx.allows(op, RT.GROUP, group_id):
            bits |= 1 << int(op)
    return bits


def describe_group_rows(ctx: Ctx) -> Gate | None:
    """DescribeGroups and ConsumerGroupDescribe: DESCRIBE on each group, else
    GROUP_AUTHORIZATION_FAILED on its row; with ``include_authorized_operations``,
    what the ACLs allow on it. ConsumerGroupDescribe also wants DESCRIBE on every topic
    of the members' assignments (else TOPIC_AUTHORIZATION_FAILED), as Kafka 4."""
    denied = group_rows("groups", RT.GROUP, GROUP_DENIED, Op.DESCRIBE)(ctx)
    assert denied is not None
    with_ops = bool(getattr(ctx.request, "include_authorized_operations", False))

    def rewrite(response: Struct) -> None:
        if isinstance(response, ShareGroupDescribeResponse):
            for i, srow in enumerate(response.groups):
                names = {tp.topic_name for m in srow.members
                         for tp in m.assignment.topic_partitions}
                if not srow.error_code and \
                        not all(ctx.allows(Op.DESCRIBE, RT.TOPIC, t) for t in names):
                    response.groups[i] = sgdr.DescribedGroup(
                        group_id=srow.group_id, error_code=TOPIC_DENIED,
                        authorized_operations=srow.authorized_operations)
            rows: list[Any] = list(response.groups)
        elif isinstance(response, ConsumerGroupDescribeResponse):
            for i, row in enumerate(response.groups):
                topics = {tp.topic_name for m in row.members
                          for a in (m.assignment, m.target_assignment)
                          for tp in a.topic_partitions}
                if not row.error_code and \
                        not all(ctx.allows(Op.DESCRIBE, RT.TOPIC, t) for t in topics):
                    response.groups[i] = cgdr.DescribedGroup(
                        group_id=row.group_id, error_code=TOPIC_DENIED,
                        authorized_operations=row.authorized_operations)
            rows = list(response.groups)
        else:
            assert isinstance(response, DescribeGroupsResponse)
            rows = list(response.groups)
        for row in rows:
            if with_ops and not row.error_code:
                row.authorized_operations = group_operations(ctx, row.group_id)
    denied.after.append(rewrite)
    return denied


def consumer_group_heartbeat(ctx: Ctx) -> Gate | None:
    """Kafka's ``handleConsumerGroupHeartbeat``: READ on the group, then DESCRIBE on every
    topic subscribed by name (TOPIC_AUTHORIZATION_FAILED otherwise)."""
    req = ctx.request
    if not ctx.allows(Op.READ, RT.GROUP, req.group_id):
        return refuse(ctx, GROUP_DENIED)
    names = req.subscribed_topic_names or []
    if not all(ctx.allows(Op.DESCRIBE, RT.TOPIC, t) for t in set(names)):
        return refuse(ctx, TOPIC_DENIED)
    return None


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


def init_producer_id(ctx: Ctx) -> Gate | None:
    txn = ctx.request.transactional_id
    if txn is not None:
        return None if txn_allowed(ctx, txn) else refuse(ctx, TXN_DENIED)
    # Kafka 4: an idempotent producer needs IDEMPOTENT_WRITE on the cluster, or WRITE
    # on at least one topic.
    if ctx.cluster(Op.IDEMPOTENT_WRITE) or allows_any(ctx.broker, ctx.conn, Op.WRITE, RT.TOPIC):
        return None
    return refuse(ctx, CLUSTER_DENIED)


def add_partitions_to_txn(ctx: Ctx) -> Gate | None:
    req = ctx.request
    if not txn_allowed(ctx, req.v3_and_below_transactional_id):
        return refuse(ctx, TXN_DENIED)
    denied = {t.name for t in req.v3_and_below_topics
              if not ctx.allows(Op.WRITE, RT.TOPIC, t.name)}
    if not denied:
        return None
    gate = refuse(ctx, NOT_ATTEMPTED)    # all or nothing, as Kafka
    assert gate.response is not None
    for s in walk(gate.response, ctx.version):
        if s.level == "partition" and s.topic in denied:
            mark_error(s.obj, TOPIC_DENIED, "partition", ctx.version)
    return gate


def txn_and_group(ctx: Ctx) -> Gate | None:
    """AddOffsetsToTxn and TxnOffsetCommit: WRITE on the id, READ on the group."""
    req = ctx.request
    if not txn_allowed(ctx, req.transactional_id):
        return refuse(ctx, TXN_DENIED)
    if not ctx.allows(Op.READ, RT.GROUP, req.group_id):
        return refuse(ctx, GROUP_DENIED)
    return None


def txn_offset_commit(ctx: Ctx) -> Gate | None:
    return txn_and_group(ctx) or strip_topics(ctx, topic_op(Op.READ)(ctx))


def end_txn(ctx: Ctx) -> Gate | None:
    return None if txn_allowed(ctx, ctx.request.transactional_id) else refuse(ctx, TXN_DENIED)


TOPIC_RESOURCE, BROKER_RESOURCES, GROUP_RESOURCE = 2, (4, 8), 32


def config_denied(ctx: Ctx, op: AclOperation, resource_type: int, name: str) -> int:
    if resource_type == TOPIC_RESOURCE:
        return 0 if ctx.allows(op, RT.TOPIC, name) else TOPIC_DENIED
    if resource_type in BROKER_RESOURCES:
        return 0 if ctx.cluster(op) else CLUSTER_DENIED
    if resource_type == GROUP_RESOURCE:
        return 0 if ctx.allows(op, RT.GROUP, name) else GROUP_DENIED
    return 0


def describe_configs(ctx: Ctx) -> Gate | None:
    def rewrite(response: Struct) -> None:
        assert isinstance(response, DescribeConfigsResponse)
        for r in response.results:
            code = config_denied(ctx, Op.DESCRIBE_CONFIGS, r.resource_type, r.resource_name)
            if code:
                r.error_code, r.error_message, r.configs = code, None, []
    return Gate(after=[rewrite])


def alter_configs(ctx: Ctx) -> Gate | None:
    req = ctx.request
    denied = [(r.resource_type, r.resource_name,
               config_denied(ctx, Op.ALTER_CONFIGS, r.resource_type, r.resource_name))
              for r in req.resources]
    denied = [d for d in denied if d[2]]
    if not denied:
        return None
    keys = {(t, n) for t, n, _ in denied}
    req.resources = [r for r in req.resources if (r.resource_type, r.resource_name) not in keys]

    def rewrite(response: Struct) -> None:
        if isinstance(response, AlterConfigsResponse):
            response.responses += [acr.AlterConfigsResourceResponse(
                error_code=code, error_message=None, resource_type=t, resource_name=n)
                for t, n, code in denied]
        else:
            assert isinstance(response, IncrementalAlterConfigsResponse)
            response.responses += [iacr.AlterConfigsResourceResponse(
                error_code=code, error_message=None, resource_type=t, resource_name=n)
                for t, n, code in denied]
    return Gate(after=[rewrite])


def alter_scram(ctx: Ctx) -> Gate | None:
    if ctx.cluster(Op.ALTER):
        return None
    req = ctx.request
    users = dict.fromkeys(c.name for c in [*req.deletions, *req.upsertions])
    req.deletions, req.upsertions = [], []

    def rewrite(response: Struct) -> None:
        assert isinstance(response, AlterUserScramCredentialsResponse)
        response.results = [ausr.AlterUserScramCredentialsResult(
            user=user, error_code=CLUSTER_DENIED, error_message=None) for user in users]
    return Gate(after=[rewrite])


def write_txn_markers(ctx: Ctx) -> Gate | None:
    if ctx.cluster(Op.CLUSTER_ACTION):
        return None
    response = WriteTxnMarkersResponse()
    for m in ctx.request.markers:
        response.markers.append(wr.WritableTxnMarkerResult(
            producer_id=m.producer_id, topics=[wr.WritableTxnMarkerTopicResult(
                name=t.name, partitions=[wr.WritableTxnMarkerPartitionResult(
                    partition_index=p, error_code=CLUSTER_DENIED)
                    for p in t.partition_indexes]) for t in m.topics]))
    return Gate(response)


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
    37: strip(Op.ALTER),                                      # CreatePartitions
    42: delete_groups,
    43: cluster_op(Op.ALTER),                                 # ElectLeaders
    45: cluster_op(Op.ALTER),                                 # AlterPartitionReassignments
    46: cluster_op(Op.DESCRIBE),                              # ListPartitionReassignments
    47: chain(group_op(Op.DELETE), strip(Op.READ)),           # OffsetDelete
    50: cluster_op(Op.DESCRIBE),                              # DescribeUserScramCredentials
    51: alter_scram,
    65: group_rows("transaction_states", RT.TRANSACTIONAL_ID, TXN_DENIED, Op.DESCRIBE,
                   key="transactional_id"),                   # DescribeTransactions
    66: group_rows("transaction_states", RT.TRANSACTIONAL_ID, TXN_DENIED, Op.DESCRIBE,
                   key="transactional_id", drop=True),        # ListTransactions
    68: consumer_group_heartbeat,
    69: describe_group_rows,                                  # ConsumerGroupDescribe
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
# Not here: ApiVersions and SASL (before anyone is known), Fetch (in its handler),
# DescribeCluster (Kafka checks nothing), the ACL APIs (in their handlers).


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
