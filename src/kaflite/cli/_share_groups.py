"""Share groups (KIP-932) for ``kaflite groups describe``, as kafka-share-groups.sh shows them.

    describe G            GROUP TOPIC PARTITION LEADER-EPOCH START-OFFSET LAG
      --verbose           + END-OFFSET IN-FLIGHT DELIVERY-COUNTS
    describe G --members  GROUP CONSUMER-ID HOST CLIENT-ID #PARTITIONS ASSIGNMENT
      --verbose           + MEMBER-EPOCH
    describe G --state    GROUP COORDINATOR (ID) STATE #MEMBERS
      --verbose           + GROUP-EPOCH ASSIGNMENT-EPOCH
    reset-offsets G ...   the start offsets, with AlterShareGroupOffsets (empty group)

The members come from ShareGroupDescribe, the start offsets (SPSO) and lags from
DescribeShareGroupOffsets v1, both answered by the group's coordinator. The
verbose columns read each share-partition's durable state from the share
coordinator (ReadShareGroupState, as a tool: leader epoch -1 fences nothing):
END-OFFSET is the SPEO + 1, IN-FLIGHT the records between the SPSO and it that are
not yet acknowledged or archived, DELIVERY-COUNTS how many of them were
delivered how often (``1x40 2x3``: 40 once, 3 twice).
"""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kaflite.cli._output import Column
from kaflite.protocol import errors
from kaflite.protocol.messages import (
    AlterShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequest,
    ReadShareGroupStateRequest,
    ShareGroupDescribeRequest,
)
from kaflite.protocol.messages import alter_share_group_offsets_request as asq
from kaflite.protocol.messages import describe_share_group_offsets_request as dsq
from kaflite.protocol.messages import read_share_group_state_request as rsq
from kaflite.protocol.messages import share_group_describe_response as sgdr

if TYPE_CHECKING:
    from kaflite.client import Admin, TopicPartition

__all__ = ["SHARE_MEMBER_COLUMNS", "SHARE_OFFSET_COLUMNS", "SHARE_STATE_COLUMNS",
           "ShareDescribed", "alter_share_offsets", "describe_share_group", "share_member_rows",
           "share_positions", "share_state_row"]

COORDINATOR = "coordinator"
SHARE_KEY = 2
ACKNOWLEDGED, ARCHIVED = 2, 4

SHARE_OFFSET_COLUMNS = [Column("group", "GROUP"), Column("topic", "TOPIC"),
                        Column("partition", "PARTITION"), Column("leader_epoch", "LEADER-EPOCH"),
                        Column("start_offset", "START-OFFSET"), Column("lag", "LAG")]
VERBOSE_SHARE_OFFSET_COLUMNS = [*SHARE_OFFSET_COLUMNS, Column("end_offset", "END-OFFSET"),
                                Column("in_flight", "IN-FLIGHT"),
                                Column("delivery_counts", "DELIVERY-COUNTS")]
SHARE_MEMBER_COLUMNS = [Column("group", "GROUP"), Column("consumer_id", "CONSUMER-ID"),
                        Column("host", "HOST"), Column("client_id", "CLIENT-ID"),
                        Column("partitions", "#PARTITIONS"), Column("assignment", "ASSIGNMENT")]
VERBOSE_SHARE_MEMBER_COLUMNS = [*SHARE_MEMBER_COLUMNS, Column("member_epoch", "MEMBER-EPOCH")]
SHARE_STATE_COLUMNS = [Column("group", "GROUP"), Column("coordinator", "COORDINATOR (ID)"),
                       Column("state", "STATE"), Column("members", "#MEMBERS")]
VERBOSE_SHARE_STATE_COLUMNS = [*SHARE_STATE_COLUMNS[:3], Column("group_epoch", "GROUP-EPOCH"),
                               Column("assignment_epoch", "ASSIGNMENT-EPOCH"),
                               SHARE_STATE_COLUMNS[3]]


@dataclass
class ShareDescribed:
    group: sgdr.DescribedGroup
    coordinator: int
    coordinator_address: str | None
    offsets: list[dict[str, object]] = field(default_factory=list)


async def describe_share_group(admin: Admin, group: str, offsets: bool,
                               verbose: bool) -> ShareDescribed | None:
    """The share group (None if ``group`` is not one), with its offset rows."""
    node = await admin._coordinator(group)
    resp = await admin._request(node, ShareGroupDescribeRequest(group_ids=[group]),
                                channel=COORDINATOR)
    described = resp.groups[0] if resp.groups else None
    if described is None or described.error_code == errors.GroupIdNotFoundError.code:
        return None
    if described.error_code:
        raise errors.error_for_code(described.error_code, f"describe group {group}")
    address = admin.pool.brokers.get(node)
    out = ShareDescribed(described, node, None if address is None else
                         f"{address.host}:{address.port}  ({node})")
    if offsets:
        out.offsets = await _offset_rows(admin, node, group, verbose)
    return out


