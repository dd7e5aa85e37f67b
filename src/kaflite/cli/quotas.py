"""``kaflite quotas``: client quotas, as ``kafka-configs.sh`` manages them for users and client ids.

    kaflite quotas alter --user alice [--client-id app] --add producer_byte_rate=1048576
    kaflite quotas alter --user-defaults --add consumer_byte_rate=2097152,request_percentage=50
    kaflite quotas alter --user alice --delete producer_byte_rate
    kaflite quotas describe [--user alice | --user-defaults] [--client-id app | --client-defaults]

``--add`` takes ``key=value`` pairs and ``--delete`` keys, each comma-separated or
repeated (kafka-configs' ``--add-config`` and ``--delete-config`` are accepted too).
The keys are Kafka's: ``producer_byte_rate``, ``consumer_byte_rate``,
``request_percentage`` and ``controller_mutation_rate``. ``describe`` prints
kafka-configs' line per entity::

    Quota configs for user-principal 'alice' are producer_byte_rate=1048576.0
    Quota configs for user-principal 'alice', the default client-id are consumer_byte_rate=2048.0

With an entity given, ``describe`` shows that entity only (the user alone, or the
user with that client id); with none, every entity. Works against any Kafka (with
``-X`` for its security properties) as against kaflite.
"""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, Annotated

import typer

from kaflite.cli._options import FIND, Bootstrap, ClientProps
from kaflite.cli._output import JsonOption, emit_json, emit_lines
from kaflite.cli.topics import with_admin
from kaflite.client._quotas import ClientQuotaAlteration, QuotaEntity, QuotaFilterComponent

if TYPE_CHECKING:
    from kaflite.client import Admin

app = typer.Typer(rich_markup_mode=None, no_args_is_help=True,
                  help="Set, remove and describe client quotas (kafka-configs.sh "
                       "--entity-type users/clients).")

CLIENT_ID = "kaflite-quotas"
USER, CLIENT = "user", "client-id"
NAMES = {USER: "user-principal", CLIENT: "client-id"}

UserOption = Annotated[str | None, typer.Option(
    "--user", help="a user (the principal's name)", show_default=False)]
UserDefaults = Annotated[bool, typer.Option(
    "--user-defaults", help="the <default> user: every user without a quota of its own")]
ClientOption = Annotated[str | None, typer.Option(
    "--client-id", help="a client id", show_default=False)]
ClientDefaults = Annotated[bool, typer.Option(
    "--client-defaults", help="the <default> client id")]


def java_double(value: float) -> str:
    """A number as Java's ``Double.toString`` prints it (kafka-configs prints doubles)."""
    if value == 0:
        return "0.0"
    if 1e-3 <= abs(value) < 1e7:
        text = repr(float(value))
        return text if "." in text else f"{text}.0"
    sign, digits, exponent = Decimal(repr(float(value))).normalize().as_tuple()
    assert isinstance(exponent, int)
    mantissa = "".join(map(str, digits))
    power = exponent + len(mantissa) - 1
    return f"{'-' if sign else ''}{mantissa[0]}.{mantissa[1:] or '0'}E{power}"


def _entity(user: str | None, user_defaults: bool, client: str | None,
            client_defaults: bool) -> dict[str, str | None]:
    if user is not None and user_defaults:
        raise typer.BadParameter("give --user or --user-defaults, not both")
    if client is not None and client_defaults:
        raise typer.BadParameter("give --client-id or --client-defaults, not both")
    entity: dict[str, str | None] = {}
    if user is not None or user_defaults:
        entity[USER] = user
    if client is not None or client_defaults:
        entity[CLIENT] = client
    return entity


def _split(values: list[str] | None) -> list[str]:
    return [part.strip() for v in values or [] for part in v.split(",") if part.strip()]


def _additions(values: list[str] | None) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for pair in _split(values):
        key, sep, value = pair.partition("=")
        try:
            if not sep:
                raise ValueError(pair)
            out[key.strip()] = float(value)
        except ValueError:
            raise typer.BadParameter(f"{pair}: expected key=number", param_hint="--add") from None
    return out


def describe_entity(entity: QuotaEntity) -> str:
    """``user-principal 'alice', the default client-id``: kafka-configs' words."""
    ordered = sorted(entity, key=lambda pair: pair[0] != USER)
    return ", ".join(f"{NAMES.get(t, t)} '{n}'" if n is not None else f"the default {NAMES.get(t, t)}"
                     for t, n in ordered)


@app.command("alter")
def alter(user: UserOption = None, user_defaults: UserDefaults = False,
          client_id: ClientOption = None, client_defaults: ClientDefaults = False,
          add: Annotated[list[str] | None, typer.Option(
              "--add", "--add-config", metavar="KEY=VALUE",
              help="quotas to set, e.g. producer_byte_rate=1048576 (comma-separated or repeated)",
              show_default=False)] = None,
          delete: Annotated[list[str] | None, typer.Option(
              "--delete", "--delete-config", metavar="KEY",
              help="quotas to remove (comma-separated or repeated)", show_default=False)] = None,
          bootstrap: Bootstrap = FIND, props: ClientProps = None) -> None:
    """Set or remove quotas of a user, a client id, or both (or their defaults)."""
    entity = _entity(user, user_defaults, client_id, client_defaults)
    if not entity:
        raise typer.BadParameter("give --user, --user-defaults, --client-id or --client-defaults")
    ops = _additions(add)
    for key in _split(delete):
        ops[key] = None
    if not ops:
        raise typer.BadParameter("nothing to do: give --add or --delete")

    async def go(admin: Admin) -> None:
        await admin.alter_client_quotas([ClientQuotaAlteration(entity, ops)])

    with_admin(bootstrap, props, go, CLIENT_ID)
    head_type, head_name = next(iter(entity.items()))
    kind = "user" if head_type == USER else "client"
    if head_name is None:
        typer.echo(f"Completed updating default config for {kind}s in the cluster.")
    else:
        typer.echo(f"Completed updating config for {kind} {head_name}.")


@app.command("describe")
def describe(user: UserOption = None, user_defaults: UserDefaults = False,
             client_id: ClientOption = None, client_defaults: ClientDefaults = False,
             bootstrap: Bootstrap = FIND, as_json: JsonOption = False,
             props: ClientProps = None) -> None:
    """Show the quotas of an entity, or of every entity."""
    entity = _entity(user, user_defaults, client_id, client_defaults)
    components = [QuotaFilterComponent.of_default(t) if n is None
                  else QuotaFilterComponent.of_entity(t, n) for t, n in entity.items()]

    async def go(admin: Admin) -> dict[QuotaEntity, dict[str, float]]:
        return await admin.describe_client_quotas(components, strict=bool(components))

    found = with_admin(bootstrap, props, go, CLIENT_ID)
    ordered = sorted(found.items(), key=lambda item: describe_entity(item[0]))
    if as_json:
        emit_json([{"entity": dict(e), "quotas": dict(sorted(q.items()))} for e, q in ordered])
        return
    emit_lines([f"Quota configs for {describe_entity(e)} are "
                + ", ".join(f"{k}={java_double(v)}" for k, v in sorted(q.items()))
                for e, q in ordered])
