"""The admin commands: `pybroker topics|groups|acls|users|quotas|transactions ...` over the wire, `dump-log` and `check-log` offline.

Every wire command takes `--bootstrap-server HOST:PORT` (default 127.0.0.1:9092), as Kafka's tools
do, `--command-config FILE` (Kafka's client security keys: SASL PLAIN or SCRAM), and `--json` for
scripts (tables otherwise). Failures — an unreachable broker, a refusal with its
Kafka error name, a file that cannot be read — print one `pybroker: error: ...` line and exit 1;
`check-log` exits 1 when it finds problems.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import click

from pybroker.broker.admin import acls as acl_ops
from pybroker.broker.admin import groups as group_ops
from pybroker.broker.admin import quotas as quota_ops
from pybroker.broker.admin import topics as topic_ops
from pybroker.broker.admin import transactions as txn_ops
from pybroker.broker.admin import users as user_ops
from pybroker.broker.admin.client_config import ClientConfigError, ClientSecurity, load_client_security
from pybroker.broker.admin.dump_log import (
    format_batch,
    index_entries,
    log_batches,
    snapshot_entries,
    txn_index_entries,
)
from pybroker.broker.admin.output import emit
from pybroker.broker.admin.wire import DEFAULT_BOOTSTRAP, WireClient, WireError
from pybroker.broker.security.scram import MAX_ITERATIONS, MECHANISMS, MIN_ITERATIONS
from pybroker.protocol.acl_codes import AclOperation, AclPermissionType, PatternType, ResourceType
from pybroker.storage.verify import check_log_dir, segment_files

F = TypeVar("F", bound=Callable[..., Any])

#: check-log shows a progress bar when the segments add up to more than this
PROGRESS_BAR_BYTES = 64 * 1024 * 1024


def _fail(message: str) -> None:
    click.echo(f"pybroker: error: {message}", err=True)
    sys.exit(1)


def wire_command(fn: F) -> F:
    """--bootstrap-server, --json and --timeout, a connected client as `client`, and errors as one line."""

    @click.option("--bootstrap-server", "bootstrap", default=DEFAULT_BOOTSTRAP, show_default=True,
                  metavar="HOST:PORT", help="The broker to talk to.")
    @click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
    @click.option("--timeout", default=10.0, show_default=True, help="Seconds to wait for the broker.")
    @click.option("--command-config", "command_config", type=click.Path(dir_okay=False, path_type=Path),
                  default=None, metavar="FILE",
                  help="Client security settings (security.protocol, sasl.mechanism, sasl.jaas.config).")
    @functools.wraps(fn)
    def wrapper(bootstrap: str, as_json: bool, timeout: float, command_config: Path | None, **kwargs: Any) -> None:
        try:
            security = load_client_security(command_config) if command_config else ClientSecurity()
            with WireClient(bootstrap, timeout, security) as client:
                fn(client=client, as_json=as_json, **kwargs)
        except ClientConfigError as exc:
            _fail(str(exc))
        except WireError as exc:
            _fail(str(exc))
        except TimeoutError:
            _fail(f"the broker at {bootstrap} did not answer within {timeout}s")

    return wrapper  # type: ignore[return-value]


def _pairs(values: tuple[str, ...], option: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in values:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"expected KEY=VALUE, got {pair!r}", param_hint=option)
        out[key.strip()] = value.strip()
    return out


# -- acls --------------------------------------------------------------------------------------------
#: resource options, as kafka-acls names them: option -> resource type
_RESOURCE_OPTIONS = {"topic": ResourceType.TOPIC, "group": ResourceType.GROUP,
                     "transactional_id": ResourceType.TRANSACTIONAL_ID, "user": ResourceType.USER}
_OPERATIONS = [op.name for op in AclOperation if op not in (AclOperation.UNKNOWN, AclOperation.ANY)]


def _resource_options(fn: F) -> F:
    for option, help_text in (("--topic", "A topic (or prefix, with --resource-pattern-type prefixed)."),
                              ("--group", "A consumer group."),
                              ("--transactional-id", "A transactional id."),
                              ("--user", "A user principal's name (delegation tokens).")):
        fn = click.option(option, metavar="NAME", default=None, help=help_text)(fn)
    return click.option("--cluster", is_flag=True, help="The cluster (kafka-cluster).")(fn)


def _resource(cluster: bool, **names: str | None) -> tuple[ResourceType, str | None]:
    chosen = [(ResourceType.CLUSTER, "kafka-cluster")] if cluster else []
    chosen += [(_RESOURCE_OPTIONS[key], value) for key, value in names.items() if value is not None]
    if len(chosen) > 1:
        raise click.UsageError("name one resource: --topic, --group, --transactional-id, --user or --cluster")
    return chosen[0] if chosen else (ResourceType.ANY, None)


@click.group()
def acls() -> None:
    """List, add and remove ACLs (the broker needs authorizer.class.name)."""


@acls.command("list")
@_resource_options
@click.option("--resource-pattern-type", "pattern", default="any", show_default=True,
              type=click.Choice(["any", "match", "literal", "prefixed"], case_sensitive=False),
              help="match: every ACL that applies to the named resource (literal, wildcard and prefixes).")
@click.option("--principal", default=None, help="Only this principal's ACLs (User:alice).")
@wire_command
def acls_list(client: WireClient, as_json: bool, cluster: bool, pattern: str, principal: str | None,
              **names: str | None) -> None:
    """ACLs matching a filter (all of them without options)."""
    resource_type, name = _resource(cluster, **names)
    sel = acl_ops.Selection(resource_type, name, PatternType[pattern.upper()], principal)
    emit(acl_ops.list_acls(client, sel), acl_ops.COLUMNS, as_json, empty="(no ACLs)")


@acls.command("add")
@_resource_options
@click.option("--resource-pattern-type", "pattern", default="literal", show_default=True,
              type=click.Choice(["literal", "prefixed"], case_sensitive=False))
@click.option("--allow-principal", "allow", multiple=True, metavar="PRINCIPAL", help="Repeatable (User:alice).")
@click.option("--deny-principal", "deny", multiple=True, metavar="PRINCIPAL", help="Repeatable (User:mallory).")
@click.option("--host", "hosts", multiple=True, metavar="HOST", help="Client address; repeatable (default: *).")
@click.option("--operation", "operations", multiple=True, required=True,
              type=click.Choice(_OPERATIONS, case_sensitive=False), help="Repeatable.")
@wire_command
def acls_add(client: WireClient, as_json: bool, cluster: bool, pattern: str, allow: tuple[str, ...],
             deny: tuple[str, ...], hosts: tuple[str, ...], operations: tuple[str, ...], **names: str | None) -> None:
    """Allow (or deny) principals operations on one resource."""
    resource_type, name = _resource(cluster, **names)
    if name is None:
        raise click.UsageError("name the resource: --topic, --group, --transactional-id, --user or --cluster")
    if bool(allow) == bool(deny):
        raise click.UsageError("give --allow-principal or --deny-principal (not both)")
    permission = AclPermissionType.ALLOW if allow else AclPermissionType.DENY
    rows = acl_ops.add_acls(client, resource_type, name, PatternType[pattern.upper()], list(allow or deny),
                            list(hosts) or ["*"], [AclOperation[op.upper()] for op in operations], permission)
    emit(rows, acl_ops.COLUMNS, as_json)


@acls.command("remove")
@_resource_options
@click.option("--resource-pattern-type", "pattern", default="any", show_default=True,
              type=click.Choice(["any", "match", "literal", "prefixed"], case_sensitive=False))
@click.option("--principal", default=None, help="Only this principal's ACLs.")
@click.option("--host", default=None, help="Only ACLs for this host.")
@click.option("--operation", default=None, type=click.Choice(_OPERATIONS, case_sensitive=False))
@click.option("--permission", default=None, type=click.Choice(["allow", "deny"], case_sensitive=False))
@click.option("--all", "everything", is_flag=True, help="Allow a filter that matches every ACL.")
@wire_command
def acls_remove(client: WireClient, as_json: bool, cluster: bool, pattern: str, principal: str | None,
                host: str | None, operation: str | None, permission: str | None, everything: bool,
                **names: str | None) -> None:
    """Remove the ACLs a filter matches; prints what was removed."""
    resource_type, name = _resource(cluster, **names)
    if resource_type == ResourceType.ANY and principal is None and not everything:
        raise click.UsageError("this would remove every ACL: name a resource or a principal, or pass --all")
    sel = acl_ops.Selection(resource_type, name, PatternType[pattern.upper()], principal, host,
                            AclOperation[operation.upper()] if operation else AclOperation.ANY,
                            AclPermissionType[permission.upper()] if permission else AclPermissionType.ANY)
    emit(acl_ops.remove_acls(client, sel), acl_ops.COLUMNS, as_json, empty="(no ACLs matched)")


# -- topics ------------------------------------------------------------------------------------------
@click.group()
def topics() -> None:
    """List, describe, create, delete topics and change their configs."""


@topics.command("list")
@click.option("--include-internal", is_flag=True, help="Also list __consumer_offsets and friends.")
@wire_command
def topics_list(client: WireClient, as_json: bool, include_internal: bool) -> None:
    """Topic names with their partition counts."""
    emit(topic_ops.list_topics(client, include_internal), ["topic", "partitions", "topic_id"], as_json,
         empty="(no topics)")


@topics.command("describe")
@click.argument("names", nargs=-1)
@wire_command
def topics_describe(client: WireClient, as_json: bool, names: tuple[str, ...]) -> None:
    """Partitions (leader, replicas, log start and end offsets) and non-default configs."""
    rows = topic_ops.describe_topics(client, list(names) or None)
    if as_json:
        emit(rows, [], True)
        return
    emit(rows, ["topic", "partition", "leader", "replicas", "isr", "log_start_offset", "log_end_offset"], False,
         empty="(no topics)")
    for topic in sorted({row["topic"] for row in rows}):
        configs = next(row["configs"] for row in rows if row["topic"] == topic)
        if configs:
            click.echo(f"{topic} configs: " + ", ".join(f"{k}={v}" for k, v in sorted(configs.items())))


@topics.command("create")
@click.argument("name")
@click.option("--partitions", type=click.IntRange(1), default=1, show_default=True)
@click.option("--replication-factor", type=int, default=1, show_default=True)
@click.option("--config", "configs", multiple=True, metavar="KEY=VALUE", help="A topic config; repeatable.")
@wire_command
def topics_create(client: WireClient, as_json: bool, name: str, partitions: int, replication_factor: int,
                  configs: tuple[str, ...]) -> None:
    """Create a topic."""
    row = topic_ops.create_topic(client, name, partitions, replication_factor, _pairs(configs, "--config"))
    emit([row], ["topic", "partitions", "topic_id"], as_json)


@topics.command("delete")
@click.argument("names", nargs=-1, required=True)
@wire_command
def topics_delete(client: WireClient, as_json: bool, names: tuple[str, ...]) -> None:
    """Delete topics (their data goes too)."""
    emit(topic_ops.delete_topics(client, list(names)), ["topic", "deleted"], as_json)


@topics.command("alter-config")
@click.argument("name")
@click.option("--set", "set_", multiple=True, metavar="KEY=VALUE", help="Set a topic config; repeatable.")
@click.option("--delete", multiple=True, metavar="KEY", help="Remove an override; repeatable.")
@wire_command
def topics_alter_config(client: WireClient, as_json: bool, name: str, set_: tuple[str, ...],
                        delete: tuple[str, ...]) -> None:
    """Change a topic's configs (IncrementalAlterConfigs); prints the overrides now in force.

    Keys and valid values are listed in docs/configuration.md (and by `pybroker configs`)."""
    configs = topic_ops.alter_topic_config(client, name, _pairs(set_, "--set"), delete)
    emit([{"config": k, "value": v} for k, v in sorted(configs.items())], ["config", "value"], as_json,
         empty="(no overrides)")


# -- groups ------------------------------------------------------------------------------------------
@click.group()
def groups() -> None:
    """List and describe consumer groups, and reset their offsets."""


@groups.command("list")
@wire_command
def groups_list(client: WireClient, as_json: bool) -> None:
    """Every group with its state."""
    emit(group_ops.list_groups(client), ["group", "state", "protocol_type"], as_json, empty="(no groups)")


@groups.command("describe")
@click.argument("group")
@wire_command
def groups_describe(client: WireClient, as_json: bool, group: str) -> None:
    """Members, assignments, committed offsets and lag per partition."""
    described = group_ops.describe_group(client, group)
    if as_json:
        click.echo(json.dumps(described, indent=2))
        return
    click.echo(f"group {group}: {described['state']}, {len(described['members'])} member(s)")
    emit(described["offsets"], ["topic", "partition", "current_offset", "log_end_offset", "lag", "member_id",
                                "client_id", "host"], False, empty="(no committed offsets)")


@groups.command("reset-offsets")
@click.argument("group")
@click.option("--topic", "topic_names", multiple=True, help="Reset these topics (default: every committed one).")
@click.option("--to-earliest", "to", flag_value="earliest", help="To each log's start.")
@click.option("--to-latest", "to", flag_value="latest", help="To each log's end.")
@click.option("--to-offset", type=click.IntRange(0), help="To this offset (kept within each log).")
@click.option("--to-datetime", type=click.DateTime(formats=["%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M:%S.%f",
                                                             "%Y-%m-%d"]),
              help="To the first offset at or after this time (UTC unless it carries an offset).")
@click.option("--execute", is_flag=True, help="Commit the new offsets; without it, only show them.")
@wire_command
def groups_reset_offsets(client: WireClient, as_json: bool, group: str, topic_names: tuple[str, ...],
                         to: str | None, to_offset: int | None, to_datetime: datetime | None, execute: bool) -> None:
    """Move an empty group's committed offsets (shows the plan unless --execute)."""
    chosen = [name for name, given in (("earliest", to == "earliest"), ("latest", to == "latest"),
                                       ("offset", to_offset is not None), ("datetime", to_datetime is not None))
              if given]
    if len(chosen) != 1:
        raise click.UsageError("give exactly one of --to-earliest, --to-latest, --to-offset, --to-datetime")
    timestamp_ms = None
    if to_datetime is not None:
        moment = to_datetime if to_datetime.tzinfo else to_datetime.replace(tzinfo=UTC)
        timestamp_ms = int(moment.timestamp() * 1000)
    plan = group_ops.plan_reset(client, group, topic_names, to=chosen[0], offset=to_offset,
                                timestamp_ms=timestamp_ms)
    if execute:
        group_ops.commit_plan(client, group, plan)
    emit(plan, ["topic", "partition", "current_offset", "new_offset"], as_json)
    if not execute and not as_json:
        click.echo("(dry run: add --execute to commit these offsets)")


