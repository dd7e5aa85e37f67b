"""``kaflite groups``: consumer groups, as kafka-consumer-groups.sh shows and resets them;
share groups as kafka-share-groups.sh shows them (``_share_groups``).

    kaflite groups list [--type consumer]     GROUP  [TYPE]  PROTOCOL-TYPE  STATE
    kaflite groups describe G                 GROUP TOPIC PARTITION CURRENT-OFFSET
                                              LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID
    kaflite groups describe G --members       GROUP CONSUMER-ID HOST CLIENT-ID #PARTITIONS
    kaflite groups describe G --state         GROUP COORDINATOR (ID) ASSIGNMENT-STRATEGY
                                              STATE #MEMBERS
    ... --members --verbose (consumer groups) + CURRENT-EPOCH CURRENT-ASSIGNMENT
                                              TARGET-EPOCH TARGET-ASSIGNMENT RECONCILING
    ... --state --verbose (consumer groups)   + GROUP-EPOCH TARGET-ASSIGNMENT-EPOCH
    kaflite groups reset-offsets G --topic T --to-earliest [--execute]
                                              GROUP TOPIC PARTITION NEW-OFFSET
    kaflite groups delete G

``describe`` follows Kafka's rows: one per assigned partition (members with the most
partitions first), then the partitions the group committed but nobody is assigned
(consumer ``-``); ``LAG`` is the log end offset minus the committed offset. An empty
group says so on stderr, a missing one is an error. A consumer (KIP-848) group, which
DescribeGroups does not describe, is described with ConsumerGroupDescribe. ``reset-offsets`` takes Kafka's
scopes (``--topic T`` or ``T:0,2``, repeatable; ``--all-topics``: the topics the group
has offsets for) and specs (``--to-earliest``, ``--to-latest``, ``--to-current``,
``--to-offset N``, ``--shift-by N``, ``--to-datetime 2024-01-31T10:00:00.000``); a
target outside the log is clamped to its start or end, as Kafka's. It is a dry run
(the plan is printed) unless ``--execute``, and refuses a group that has members.
Every command takes ``--json`` and ``-X name=value`` (an admin client property).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Annotated

import typer

from kaflite.cli._consumer_groups import consumer_member_rows
from kaflite.cli._options import FIND, Bootstrap, ClientProps, CommandConfig
from kaflite.cli._output import Column, JsonOption, Row, emit, emit_json, table_lines
from kaflite.cli._share_groups import (
    ShareDescribed,
    alter_share_offsets,
    describe_share_group,
    share_positions,
)
from kaflite.cli.topics import with_admin

if TYPE_CHECKING:
    from kaflite.client import Admin, TopicPartition
    from kaflite.client.admin import ConsumerGroupDescription, GroupDescription, GroupListing
    from kaflite.client.consumer._types import OffsetAndMetadata

app = typer.Typer(rich_markup_mode=None, no_args_is_help=True,
                  help="List, describe, reset and delete consumer groups, as "
                       "kafka-consumer-groups.sh.")

CLIENT_ID = "kaflite-groups"
REBALANCING = ("PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling")

LIST_COLUMNS = [Column("group", "GROUP"), Column("protocol_type", "PROTOCOL-TYPE"),
                Column("state", "STATE")]
OFFSET_COLUMNS = [Column("group", "GROUP"), Column("topic", "TOPIC"),
                  Column("partition", "PARTITION"), Column("current_offset", "CURRENT-OFFSET"),
                  Column("log_end_offset", "LOG-END-OFFSET"), Column("lag", "LAG"),
                  Column("consumer_id", "CONSUMER-ID"), Column("host", "HOST"),
                  Column("client_id", "CLIENT-ID")]
MEMBER_COLUMNS = [Column("group", "GROUP"), Column("consumer_id", "CONSUMER-ID"),
                  Column("group_instance_id", "GROUP-INSTANCE-ID"), Column("host", "HOST"),
                  Column("client_id", "CLIENT-ID"), Column("partitions", "#PARTITIONS")]
STATE_COLUMNS = [Column("group", "GROUP"), Column("coordinator", "COORDINATOR (ID)"),
                 Column("assignment_strategy", "ASSIGNMENT-STRATEGY"),
                 Column("state", "STATE"), Column("members", "#MEMBERS")]
TYPED_LIST_COLUMNS = [LIST_COLUMNS[0], Column("type", "TYPE"), *LIST_COLUMNS[1:]]
# kafka-consumer-groups.sh --describe --members --verbose / --state --verbose, for
# consumer (KIP-848) groups; RECONCILING is kaflite's: the member is not at its target yet.
CONSUMER_MEMBER_COLUMNS = [*MEMBER_COLUMNS, Column("current_epoch", "CURRENT-EPOCH"),
                           Column("current_assignment", "CURRENT-ASSIGNMENT"),
                           Column("target_epoch", "TARGET-EPOCH"),
                           Column("target_assignment", "TARGET-ASSIGNMENT"),
                           Column("reconciling", "RECONCILING")]
VERBOSE_STATE_COLUMNS = [*STATE_COLUMNS[:4], Column("group_epoch", "GROUP-EPOCH"),
                         Column("assignment_epoch", "TARGET-ASSIGNMENT-EPOCH"),
                         STATE_COLUMNS[4]]
RESET_COLUMNS = [Column("group", "GROUP"), Column("topic", "TOPIC"),
                 Column("partition", "PARTITION"), Column("new_offset", "NEW-OFFSET")]


@app.command("list")
def list_groups(bootstrap: Bootstrap = FIND,
                state: Annotated[list[str] | None, typer.Option(
                    "--state", help="only groups in this state (repeatable; Stable, Empty...)")]
                = None,
                group_type: Annotated[list[str] | None, typer.Option(
                    "--type", help="only groups of this type (repeatable: classic, consumer, "
                                   "share); "
                                   "shows the TYPE column")] = None,
                as_json: JsonOption = False, props: ClientProps = None,
                command_config: CommandConfig = None) -> None:
    """Every group with its protocol type and state (and type, with --type)."""
    wanted = {s.lower() for s in state or []}
    types = {t.lower() for t in group_type or []}
    async def listings(admin: Admin) -> list[GroupListing]:
        return await admin.list_group_listings()

    rows = [{"group": g.group_id, "type": g.type or None,
             "protocol_type": g.protocol_type or None, "state": g.state}
            for g in with_admin(bootstrap, props, listings, CLIENT_ID)
            if (not wanted or g.state.lower() in wanted)
            and (not types or g.type.lower() in types)]
    emit(rows, TYPED_LIST_COLUMNS if types else LIST_COLUMNS, as_json)


def _tp_key(tp: TopicPartition) -> tuple[str, int]:
    return tp.topic, tp.partition


def offset_rows(desc: GroupDescription, committed: dict[TopicPartition, OffsetAndMetadata],
                ends: dict[TopicPartition, int | None]) -> list[dict[str, object]]:
    """kafka-consumer-groups' offset rows: assigned partitions by member (most partitions
    first), then committed partitions nobody is assigned."""
    rows: list[dict[str, object]] = []

    def row(tp: TopicPartition, member: str | None, host: str | None,
            client: str | None) -> dict[str, object]:
        current = committed[tp].offset if tp in committed else None
        end = ends.get(tp)
        return {"group": desc.group_id, "topic": tp.topic, "partition": tp.partition,
                "current_offset": current, "log_end_offset": end,
                "lag": end - current if end is not None and current is not None else None,
                "consumer_id": member, "host": host, "client_id": client}

    assigned: set[TopicPartition] = set()
    for m in sorted((m for m in desc.members if m.assignment),
                    key=lambda m: -len(m.assignment)):
        for tp in sorted(m.assignment, key=_tp_key):
            assigned.add(tp)
            rows.append(row(tp, m.member_id, m.client_host, m.client_id))
    for tp in sorted(set(committed) - assigned, key=_tp_key):
        rows.append(row(tp, None, None, None))
    return rows


def member_rows(desc: GroupDescription) -> list[dict[str, object]]:
    return [{"group": desc.group_id, "consumer_id": m.member_id,
             "group_instance_id": m.group_instance_id, "host": m.client_host,
             "client_id": m.client_id, "partitions": len(m.assignment),
             "assignment": [f"{tp.topic}-{tp.partition}"
                            for tp in sorted(m.assignment, key=_tp_key)]}
            for m in desc.members]


def state_row(desc: GroupDescription) -> dict[str, object]:
    c = desc.coordinator
    return {"group": desc.group_id,
            "coordinator": f"{c.host}:{c.port}  ({c.node_id})" if c is not None else None,
            "coordinator_id": c.node_id if c is not None else None,
            "assignment_strategy": desc.protocol or None, "state": desc.state,
            "members": len(desc.members)}


@dataclass
class Described:
    desc: GroupDescription | None
    offsets: list[dict[str, object]]
    modern: ConsumerGroupDescription | None = None   # a consumer (KIP-848) group
    share: ShareDescribed | None = None              # a share group (KIP-932)


def _from_modern(modern: ConsumerGroupDescription) -> GroupDescription:
    from kaflite.client.admin import GroupDescription, MemberDescription

    return GroupDescription(
        modern.group_id, modern.state, "consumer", modern.assignor,
        [MemberDescription(m.member_id, m.instance_id, m.client_id, m.client_host,
                           list(m.assignment)) for m in modern.members], modern.coordinator)


async def _describe(admin: Admin, group: str, offsets: bool, verbose: bool = False
                    ) -> Described:
    from kaflite.protocol import errors

    desc = (await admin.describe_groups([group]))[group]
    modern = None
    if desc.state == "Dead":
        try:
            modern = (await admin.describe_consumer_groups([group]))[group]
        except errors.GroupIdNotFoundError:
            share = await describe_share_group(admin, group, offsets, verbose)
            if share is not None:
                return Described(None, share.offsets, share=share)
            raise errors.GroupIdNotFoundError(
                f"Consumer group '{group}' does not exist.") from None
        desc = _from_modern(modern)
    if not offsets:
        return Described(desc, [], modern)
    committed = await admin.list_group_offsets(group)
    tps = set(committed) | {tp for m in desc.members for tp in m.assignment}
    listed = await admin.list_offsets({tp: "latest" for tp in tps}) if tps else {}
    ends = {tp: (o.offset if o is not None and o.offset >= 0 else None)
            for tp, o in listed.items()}
    return Described(desc, offset_rows(desc, committed, ends), modern)


@app.command("describe")
def describe(groups: Annotated[list[str] | None, typer.Argument(
                 help="group ids", show_default=False)] = None,
             bootstrap: Bootstrap = FIND,
             all_groups: Annotated[bool, typer.Option(
                 "--all-groups", help="describe every group")] = False,
             members: Annotated[bool, typer.Option(
                 "--members", help="the members instead of the offsets")] = False,
             state: Annotated[bool, typer.Option(
                 "--state", help="the group's state and coordinator instead of the offsets")]
             = False,
             verbose: Annotated[bool, typer.Option(
                 "--verbose", help="with --members or --state: epochs, current and target "
                                   "assignments of consumer (KIP-848) groups; for share "
                                   "groups also end offset, in-flight records and delivery "
                                   "counts")] = False,
             as_json: JsonOption = False, props: ClientProps = None,
             command_config: CommandConfig = None) -> None:
    """Per partition: committed offset, log end offset, lag and the consumer that owns it."""
    if members and state:
        raise typer.BadParameter("--members and --state are exclusive", param_hint="--state")
    if not groups and not all_groups:
        raise typer.BadParameter("name a group, or pass --all-groups", param_hint="GROUPS")

    async def go(admin: Admin) -> list[Described]:
        ids = list(groups or [])
        if all_groups:
            ids = [g.group_id for g in await admin.list_group_listings()]
        return [await _describe(admin, g, not members and not state, verbose) for g in ids]

    described = with_admin(bootstrap, props, go, CLIENT_ID)
    rows: list[dict[str, object]] = []
    lines: list[str] = []
    for d in described:
        desc, modern = d.desc, d.modern
        if desc is None:
            group_rows, columns = _share_rows(d, members, state, verbose)
        elif state:
            group_rows = [state_row(desc)]
            columns = STATE_COLUMNS
            if modern is not None:
                group_rows[0].update(group_epoch=modern.group_epoch,
                                     assignment_epoch=modern.assignment_epoch, type="consumer")
                columns = VERBOSE_STATE_COLUMNS if verbose else STATE_COLUMNS
        else:
            _warn_state(desc)
            if members and modern is not None:
                group_rows = consumer_member_rows(modern)
                columns = CONSUMER_MEMBER_COLUMNS if verbose else MEMBER_COLUMNS
            else:
                group_rows = member_rows(desc) if members else d.offsets
                columns = MEMBER_COLUMNS if members else OFFSET_COLUMNS
            if members and not any(r["group_instance_id"] for r in group_rows):
                columns = [c for c in columns if c.key != "group_instance_id"]
        rows += group_rows
        if group_rows:
            lines += ["", *table_lines(group_rows, columns)]
    if as_json:
        emit_json(rows)
    else:
        for line in lines[1:]:
            typer.echo(line)


def _share_rows(d: Described, members: bool, state: bool, verbose: bool
                ) -> tuple[list[dict[str, object]], list[Column]]:
    """A share group's rows and columns (see ``_share_groups``)."""
    from kaflite.cli import _share_groups as sg

    assert d.share is not None
    if state:
        return [sg.share_state_row(d.share)], \
            sg.VERBOSE_SHARE_STATE_COLUMNS if verbose else sg.SHARE_STATE_COLUMNS
    if not d.share.group.members:
        typer.echo(f"Share group '{d.share.group.group_id}' has no active members.", err=True)
    if members:
        return sg.share_member_rows(d.share), \
            sg.VERBOSE_SHARE_MEMBER_COLUMNS if verbose else sg.SHARE_MEMBER_COLUMNS
    return d.offsets, sg.VERBOSE_SHARE_OFFSET_COLUMNS if verbose else sg.SHARE_OFFSET_COLUMNS


