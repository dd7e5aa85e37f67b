"""``kaflite acls``: ACLs, with kafka-acls.sh's options and output.

    kaflite acls add --allow-principal User:alice --operation READ --topic orders
    kaflite acls add --allow-principal User:bob --consumer --topic orders --group billing
    kaflite acls add --allow-principal User:alice --producer --topic orders [--idempotent]
    kaflite acls list [--topic orders] [--principal User:alice]
    kaflite acls remove --allow-principal User:alice --operation READ --topic orders --force

Resources: ``--topic``, ``--group``, ``--transactional-id`` (each repeatable) and
``--cluster``, named as ``--resource-pattern-type`` says (LITERAL by default for
add; for list and remove ANY, and MATCH lists what applies to a name). ``--producer``
grants WRITE, DESCRIBE and CREATE on the topics (and WRITE, DESCRIBE on the
transactional ids, IDEMPOTENT_WRITE on the cluster with ``--idempotent``);
``--consumer`` READ and DESCRIBE on the topics and READ on the groups. Hosts default
to ``*``, the operation to ALL. ``remove`` asks first unless ``--force``. The lines
printed are kafka-acls.sh's::

    Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`:
     <TAB>(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)

(``<TAB>`` is a tab.)
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

from kaflite.cli._options import FIND, Bootstrap, ClientProps
from kaflite.cli._output import JsonOption, emit_json, emit_lines
from kaflite.cli.topics import with_admin
from kaflite.security.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

if TYPE_CHECKING:
    from kaflite.client import Admin

app = typer.Typer(rich_markup_mode=None, no_args_is_help=True,
                  help="Add, list and remove ACLs (kafka-acls.sh).")

CLIENT_ID = "kaflite-acls"
Op, RT, P = AclOperation, ResourceType, AclPermissionType
Resource = tuple[ResourceType, str]

Topics = Annotated[list[str] | None, typer.Option("--topic", metavar="TOPIC",
                                                  help="a topic (repeatable)")]
Groups = Annotated[list[str] | None, typer.Option("--group", metavar="GROUP",
                                                  help="a consumer group (repeatable)")]
TxnIds = Annotated[list[str] | None, typer.Option(
    "--transactional-id", metavar="ID", help="a transactional id (repeatable)")]
ClusterOpt = Annotated[bool, typer.Option("--cluster", help="the cluster resource")]
PatternOpt = Annotated[str | None, typer.Option(
    "--resource-pattern-type", metavar="TYPE",
    help="LITERAL or PREFIXED (add); also ANY or MATCH (list, remove)")]
AllowP = Annotated[list[str] | None, typer.Option(
    "--allow-principal", metavar="PRINCIPAL", help="User:name to allow (repeatable)")]
DenyP = Annotated[list[str] | None, typer.Option(
    "--deny-principal", metavar="PRINCIPAL", help="User:name to deny (repeatable)")]
AllowH = Annotated[list[str] | None, typer.Option(
    "--allow-host", metavar="HOST", help="host the allowed principals are allowed from "
                                         "(default *)")]
DenyH = Annotated[list[str] | None, typer.Option(
    "--deny-host", metavar="HOST", help="host the denied principals are denied from "
                                        "(default *)")]
Ops = Annotated[list[str] | None, typer.Option(
    "--operation", metavar="OPERATION",
    help="READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, "
         "ALTER_CONFIGS, IDEMPOTENT_WRITE or ALL (repeatable; default ALL)")]
ProducerOpt = Annotated[bool, typer.Option("--producer", help="what a producer needs")]
ConsumerOpt = Annotated[bool, typer.Option("--consumer", help="what a consumer needs")]
IdempotentOpt = Annotated[bool, typer.Option(
    "--idempotent", help="with --producer: IDEMPOTENT_WRITE on the cluster")]


E = TypeVar("E", bound=enum.Enum)


def _enum(cls: type[E], text: str, option: str) -> E:
    try:
        return cls[text.strip().upper().replace("-", "_")]
    except KeyError:
        raise typer.BadParameter(f"unknown value {text}", param_hint=option) from None


def pattern_text(rt: ResourceType, name: str, pt: PatternType) -> str:
    return f"ResourcePattern(resourceType={rt.name}, name={name}, patternType={pt.name})"


def entry_text(b: AclBinding) -> str:
    return (f"(principal={b.principal}, host={b.host}, operation={b.operation.name}, "
            f"permissionType={b.permission.name})")


def resources(topics: list[str] | None, groups: list[str] | None, txn_ids: list[str] | None,
              cluster: bool) -> list[Resource]:
    out: list[Resource] = [(RT.TOPIC, t) for t in topics or []]
    out += [(RT.GROUP, g) for g in groups or []]
    out += [(RT.TRANSACTIONAL_ID, t) for t in txn_ids or []]
    if cluster:
        out.append((RT.CLUSTER, CLUSTER_NAME))
    return out


def operations_for(rt: ResourceType, ops: list[AclOperation], producer: bool, consumer: bool,
                   idempotent: bool) -> list[AclOperation]:
    """The operations to grant on a resource of type ``rt`` (kafka-acls' conveniences)."""
    if not producer and not consumer:
        return ops
    out: list[AclOperation] = []
    if producer:
        out += {RT.TOPIC: [Op.WRITE, Op.DESCRIBE, Op.CREATE],
                RT.TRANSACTIONAL_ID: [Op.WRITE, Op.DESCRIBE],
                RT.CLUSTER: [Op.IDEMPOTENT_WRITE] if idempotent else []}.get(rt, [])
    if consumer:
        out += {RT.TOPIC: [Op.READ, Op.DESCRIBE], RT.GROUP: [Op.READ]}.get(rt, [])
    return list(dict.fromkeys(out))


def bindings(res: list[Resource], pt: PatternType, allow_p: list[str], deny_p: list[str],
             allow_h: list[str], deny_h: list[str], ops: list[AclOperation],
             producer: bool = False, consumer: bool = False,
             idempotent: bool = False) -> list[AclBinding]:
    out = []
    for rt, name in res:
        for op in operations_for(rt, ops, producer, consumer, idempotent):
            out += [AclBinding(rt, name, pt, p, h, op, P.ALLOW) for p in allow_p for h in allow_h]
            out += [AclBinding(rt, name, pt, p, h, op, P.DENY) for p in deny_p for h in deny_h]
    return out


def grouped_lines(found: Iterable[AclBinding], verb: str = "Current ACLs for") -> list[str]:
    by_resource: dict[tuple[ResourceType, str, PatternType], list[AclBinding]] = {}
    for b in found:
        by_resource.setdefault((b.resource_type, b.name, b.pattern_type), []).append(b)
    lines = []
    for key, rows in by_resource.items():
        lines.append(f"{verb} resource `{pattern_text(*key)}`: ")
        lines += [f" \t{entry_text(b)} " for b in rows]
        lines.append("")
    return lines


def as_json(found: Iterable[AclBinding]) -> list[dict[str, str]]:
    return [{"resource_type": b.resource_type.name, "name": b.name,
             "pattern_type": b.pattern_type.name, "principal": b.principal, "host": b.host,
             "operation": b.operation.name, "permission_type": b.permission.name}
            for b in found]


def _pattern(value: str | None, default: PatternType, allowed: tuple[PatternType, ...]
             ) -> PatternType:
    pt = default if value is None else _enum(PatternType, value, "--resource-pattern-type")
    if pt not in allowed:
        raise typer.BadParameter(f"{pt.name} is not allowed here",
                                 param_hint="--resource-pattern-type")
    return pt


def _ops(values: list[str] | None) -> list[AclOperation]:
    return [_enum(AclOperation, v, "--operation") for v in values or ["ALL"]]


@app.command("add")
def add(allow_principal: AllowP = None, deny_principal: DenyP = None, allow_host: AllowH = None,
        deny_host: DenyH = None, operation: Ops = None, topic: Topics = None,
        group: Groups = None, transactional_id: TxnIds = None, cluster: ClusterOpt = False,
        resource_pattern_type: PatternOpt = None, producer: ProducerOpt = False,
        consumer: ConsumerOpt = False, idempotent: IdempotentOpt = False,
        bootstrap: Bootstrap = FIND, props: ClientProps = None) -> None:
    """Add ACLs."""
    pt = _pattern(resource_pattern_type, PatternType.LITERAL,
                  (PatternType.LITERAL, PatternType.PREFIXED))
    res = resources(topic, group, transactional_id, cluster or (producer and idempotent))
    if not res:
        raise typer.BadParameter("name a resource: --topic, --group, --transactional-id "
                                 "or --cluster")
    if not allow_principal and not deny_principal:
        raise typer.BadParameter("give --allow-principal or --deny-principal")
    new = bindings(res, pt, allow_principal or [], deny_principal or [], allow_host or ["*"],
                   deny_host or ["*"], _ops(operation), producer, consumer, idempotent)

    async def go(admin: Admin) -> list[AclBinding]:
        await admin.create_acls(new)
        return await admin.describe_acls()

    current = with_admin(bootstrap, props, go, CLIENT_ID)
    touched = {(b.resource_type, b.name, b.pattern_type) for b in new}
    emit_lines(grouped_lines(new, "Adding ACLs for") + grouped_lines(
        b for b in current if (b.resource_type, b.name, b.pattern_type) in touched))


def _filters(res: list[Resource], pt: PatternType, principal: str | None
             ) -> list[AclBindingFilter]:
    if not res:
        return [AclBindingFilter(pattern_type=pt, principal=principal)]
    return [AclBindingFilter(rt, name, pt, principal) for rt, name in res]


@app.command("list")
def list_acls(topic: Topics = None, group: Groups = None, transactional_id: TxnIds = None,
              cluster: ClusterOpt = False, resource_pattern_type: PatternOpt = None,
              principal: Annotated[str | None, typer.Option(
                  "--principal", metavar="PRINCIPAL", help="only this principal's ACLs")] = None,
              bootstrap: Bootstrap = FIND, json_output: JsonOption = False,
              props: ClientProps = None) -> None:
    """List ACLs (every one, or those of the named resources)."""
    pt = _pattern(resource_pattern_type, PatternType.ANY, tuple(PatternType)[1:])
    filters = _filters(resources(topic, group, transactional_id, cluster), pt, principal)

    async def go(admin: Admin) -> list[AclBinding]:
        out: list[AclBinding] = []
        for f in filters:
            out += [b for b in await admin.describe_acls(f) if b not in out]
        return out

    found = with_admin(bootstrap, props, go, CLIENT_ID)
    if json_output:
        emit_json(as_json(found))
        return
    emit_lines(grouped_lines(found))


@app.command("remove")
def remove(allow_principal: AllowP = None, deny_principal: DenyP = None,
           allow_host: AllowH = None, deny_host: DenyH = None, operation: Ops = None,
           topic: Topics = None, group: Groups = None, transactional_id: TxnIds = None,
           cluster: ClusterOpt = False, resource_pattern_type: PatternOpt = None,
           producer: ProducerOpt = False, consumer: ConsumerOpt = False,
           idempotent: IdempotentOpt = False,
           force: Annotated[bool, typer.Option("--force", help="do not ask")] = False,
           bootstrap: Bootstrap = FIND, props: ClientProps = None) -> None:
    """Remove ACLs: those given by principal, host and operation, or every ACL of the
    named resources when no principal is given."""
    pt = _pattern(resource_pattern_type, PatternType.ANY, tuple(PatternType)[1:])
    res = resources(topic, group, transactional_id, cluster or (producer and idempotent))
    if not res:
        raise typer.BadParameter("name a resource: --topic, --group, --transactional-id "
                                 "or --cluster")
    if allow_principal or deny_principal:
        filters = [AclBindingFilter(b.resource_type, b.name, b.pattern_type, b.principal,
                                    b.host, b.operation, b.permission)
                   for b in bindings(res, PatternType.LITERAL, allow_principal or [],
                                     deny_principal or [], allow_host or ["*"],
                                     deny_host or ["*"], _ops(operation), producer, consumer,
                                     idempotent)]
        filters = [AclBindingFilter(f.resource_type, f.name, pt, f.principal, f.host,
                                    f.operation, f.permission) for f in filters]
    else:
        filters = _filters(res, pt, None)
    if not force and not typer.confirm(
            "Are you sure you want to remove ACLs from resource filter(s) "
            + ", ".join(f"`{pattern_text(f.resource_type, f.name or '', f.pattern_type)}`"
                        for f in filters) + "?"):
        raise typer.Exit(1)

    async def go(admin: Admin) -> list[AclBinding]:
        return await admin.delete_acls(filters)

    gone = with_admin(bootstrap, props, go, CLIENT_ID)
    emit_lines(grouped_lines(gone, "Removed ACLs for"))
