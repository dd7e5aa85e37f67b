"""``kaflite features``: the cluster's feature levels, as kafka-features.sh shows and
changes them.

``describe`` prints a line per feature in kafka-features' words (``Feature: NAME
SupportedMinVersion: A SupportedMaxVersion: B FinalizedVersionLevel: L Epoch: E``);
``upgrade`` and ``downgrade`` take ``--feature name=level`` (repeatable), with
``--dry-run`` (validate only) and, for downgrade, ``--unsafe``, and print one line per
feature: what was done or why it was refused. Kafka 4's controller (and kaflite's)
refuses the whole request at its first refusal, and names it at the top level; older
brokers answered each feature. A refusal makes the command fail.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from kaflite.cli._options import FIND, Bootstrap, ClientProps, CommandConfig
from kaflite.cli.topics import with_admin
from kaflite.protocol import errors

if TYPE_CHECKING:
    from kaflite.client import Admin

app = typer.Typer(rich_markup_mode=None, no_args_is_help=True,
                  help="Describe, upgrade and downgrade feature levels, as kafka-features.sh.")

CLIENT_ID = "kaflite-features"
FeatureOption = Annotated[list[str], typer.Option(
    "--feature", "-f", help="name=level, e.g. group.version=1 (repeatable)")]
DryRun = Annotated[bool, typer.Option("--dry-run", help="validate only; change nothing")]


@app.command("describe")
def describe(bootstrap: Bootstrap = FIND, props: ClientProps = None,
             command_config: CommandConfig = None) -> None:
    """Every feature: the levels the brokers support and the finalized one."""
    features = with_admin(bootstrap, props, lambda a: a.describe_features(), CLIENT_ID)
    for name in sorted(set(features.supported) | set(features.finalized)):
        lo, hi = features.supported.get(name, (0, 0))
        typer.echo(f"Feature: {name}\tSupportedMinVersion: {lo}\tSupportedMaxVersion: {hi}\t"
                   f"FinalizedVersionLevel: {features.finalized.get(name, 0)}\t"
                   f"Epoch: {features.epoch}")


def _levels(specs: list[str]) -> dict[str, int]:
    out = {}
    for spec in specs:
        name, sep, level = spec.partition("=")
        if not sep or not level.strip().lstrip("-").isdigit():
            raise typer.BadParameter(f"{spec!r}: expected name=level", param_hint="--feature")
        out[name.strip()] = int(level)
    return out


def _update(bootstrap: str, props: list[str] | None, specs: list[str],
            downgrade: str | None, dry_run: bool) -> None:
    levels = _levels(specs)

    async def go(admin: Admin) -> dict[str, str | None]:
        return await admin.update_features(levels, downgrade=downgrade, validate_only=dry_run)
    verb = "downgraded" if downgrade else "upgraded"
    try:
        results = with_admin(bootstrap, props, go, CLIENT_ID)
    except errors.InvalidUpdateVersionError as exc:   # the first refusal, for all
        typer.echo(f"Could not {verb[:-1]} {', '.join(levels)}. {exc.message}", err=True)
        raise typer.Exit(1) from None
    failed = False
    for name, level in levels.items():
        why = results.get(name)
        if why is None:
            typer.echo(f"{name} was {verb} to {level}." if not dry_run
                       else f"{name} can be {verb} to {level}.")
        else:
            failed = True
            typer.echo(f"Could not {verb[:-1]} {name} to {level}. {why}", err=True)
    if failed:
        raise typer.Exit(1)


@app.command("upgrade")
def upgrade(feature: FeatureOption, bootstrap: Bootstrap = FIND, dry_run: DryRun = False,
            props: ClientProps = None, command_config: CommandConfig = None) -> None:
    """Raise feature levels."""
    _update(bootstrap, props, feature, None, dry_run)


@app.command("downgrade")
def downgrade(feature: FeatureOption, bootstrap: Bootstrap = FIND, dry_run: DryRun = False,
              unsafe: Annotated[bool, typer.Option(
                  "--unsafe", help="an unsafe downgrade (may lose metadata)")] = False,
              props: ClientProps = None, command_config: CommandConfig = None) -> None:
    """Lower feature levels (0 turns a feature off)."""
    _update(bootstrap, props, feature, "unsafe" if unsafe else "safe", dry_run)
