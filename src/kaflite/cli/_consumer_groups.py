"""KIP-848 consumer groups for ``kaflite groups``: the member rows of a consumer group.

A ``consumer`` group (KIP-848) is not described by DescribeGroups (Kafka answers
``Dead``), so ``kaflite groups describe`` asks the admin's
``describe_consumer_groups`` (ConsumerGroupDescribe) for it, as
kafka-consumer-groups.sh does, and shows its epochs: the group epoch, the target
assignment epoch, and per member its epoch, its current and its target assignment.
A member is *reconciling* while its epoch is behind the target assignment's or its
current assignment is not yet its target.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kaflite.client import TopicPartition
    from kaflite.client.admin import ConsumerGroupDescription

__all__ = ["assignment_text", "consumer_member_rows"]


def _by_topic(tps: Iterable[TopicPartition]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for tp in tps:
        out.setdefault(tp.topic, []).append(tp.partition)
    return {t: sorted(ps) for t, ps in sorted(out.items())}


def assignment_text(parts: dict[str, list[int]]) -> str | None:
    """Kafka's layout: ``topic(0,1),other(2)``; None (``-``) when empty."""
    text = ",".join(f"{t}({','.join(map(str, ps))})" for t, ps in parts.items() if ps)
    return text or None


def consumer_member_rows(group: ConsumerGroupDescription) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for m in group.members:
        current, target = _by_topic(m.assignment), _by_topic(m.target_assignment)
        rows.append({
            "group": group.group_id, "consumer_id": m.member_id,
            "group_instance_id": m.instance_id, "host": m.client_host,
            "client_id": m.client_id, "partitions": len(m.assignment),
            "current_epoch": m.member_epoch, "current_assignment": assignment_text(current),
            "target_epoch": group.assignment_epoch,
            "target_assignment": assignment_text(target),
            "reconciling": group.reconciling(m),
            "assignment": [f"{t}-{p}" for t, ps in current.items() for p in ps],
            "target": [f"{t}-{p}" for t, ps in target.items() for p in ps]})
    return rows
