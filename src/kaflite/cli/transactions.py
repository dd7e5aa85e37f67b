"""``kaflite transactions``: transactional ids, as kafka-transactions.sh lists and
describes them.

``list`` prints kafka-transactions' columns ``TransactionalId Coordinator ProducerId
TransactionState``; ``describe`` prints ``CoordinatorId TransactionalId ProducerId
ProducerEpoch TransactionState TransactionTimeoutMs CurrentTransactionStartTimeMs
TransactionDurationMs TopicPartitions`` (``None`` for the times of a transaction that
is not open, as Kafka's). Both take ``--json`` and ``-X name=value``.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Annotated

import typer

from kaflite.cli._options import FIND, Bootstrap, ClientProps, CommandConfig
from kaflite.cli._output import Column, JsonOption, emit
from kaflite.cli.topics import with_admin

if TYPE_CHECKING:
    from kaflite.client import Admin
    from kaflite.client.admin import TransactionDescription

app = typer.Typer(rich_markup_mode=None, no_args_is_help=True,
                  help="List and describe transactional ids, as kafka-transactions.sh.")

CLIENT_ID = "kaflite-transactions"
LIST_COLUMNS = [Column("transactional_id", "TransactionalId"),
                Column("coordinator", "Coordinator"), Column("producer_id", "ProducerId"),
                Column("state", "TransactionState")]
DESCRIBE_COLUMNS = [
    Column("coordinator_id", "CoordinatorId"), Column("transactional_id", "TransactionalId"),
    Column("producer_id", "ProducerId"), Column("producer_epoch", "ProducerEpoch"),
    Column("state", "TransactionState"), Column("timeout_ms", "TransactionTimeoutMs"),
    Column("start_ms", "CurrentTransactionStartTimeMs"),
    Column("duration_ms", "TransactionDurationMs"), Column("partitions", "TopicPartitions")]


@app.command("list")
def list_transactions(
    bootstrap: Bootstrap = FIND,
    state: Annotated[list[str] | None, typer.Option(
        "--state", "-s", help="only these states (Ongoing, CompleteCommit...)")] = None,
    as_json: JsonOption = False, props: ClientProps = None,
    command_config: CommandConfig = None,
) -> None:
    """Every transactional id on every broker, with its coordinator, producer id and state."""
    listed = with_admin(bootstrap, props,
                        lambda a: a.list_transaction_listings(states=state or ()), CLIENT_ID)
    emit([{"transactional_id": t.transactional_id, "coordinator": t.coordinator_id,
           "producer_id": t.producer_id, "state": t.state} for t in listed],
         LIST_COLUMNS, as_json)


def describe_row(d: TransactionDescription, now_ms: int) -> dict[str, object]:
    started = d.start_ms if d.start_ms >= 0 else None
    return {"coordinator_id": d.coordinator_id, "transactional_id": d.transactional_id,
            "producer_id": d.producer_id, "producer_epoch": d.producer_epoch,
            "state": d.state, "timeout_ms": d.timeout_ms, "start_ms": started,
            "duration_ms": now_ms - started if started is not None else None,
            "partitions": [f"{tp.topic}-{tp.partition}" for tp in d.partitions]}


@app.command("describe")
def describe(transactional_id: str, bootstrap: Bootstrap = FIND, as_json: JsonOption = False,
             props: ClientProps = None,
             command_config: CommandConfig = None) -> None:
    """Producer id and epoch, state, timeout and the partitions of the open transaction."""

    async def go(admin: Admin) -> TransactionDescription:
        return (await admin.describe_transactions([transactional_id]))[transactional_id]

    row = describe_row(with_admin(bootstrap, props, go, CLIENT_ID), int(time.time() * 1000))
    if not as_json:   # Kafka prints a time it does not have as None
        row = {k: "None" if v is None and k.endswith("_ms") else v for k, v in row.items()}
    emit([row], DESCRIBE_COLUMNS, as_json)
