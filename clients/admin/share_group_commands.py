"""`pybroker share-groups ...`: list, describe (start offsets and lag, members, state), reset offsets, delete
share groups and their offsets (KIP-932) — kafka-share-groups' actions, over the wire (see `share_groups`)."""

from __future__ import annotations

import click

from pybroker.clients.admin import share_groups as ops
from pybroker.clients.admin.cli_support import wire_command
from pybroker.clients.admin.output import emit
from pybroker.clients.wire import WireClient

OFFSET_COLUMNS = ["topic", "partition", "start_offset", "lag"]
MEMBER_COLUMNS = ["group", "member_id", "client_id", "host", "member_epoch", "partitions"]
STATE_COLUMNS = ["group", "state", "group_epoch", "assignment_epoch", "assignor", "members", "total_lag"]
PLAN_COLUMNS = ["group", "topic", "partition", "start_offset", "new_offset"]


@click.group("share-groups", short_help="Share groups (queues): describe, reset offsets, delete.")
def share_groups() -> None:
    """List and describe share groups (KIP-932), reset their start offsets, delete groups and offsets."""


@share_groups.command("list")
@wire_command
def share_groups_list(client: WireClient, as_json: bool) -> None:
    """Every share group with its state."""
    emit(ops.list_share_groups(client), ["group", "state"], as_json, empty="(no share groups)")


@share_groups.command("describe")
@click.argument("group")
@click.option("--members", "view", flag_value="members", help="Members: client id, host, epoch, partitions.")
@click.option("--state", "view", flag_value="state", help="One line: state, epochs, assignor, members, lag.")
@click.option("--offsets", "view", flag_value="offsets", default=True,
              help="Start offset and lag per share-partition (the default).")
@wire_command
def share_groups_describe(client: WireClient, as_json: bool, group: str, view: str) -> None:
    """Start offsets and lag, members, or state of a share group (one that does not exist is an error)."""
    described = ops.describe(client, group)
    if view == "members":
        emit([{"group": group, **m} for m in described["members"]], MEMBER_COLUMNS, as_json,
             empty="(no active members)")
    elif view == "state":
        emit([{**described, "members": len(described["members"])}], STATE_COLUMNS, as_json)
    else:
        emit(described["offsets"], OFFSET_COLUMNS, as_json, empty="(no share-partitions)")


@share_groups.command("reset-offsets")
@click.argument("group")
@click.option("--topic", "topics", multiple=True, required=True, help="A topic (all its partitions); repeatable.")
@click.option("--to-earliest", "target", flag_value="earliest", help="To each log's start.")
@click.option("--to-latest", "target", flag_value="latest", help="To each log's end.")
@click.option("--to-offset", type=click.IntRange(0), help="To this offset (kept within each log).")
@click.option("--execute", is_flag=True, help="Write the new start offsets; without it, only show them.")
@wire_command
def share_groups_reset_offsets(client: WireClient, as_json: bool, group: str, topics: tuple[str, ...],
                               target: str | None, to_offset: int | None, execute: bool) -> None:
    """Move an empty share group's start offsets (shows the plan unless --execute)."""
    if (target is None) == (to_offset is None):
        raise click.UsageError("give exactly one of --to-earliest, --to-latest, --to-offset")
    plan = ops.plan_reset(client, group, list(topics), target or "offset", to_offset)
    if execute:
        ops.execute_plan(client, group, plan)
    emit(plan, PLAN_COLUMNS, as_json, empty="(nothing to reset)")
    if not execute and not as_json:
        click.echo("(dry run: add --execute to write these start offsets)")


@share_groups.command("delete-offsets")
@click.argument("group")
@click.option("--topic", "topics", multiple=True, required=True, help="A topic; repeatable.")
@wire_command
def share_groups_delete_offsets(client: WireClient, as_json: bool, group: str, topics: tuple[str, ...]) -> None:
    """Forget an empty share group's state of whole topics (exit 1 if any could not be deleted)."""
    rows = ops.delete_offsets(client, group, list(topics))
    emit(rows, ["group", "topic", "deleted", "error"], as_json)
    if any(not row["deleted"] for row in rows):
        raise SystemExit(1)


@share_groups.command("delete")
@click.argument("names", nargs=-1, required=True)
@wire_command
def share_groups_delete(client: WireClient, as_json: bool, names: tuple[str, ...]) -> None:
    """Delete empty share groups with their state (exit 1 if any could not be deleted)."""
    rows = ops.delete_groups(client, list(names))
    emit(rows, ["group", "deleted", "error"], as_json)
    if any(not row["deleted"] for row in rows):
        raise SystemExit(1)