# -- users (SCRAM) -----------------------------------------------------------------------------------
@click.group()
def users() -> None:
    """List, add and delete SCRAM users (the password is salted and hashed here; only the hash travels)."""


_MECHANISM = click.option("--mechanism", type=click.Choice(sorted(MECHANISMS)), default="SCRAM-SHA-512",
                          show_default=True)


@users.command("list")
@click.argument("names", nargs=-1)
@wire_command
def users_list(client: WireClient, as_json: bool, names: tuple[str, ...]) -> None:
    """SCRAM users with their mechanisms and iteration counts."""
    emit(user_ops.list_users(client, list(names) or None), ["user", "mechanism", "iterations"], as_json,
         empty="(no SCRAM users)")


@users.command("add")
@click.argument("name")
@_MECHANISM
@click.option("--password", prompt=True, hide_input=True, confirmation_prompt=True,
              help="Asked for when not given (better than on the command line, where ps shows it).")
@click.option("--iterations", type=click.IntRange(MIN_ITERATIONS, MAX_ITERATIONS), default=MIN_ITERATIONS,
              show_default=True)
@wire_command
def users_add(client: WireClient, as_json: bool, name: str, mechanism: str, password: str, iterations: int) -> None:
    """Create a SCRAM user, or change its password."""
    user_ops.add_user(client, name, mechanism, password, iterations)
    emit([{"user": name, "mechanism": mechanism, "iterations": iterations}], ["user", "mechanism", "iterations"],
         as_json)


