"""The request gate's policies for consumer groups: offsets, coordinators, listing, describing."""

from __future__ import annotations

from typing import Any

from kaflite.cluster._inject import mark_error
from kaflite.cluster.acl._context import authorized_operations
from kaflite.cluster.acl._gate_base import (
    GROUP_DENIED,
    RT,
    TOPIC_DENIED,
    TXN_DENIED,
    Ctx,
    Gate,
    Op,
    group_rows,
    mark_topics,
    refuse,
    strip_topics,
    topic_op,
)
from kaflite.protocol.messages import (
    ConsumerGroupDescribeResponse,
    DeleteGroupsResponse,
    DescribeGroupsResponse,
    FindCoordinatorResponse,
    OffsetFetchResponse,
    ShareGroupDescribeResponse,
    Struct,
)
from kaflite.protocol.messages import consumer_group_describe_response as cgdr
from kaflite.protocol.messages import delete_groups_response as dgr
from kaflite.protocol.messages import share_group_describe_response as sgdr


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
                row.authorized_operations = authorized_operations(
                    ctx.broker, ctx.conn, RT.GROUP, row.group_id)
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
