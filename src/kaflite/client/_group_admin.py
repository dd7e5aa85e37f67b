"""The admin's calls for typed group listings and KIP-848 consumer groups.

``list_group_listings`` is ListGroups (v5) on every broker, with its state and
type filters, as Java's ``Admin.listGroups``; ``describe_consumer_groups`` is
ConsumerGroupDescribe at each group's coordinator, as Java's
``describeConsumerGroups`` for a ``consumer`` group: epochs, the assignor, and
per member its epoch, subscription, current and target assignment. A group that
is not a consumer group (a classic one, or none) raises GROUP_ID_NOT_FOUND, the
code Kafka answers; DescribeGroups (``describe_groups``) describes classic groups.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kaflite.client._base import BaseClient
from kaflite.client.consumer._types import TopicPartition
from kaflite.client.pool import COORDINATOR, BrokerAddress
from kaflite.protocol import errors
from kaflite.protocol.messages import ConsumerGroupDescribeRequest, ListGroupsRequest
from kaflite.protocol.messages import consumer_group_describe_response as cgdr

__all__ = ["ConsumerGroupDescription", "ConsumerGroupMemberDescription", "GroupAdmin",
           "GroupListing"]


@dataclass(frozen=True)
class GroupListing:
    """One group as ListGroups lists it (Java's ``GroupListing``)."""

    group_id: str
    protocol_type: str
    state: str
    type: str       # "classic" or "consumer" (ListGroups v5), "" from an older broker


@dataclass(frozen=True)
class ConsumerGroupMemberDescription:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    assignment: tuple[TopicPartition, ...]          # what it owns now
    target_assignment: tuple[TopicPartition, ...]   # what the coordinator means it to own


@dataclass(frozen=True)
class ConsumerGroupDescription:
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int       # the target assignment's epoch
    assignor: str
    members: tuple[ConsumerGroupMemberDescription, ...]
    coordinator: BrokerAddress | None = None

    def reconciling(self, member: ConsumerGroupMemberDescription) -> bool:
        """The member is behind the target epoch, or does not own its target yet."""
        return member.member_epoch != self.assignment_epoch or \
            sorted(member.assignment) != sorted(member.target_assignment)


def _partitions(a: cgdr.Assignment) -> tuple[TopicPartition, ...]:
    return tuple(sorted(TopicPartition(tp.topic_name, p) for tp in a.topic_partitions
                        for p in tp.partitions))


def _described(g: cgdr.DescribedGroup, coordinator: BrokerAddress | None
               ) -> ConsumerGroupDescription:
    return ConsumerGroupDescription(
        g.group_id, g.group_state, g.group_epoch, g.assignment_epoch, g.assignor_name,
        tuple(ConsumerGroupMemberDescription(
            m.member_id, m.instance_id, m.rack_id, m.member_epoch, m.client_id, m.client_host,
            tuple(m.subscribed_topic_names), m.subscribed_topic_regex,
            _partitions(m.assignment), _partitions(m.target_assignment)) for m in g.members),
        coordinator)


class GroupAdmin(BaseClient):
    """Mixed into ``Admin``."""

    if TYPE_CHECKING:
        async def _coordinator(self, key: str, key_type: int = 0) -> int: ...

    async def list_group_listings(self, types: Iterable[str] = (), states: Iterable[str] = ()
                                  ) -> list[GroupListing]:
        """Every group of every broker, of the given types (``classic``, ``consumer``)
        and states (``Stable``, ``Empty``...) when given, by group id."""
        await self.start()
        req = ListGroupsRequest(states_filter=list(states), types_filter=list(types))
        out = []
        for node in list(self.pool.brokers):
            resp = await self._request(node, req)
            if resp.error_code:
                raise errors.error_for_code(resp.error_code, f"list groups on broker {node}")
            out += [GroupListing(g.group_id, g.protocol_type, g.group_state, g.group_type or "")
                    for g in resp.groups]
        return sorted(out, key=lambda g: g.group_id)

    async def describe_consumer_groups(self, groups: Iterable[str]
                                       ) -> dict[str, ConsumerGroupDescription]:
        """Each consumer (KIP-848) group as its coordinator describes it."""
        out = {}
        for group in groups:
            node = await self._coordinator(group)
            resp = await self._request(node, ConsumerGroupDescribeRequest(group_ids=[group]),
                                       channel=COORDINATOR)
            for g in resp.groups:
                if g.error_code:
                    raise errors.error_for_code(
                        g.error_code, f"describe group {g.group_id}: {g.error_message or ''}"
                        .rstrip(": "))
                out[g.group_id] = _described(g, self.pool.brokers.get(node))
        return out
