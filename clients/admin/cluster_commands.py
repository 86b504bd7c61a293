"""`pybroker log-dirs`, `pybroker configs describe|keys`, `pybroker health` and `pybroker completion`."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import click
from click.shell_completion import get_completion_class

from pybroker.clients.admin import cluster as cluster_ops
from pybroker.clients.admin.cli_support import fail, pairs, wire_command, wire_connector, wire_options
from pybroker.clients.admin.output import emit, human_bytes
from pybroker.clients.wire import WireClient, WireError

COMPLETION_VAR = "_PYBROKER_COMPLETE"
HEALTH_RETRY_S = 0.5


@click.group("log-dirs", invoke_without_command=True, short_help="Log dirs with their space and partition sizes; "
             "move a partition between them.")
@click.option("--topic", "topics", multiple=True, help="Only these topics' partitions; repeatable.")
@click.option("--partitions/--no-partitions", default=True, show_default=True,
              help="Also list each partition with its size.")
@wire_options
@click.pass_context
def log_dirs(ctx: click.Context, **options: Any) -> None:
    """Log dirs with their state, space and partition sizes (DescribeLogDirs, as kafka-log-dirs); `move`
    moves a partition to another log dir (AlterReplicaLogDirs).

    `log-dirs` alone lists the dirs, as `log-dirs describe` does."""
    if ctx.invoked_subcommand is None:
        ctx.invoke(log_dirs_describe, **options)


@log_dirs.command("describe")
@click.option("--topic", "topics", multiple=True, help="Only these topics' partitions; repeatable.")
@click.option("--partitions/--no-partitions", default=True, show_default=True,
              help="Also list each partition with its size.")
@wire_command
def log_dirs_describe(client: WireClient, as_json: bool, topics: tuple[str, ...], partitions: bool) -> None:
    """Log dirs with their state, space and partition sizes (DescribeLogDirs, as kafka-log-dirs); a partition
    being moved is also listed under its target dir as a future replica, with its offset lag."""
    dirs = cluster_ops.log_dirs(client, topics)
    if as_json:  # the same flags as the table: --no-partitions leaves the partitions out here too
        click.echo(json.dumps(dirs if partitions else [{k: v for k, v in d.items() if k != "partitions"}
                                                       for d in dirs], indent=2))
        return
    # The table humanizes byte counts (`--json` above keeps them exact)
    emit([{**d, "state": d["error"] or "online", "size": human_bytes(d["size"]),
           "usable": human_bytes(d["usable_bytes"]), "total": human_bytes(d["total_bytes"])} for d in dirs],
         ["log_dir", "state", "partition_count", "size", "usable", "total"], False, empty="(no log dirs)")
    if partitions:
        rows = [{"log_dir": d["log_dir"], **p, "size": human_bytes(p["size"]),
                 "future": "future" if p["future"] else ""}
                for d in dirs for p in d["partitions"]]
        if rows:
            click.echo()
            emit(rows, ["topic", "partition", "size", "log_dir", "future", "offset_lag"], False)


@log_dirs.command("move")
@click.argument("topic")
@click.argument("partition", type=click.IntRange(0))
@click.argument("log_dir", metavar="DIR")
@click.option("--wait", "wait_s", type=click.FloatRange(0), default=None, metavar="SECONDS",
              help="Wait up to this long for the move to finish (default: return once it started).")
@wire_command
def log_dirs_move(client: WireClient, as_json: bool, topic: str, partition: int, log_dir: str,
                  wait_s: float | None) -> None:
    """Move PARTITION of TOPIC to the broker's log dir DIR (AlterReplicaLogDirs; DIR exactly as `log-dirs`
    shows it). The broker copies the partition while it keeps serving, then swaps it in; `log-dirs`
    shows the copy as a future replica until then."""
    cluster_ops.move_partition(client, topic, partition, log_dir)
    deadline = time.monotonic() + (wait_s or 0)
    state = "started"
    while wait_s is not None:
        rows = [(d["log_dir"], p["future"]) for d in cluster_ops.log_dirs(client, [topic]) for p in d["partitions"]
                if p["partition"] == partition]
        if [(os.path.normpath(d), future) for d, future in rows] == [(os.path.normpath(log_dir), False)]:
            state = "done"
            break
        if time.monotonic() >= deadline:
            fail(f"the move of {topic}-{partition} to {log_dir} has not finished after {wait_s} s")
        time.sleep(HEALTH_RETRY_S)
    emit([{"topic": topic, "partition": partition, "log_dir": log_dir, "move": state}],
         ["topic", "partition", "log_dir", "move"], as_json)


@click.group("configs", invoke_without_command=True,
             short_help="Configs in force (with sources), and every known key.")
@click.option("--scope", type=click.Choice(["broker", "topic"]), default=None,
              help="(Without a subcommand: as `configs keys --scope`.)")
@click.option("--json", "as_json", is_flag=True, help="(Without a subcommand: as `configs keys --json`.)")
@click.pass_context
def configs(ctx: click.Context, scope: str | None, as_json: bool) -> None:
    """The running broker's configs with their sources (`describe`), or every key pybroker knows (`keys`).

    `configs` alone prints the key table, as it did before it had subcommands."""
    if ctx.invoked_subcommand is None:
        ctx.invoke(configs_keys, scope=scope, as_json=as_json)


@configs.command("describe")
@click.option("--topic", default=None, help="A topic's configs (default: the broker's).")
@click.option("--broker", "broker_id", default=None, metavar="ID", help="The broker's node id (default: the one "
              "answering).")
@click.option("--key", "keys", multiple=True, help="Only this key; repeatable (shown even when it is the default).")
@click.option("--all", "include_defaults", is_flag=True, help="Every key, defaults included.")
@click.option("--synonyms", is_flag=True, help="Show the synonyms (the broker keys behind a topic key).")
@wire_command
def configs_describe(client: WireClient, as_json: bool, topic: str | None, broker_id: str | None,
                     keys: tuple[str, ...], include_defaults: bool, synonyms: bool) -> None:
    """Configs in force on the running broker (DescribeConfigs), each with its source: DYNAMIC_TOPIC_CONFIG,
    DYNAMIC_BROKER_CONFIG, STATIC_BROKER_CONFIG (server.properties, flags) or DEFAULT_CONFIG."""
    if topic is not None and broker_id is not None:
        raise click.UsageError("give --topic or --broker, not both")
    rows = cluster_ops.describe_configs(client, topic=topic, broker=broker_id, keys=keys,
                                        include_defaults=include_defaults)
    emit(rows, ["name", "value", "source", "read_only", "sensitive"] + (["synonyms"] if synonyms else []), as_json,
         empty="(every value is the default: add --all to list them)")


@configs.command("alter")
@click.option("--topic", default=None, help="A topic's configs (default: the broker's dynamic ones).")
@click.option("--broker", "broker_id", default=None, metavar="ID", help="The broker's node id (default: the one "
              "answering).")
@click.option("--set", "set_", multiple=True, metavar="KEY=VALUE", help="Set a key; repeatable.")
@click.option("--delete", multiple=True, metavar="KEY", help="Remove a key's override; repeatable.")
@wire_command
def configs_alter(client: WireClient, as_json: bool, topic: str | None, broker_id: str | None, set_: tuple[str, ...],
                  delete: tuple[str, ...]) -> None:
    """Change configs of the running broker or of a topic (IncrementalAlterConfigs, as kafka-configs --alter);
    prints the keys touched as they are now. A key the broker cannot change at runtime is refused, by name."""
    if topic is not None and broker_id is not None:
        raise click.UsageError("give --topic or --broker, not both")
    rows = cluster_ops.alter_configs(client, topic=topic, broker=broker_id, set_=pairs(set_, "--set"),
                                     delete=list(delete))
    emit(rows, ["name", "value", "source", "read_only", "sensitive"], as_json)


@configs.command("keys")
@click.option("--scope", type=click.Choice(["broker", "topic"]), default=None, help="Only these keys.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def configs_keys(scope: str | None, as_json: bool) -> None:
    """Every config key pybroker knows, from the one config table (type, default, dynamic, meaning); offline."""
    from pybroker.config.definitions import BROKER_DEFS, TOPIC_DEFS
    from pybroker.config.types import render

    rows = [{"scope": d.scope, "key": d.key, "type": d.type, "default": render(d.type, d.default),
             "dynamic": d.dynamic, "doc": d.doc}
            for d in (*BROKER_DEFS, *TOPIC_DEFS) if scope in (None, d.scope)]
    emit(rows, ["scope", "key", "type", "default", "dynamic", "doc"], as_json)


@click.command("health", short_help="Check the broker (exit 1 when unhealthy).")
@click.option("--wait", type=click.FloatRange(0), default=0.0, show_default=True, metavar="SECONDS",
              help="Keep checking (twice a second) until healthy or this much time has passed: for scripts "
                   "that wait for a broker to start.")
@wire_connector
def health(connect: Callable[[], WireClient], as_json: bool, wait: float) -> None:
    """Is the broker healthy? Exit 0 when it answers, every partition has a leader and every log dir is
    online; 1 otherwise (also when it cannot be reached)."""
    deadline = time.monotonic() + wait
    while True:
        try:
            client = connect()
            try:
                report = cluster_ops.health(client)
            finally:
                client.close()
        except WireError:
            if time.monotonic() >= deadline:
                raise
        else:
            if report["healthy"] or time.monotonic() >= deadline:
                break
        time.sleep(HEALTH_RETRY_S)
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        click.echo(f"healthy: {'yes' if report['healthy'] else 'NO'}")
        emit([{**c, "ok": "ok" if c["ok"] else "FAILED"} for c in report["checks"]], ["check", "ok", "detail"], False)
    if not report["healthy"]:
        sys.exit(1)


@click.command("completion", short_help="Print a shell completion script.")
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
@click.pass_context
def completion(ctx: click.Context, shell: str) -> None:
    """Print the shell completion script: `eval "$(pybroker completion bash)"` (zsh, fish alike)."""
    root = ctx.find_root().command
    cls = get_completion_class(shell)
    if cls is None:
        fail(f"click has no completion for {shell}")
    else:
        click.echo(cls(root, {}, "pybroker", COMPLETION_VAR).source())
