"""A share group's state: members, epochs, the target assignment, and the ``simple``
assignor (see ``_share`` for how a heartbeat moves them). Pure state, as
``_consumer_group`` is for KIP-848 groups."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from kaflite.cluster.groups._consumer_group import Assignment, TopicMeta

__all__ = ["ShareGroup", "ShareMember", "simple_assign"]


@dataclass(frozen=True)
class ShareMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = 0
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    assigned: Assignment = field(default_factory=dict)


@dataclass(eq=False)
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    subscription_metadata: dict[str, TopicMeta] = field(default_factory=dict)
    # Partitions whose share state exists (Kafka's ShareGroupStatePartitionMetadata).
    initialized: dict[uuid.UUID, set[int]] = field(default_factory=dict)

    @property
    def state(self) -> str:
        """Kafka's ``ShareGroupState``: Empty or Stable (nothing is ever revoked, so a share
        group has no assigning or reconciling state; Dead once deleted)."""
        return "Stable" if self.members else "Empty"


def simple_assign(members: Mapping[str, frozenset[uuid.UUID]],
                  partitions: Mapping[uuid.UUID, int]) -> dict[str, Assignment]:
    """Kafka's ``SimpleAssignor``, topic by topic over the members subscribed to it."""
    out: dict[str, dict[uuid.UUID, frozenset[int]]] = {m: {} for m in members}
    for topic_id in sorted(partitions, key=str):
        count = partitions[topic_id]
        subs = sorted(m for m, topics in members.items() if topic_id in topics)
        if not subs or count <= 0:
            continue
        per: dict[str, set[int]] = {m: set() for m in subs}
        if len(subs) <= count:
            for p in range(count):
                per[subs[p % len(subs)]].add(p)
        else:
            for i, m in enumerate(subs):
                per[m].add(i % count)
        for m, ps in per.items():
            if ps:
                out[m][topic_id] = frozenset(ps)
    return dict(out)
