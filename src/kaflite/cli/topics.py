"""``kaflite topics``: list, describe, create, alter and delete topics, as kafka-topics.sh.

``describe`` prints kafka-topics' layout, one summary line per topic then one line per
partition, its fields separated by tabs (shown here as ``|``; a partition line starts
with a tab)::

    Topic: t|TopicId: 0CUPzAkZRfqkgRmyv3BvNQ|PartitionCount: 3|ReplicationFactor: 3|Configs: retention.ms=60000
    |Topic: t|Partition: 0|Leader: 1|Replicas: 1,2,0|Isr: 1,2,0|Elr: N/A|LastKnownElr: N/A

``Configs`` lists the configs that are not defaults (Kafka's ``!isDefault()``); the
topic id is Kafka's base64 form. kaflite's brokers answer Metadata, not
DescribeTopicPartitions, so the eligible leader replicas are unknown: ``N/A``, as
kafka-topics.sh prints them against such a broker. ``list`` prints one name a line,
internal topics included unless ``--exclude-internal`` (as Kafka); ``create`` prints
``Created topic t.``; ``alter`` and ``delete`` print nothing. Every command takes
``--json`` and ``-X name=value`` (an admin client property).
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

from kaflite._loop import run
from kaflite.cli._options import FIND, Bootstrap, ClientProps, CommandConfig, client_config
from kaflite.cli._output import JsonOption, emit_json, emit_lines

if TYPE_CHECKING:
    from kaflite.client import Admin
    from kaflite.client.admin import ConfigEntry
    from kaflite.client.metadata import TopicMetadata

app = typer.Typer(rich_markup_mode=None, no_args_is_help=True,
                  help="List, describe, create, alter and delete topics (kaflite or any "
                       "Kafka), as kafka-topics.sh.")

T = TypeVar("T")
ExcludeInternal = Annotated[bool, typer.Option(
    "--exclude-internal", help="leave out internal topics (__consumer_offsets...)")]


def with_admin(bootstrap: str, props: list[str] | None,
               call: Callable[[Admin], Awaitable[T]], client_id: str = "kaflite-topics") -> T:
    """Run ``call`` with an admin client (``-X`` properties applied) and return its result."""

    async def go() -> T:
        from kaflite.client import Admin

        async with Admin(client_config(bootstrap, client_id, props)) as admin:
            return await call(admin)

    return run(go())


def topic_id_text(topic_id: uuid.UUID) -> str:
    """A topic id as Kafka prints it (``Uuid.toString``: URL-safe base64, no padding)."""
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode()


def parse_configs(items: list[str] | None, option: str) -> dict[str, str]:
    """``name=value`` items (repeatable options) as a dict; a bad one is a usage error."""
    out: dict[str, str] = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise typer.BadParameter(f"expected name=value, got {item!r}", param_hint=option)
        out[name.strip()] = value.strip()
    return out


@app.command("list")
def list_topics(bootstrap: Bootstrap = FIND, exclude_internal: ExcludeInternal = False,
                as_json: JsonOption = False, props: ClientProps = None,
                command_config: CommandConfig = None) -> None:
    """Print every topic name, one a line."""
    names = sorted(with_admin(bootstrap, props, lambda a: a.list_topics(not exclude_internal)))
    if as_json:
        emit_json([{"topic": n} for n in names])
    else:
        emit_lines(names)


def describe_rows(described: dict[str, TopicMetadata],
                  configs: dict[str, list[ConfigEntry]]) -> list[dict[str, object]]:
    """kafka-topics' describe as JSON objects, one a topic."""
    out: list[dict[str, object]] = []
    for name in sorted(described):
        md = described[name]
        parts = sorted(md.partitions, key=lambda p: p.partition)
        out.append({
            "topic": name,
            "topic_id": topic_id_text(md.topic_id) if md.topic_id.int else None,
            "partition_count": len(parts),
            "replication_factor": len(parts[0].replicas) if parts else 0,
            "configs": {e.name: e.value for e in sorted(configs.get(name, []),
                                                        key=lambda e: e.name)
                        if not e.is_default},
            "partitions": [{"partition": p.partition,
                            "leader": p.leader if p.leader >= 0 else None,
                            "leader_epoch": p.leader_epoch, "replicas": list(p.replicas),
                            "isr": list(p.isr), "offline_replicas": list(p.offline),
                            "elr": None, "last_known_elr": None} for p in parts],
        })
    return out


