"""`pybroker groups ...`: list, describe (offsets and lag, members, state), reset offsets, delete groups
and their offsets — kafka-consumer-groups' actions, over the wire (see `groups` for what each asks)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import click

from pybroker.clients.admin import groups as group_ops
from pybroker.clients.admin.cli_support import fail, progress, wire_command
from pybroker.clients.admin.output import emit
from pybroker.clients.admin.times import DATETIME, DURATION
from pybroker.clients.wire import WireClient, WireError

OFFSET_COLUMNS = ["topic", "partition", "current_offset", "log_end_offset", "lag", "member_id", "client_id", "host"]
MEMBER_COLUMNS = ["group", "member_id", "group_instance_id", "client_id", "host", "partitions"]
#: a streams member is assigned tasks (`<subtopology>_<partition>`), not partitions: its columns instead
STREAMS_MEMBER_COLUMNS = ["group", "member_id", "process_id", "client_id", "host", "member_epoch", "active_tasks",
                          "standby_tasks", "warmup_tasks"]
STREAMS_VERBOSE_COLUMNS = ["topology_epoch", "target_active_tasks", "target_standby_tasks", "target_warmup_tasks"]
STATE_COLUMNS = ["group", "coordinator", "state", "assignment_strategy", "members", "total_lag"]
PLAN_COLUMNS = ["group", "topic", "partition", "current_offset", "new_offset"]


@click.group(short_help="Consumer groups: describe, reset offsets, delete.")
def groups() -> None:
    """List and describe consumer groups, reset their offsets, delete groups and offsets."""


def _chosen_groups(client: WireClient, names: tuple[str, ...], all_groups: bool) -> list[str]:
    if all_groups:
        if names:
            raise click.UsageError("give group names or --all-groups, not both")
        return [row["group"] for row in group_ops.list_groups(client)]
    if not names:
        raise click.UsageError("name a group (or several), or pass --all-groups")
    return list(names)


@groups.command("list")
@click.option("--state", "states", multiple=True, help="Only groups in this state (Stable, Empty, ...); repeatable.")
@wire_command
def groups_list(client: WireClient, as_json: bool, states: tuple[str, ...]) -> None:
    """Every group with its state."""
    rows = group_ops.list_groups(client)
    if states:
        wanted = {s.lower() for s in states}
        rows = [row for row in rows if (row["state"] or "").lower() in wanted]
    emit(rows, ["group", "state", "protocol_type", "group_type"], as_json, empty="(no groups)")


@groups.command("describe")
@click.argument("names", nargs=-1)
@click.option("--all-groups", is_flag=True, help="Describe every group.")
@click.option("--members", "view", flag_value="members", help="Members: client id, host, partition count.")
@click.option("--state", "view", flag_value="state", help="One line per group: state, strategy, members, lag.")
@click.option("--offsets", "view", flag_value="offsets", default=True,
              help="Committed offsets, log end offsets and lag per partition (the default).")
@click.option("--verbose", is_flag=True, help="With --members: each member's assigned partitions.")
@wire_command
def groups_describe(client: WireClient, as_json: bool, names: tuple[str, ...], all_groups: bool, view: str,
                    verbose: bool) -> None:
    """Offsets and lag per partition, members, or state of groups (a group that does not exist is an error)."""
    chosen = _chosen_groups(client, names, all_groups)
    described: list[dict[str, Any]] = []
    with progress(len(chosen), "describing groups", as_json or len(chosen) < 2) as bar:
        for group in chosen:
            try:
                described.append(group_ops.describe_group(client, group))
            except WireError as exc:
                if not all_groups or exc.kafka_error != "GROUP_ID_NOT_FOUND":
                    raise
                # listed a moment ago, gone now (deleted or expired): not an error of --all-groups
            bar.update(1)
    if view == "members":
        rows = [{"group": d["group"], **m} for d in described for m in d["members"]]
        if described and all(d["group_type"] == "streams" for d in described):
            columns = STREAMS_MEMBER_COLUMNS + (STREAMS_VERBOSE_COLUMNS if verbose else [])
        else:
            epochs = ["member_epoch"] if any(d["group_type"] in ("consumer", "streams") for d in described) else []
            columns = MEMBER_COLUMNS + (["assignment", *epochs] if verbose else [])
        emit(rows, columns, as_json, empty="(no active members)")
    elif view == "state":
        emit([group_ops.state_row(d, client.bootstrap) for d in described], STATE_COLUMNS, as_json)
    elif as_json:
        click.echo(json.dumps(described[0] if len(names) == 1 else described, indent=2, default=str))
    else:
        for index, d in enumerate(described):
            if index:
                click.echo()
            kind = ""
            if d["group_type"] == "consumer":
                kind = f" (consumer protocol, group epoch {d['group_epoch']})"
            elif d["group_type"] == "streams":
                kind = (f" (streams protocol, group epoch {d['group_epoch']}, "
                        f"topology epoch {d['topology_epoch']})")
            click.echo(f"group {d['group']}{kind}: {d['state']}, {len(d['members'])} member(s), "
                       f"total lag {d['total_lag']}")
            if d["group_type"] == "streams" and d["members"]:  # who runs which task is the point of a streams group
                emit(d["members"], STREAMS_MEMBER_COLUMNS[1:], False)
            emit(d["offsets"], OFFSET_COLUMNS, False, empty="(no committed offsets)")


@groups.command("delete")
@click.argument("names", nargs=-1)
@click.option("--all-groups", is_flag=True, help="Delete every group that can be deleted (only empty ones can).")
@wire_command
def groups_delete(client: WireClient, as_json: bool, names: tuple[str, ...], all_groups: bool) -> None:
    """Delete empty groups with their committed offsets (exit 1 if any could not be deleted)."""
    rows = group_ops.delete_groups(client, _chosen_groups(client, names, all_groups))
    emit(rows, ["group", "deleted", "error"], as_json, empty="(no groups)")
    if any(not row["deleted"] for row in rows):
        raise SystemExit(1)


@groups.command("delete-offsets")
@click.argument("group")
@click.option("--topic", "topic_specs", multiple=True, required=True, metavar="TOPIC[:P,P...]",
              help="A topic (all its partitions) or some of its partitions; repeatable.")
@wire_command
def groups_delete_offsets(client: WireClient, as_json: bool, group: str, topic_specs: tuple[str, ...]) -> None:
    """Delete a group's committed offsets of some partitions (the group must not be consuming them)."""
    rows = group_ops.delete_offsets(client, group, group_ops.resolve_partitions(client, topic_specs))
    emit(rows, ["group", "topic", "partition", "deleted", "error"], as_json)
    if any(not row["deleted"] for row in rows):
        raise SystemExit(1)


