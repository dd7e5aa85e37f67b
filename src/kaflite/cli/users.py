"""``kaflite users``: SCRAM users, as ``kafka-configs.sh --entity-type users`` manages them.

    kaflite users add alice --password alice-secret [--mechanism SCRAM-SHA-512] [--iterations 8192]
    kaflite users list [alice ...]
    kaflite users delete alice [--mechanism SCRAM-SHA-256]

The password is salted by the client and only the salted form is sent
(AlterUserScramCredentials); without ``--password`` it is asked for. ``list``
prints kafka-configs' line for each user::

    SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-512=iterations=8192

Works against any Kafka (with ``-X`` for its security properties) as against kaflite.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from kaflite.cli._options import FIND, Bootstrap, ClientProps
from kaflite.cli._output import JsonOption, emit_json, emit_lines
from kaflite.cli.topics import with_admin

if TYPE_CHECKING:
    from kaflite.client import Admin

app = typer.Typer(rich_markup_mode=None, no_args_is_help=True,
                  help="Add, list and delete SCRAM users (kafka-configs.sh --entity-type users).")

CLIENT_ID = "kaflite-users"
SCRAM = ("SCRAM-SHA-256", "SCRAM-SHA-512")

Mechanisms = Annotated[list[str] | None, typer.Option(
    "--mechanism", "-m", metavar="MECHANISM",
    help="SCRAM-SHA-256 or SCRAM-SHA-512 (repeatable; default: both)")]


def _mechanisms(given: list[str] | None) -> list[str]:
    out = [m.upper() for m in given or SCRAM]
    for m in out:
        if m not in SCRAM:
            raise typer.BadParameter(f"{m}: expected one of {', '.join(SCRAM)}",
                                     param_hint="--mechanism")
    return out


@app.command("add")
def add(user: str, password: Annotated[str | None, typer.Option(
            "--password", "-p", help="the user's password (asked for when left out)")] = None,
        mechanism: Mechanisms = None,
        iterations: Annotated[int, typer.Option(
            help="PBKDF2 iterations (Kafka takes 4096 to 16384)")] = 4096,
        bootstrap: Bootstrap = FIND, props: ClientProps = None) -> None:
    """Add a SCRAM user (or change its password)."""
    mechanisms = _mechanisms(mechanism)
    if password is None:
        password = str(typer.prompt(f"password for {user}", hide_input=True,
                                    confirmation_prompt=True))

    async def go(admin: Admin) -> None:
        await admin.alter_user_scram_credentials(
            upsertions=[(user, m, password, iterations) for m in mechanisms])

    with_admin(bootstrap, props, go, CLIENT_ID)
    typer.echo(f"Completed updating config for user {user}.")


@app.command("list")
def list_users(users: Annotated[list[str] | None, typer.Argument(
                   help="the users to show (default: every user)", show_default=False)] = None,
               bootstrap: Bootstrap = FIND, as_json: JsonOption = False,
               props: ClientProps = None) -> None:
    """List SCRAM users and their mechanisms."""
    async def go(admin: Admin) -> dict[str, list[tuple[str, int]]]:
        return await admin.describe_user_scram_credentials(users or None)

    found = with_admin(bootstrap, props, go, CLIENT_ID)
    if as_json:
        emit_json([{"user": u, "credentials": [{"mechanism": m, "iterations": i}
                                               for m, i in creds]}
                   for u, creds in sorted(found.items())])
        return
    emit_lines([f"SCRAM credential configs for user-principal '{u}' are "
                + ", ".join(f"{m}=iterations={i}" for m, i in creds)
                for u, creds in sorted(found.items())])


@app.command("delete")
def delete(user: str, mechanism: Mechanisms = None, bootstrap: Bootstrap = FIND,
           props: ClientProps = None) -> None:
    """Delete a SCRAM user's credentials (all of its mechanisms unless --mechanism)."""
    async def go(admin: Admin) -> None:
        if mechanism:
            mechanisms = _mechanisms(mechanism)
        else:
            found = await admin.describe_user_scram_credentials([user])
            mechanisms = [m for m, _ in found.get(user, [])]
        await admin.alter_user_scram_credentials(deletions=[(user, m) for m in mechanisms])

    with_admin(bootstrap, props, go, CLIENT_ID)
    typer.echo(f"Completed updating config for user {user}.")