def describe_lines(rows: list[dict[str, object]]) -> list[str]:
    """kafka-topics.sh --describe's lines for ``describe_rows``."""

    def ids(values: object) -> str:
        return ",".join(str(v) for v in values) if isinstance(values, list) else ""

    lines = []
    for t in rows:
        configs = t["configs"]
        assert isinstance(configs, dict)
        head = f"Topic: {t['topic']}"
        if t["topic_id"] is not None:
            head += f"\tTopicId: {t['topic_id']}"
        head += (f"\tPartitionCount: {t['partition_count']}"
                 f"\tReplicationFactor: {t['replication_factor']}"
                 f"\tConfigs: {','.join(f'{k}={v}' for k, v in configs.items())}")
        lines.append(head)
        partitions = t["partitions"]
        assert isinstance(partitions, list)
        for p in partitions:
            leader = "none" if p["leader"] is None else p["leader"]
            elr = "N/A" if p["elr"] is None else ids(p["elr"])
            last = "N/A" if p["last_known_elr"] is None else ids(p["last_known_elr"])
            lines.append(f"\tTopic: {t['topic']}\tPartition: {p['partition']}\tLeader: {leader}"
                         f"\tReplicas: {ids(p['replicas'])}\tIsr: {ids(p['isr'])}"
                         f"\tElr: {elr}\tLastKnownElr: {last}")
    return lines


@app.command("describe")
def describe(topics: Annotated[list[str] | None, typer.Argument(
                 help="topic names (default: every topic)", show_default=False)] = None,
             bootstrap: Bootstrap = FIND, exclude_internal: ExcludeInternal = False,
             as_json: JsonOption = False, props: ClientProps = None,
             command_config: CommandConfig = None) -> None:
    """Partitions with leader, replicas and ISR, and the topic's non-default configs."""
    from kaflite.client.admin import TOPIC, ConfigResource

    async def go(admin: Admin) -> tuple[dict[str, TopicMetadata],
                                        dict[str, list[ConfigEntry]]]:
        names = list(topics or await admin.list_topics(not exclude_internal))
        described = await admin.describe_topics(names)
        entries = await admin.describe_config_entries(ConfigResource(TOPIC, n) for n in names)
        return described, {res.name: e for res, e in entries.items()}

    described, configs = with_admin(bootstrap, props, go)
    rows = describe_rows(described, configs)
    if as_json:
        emit_json(rows)
    else:
        emit_lines(describe_lines(rows))


@app.command("create")
def create(name: str, bootstrap: Bootstrap = FIND,
           partitions: Annotated[int | None, typer.Option(
               "--partitions", "-p", help="default: the cluster's num.partitions")] = None,
           replication_factor: Annotated[int | None, typer.Option(
               "--replication-factor", "-r",
               help="default: the cluster's default.replication.factor")] = None,
           config: Annotated[list[str] | None, typer.Option(
               "--config", "-c", help="topic config as name=value (repeatable)")] = None,
           if_not_exists: Annotated[bool, typer.Option(
               "--if-not-exists", help="no error if the topic exists already")] = False,
           as_json: JsonOption = False, props: ClientProps = None,
           command_config: CommandConfig = None) -> None:
    """Create a topic."""
    from kaflite.client import NewTopic
    from kaflite.protocol import errors

    configs = parse_configs(config, "--config")

    async def go(admin: Admin) -> tuple[bool, TopicMetadata]:
        created = True
        try:
            await admin.create_topics([NewTopic(name, -1 if partitions is None else partitions,
                                                -1 if replication_factor is None
                                                else replication_factor, configs)])
        except errors.TopicAlreadyExistsError:
            if not if_not_exists:
                raise
            created = False
        return created, (await admin.describe_topics([name]))[name]

    created, md = with_admin(bootstrap, props, go)
    if as_json:
        emit_json({"topic": name, "created": created,
                   "topic_id": topic_id_text(md.topic_id) if md.topic_id.int else None,
                   "partitions": len(md.partitions),
                   "replication_factor": len(md.partitions[0].replicas) if md.partitions
                   else 0, "configs": configs})
    elif created:
        typer.echo(f"Created topic {name}.")


@app.command("alter")
def alter(name: str,
          partitions: Annotated[int, typer.Option(
              "--partitions", "-p", help="the new (higher) partition count")],
          bootstrap: Bootstrap = FIND, as_json: JsonOption = False,
          props: ClientProps = None,
          command_config: CommandConfig = None) -> None:
    """Raise a topic's partition count (as kafka-topics.sh --alter --partitions)."""

    async def go(admin: Admin) -> int:
        await admin.create_partitions({name: partitions})
        return len((await admin.describe_topics([name]))[name].partitions)

    count = with_admin(bootstrap, props, go)
    if as_json:
        emit_json({"topic": name, "partitions": count})


@app.command("delete")
def delete(names: list[str], bootstrap: Bootstrap = FIND,
           if_exists: Annotated[bool, typer.Option(
               "--if-exists", help="no error for a topic that does not exist")] = False,
           as_json: JsonOption = False, props: ClientProps = None,
           command_config: CommandConfig = None) -> None:
    """Delete topics."""
    from kaflite.protocol import errors

    async def go(admin: Admin) -> list[dict[str, object]]:
        out: list[dict[str, object]] = []
        for n in names:
            try:
                await admin.delete_topics([n])
                out.append({"topic": n, "deleted": True})
            except errors.UnknownTopicOrPartitionError:
                if not if_exists:
                    raise
                out.append({"topic": n, "deleted": False})
        return out

    rows = with_admin(bootstrap, props, go)
    if as_json:
        emit_json(rows)