async def _offset_rows(admin: Admin, node: int, group: str,
                       verbose: bool) -> list[dict[str, object]]:
    resp = await admin._request(node, DescribeShareGroupOffsetsRequest(groups=[
        dsq.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None)]),
        channel=COORDINATOR)
    rows: list[dict[str, object]] = []
    for g in resp.groups:
        if g.error_code:
            raise errors.error_for_code(g.error_code, f"describe offsets of {group}")
        for t in sorted(g.topics, key=lambda t: t.topic_name):
            for p in sorted(t.partitions, key=lambda p: p.partition_index):
                row: dict[str, object] = {
                    "group": group, "topic": t.topic_name, "partition": p.partition_index,
                    "leader_epoch": p.leader_epoch if p.leader_epoch >= 0 else None,
                    "start_offset": p.start_offset if p.start_offset >= 0 else None,
                    "lag": p.lag if p.lag >= 0 else None}
                if verbose:
                    row.update(await _state(admin, group, t.topic_id, p.partition_index))
                rows.append(row)
    return rows


async def _state(admin: Admin, group: str, topic_id: uuid.UUID,
                 partition: int) -> dict[str, object]:
    """END-OFFSET, IN-FLIGHT and DELIVERY-COUNTS from the share coordinator's state."""
    from kaflite.cluster.log._files import format_topic_id

    empty: dict[str, object] = {"end_offset": None, "in_flight": None, "delivery_counts": None}
    try:
        node = await admin._coordinator(f"{group}:{format_topic_id(topic_id)}:{partition}",
                                        SHARE_KEY)
        resp = await admin._request(node, ReadShareGroupStateRequest(
            group_id=group, topics=[rsq.ReadStateData(topic_id=topic_id, partitions=[
                rsq.PartitionData(partition, -1)])]), channel=COORDINATOR)
    except errors.KafkaError:
        return empty
    r = resp.results[0].partitions[0]
    if r.error_code or r.start_offset < 0:
        return empty
    end = max([r.start_offset, *(b.last_offset + 1 for b in r.state_batches)])
    counts: Counter[int] = Counter()
    pending = 0
    for b in r.state_batches:
        if b.delivery_state in (ACKNOWLEDGED, ARCHIVED):
            continue
        n = b.last_offset - max(b.first_offset, r.start_offset) + 1
        pending += max(n, 0)
        if b.delivery_count > 0:
            counts[b.delivery_count] += max(n, 0)
    return {"end_offset": end, "in_flight": pending,
            "delivery_counts": " ".join(f"{c}x{n}" for c, n in sorted(counts.items())) or None}


async def share_positions(admin: Admin, group: str) -> dict[TopicPartition, int] | None:
    """A share group's start offsets, for ``reset-offsets`` (None: not a share group);
    NON_EMPTY_GROUP while it has members, as Kafka refuses it."""
    from kaflite.client import TopicPartition

    described = await describe_share_group(admin, group, offsets=False, verbose=False)
    if described is None:
        return None
    if described.group.members:
        raise errors.NonEmptyGroupError(
            f"Share group '{group}' is not empty: offsets can only be reset when it has "
            "no members.")
    rows = await _offset_rows(admin, described.coordinator, group, verbose=False)
    return {TopicPartition(str(r["topic"]), int(str(r["partition"]))): int(str(r["start_offset"]))
            for r in rows if r["start_offset"] is not None}


async def alter_share_offsets(admin: Admin, group: str, plan: dict[TopicPartition, int]) -> None:
    """AlterShareGroupOffsets with the planned start offsets."""
    node = await admin._coordinator(group)
    topics: dict[str, list[asq.AlterShareGroupOffsetsRequestPartition]] = {}
    for tp, offset in sorted(plan.items(), key=lambda kv: (kv[0].topic, kv[0].partition)):
        topics.setdefault(tp.topic, []).append(
            asq.AlterShareGroupOffsetsRequestPartition(tp.partition, offset))
    resp = await admin._request(node, AlterShareGroupOffsetsRequest(group_id=group, topics=[
        asq.AlterShareGroupOffsetsRequestTopic(t, ps) for t, ps in topics.items()]),
        channel=COORDINATOR)
    if resp.error_code:
        raise errors.error_for_code(resp.error_code, resp.error_message or f"reset {group}")
    for t in resp.responses:
        for p in t.partitions:
            if p.error_code:
                raise errors.error_for_code(p.error_code, f"reset {t.topic_name}-"
                                            f"{p.partition_index}")


def share_member_rows(d: ShareDescribed) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for m in d.group.members:
        parts = sorted((tp.topic_name, p) for tp in m.assignment.topic_partitions
                       for p in tp.partitions)
        by_topic: dict[str, list[int]] = {}
        for t, p in parts:
            by_topic.setdefault(t, []).append(p)
        rows.append({"group": d.group.group_id, "consumer_id": m.member_id,
                     "host": m.client_host, "client_id": m.client_id,
                     "partitions": len(parts),
                     "assignment": ",".join(f"{t}:{','.join(map(str, ps))}"
                                            for t, ps in by_topic.items()) or None,
                     "member_epoch": m.member_epoch})
    return rows


def share_state_row(d: ShareDescribed) -> dict[str, object]:
    g = d.group
    return {"group": g.group_id, "coordinator": d.coordinator_address,
            "coordinator_id": d.coordinator, "state": g.group_state, "type": "share",
            "members": len(g.members), "group_epoch": g.group_epoch,
            "assignment_epoch": g.assignment_epoch}