def _warn_state(desc: GroupDescription) -> None:
    if desc.state == "Empty":
        typer.echo(f"Consumer group '{desc.group_id}' has no active members.", err=True)
    elif desc.state in REBALANCING:
        typer.echo(f"Warning: Consumer group '{desc.group_id}' is rebalancing.", err=True)


def parse_scope(topics: Iterable[str]) -> tuple[list[str], list[tuple[str, int]]]:
    """``--topic`` values: whole topics, and ``topic:0,2`` partitions."""
    whole: list[str] = []
    parts: list[tuple[str, int]] = []
    for arg in topics:
        name, sep, partitions = arg.partition(":")
        if not sep:
            whole.append(arg)
            continue
        try:
            parts += [(name, int(p)) for p in partitions.split(",")]
        except ValueError:
            raise typer.BadParameter(f"Invalid topic arg '{arg}', expected topic name and "
                                     "partitions", param_hint="--topic") from None
    return whole, parts


def clamp(wanted: int, start: int | None, end: int | None) -> int:
    """Kafka's checkOffsetsRange: past the end is the end, before the start the start."""
    if end is not None and wanted > end:
        return end
    if start is not None and wanted < start:
        return start
    return wanted


def _timestamp(text: str) -> int:
    """Kafka's --to-datetime (``YYYY-MM-DDTHH:mm:SS.sss``, local time unless a zone is
    given) in epoch milliseconds."""
    try:
        return int(datetime.fromisoformat(text).timestamp() * 1000)
    except ValueError:
        raise typer.BadParameter(f"expected YYYY-MM-DDTHH:mm:SS.sss, got {text!r}",
                                 param_hint="--to-datetime") from None


