"""`pybroker transactions ...`: kafka-transactions' actions over the wire (see `transactions` for what each
asks): list and describe transactions and producers, find and abort hanging transactions."""

from __future__ import annotations

import click

from pybroker.clients.admin import transactions as txn_ops
from pybroker.clients.admin.cli_support import fail, wire_command
from pybroker.clients.admin.output import emit
from pybroker.clients.wire import WireClient


# -- transactions (kafka-transactions.sh) ------------------------------------------------------------
@click.group(short_help="Transactions: list, describe, find and abort hanging ones.")
def transactions() -> None:
    """List and describe transactions and producers; find and abort hanging transactions."""


@transactions.command("list")
@click.option("--state", "states", multiple=True, metavar="STATE",
              help="Only transactions in this state (Empty, Ongoing, PrepareCommit, ...); repeatable.")
@click.option("--producer-id", "producer_ids", multiple=True, type=int, help="Only this producer id; repeatable.")
@click.option("--duration-ms", type=click.IntRange(0), default=None,
              help="Only transactions running longer than this (ListTransactions v1).")
@click.option("--transactional-id-pattern", "pattern", default=None, metavar="REGEX",
              help="Only ids this regular expression matches whole (ListTransactions v2).")
@wire_command
def transactions_list(client: WireClient, as_json: bool, states: tuple[str, ...], producer_ids: tuple[int, ...],
                      duration_ms: int | None, pattern: str | None) -> None:
    """Transactional ids with their producer id and state."""
    emit(txn_ops.list_transactions(client, states, producer_ids, duration_ms, pattern), txn_ops.LIST_COLUMNS,
         as_json, empty="(no transactions)")


@transactions.command("describe")
@click.option("--transactional-id", "transactional_id", required=True)
@wire_command
def transactions_describe(client: WireClient, as_json: bool, transactional_id: str) -> None:
    """A transactional id's state, producer, timeout, start time and partitions."""
    emit(txn_ops.describe_transactions(client, [transactional_id]), txn_ops.DESCRIBE_COLUMNS, as_json)


_TOPIC = click.option("--topic", required=True)
_PARTITION = click.option("--partition", type=click.IntRange(0), required=True)


@transactions.command("describe-producers")
@_TOPIC
@_PARTITION
@wire_command
def transactions_describe_producers(client: WireClient, as_json: bool, topic: str, partition: int) -> None:
    """The active producers of a partition, with the start offset of each one's open transaction."""
    rows = [p.as_row() for p in txn_ops.describe_producers(client, [(topic, partition)])]
    emit(rows, txn_ops.PRODUCER_COLUMNS, as_json, empty="(no active producers)")


@transactions.command("abort")
@_TOPIC
@_PARTITION
@click.option("--start-offset", type=click.IntRange(0), default=None,
              help="The first offset of the transaction to abort (its producer is looked up).")
@click.option("--producer-id", type=int, default=None, help="Instead of --start-offset: the producer id ...")
@click.option("--producer-epoch", type=int, default=None, help="... its epoch ...")
@click.option("--coordinator-epoch", type=int, default=None, help="... and the coordinator epoch.")
@wire_command
def transactions_abort(client: WireClient, as_json: bool, topic: str, partition: int, start_offset: int | None,
                       producer_id: int | None, producer_epoch: int | None, coordinator_epoch: int | None) -> None:
    """Abort a hanging transaction on one partition (writes an ABORT marker; needs CLUSTER_ACTION)."""
    row = txn_ops.abort_transaction(client, topic, partition, start_offset=start_offset, producer_id=producer_id,
                                    producer_epoch=producer_epoch, coordinator_epoch=coordinator_epoch)
    emit([row], list(row), as_json)


@transactions.command("find-hanging")
@click.option("--topic", default=None, help="Only this topic (default: every topic).")
@click.option("--partition", type=click.IntRange(0), default=None, help="Only this partition (needs --topic).")
@click.option("--broker-id", type=int, default=None, help="Accepted for compatibility: one broker holds all.")
@click.option("--max-transaction-timeout", "max_minutes", type=click.IntRange(0), default=15, show_default=True,
              help="Minutes an open transaction must have been silent to be a candidate.")
@wire_command
def transactions_find_hanging(client: WireClient, as_json: bool, topic: str | None, partition: int | None,
                              broker_id: int | None, max_minutes: int) -> None:
    """Open transactions their coordinator will never finish (abort them with `abort --start-offset`)."""
    if partition is not None and topic is None:
        fail("--partition needs --topic")
    rows = txn_ops.find_hanging(client, topic, partition, max_minutes * txn_ops.MINUTE_MS)
    emit(rows, txn_ops.HANGING_COLUMNS, as_json, empty="(no hanging transactions)")
