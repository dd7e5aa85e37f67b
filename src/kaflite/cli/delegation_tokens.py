"""``kaflite delegation-tokens``: delegation tokens (KIP-48), as kafka-delegation-tokens.sh
manages them.

    kaflite delegation-tokens --create [--max-life-time-period MS] \\
        [--renewer-principal User:bob ...] [--owner-principal User:alice]
    kaflite delegation-tokens --renew --hmac B64 [--renew-time-period MS]
    kaflite delegation-tokens --expire --hmac B64 [--expiry-time-period MS]
    kaflite delegation-tokens --describe [--owner-principal User:alice ...]

The broker serves these over an authenticated connection only (SASL, or TLS with a
client certificate), so give the client's security properties with
``--command-config`` or ``-X``. The lines are those of Kafka's tool: the call, then
``Created delegation token with tokenId : ...`` and the table of tokens (TOKENID,
HMAC, OWNER, REQUESTER, RENEWERS and the dates, as ``yyyy-MM-ddTHH:mm`` in local
time). One difference: ``--describe`` without ``--owner-principal`` lists every
token the caller may see (Kafka 4.4's tool sends an empty owner list, and its
broker answers with no tokens).
"""

from __future__ import annotations

import base64
import binascii
import time
from typing import TYPE_CHECKING, Annotated

import typer

from kaflite.cli._options import ClientProps, CommandConfig
from kaflite.cli.client_metrics import BootstrapServer
from kaflite.cli.topics import with_admin
from kaflite.protocol import errors

if TYPE_CHECKING:
    from kaflite.client import Admin
    from kaflite.client._token_admin import DelegationToken

CLIENT_ID = "kaflite-delegation-tokens"
ROW = "{:<15} {:<30} {:<15} {:<15} {:<25} {:<15} {:<15} {:<15}"

Principals = Annotated[list[str] | None, typer.Option(
    metavar="TYPE:NAME", help="a principal, e.g. User:alice (repeatable)")]


def _date(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M", time.localtime(ms / 1000))


def _table(tokens: list[DelegationToken]) -> list[str]:
    lines = ["", ROW.format("TOKENID", "HMAC", "OWNER", "REQUESTER", "RENEWERS", "ISSUEDATE",
                            "EXPIRYDATE", "MAXDATE")]
    for t in tokens:
        lines += ["", ROW.format(t.token_id, t.hmac_b64, t.owner, t.requester,
                                 "[" + ", ".join(t.renewers) + "]", _date(t.issue_timestamp_ms),
                                 _date(t.expiry_timestamp_ms), _date(t.max_timestamp_ms))]
    return lines


def _principals(given: list[str] | None, option: str) -> list[str]:
    out = [p.strip() for p in given or []]
    for p in out:
        kind, sep, _ = p.partition(":")
        if not sep or not kind:
            raise typer.BadParameter(f"expected a string in format principalType:principalName "
                                     f"but got {p}", param_hint=option)
    return out


def _hmac(text: str | None) -> bytes:
    if not text:
        raise typer.BadParameter("--hmac is required with --renew and --expire")
    try:
        return base64.b64decode(text, validate=True)
    except binascii.Error:
        raise typer.BadParameter("not base64", param_hint="--hmac") from None


def delegation_tokens(
    bootstrap: BootstrapServer = "",
    create: Annotated[bool, typer.Option("--create", help="create a token")] = False,
    renew: Annotated[bool, typer.Option("--renew", help="renew a token")] = False,
    expire: Annotated[bool, typer.Option("--expire", help="expire a token")] = False,
    describe: Annotated[bool, typer.Option("--describe", help="list tokens")] = False,
    owner_principal: Principals = None,
    renewer_principal: Principals = None,
    max_life_time_period: Annotated[int, typer.Option(
        "--max-life-time-period", metavar="MS",
        help="--create: the token's max lifetime (-1: the broker's)")] = -1,
    renew_time_period: Annotated[int, typer.Option(
        "--renew-time-period", metavar="MS",
        help="--renew: the renewal's period (-1: the broker's)")] = -1,
    expiry_time_period: Annotated[int, typer.Option(
        "--expiry-time-period", metavar="MS",
        help="--expire: expire after this long (-1: at once)")] = -1,
    hmac: Annotated[str | None, typer.Option(
        "--hmac", help="the token's HMAC, base64 (--renew, --expire)")] = None,
    props: ClientProps = None,
    command_config: CommandConfig = None,
) -> None:
    """Create, renew, expire and describe delegation tokens (kafka-delegation-tokens)."""
    if sum((create, renew, expire, describe)) != 1:
        raise typer.BadParameter("Command must include exactly one action: --create, "
                                 "--renew, --expire or --describe")
    owners = _principals(owner_principal, "--owner-principal")
    renewers = _principals(renewer_principal, "--renewer-principal")
    token_hmac = _hmac(hmac) if renew or expire else b""

    async def go(admin: Admin) -> list[str]:
        if create:
            token = await admin.create_delegation_token(
                renewers, max_life_time_period, owners[0] if owners else None)
            return [f"Calling create token operation with renewers :[{', '.join(renewers)}] "
                    f", max-life-time-period :{max_life_time_period}",
                    f"Created delegation token with tokenId : {token.token_id}",
                    *_table([token])]
        if renew:
            expiry = await admin.renew_delegation_token(token_hmac, renew_time_period)
            return [f"Calling renew token operation with hmac :{hmac} , renew-time-period "
                    f":{renew_time_period}",
                    f"Completed renew operation. New expiry date : {_date(expiry)}"]
        if expire:
            expiry = await admin.expire_delegation_token(token_hmac, expiry_time_period)
            return [f"Calling expire token operation with hmac :{hmac} , expire-time-period "
                    f":{expiry_time_period}",
                    f"Completed expire operation. New expiry date : {_date(expiry)}"]
        tokens = await admin.describe_delegation_token(owners or None)
        head = ("Calling describe token operation for current user." if not owners else
                f"Calling describe token operation for owners: [{', '.join(owners)}]")
        return [head, f"Total number of tokens : {len(tokens)}", *_table(tokens)]

    try:
        lines = with_admin(bootstrap, props, go, CLIENT_ID)
    except errors.KafkaError as exc:
        typer.echo(f"Error while executing delegation token command : {exc}")
        raise typer.Exit(1) from None
    for line in lines:
        typer.echo(line)