async def apply_reset(admin: Admin, group: str, topics: list[str], all_topics: bool,
                      spec: tuple[str, int | None], *, execute: bool = True
                      ) -> dict[TopicPartition, int]:
    """Plan the group's new offsets (``plan_reset``) and, with ``execute``, set them: a
    consumer group's committed offsets, or a share group's start offsets (KIP-932's
    AlterShareGroupOffsets). ``kaflite groups reset-offsets`` and the console both
    reset through here."""
    share = await share_positions(admin, group)    # None: not a share group
    plan = await plan_reset(admin, group, topics, all_topics, spec, share)
    if execute and plan:
        if share is None:
            await admin.alter_group_offsets(group, plan)
        else:
            await alter_share_offsets(admin, group, plan)
    return plan


async def plan_reset(admin: Admin, group: str, topics: list[str], all_topics: bool,
                     spec: tuple[str, int | None],
                     share: dict[TopicPartition, int] | None = None) -> dict[TopicPartition, int]:
    """The new offset of every partition in scope; raises NonEmptyGroupError for a
    group with members, as Kafka refuses it. ``share``: a share group's start offsets,
    which stand for the committed ones."""
    from kaflite.client import TopicPartition
    from kaflite.protocol import errors

    if share is None:
        desc = (await admin.describe_groups([group]))[group]
        if desc.state not in ("Empty", "Dead"):
            raise errors.NonEmptyGroupError(
                f"Assignments can only be reset if the group '{group}' is inactive, but the "
                f"current state is {desc.state}.")
        committed = await admin.list_group_offsets(group)
    else:
        from kaflite.client.consumer._types import OffsetAndMetadata

        committed = {tp: OffsetAndMetadata(offset) for tp, offset in share.items()}
    if all_topics:
        tps = sorted(committed, key=_tp_key)
    else:
        whole, parts = parse_scope(topics)
        tps = [TopicPartition(t, p) for t, p in parts]
        if whole:
            described = await admin.describe_topics(whole)
            tps += [TopicPartition(t, p.partition) for t in whole
                    for p in sorted(described[t].partitions, key=lambda p: p.partition)]

    async def offsets(query: int | str) -> dict[TopicPartition, int | None]:
        got = await admin.list_offsets({tp: query for tp in tps}) if tps else {}
        return {tp: (o.offset if o is not None and o.offset >= 0 else None)
                for tp, o in got.items()}

    kind, value = spec
    starts, ends = await offsets("earliest"), await offsets("latest")
    out: dict[TopicPartition, int] = {}
    for tp in tps:
        start, end = starts.get(tp), ends.get(tp)
        current = committed[tp].offset if tp in committed else None
        if kind == "earliest" or kind == "latest":
            target = start if kind == "earliest" else end
            if target is None:
                raise errors.LeaderNotAvailableError(
                    f"Error getting {'starting' if kind == 'earliest' else 'ending'} "
                    f"offset of topic partition: {tp.topic}-{tp.partition}")
            out[tp] = target
        elif kind == "current":
            out[tp] = current if current is not None else end if end is not None else 0
        elif kind == "offset":
            out[tp] = clamp(value or 0, start, end)
        elif kind == "shift":
            if current is None:
                raise typer.BadParameter(
                    f"Cannot shift offset for partition {tp.topic}-{tp.partition} since there "
                    "is no current committed offset", param_hint="--shift-by")
            out[tp] = clamp(current + (value or 0), start, end)
    if kind == "datetime" and value is not None:
        at = await offsets(value)
        for tp in tps:
            found = at.get(tp)
            out[tp] = found if found is not None else ends.get(tp) or 0
    return out