@users.command("delete")
@click.argument("name")
@_MECHANISM
@wire_command
def users_delete(client: WireClient, as_json: bool, name: str, mechanism: str) -> None:
    """Remove a user's SCRAM credential for one mechanism."""
    user_ops.delete_user(client, name, mechanism)
    emit([{"user": name, "mechanism": mechanism, "deleted": True}], ["user", "mechanism", "deleted"], as_json)


# -- client quotas ----------------------------------------------------------------------------------
@click.group()
def quotas() -> None:
    """Describe and alter client quotas (producer_byte_rate, consumer_byte_rate, ...), as kafka-configs."""


_ENTITY_TYPE = click.option("--entity-type", type=click.Choice(sorted(quota_ops.ENTITY_TYPES)),
                            help="users, clients (client-id) or ips.")
_ENTITY_NAME = click.option("--entity-name", help="The user, client-id or IP (omit with --entity-default).")
_ENTITY_DEFAULT = click.option("--entity-default", is_flag=True, help="The default user or client-id.")


@quotas.command("describe")
@_ENTITY_TYPE
@_ENTITY_NAME
@_ENTITY_DEFAULT
@wire_command
def quotas_describe(client: WireClient, as_json: bool, entity_type: str | None, entity_name: str | None,
                    entity_default: bool) -> None:
    """Configured quotas (all, or those of one entity type / name / the default)."""
    if entity_type is None and (entity_name or entity_default):
        _fail("--entity-name and --entity-default need --entity-type")
    emit(quota_ops.describe(client, entity_type, entity_name, entity_default), ["entity", "key", "value"], as_json,
         empty="(no client quotas)")


