"""KIP-848 consumer groups for ``kaflite groups``: ListGroups with group types and
ConsumerGroupDescribe, sent through the admin client's connections.

A ``consumer`` group (KIP-848) is not described by DescribeGroups (Kafka answers
``Dead``), so ``kaflite groups describe`` asks ConsumerGroupDescribe for it, as
kafka-consumer-groups.sh does, and shows its epochs: the group epoch, the target
assignment epoch, and per member its epoch, its current and its target assignment.
A member is *reconciling* while its epoch is behind the target assignment's or its
current assignment is not yet its target.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kaflite.protocol import errors
from kaflite.protocol.messages import ConsumerGroupDescribeRequest, ListGroupsRequest
from kaflite.protocol.messages import consumer_group_describe_response as cgdr

if TYPE_CHECKING:
    from kaflite.client import Admin

__all__ = ["Listed", "assignment_text", "consumer_member_rows", "describe_consumer_group",
           "list_typed", "reconciling"]

COORDINATOR = "coordinator"   # the admin pool's channel to coordinators


@dataclass(frozen=True)
class Listed:
    group: str
    protocol_type: str
    state: str
    type: str       # "classic" or "consumer" (ListGroups v5), "" from an older broker


async def list_typed(admin: Admin) -> list[Listed]:
    """Every group of every broker with its type."""
    await admin.start()
    out = []
    for node in list(admin.pool.brokers):
        resp = await admin._request(node, ListGroupsRequest())
        if resp.error_code:
            raise errors.error_for_code(resp.error_code, f"list groups on broker {node}")
        out += [Listed(g.group_id, g.protocol_type, g.group_state, g.group_type or "")
                for g in resp.groups]
    return sorted(out, key=lambda g: g.group)


async def describe_consumer_group(admin: Admin, group: str
                                  ) -> tuple[cgdr.DescribedGroup, int] | None:
    """The group as ConsumerGroupDescribe answers it, and its coordinator; None when the
    group is not a consumer group."""
    node = await admin._coordinator(group)
    resp = await admin._request(node, ConsumerGroupDescribeRequest(group_ids=[group]),
                                channel=COORDINATOR)
    for g in resp.groups:
        if g.error_code == errors.GroupIdNotFoundError.code:
            return None
        if g.error_code:
            raise errors.error_for_code(g.error_code, f"describe group {group}: "
                                        f"{g.error_message or ''}".rstrip(": "))
        return g, node
    return None


def _partitions(a: cgdr.Assignment) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for tp in a.topic_partitions:
        out.setdefault(tp.topic_name, []).extend(tp.partitions)
    return {t: sorted(ps) for t, ps in sorted(out.items())}


def assignment_text(parts: dict[str, list[int]]) -> str | None:
    """Kafka's layout: ``topic(0,1),other(2)``; None (``-``) when empty."""
    text = ",".join(f"{t}({','.join(map(str, ps))})" for t, ps in parts.items() if ps)
    return text or None


def reconciling(group: cgdr.DescribedGroup, member: cgdr.Member) -> bool:
    return member.member_epoch != group.assignment_epoch or \
        _partitions(member.assignment) != _partitions(member.target_assignment)


def consumer_member_rows(group: cgdr.DescribedGroup) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for m in group.members:
        current, target = _partitions(m.assignment), _partitions(m.target_assignment)
        rows.append({
            "group": group.group_id, "consumer_id": m.member_id,
            "group_instance_id": m.instance_id, "host": m.client_host,
            "client_id": m.client_id, "partitions": sum(len(ps) for ps in current.values()),
            "current_epoch": m.member_epoch, "current_assignment": assignment_text(current),
            "target_epoch": group.assignment_epoch,
            "target_assignment": assignment_text(target),
            "reconciling": reconciling(group, m),
            "assignment": [f"{t}-{p}" for t, ps in current.items() for p in ps],
            "target": [f"{t}-{p}" for t, ps in target.items() for p in ps]})
    return rows
