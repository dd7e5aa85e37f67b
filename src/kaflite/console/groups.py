"""Consumer groups for the console: classic and consumer (KIP-848) groups, their
members, committed offsets and lag, offset resets and deletion.

It reuses what ``kaflite groups`` does (``cli/groups.py``): the same describe
(DescribeGroups, then ConsumerGroupDescribe for a consumer group), the same offset
rows (lag = log end offset - committed offset) and the same reset plan, which
Kafka allows on an empty group only.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

import typer

from kaflite.cli.groups import Described, _describe, apply_reset
from kaflite.client._group_admin import ConsumerGroupDescription
from kaflite.client.admin import GroupListing
from kaflite.client.consumer._types import TopicPartition
from kaflite.console.backend import ClientBackend
from kaflite.console.web import ApiError, Json
from kaflite.protocol import errors

__all__ = ["RESET_KINDS", "delete_group", "describe_group", "group_lag", "list_groups",
           "reset_group"]

RESET_KINDS = ("earliest", "latest", "timestamp", "offset", "shift", "duration")


def _type(listed_type: str) -> str:
    """ListGroups v5's group type; an older broker's groups are all classic."""
    return listed_type.lower() or "classic"


async def _lag_rows(backend: ClientBackend, group: str
                   ) -> tuple[int | None, int, list[Json], int | None]:
    """The group's total lag (None without committed offsets), its member count, its
    offset rows and its coordinator's node id (None when unknown), from one describe."""
    admin = await backend.admin()
    described = await _describe(admin, group, offsets=True)
    if described.desc is None:       # a share group: start offsets (SPSO) and their lags
        assert described.share is not None
        rows: list[Json] = [{"topic": r["topic"], "partition": r["partition"],
                             "committed": r["start_offset"], "log_end_offset": None,
                             "lag": r["lag"], "member_id": None} for r in described.offsets]
        members = len(described.share.group.members)
        coordinator: int | None = described.share.coordinator
    else:
        rows = [{"topic": r["topic"], "partition": r["partition"],
                 "committed": r["current_offset"], "log_end_offset": r["log_end_offset"],
                 "lag": r["lag"], "member_id": r["consumer_id"]} for r in described.offsets]
        members = len(described.desc.members)
        c = described.desc.coordinator
        coordinator = c.node_id if c is not None else None
    lags = [r["lag"] for r in rows if isinstance(r["lag"], int)]
    return (sum(lags) if lags else None), members, rows, coordinator


async def group_lag(backend: ClientBackend, group: str) -> tuple[int | None, list[Json]]:
    """The group's total lag (None when it has no committed offsets) and offset rows."""
    lag, _, rows, _ = await _lag_rows(backend, group)
    return lag, rows


async def list_groups(backend: ClientBackend) -> list[Json]:
    admin = await backend.admin()
    listed = await admin.list_group_listings()

    async def row(g: GroupListing) -> Json:
        lag: int | None = None
        members: int | None = None
        coordinator: int | None = None
        # a group that went away meanwhile, or a coordinator moving: no figures this time
        with contextlib.suppress(errors.KafkaError):
            lag, members, _, coordinator = await _lag_rows(backend, g.group_id)
        return {"group_id": g.group_id, "type": _type(g.type),
                "protocol_type": g.protocol_type, "state": g.state, "members": members,
                "lag": lag, "coordinator": coordinator}

    return list(await asyncio.gather(*(row(g) for g in listed)))


async def described_or_404(backend: ClientBackend, group: str) -> Described:
    """The group described with its offsets (``kaflite groups describe``'s answer);
    404 for a group the cluster does not know."""
    admin = await backend.admin()
    try:
        return await _describe(admin, group, offsets=True)
    except errors.GroupIdNotFoundError:
        raise ApiError(404, f"no group {group!r}") from None


async def describe_group(backend: ClientBackend, group: str) -> Json:
    described = await described_or_404(backend, group)
    desc = described.desc
    if desc is None:
        return _share_group(described)
    if desc.state == "Dead" and not desc.members and not described.offsets:
        raise ApiError(404, f"no group {group!r}")
    offsets: list[Json] = [{"topic": r["topic"], "partition": r["partition"],
                            "committed": r["current_offset"],
                            "log_end_offset": r["log_end_offset"], "lag": r["lag"],
                            "member_id": r["consumer_id"]} for r in described.offsets]
    lags = [r["lag"] for r in offsets if isinstance(r["lag"], int)]
    coordinator = desc.coordinator.node_id if desc.coordinator is not None else None
    members: list[Json] = [{"member_id": m.member_id, "client_id": m.client_id,
                            "host": m.client_host, "instance_id": m.group_instance_id,
                            "assignment": _tps(sorted(m.assignment))} for m in desc.members]
    out: Json = {
        "group_id": group,
        "type": "consumer" if described.modern is not None else "classic",
        "protocol_type": desc.protocol_type, "protocol": desc.protocol, "state": desc.state,
        "coordinator": coordinator,
        "members": members, "offsets": offsets, "lag": sum(lags)}
    if described.modern is not None:
        fields, by_member = _consumer_group(described.modern)
        out.update(fields)
        for member in members:
            member.update(by_member.get(str(member["member_id"]), {}))
    return out