@quotas.command("alter")
@_ENTITY_TYPE
@_ENTITY_NAME
@_ENTITY_DEFAULT
@click.option("--add-config", "add_config", default="", help="key=value,key=value to set.")
@click.option("--delete-config", "delete_config", default="", help="key,key to remove.")
@wire_command
def quotas_alter(client: WireClient, as_json: bool, entity_type: str | None, entity_name: str | None,
                 entity_default: bool, add_config: str, delete_config: str) -> None:
    """Set or remove quota keys of one entity."""
    if entity_type is None or bool(entity_name) == entity_default:
        _fail("give --entity-type and exactly one of --entity-name / --entity-default")
    add = _pairs(tuple(p for p in add_config.split(",") if p), "--add-config")
    delete = [k.strip() for k in delete_config.split(",") if k.strip()]
    if not add and not delete:
        _fail("nothing to do: give --add-config and/or --delete-config")
    assert entity_type is not None
    quota_ops.alter(client, entity_type, None if entity_default else entity_name, add, delete)
    emit([{"entity_type": entity_type, "entity": entity_name or "<default>", "set": ",".join(add),
           "removed": ",".join(delete)}], ["entity_type", "entity", "set", "removed"], as_json)


# -- transactions (kafka-transactions.sh) ------------------------------------------------------------
@click.group()
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
        _fail("--partition needs --topic")
    rows = txn_ops.find_hanging(client, topic, partition, max_minutes * txn_ops.MINUTE_MS)
    emit(rows, txn_ops.HANGING_COLUMNS, as_json, empty="(no hanging transactions)")


