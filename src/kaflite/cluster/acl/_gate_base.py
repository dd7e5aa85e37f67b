"""The request gate's building blocks: the Gate, a policy's context, refusals, strips, rewrites."""

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
from kaflite.cluster.acl._context import allows, allows_cluster
from kaflite.protocol import errors
from kaflite.protocol.messages import REGISTRY, Struct
from kaflite.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker
    from kaflite.cluster.network import ServerConnection

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
