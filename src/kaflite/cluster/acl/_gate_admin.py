"""The request gate's policies for transactions, configs, SCRAM credentials, client
quotas and log directories."""

from __future__ import annotations

from kaflite.cluster._inject import mark_error
from kaflite.cluster._msgscope import walk
from kaflite.cluster.acl._context import allows_any
from kaflite.cluster.acl._gate_base import (
    CLUSTER_DENIED,
    GROUP_DENIED,
    NOT_ATTEMPTED,
    RT,
    TOPIC_DENIED,
    TXN_DENIED,
    Ctx,
    Gate,
    Op,
    refuse,
    strip_topics,
    topic_op,
    txn_allowed,
)
from kaflite.protocol.messages import (
    AddPartitionsToTxnResponse,
    AlterClientQuotasResponse,
    AlterConfigsResponse,
    AlterReplicaLogDirsResponse,
    AlterUserScramCredentialsResponse,
    DescribeConfigsResponse,
    IncrementalAlterConfigsResponse,
    Struct,
    WriteTxnMarkersResponse,
)
from kaflite.protocol.messages import alter_client_quotas_response as acq
from kaflite.protocol.messages import alter_configs_response as acr
from kaflite.protocol.messages import alter_replica_log_dirs_response as arl
from kaflite.protocol.messages import alter_user_scram_credentials_response as ausr
from kaflite.protocol.messages import incremental_alter_configs_response as iacr
from kaflite.protocol.messages import write_txn_markers_response as wr
from kaflite.security.acl import AclOperation


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
    if ctx.version >= 4:    # from partition leaders (KIP-890): CLUSTER_ACTION, as Kafka
        if ctx.cluster(Op.CLUSTER_ACTION):
            return None
        return Gate(AddPartitionsToTxnResponse(error_code=CLUSTER_DENIED))
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


# CLIENT_METRICS subscriptions (16) are the cluster's, as Kafka authorizes them
TOPIC_RESOURCE, BROKER_RESOURCES, GROUP_RESOURCE = 2, (4, 8, 16), 32


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


def alter_client_quotas(ctx: Ctx) -> Gate | None:
    """ALTER_CONFIGS on the cluster, or every entry CLUSTER_AUTHORIZATION_FAILED."""
    if ctx.cluster(Op.ALTER_CONFIGS):
        return None
    return Gate(AlterClientQuotasResponse(entries=[
        acq.EntryData(error_code=CLUSTER_DENIED, error_message=None, entity=[
            acq.EntityData(e.entity_type, e.entity_name) for e in entry.entity])
        for entry in ctx.request.entries]))


def alter_replica_log_dirs(ctx: Ctx) -> Gate | None:
    """ALTER on the cluster, or every partition named CLUSTER_AUTHORIZATION_FAILED."""
    if ctx.cluster(Op.ALTER):
        return None
    topics: dict[str, list[arl.AlterReplicaLogDirPartitionResult]] = {}
    for target in ctx.request.dirs:
        for t in target.topics:
            topics.setdefault(t.name, []).extend(
                arl.AlterReplicaLogDirPartitionResult(p, CLUSTER_DENIED) for p in t.partitions)
    return Gate(AlterReplicaLogDirsResponse(results=[
        arl.AlterReplicaLogDirTopicResult(name, parts) for name, parts in topics.items()]))