# -- offline tools -----------------------------------------------------------------------------------
@click.command("dump-log")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--print-records", is_flag=True, help="Decode each batch's records too.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per batch or index entry, a line each.")
def dump_log(file: Path, print_records: bool, as_json: bool) -> None:
    """Decode a segment (.log), index (.index, .timeindex, .txnindex) or producer snapshot (.snapshot) file,
    like kafka-dump-log."""
    try:
        base = int(file.stem)
    except ValueError:
        _fail(f"{file.name} is not a segment file (expected a 20-digit base offset name)")
        return
    readers = {".log": lambda: log_batches(file, print_records), ".index": lambda: index_entries(file),
               ".timeindex": lambda: index_entries(file), ".txnindex": lambda: txn_index_entries(file),
               ".snapshot": lambda: snapshot_entries(file)}
    reader = readers.get(file.suffix)
    if reader is None:
        _fail(f"{file.name}: expected a .log, .index, .timeindex, .txnindex or .snapshot file")
        return
    try:
        items = list(reader())
    except OSError as exc:
        _fail(f"cannot read {file}: {exc.strerror or exc}")
        return
    if as_json:
        for item in items:
            click.echo(json.dumps(item))
        return
    click.echo(f"Dumping {file}")
    if file.suffix == ".log":
        click.echo(f"Log starting offset: {base}")
        for batch in items:
            for line in format_batch(batch):
                click.echo(line)
    else:
        for entry in items:
            click.echo(" ".join(f"{k}: {v}" for k, v in entry.items()))