@app.command("reset-offsets")
def reset_offsets(
    group: str,
    bootstrap: Bootstrap = FIND,
    topic: Annotated[list[str] | None, typer.Option(
        "--topic", help="a topic, or topic:0,1 for some partitions (repeatable)")] = None,
    all_topics: Annotated[bool, typer.Option(
        "--all-topics", help="every topic the group has committed offsets for")] = False,
    to_earliest: Annotated[bool, typer.Option(
        "--to-earliest", help="the log start offsets")] = False,
    to_latest: Annotated[bool, typer.Option("--to-latest", help="the log end offsets")] = False,
    to_current: Annotated[bool, typer.Option(
        "--to-current", help="the committed offsets (the log end where none)")] = False,
    to_offset: Annotated[int | None, typer.Option(
        "--to-offset", help="offset N (clamped to the log)")] = None,
    shift_by: Annotated[int | None, typer.Option(
        "--shift-by", help="move the committed offsets by N (negative: back)")] = None,
    to_datetime: Annotated[str | None, typer.Option(
        "--to-datetime", help="the first offset at or after YYYY-MM-DDTHH:mm:SS.sss")] = None,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="print the plan only (the default)")] = False,
    execute: Annotated[bool, typer.Option("--execute", help="commit the new offsets")]
    = False,
    as_json: JsonOption = False, props: ClientProps = None,
    command_config: CommandConfig = None,
) -> None:
    """Move a group's committed offsets (the group must have no members)."""
    specs: list[tuple[str, int | None]] = [
        (kind, value) for kind, value, given in (
            ("earliest", None, to_earliest), ("latest", None, to_latest),
            ("current", None, to_current), ("offset", to_offset, to_offset is not None),
            ("shift", shift_by, shift_by is not None),
            ("datetime", _timestamp(to_datetime) if to_datetime else None,
             to_datetime is not None)) if given]
    if len(specs) != 1:
        raise typer.BadParameter("give exactly one of --to-earliest, --to-latest, "
                                 "--to-current, --to-offset, --shift-by, --to-datetime")
    if bool(topic) == all_topics:
        raise typer.BadParameter("give --topic or --all-topics (one of them)",
                                 param_hint="--topic")
    if dry_run and execute:
        raise typer.BadParameter("--dry-run and --execute are exclusive", param_hint="--execute")
    if not execute:
        typer.echo("WARN: No action will be performed as the --execute option is missing.",
                   err=True)

    plan = with_admin(bootstrap, props, lambda admin: apply_reset(
        admin, group, topic or [], all_topics, specs[0], execute=execute), CLIENT_ID)
    rows: list[Row] = [{"group": group, "topic": tp.topic, "partition": tp.partition,
                        "new_offset": offset}
                       for tp, offset in sorted(plan.items(), key=lambda kv: _tp_key(kv[0]))]
    emit(rows, RESET_COLUMNS, as_json)


@app.command("delete")
def delete(groups: list[str], bootstrap: Bootstrap = FIND, as_json: JsonOption = False,
           props: ClientProps = None,
           command_config: CommandConfig = None) -> None:
    """Delete groups (they must have no members)."""
    with_admin(bootstrap, props, lambda a: a.delete_groups(groups), CLIENT_ID)
    if as_json:
        emit_json([{"group": g, "deleted": True} for g in groups])
    else:
        typer.echo(f"Deletion of requested consumer groups ({', '.join(map(repr, groups))}) "
                   "was successful.")
