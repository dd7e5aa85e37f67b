"""``kaflite client-metrics``: client metrics subscriptions (KIP-714), as
kafka-client-metrics.sh manages them.

    kaflite client-metrics --alter --name sub --metrics org.apache.kafka.producer. \\
        --interval 1000 --match client_id=app-.*       (or --generate-name)
    kaflite client-metrics --describe [--name sub]
    kaflite client-metrics --list
    kaflite client-metrics --delete --name sub

A subscription is a CLIENT_METRICS config resource: ``--alter`` sets the configs it
is given (an empty value deletes one) with IncrementalAlterConfigs, ``--delete``
deletes every config, ``--list`` names the subscriptions (ListClientMetricsResources).
The lines are those Kafka 4.4's tool prints (``Altered client metrics config for
sub.``, ``Client metrics configs for sub are:`` then ``  name=value`` lines, and
``Error while executing client metrics command : ...`` on failure), read from that
tool run against kaflite; configs are listed sorted by name.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Annotated

import typer

from kaflite.cli._options import ClientProps, CommandConfig
from kaflite.cli._state import find_bootstrap
from kaflite.cli.topics import with_admin
from kaflite.protocol import errors

if TYPE_CHECKING:
    from kaflite.client import Admin

CLIENT_ID = "kaflite-client-metrics"
CLIENT_METRICS = 16     # ConfigResource type
SELECTORS = ("client_id", "client_instance_id", "client_software_name",
             "client_software_version", "client_source_address", "client_source_port")

BootstrapServer = Annotated[str, typer.Option(
    "--bootstrap-server", "--bootstrap", "-b", envvar="KAFLITE_BOOTSTRAP",
    callback=find_bootstrap, show_default=False, metavar="HOST:PORT,...",
    help="bootstrap.servers of any Kafka cluster (default: the running `kaflite up`)")]


def _configs(admin_configs: dict[str, str | None]) -> list[str]:
    return [f"  {k}={v}" for k, v in sorted(admin_configs.items())]


def client_metrics(
    bootstrap: BootstrapServer = "",
    alter: Annotated[bool, typer.Option("--alter", help="set a subscription's configs")] = False,
    describe: Annotated[bool, typer.Option("--describe", help="show subscriptions' configs")
                        ] = False,
    list_: Annotated[bool, typer.Option("--list", help="name every subscription")] = False,
    delete: Annotated[bool, typer.Option("--delete", help="delete a subscription")] = False,
    name: Annotated[str | None, typer.Option("--name", help="the subscription")] = None,
    generate_name: Annotated[bool, typer.Option(
        "--generate-name", help="--alter: name the subscription with a new UUID")] = False,
    metrics: Annotated[str | None, typer.Option(
        "--metrics", metavar="M1,M2", help="metric name prefixes ('*': every metric)")] = None,
    interval: Annotated[int | None, typer.Option(
        "--interval", metavar="MS", help="the push interval in milliseconds")] = None,
    match: Annotated[str | None, typer.Option(
        "--match", metavar="K1=V1,K2=V2",
        help="selector=regex terms; selectors: " + ", ".join(SELECTORS))] = None,
    props: ClientProps = None,
    command_config: CommandConfig = None,
) -> None:
    """Alter, describe, list and delete client metrics subscriptions (KIP-714)."""
    if sum((alter, describe, list_, delete)) != 1:
        raise typer.BadParameter("Command must include exactly one action: --alter, "
                                 "--delete, --describe or --list.")
    if alter and (name is None) == (not generate_name):
        raise typer.BadParameter("One of --name or --generate-name must be specified with "
                                 "--alter.")
    if delete and name is None:
        raise typer.BadParameter("A client metric resource name must be specified with "
                                 "--delete.")
    if list_ and name is not None:
        raise typer.BadParameter("--name does not go with --list.")
    if not alter and (generate_name or metrics is not None or interval is not None
                      or match is not None):
        raise typer.BadParameter("--generate-name, --metrics, --interval and --match go "
                                 "with --alter only.")

    async def go(admin: Admin) -> list[str]:
        from kaflite.client.admin import ConfigResource

        if alter:
            entity = name if name is not None else str(uuid.uuid4())
            given = {"interval.ms": None if interval is None else str(interval),
                     "metrics": metrics, "match": match}
            # an empty value deletes the config, as kafka-client-metrics does
            changes = {k: v or None for k, v in given.items() if v is not None}
            await admin.alter_configs({ConfigResource(CLIENT_METRICS, entity): changes})
            return [f"Altered client metrics config for {entity}."]
        if list_:
            return await admin.list_client_metrics_resources()
        assert name is not None or describe
        if delete:
            assert name is not None
            res = ConfigResource(CLIENT_METRICS, name)
            current = (await admin.describe_configs([res]))[res]
            await admin.alter_configs({res: dict.fromkeys(current)})
            return [f"Deleted client metrics config for {name}."]
        known = await admin.list_client_metrics_resources()
        if name is not None and name not in known:
            return [f"The client metric resource {name} doesn't exist and doesn't have "
                    "dynamic config."]
        lines = []
        for entity in [name] if name is not None else known:
            res = ConfigResource(CLIENT_METRICS, entity)
            lines.append(f"Client metrics configs for {entity} are:")
            lines += _configs((await admin.describe_configs([res]))[res])
        return lines

    try:
        lines = with_admin(bootstrap, props, go, CLIENT_ID)
    except errors.KafkaError as exc:
        typer.echo(f"Error while executing client metrics command : {_bare(exc)}")
        raise typer.Exit(1) from None
    for line in lines:
        typer.echo(line)


def _bare(exc: errors.KafkaError) -> str:
    """The broker's message without the admin's ``alter configs NAME: `` prefix."""
    text = exc.message or exc.name
    return text.split(": ", 1)[1] if text.startswith(("alter configs ", "describe configs ")) \
        and ": " in text else text