@click.command("check-log")
@click.argument("log_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def check_log(log_dir: Path, as_json: bool) -> None:
    """Verify every batch's CRC and framing and the indexes of a log dir, offline (stop the broker first)."""
    total = sum(path.stat().st_size for path in segment_files(log_dir))
    try:
        if total > PROGRESS_BAR_BYTES and not as_json:
            with click.progressbar(length=total, label="checking", file=sys.stderr) as bar:
                report = check_log_dir(log_dir, bar.update)
        else:
            report = check_log_dir(log_dir)
    except OSError as exc:
        _fail(f"cannot read {exc.filename or log_dir}: {exc.strerror or exc}")
        return
    problems = [{"file": p.file, "position": p.position, "problem": p.message} for p in report.problems]
    if as_json:
        click.echo(json.dumps({"partitions": report.partitions, "segments": report.segments,
                               "batches": report.batches, "bytes": report.bytes, "problems": problems}, indent=2))
    else:
        click.echo(f"checked {report.partitions} partition(s), {report.segments} segment(s), "
                   f"{report.batches} batch(es), {report.bytes} bytes: "
                   + (f"{len(problems)} problem(s)" if problems else "OK"))
        emit(problems, ["file", "position", "problem"], False)
    if problems:
        sys.exit(1)


@click.command("configs")
@click.option("--scope", type=click.Choice(["broker", "topic"]), default=None, help="Only these keys.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def configs(scope: str | None, as_json: bool) -> None:
    """Every config key pybroker knows, from the one config table (type, default, dynamic, meaning)."""
    from pybroker.config.definitions import BROKER_DEFS, TOPIC_DEFS
    from pybroker.config.types import render

    rows = [{"scope": d.scope, "key": d.key, "type": d.type, "default": render(d.type, d.default),
             "dynamic": d.dynamic, "doc": d.doc}
            for d in (*BROKER_DEFS, *TOPIC_DEFS) if scope in (None, d.scope)]
    emit(rows, ["scope", "key", "type", "default", "dynamic", "doc"], as_json)


ADMIN_COMMANDS = (topics, groups, acls, users, quotas, transactions, dump_log, check_log, configs)