def _tps(tps: list[TopicPartition]) -> list[Json]:
    return [{"topic": tp.topic, "partition": tp.partition} for tp in tps]


def _consumer_group(g: ConsumerGroupDescription) -> tuple[Json, dict[str, Json]]:
    """A consumer (KIP-848) group's epochs and, per member, its epoch, its current and
    target assignments and its state, told from them as Kafka's coordinator moves a
    member: ``unrevoked_partitions`` (behind the target epoch: it keeps its epoch until
    it has revoked what the target gives to others; those partitions are not in its
    described assignment), ``unreleased_partitions`` (at the target epoch, waiting for
    partitions of its target that another member has not released yet), ``stable``
    (at the target epoch, owning its target). ``waiting_for``: the partitions of its
    target it does not own yet, each with the member that holds it when one shows it."""
    owner = {tp: m.member_id for m in g.members for tp in m.assignment}
    members: dict[str, Json] = {}
    for m in g.members:
        owned, target = set(m.assignment), set(m.target_assignment)
        waiting = sorted(target - owned)
        state = ("unrevoked_partitions" if m.member_epoch < g.assignment_epoch
                 else "unreleased_partitions" if waiting
                 else "stable" if m.member_epoch == g.assignment_epoch else "unknown")
        members[m.member_id] = {
            "member_epoch": m.member_epoch, "member_state": state, "rack": m.rack_id,
            "subscribed_topics": list(m.subscribed_topic_names),
            "subscribed_regex": m.subscribed_topic_regex,
            "target_assignment": _tps(sorted(target)),
            "waiting_for": [{"topic": tp.topic, "partition": tp.partition,
                             "held_by": owner.get(tp)} for tp in waiting]}
    return {"group_epoch": g.group_epoch, "assignment_epoch": g.assignment_epoch,
            "assignor": g.assignor,
            "reconciling": sum(1 for m in members.values() if m["member_state"] != "stable")
            }, members


def _share_group(described: Described) -> Json:
    """A share group (KIP-932): members and their partitions; per partition the start
    offset (SPSO) and the lag, as ``kaflite groups describe`` shows them."""
    share = described.share
    assert share is not None
    g = share.group
    offsets: list[Json] = [{"topic": r["topic"], "partition": r["partition"],
                            "start_offset": r["start_offset"], "lag": r["lag"]}
                           for r in described.offsets]
    lags = [r["lag"] for r in offsets if isinstance(r["lag"], int)]
    return {
        "group_id": g.group_id, "type": "share", "protocol_type": "share", "protocol": None,
        "state": g.group_state, "coordinator": share.coordinator,
        "members": [{"member_id": m.member_id, "client_id": m.client_id,
                     "host": m.client_host, "instance_id": None,
                     "assignment": [{"topic": tp.topic_name, "partition": p}
                                    for tp in m.assignment.topic_partitions
                                    for p in sorted(tp.partitions)]}
                    for m in g.members],
        "offsets": offsets, "lag": sum(lags), "group_epoch": g.group_epoch,
        "assignment_epoch": g.assignment_epoch}


async def reset_group(backend: ClientBackend, group: str, to: str, *,
                      timestamp: int | None = None, offset: int | None = None,
                      topic: str | None = None, partitions: list[int] | None = None,
                      shift: int | None = None, duration_ms: int | None = None
                      ) -> list[Json]:
    """Reset the group's committed offsets, or a share group's start offsets (Kafka
    refuses it unless the group is empty): to the earliest or latest offset, an offset,
    a timestamp, ``duration_ms`` before now (kafka-consumer-groups' --by-duration), or
    ``shift`` records from the committed offset (--shift-by; negative: back)."""
    admin = await backend.admin()
    if topic is not None:
        await backend.describe_one(topic)          # 404 for an unknown topic
        scope = [f"{topic}:{','.join(map(str, partitions))}" if partitions else topic]
    else:
        scope = []
    spec: tuple[str, int | None] = (
        ("datetime", timestamp) if to == "timestamp"
        else ("datetime", int(time.time() * 1000) - (duration_ms or 0)) if to == "duration"
        else ("shift", shift) if to == "shift" else (to, offset))
    try:
        plan = await apply_reset(admin, group, scope, topic is None, spec)
    except typer.BadParameter as exc:      # shift: a partition with no committed offset
        raise ApiError(400, exc.message) from None
    if not plan:
        raise ApiError(400, f"group {group!r} has no committed offsets to reset; "
                            "name a topic")
    return [{"topic": tp.topic, "partition": tp.partition, "offset": off}
            for tp, off in sorted(plan.items())]


async def delete_group(backend: ClientBackend, group: str) -> None:
    admin = await backend.admin()
    await admin.delete_groups([group])