_TARGETS = ("--to-earliest", "--to-latest", "--to-current", "--to-offset", "--shift-by", "--to-datetime",
            "--by-duration", "--from-file")


@groups.command("reset-offsets")
@click.argument("names", nargs=-1)
@click.option("--all-groups", is_flag=True, help="Reset every group (each must be inactive).")
@click.option("--topic", "topic_specs", multiple=True, metavar="TOPIC[:P,P...]",
              help="Reset these topics or partitions (default: every partition the group has committed).")
@click.option("--all-topics", is_flag=True, help="Every topic the group has committed offsets for.")
@click.option("--to-earliest", is_flag=True, help="To each log's start.")
@click.option("--to-latest", is_flag=True, help="To each log's end.")
@click.option("--to-current", is_flag=True, help="To the committed offset (the end where none).")
@click.option("--to-offset", type=click.IntRange(0), help="To this offset (kept within each log).")
@click.option("--shift-by", type=int, help="Move the committed offset by N (negative: back), kept within the log.")
@click.option("--to-datetime", type=DATETIME,
              help="To the first offset at or after this time: YYYY-MM-DDTHH:MM:SS[.sss] with an optional "
                   "zone (Z, +02:00); UTC without one.")
@click.option("--by-duration", type=DURATION, help="To the first offset at or after now minus this (PT15M, 2h).")
@click.option("--from-file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="To the offsets of a CSV file: topic,partition,offset (or group,topic,partition,offset).")
@click.option("--execute", is_flag=True, help="Commit the new offsets; without it, only show them.")
@click.option("--dry-run", is_flag=True, help="Only show the new offsets (the default).")
@click.option("--export", is_flag=True, help="Print the plan as CSV that --from-file reads back.")
@wire_command
def groups_reset_offsets(client: WireClient, as_json: bool, names: tuple[str, ...], all_groups: bool,
                         topic_specs: tuple[str, ...], all_topics: bool, to_earliest: bool, to_latest: bool,
                         to_current: bool, to_offset: int | None,
                         shift_by: int | None, to_datetime: int | None, by_duration: int | None,
                         from_file: Path | None, execute: bool, dry_run: bool, export: bool) -> None:
    """Move inactive groups' committed offsets (shows the plan unless --execute)."""
    given = [t for t, on in (("earliest", to_earliest), ("latest", to_latest), ("current", to_current),
                             ("offset", to_offset is not None), ("shift", shift_by is not None),
                             ("timestamp", to_datetime is not None), ("duration", by_duration is not None),
                             ("file", from_file is not None)) if on]
    if len(given) != 1:
        raise click.UsageError("give exactly one of " + ", ".join(_TARGETS))
    if execute and dry_run:
        raise click.UsageError("--execute and --dry-run exclude each other")
    file_offsets: dict[str, dict[tuple[str, int], int]] = {}
    if from_file is not None:
        try:
            file_offsets = group_ops.parse_offsets_file(from_file.read_text())
        except (OSError, UnicodeDecodeError) as exc:
            fail(f"cannot read {from_file}: {exc}")
        except ValueError as exc:
            fail(f"{from_file}: {exc}")
    chosen = _chosen_groups(client, names, all_groups)
    partitions = group_ops.resolve_partitions(client, topic_specs)
    plan: list[dict[str, Any]] = []
    with progress(len(chosen), "resetting offsets", as_json or len(chosen) < 2) as bar:
        for group in chosen:
            target = _target(given[0], to_offset, shift_by, to_datetime, by_duration,
                             {**file_offsets.get("", {}), **file_offsets.get(group, {})})
            rows = group_ops.plan_reset(client, group, partitions, target, all_topics=all_topics)
            if execute:
                group_ops.commit_plan(client, group, rows)
            plan += rows
            bar.update(1)
    if export:
        click.echo(group_ops.export_plan(plan, with_group=len(chosen) > 1), nl=False)
        return
    emit(plan, PLAN_COLUMNS, as_json, empty="(nothing to reset)")
    if not execute and not as_json:
        click.echo("(dry run: add --execute to commit these offsets)")


def _target(kind: str, to_offset: int | None, shift_by: int | None, to_datetime: int | None,
            by_duration: int | None, offsets: dict[tuple[str, int], int]) -> group_ops.ResetTarget:
    if kind == "offset":
        return group_ops.ResetTarget("offset", offset=to_offset)
    if kind == "shift":
        return group_ops.ResetTarget("shift", shift=shift_by or 0)
    if kind == "timestamp":
        return group_ops.ResetTarget("timestamp", timestamp_ms=to_datetime)
    if kind == "duration":
        assert by_duration is not None
        return group_ops.ResetTarget("timestamp", timestamp_ms=int(time.time() * 1000) - by_duration)
    if kind == "file":
        return group_ops.ResetTarget("file", offsets=offsets)
    return group_ops.ResetTarget(kind)
