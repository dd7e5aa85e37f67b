"""``kaflite configs``: describe and alter topic, broker and group configs, as kafka-configs.sh.

    kaflite configs describe --entity-type topics --entity-name t [--all]
    kaflite configs describe --topic t            (Kafka's shortcut; --broker 0 likewise)
    kaflite configs alter --entity-type groups --entity-name g \\
        --add-config consumer.session.timeout.ms=50000   (Kafka 4's group configs; --group g)
    kaflite configs alter --entity-type topics --entity-name t \\
        --add-config retention.ms=60000,cleanup.policy=[compact,delete] --delete-config k
    kaflite configs alter --entity-type brokers --entity-default \\
        --add-config log.retention.ms=3600000    (every broker; --entity-name 0: one broker)

``describe`` prints kafka-configs' layout::

    Dynamic configs for topic t are:
      retention.ms=60000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=60000, ...}

the configs set on the entity itself (``DYNAMIC_TOPIC_CONFIG``, ``DYNAMIC_BROKER_CONFIG``)
or, with ``--all``, every config; without ``--entity-name`` every topic (or broker, or
listed group). A group carries configs whether or not it exists yet, as in Kafka.
``alter`` sets and deletes through IncrementalAlterConfigs, refuses to delete a config
that is not set (``Invalid config(s): k``), and prints ``Completed updating config for
topic t.`` Kafka's ``--add-config`` syntax: ``k=v`` pairs split at commas, a value with
commas in square brackets. Both take ``--json`` and ``-X name=value``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated

import typer

from kaflite.cli._options import FIND, Bootstrap, ClientProps, CommandConfig
from kaflite.cli._output import JsonOption, emit_json, emit_lines
from kaflite.cli.topics import with_admin

if TYPE_CHECKING:
    from kaflite.client import Admin
    from kaflite.client.admin import ConfigEntry

app = typer.Typer(rich_markup_mode=None, no_args_is_help=True,
                  help="Describe and alter topic, broker and group configs, as kafka-configs.sh.")

CLIENT_ID = "kaflite-configs"
TYPES = {"topics": 2, "brokers": 4, "groups": 32}      # ConfigResource types
DYNAMIC = {"topics": "DYNAMIC_TOPIC_CONFIG", "brokers": "DYNAMIC_BROKER_CONFIG",
           "groups": "DYNAMIC_GROUP_CONFIG"}
SPLIT = re.compile(r",(?=[^\]]*(?:\[|$))")             # commas outside [...]

EntityType = Annotated[str | None, typer.Option(
    "--entity-type", help="topics, brokers or groups", show_default=False)]
EntityName = Annotated[str | None, typer.Option(
    "--entity-name", help="the topic name, broker id or group id (describe without it: all "
                          "of them)")]
TopicOpt = Annotated[str | None, typer.Option(
    "--topic", help="same as --entity-type topics --entity-name TOPIC")]
BrokerOpt = Annotated[str | None, typer.Option(
    "--broker", help="same as --entity-type brokers --entity-name BROKER")]
GroupOpt = Annotated[str | None, typer.Option(
    "--group", help="same as --entity-type groups --entity-name GROUP")]
DefaultOpt = Annotated[bool, typer.Option(
    "--entity-default", help="the brokers' cluster-wide default (with --entity-type brokers)")]
DEFAULT_SOURCE = "DYNAMIC_DEFAULT_BROKER_CONFIG"


def entity(entity_type: str | None, entity_name: str | None, topic: str | None,
           broker: str | None, group: str | None = None, default: bool = False
           ) -> tuple[str, str | None]:
    """(entity type, name or None for all; "" for the brokers' default) from Kafka's
    options or its shortcuts."""
    if default:
        if entity_type != "brokers" or entity_name is not None:
            raise typer.BadParameter("--entity-default goes with --entity-type brokers alone",
                                     param_hint="--entity-default")
        return "brokers", ""
    given: list[tuple[str, str | None]] = [
        (t, n) for t, n in (("topics", topic), ("brokers", broker), ("groups", group))
        if n is not None]
    if entity_type is not None:
        given.append((entity_type, entity_name))
    elif entity_name is not None:
        raise typer.BadParameter("--entity-name needs --entity-type", param_hint="--entity-type")
    if len(given) != 1:
        raise typer.BadParameter("give one entity: --entity-type (topics|brokers|groups) "
                                 "with --entity-name, or --topic, --broker or --group",
                                 param_hint="--entity-type")
    kind, name = given[0]
    if kind not in TYPES:
        raise typer.BadParameter(f"{kind!r}: kaflite describes topics, brokers and groups",
                                 param_hint="--entity-type")
    if kind == "brokers" and name is not None and not name.isdigit():
        raise typer.BadParameter(f"The entity name for brokers must be a valid integer broker "
                                 f"id, found: {name}", param_hint="--entity-name")
    return kind, name


def parse_add_config(text: str | None) -> dict[str, str]:
    """Kafka's ``--add-config``: ``k=v,k2=[a,b]`` (brackets keep commas in a value)."""
    out: dict[str, str] = {}
    for item in SPLIT.split(text or ""):
        if not item.strip():
            continue
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise typer.BadParameter(f"expected name=value, got {item!r}",
                                     param_hint="--add-config")
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        out[name.strip()] = value
    return out


def entry_row(e: ConfigEntry) -> dict[str, object]:
    return {"name": e.name, "value": e.value, "source": e.source, "sensitive": e.sensitive,
            "read_only": e.read_only,
            "synonyms": [{"name": s.name, "value": s.value, "source": s.source}
                         for s in e.synonyms]}


def _text(value: object) -> str:
    return "null" if value is None else str(value)   # as Java prints a null


def describe_lines(results: list[dict[str, object]], all_configs: bool) -> list[str]:
    """kafka-configs --describe's lines for ``describe``'s JSON objects."""
    lines = []
    for r in results:
        singular = str(r["entity_type"])[:-1]
        if r["entity_name"] == "":          # the brokers' cluster-wide default
            lines.append("Default configs for brokers in the cluster are:")
        elif not r["exists"]:
            lines.append(f"The {singular} '{r['entity_name']}' doesn't exist and doesn't "
                         "have dynamic config.")
            continue
        else:
            lines.append(f"{'All' if all_configs else 'Dynamic'} configs for {singular} "
                         f"{r['entity_name']} are:")
        configs = r["configs"]
        assert isinstance(configs, list)
        for c in configs:
            synonyms = ", ".join(f"{s['source']}:{s['name']}={_text(s['value'])}"
                                 for s in c["synonyms"])
            lines.append(f"  {c['name']}={_text(c['value'])} sensitive="
                         f"{str(c['sensitive']).lower()} synonyms={{{synonyms}}}")
    return lines


async def _names(admin: Admin, kind: str) -> list[str]:
    if kind == "topics":
        return list(await admin.list_topics(internal=True))
    if kind == "groups":
        return sorted({g.group_id for g in await admin.list_group_listings()})
    cluster = await admin.describe_cluster()
    return [str(b.node_id) for b in cluster["brokers"]]


@app.command("describe")
def describe(entity_type: EntityType = None, entity_name: EntityName = None,
             topic: TopicOpt = None, broker: BrokerOpt = None, group: GroupOpt = None,
             default: DefaultOpt = False, bootstrap: Bootstrap = FIND,
             all_configs: Annotated[bool, typer.Option(
                 "--all", help="every config, not only those set on the entity")] = False,
             as_json: JsonOption = False, props: ClientProps = None,
             command_config: CommandConfig = None) -> None:
    """The configs set on a topic, broker or group (with --all: every config), with their
    source and synonyms."""
    from kaflite.client.admin import ConfigResource

    kind, name = entity(entity_type, entity_name, topic, broker, group, default)

    async def go(admin: Admin) -> list[dict[str, object]]:
        # a group, or the brokers' default, has configs whether or not it is listed
        listed = name is None or (kind != "groups" and name != "")
        known = await _names(admin, kind) if listed else [name or ""]
        names = [name] if name is not None else sorted(known)
        out: list[dict[str, object]] = []
        for n in names:
            if n not in known:
                out.append({"entity_type": kind, "entity_name": n, "exists": False,
                            "configs": []})
                continue
            res = ConfigResource(TYPES[kind], n)
            entries = (await admin.describe_config_entries([res], include_synonyms=True))[res]
            wanted = DEFAULT_SOURCE if n == "" else DYNAMIC[kind]
            shown = sorted((e for e in entries if all_configs or e.source == wanted),
                           key=lambda e: e.name)
            out.append({"entity_type": kind, "entity_name": n, "exists": True,
                        "configs": [entry_row(e) for e in shown]})
        return out

    results = with_admin(bootstrap, props, go, CLIENT_ID)
    if as_json:
        emit_json(results)
    else:
        emit_lines(describe_lines(results, all_configs))


@app.command("alter")
def alter(entity_type: EntityType = None, entity_name: EntityName = None,
          topic: TopicOpt = None, broker: BrokerOpt = None, group: GroupOpt = None,
          default: DefaultOpt = False, bootstrap: Bootstrap = FIND,
          add_config: Annotated[str | None, typer.Option(
              "--add-config", help="k=v,k2=[a,b]: configs to set")] = None,
          delete_config: Annotated[str | None, typer.Option(
              "--delete-config", help="k,k2: configs to remove")] = None,
          as_json: JsonOption = False, props: ClientProps = None,
          command_config: CommandConfig = None) -> None:
    """Set and remove configs of one topic, broker or group."""
    from kaflite.client.admin import ConfigResource
    from kaflite.protocol import errors

    kind, name = entity(entity_type, entity_name, topic, broker, group, default)
    if name is None:
        raise typer.BadParameter("alter needs one entity: --entity-name", param_hint="--entity-name")
    to_set = parse_add_config(add_config)
    to_delete = [k.strip() for k in (delete_config or "").split(",") if k.strip()]
    if not to_set and not to_delete:
        raise typer.BadParameter("give --add-config and/or --delete-config",
                                 param_hint="--add-config")
    res = ConfigResource(TYPES[kind], name)

    async def go(admin: Admin) -> None:
        current = (await admin.describe_config_entries([res]))[res]
        wanted = DEFAULT_SOURCE if name == "" else DYNAMIC[kind]
        dynamic = {e.name for e in current if e.source == wanted}
        invalid = [k for k in to_delete if k not in dynamic]
        if invalid:
            raise errors.InvalidConfigError(f"Invalid config(s): {','.join(invalid)}")
        changes: dict[str, str | None] = {k: None for k in to_delete}
        changes.update(to_set)
        await admin.alter_configs({res: changes})

    with_admin(bootstrap, props, go, CLIENT_ID)
    if as_json:
        emit_json({"entity_type": kind, "entity_name": name, "set": to_set,
                   "deleted": to_delete})
    else:
        typer.echo("Completed updating default config for brokers in the cluster." if name == ""
                   else f"Completed updating config for {kind[:-1]} {name}.")
