"""The admin commands over the wire: `pybroker topics|acls|users|quotas ...`, and the list of every admin
command the `pybroker` program adds beside `start` (groups, produce, consume, transactions, ... live in
modules of their own).

Every wire command takes `--bootstrap-server HOST:PORT[,HOST:PORT]` (default from
`PYBROKER_BOOTSTRAP_SERVER`, else 127.0.0.1:9092), as Kafka's tools do, `--command-config FILE` (Kafka's
client security keys: SASL PLAIN or SCRAM, TLS), and `--json` for scripts (tables otherwise). Failures —
an unreachable broker, a refusal with its Kafka error name, a file that cannot be read — print one
`pybroker: error: ...` line (a JSON object under `--json`) and exit 1. See `cli_support`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from pybroker.clients.admin import acls as acl_ops
from pybroker.clients.admin import quotas as quota_ops
from pybroker.clients.admin import topics as topic_ops
from pybroker.clients.admin import users as user_ops
from pybroker.clients.admin.cli_support import fail, pairs, wire_command
from pybroker.clients.admin.cluster_commands import completion, configs, health, log_dirs
from pybroker.clients.admin.consumer import topic_partitions
from pybroker.clients.admin.data_commands import consume, produce
from pybroker.clients.admin.group_commands import groups
from pybroker.clients.admin.offline_commands import check_log, dump_log
from pybroker.clients.admin.output import emit
from pybroker.clients.admin.share_group_commands import share_groups
from pybroker.clients.admin.times import parse_datetime_ms
from pybroker.clients.admin.transaction_commands import transactions
from pybroker.clients.wire import WireClient
from pybroker.protocol.acl_codes import AclOperation, AclPermissionType, PatternType, ResourceType
from pybroker.protocol.scram_mechanisms import MAX_ITERATIONS, MECHANISMS, MIN_ITERATIONS

F = TypeVar("F", bound=Callable[..., Any])


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


@click.group(short_help="List, add and remove ACLs.")
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
@click.group(short_help="List, describe, create, delete and alter topics.")
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
@click.option("--include-internal", is_flag=True,
              help="Without names, also describe __consumer_offsets and other internal topics.")
@wire_command
def topics_describe(client: WireClient, as_json: bool, names: tuple[str, ...], include_internal: bool) -> None:
    """Partitions (leader, replicas, log start and end offsets) and non-default configs.

    Without names: every topic but the internal ones (as Kafka's --exclude-internal)."""
    rows = topic_ops.describe_topics(client, list(names) or None, include_internal)
    if as_json:
        emit(rows, [], True)
        return
    emit(rows, ["topic", "partition", "leader", "replicas", "isr", "log_start_offset", "log_end_offset"], False,
         empty="(no topics)")
    for topic in sorted({row["topic"] for row in rows}):
        configs = next(row["configs"] for row in rows if row["topic"] == topic)
        if configs:
            click.echo(f"{topic} configs: " + ", ".join(f"{k}={v}" for k, v in sorted(configs.items())))


@topics.command("add-partitions")
@click.argument("name")
@click.option("--total", type=click.IntRange(1), default=None, help="The partition count to grow to.")
@click.option("--num", "more", type=click.IntRange(1), default=None, help="How many partitions to add.")
@wire_command
def topics_add_partitions(client: WireClient, as_json: bool, name: str, total: int | None, more: int | None) -> None:
    """Add partitions to a topic (CreatePartitions); keyed records may map to other partitions afterwards."""
    if (total is None) == (more is None):
        raise click.UsageError("give exactly one of --total N (the new count) or --num N (how many to add)")
    emit([topic_ops.add_partitions(client, name, total, more)], ["topic", "partitions_before", "partitions"], as_json)


@topics.command("offsets")
@click.argument("names", nargs=-1, required=True)
@click.option("--partition", "-p", "partitions", type=click.IntRange(0), multiple=True,
              help="Only these partitions; repeatable.")
@click.option("--time", "when", default="latest", show_default=True, metavar="WHEN",
              help="earliest, latest, max-timestamp (the record with the largest timestamp), or a time "
                   "(ISO 8601 or ms): the first record at or after it.")
@wire_command
def topics_offsets(client: WireClient, as_json: bool, names: tuple[str, ...], partitions: tuple[int, ...],
                   when: str) -> None:
    """Each partition's offset at a time (ListOffsets, as kafka-get-offsets): where a log starts or ends, or the
    first record at or after a moment (offset "-" when there is none)."""
    try:
        timestamp = topic_ops.TIME_WORDS[when] if when in topic_ops.TIME_WORDS else parse_datetime_ms(when)
    except ValueError:
        raise click.BadParameter(f"{when!r}: use earliest, latest, max-timestamp, an ISO 8601 time or ms",
                                 param_hint="--time") from None
    keys = topic_partitions(client, names, partitions)
    emit(topic_ops.offsets_at(client, keys, timestamp), ["topic", "partition", "offset", "timestamp"], as_json)


@topics.command("delete-records")
@click.argument("name")
@click.option("--partition", "-p", "partitions", type=click.IntRange(0), multiple=True,
              help="Only these partitions (default: all); repeatable.")
@click.option("--before", required=True, metavar="OFFSET|latest",
              help="Delete the records before this offset (latest: every record there is now).")
@wire_command
def topics_delete_records(client: WireClient, as_json: bool, name: str, partitions: tuple[int, ...],
                          before: str) -> None:
    """Delete a partition's oldest records (DeleteRecords, as kafka-delete-records): its log start moves up to
    the offset; prints the new log start offset of each partition."""
    if before != "latest" and not before.isdigit():
        raise click.BadParameter(f"{before!r}: an offset or latest", param_hint="--before")
    offset = topic_ops.LATEST if before == "latest" else int(before)
    keys = topic_partitions(client, [name], partitions)
    emit(topic_ops.delete_records(client, dict.fromkeys(keys, offset)), ["topic", "partition", "low_watermark"],
         as_json)


@topics.command("create")
@click.argument("name")
@click.option("--partitions", type=click.IntRange(1), default=1, show_default=True)
@click.option("--replication-factor", type=int, default=1, show_default=True)
@click.option("--config", "configs", multiple=True, metavar="KEY=VALUE", help="A topic config; repeatable.")
@click.option("--if-not-exists", is_flag=True, help="An existing topic is no error (it is left as it is).")
@wire_command
def topics_create(client: WireClient, as_json: bool, name: str, partitions: int, replication_factor: int,
                  configs: tuple[str, ...], if_not_exists: bool) -> None:
    """Create a topic."""
    row = topic_ops.create_topic(client, name, partitions, replication_factor, pairs(configs, "--config"),
                                 if_not_exists=if_not_exists)
    emit([row], ["topic", "partitions", "topic_id", "created"], as_json)


@topics.command("delete")
@click.argument("names", nargs=-1, required=True)
@click.option("--if-exists", is_flag=True, help="A topic that does not exist is no error.")
@wire_command
def topics_delete(client: WireClient, as_json: bool, names: tuple[str, ...], if_exists: bool) -> None:
    """Delete topics (their data goes too)."""
    emit(topic_ops.delete_topics(client, list(names), if_exists=if_exists), ["topic", "deleted"], as_json)


@topics.command("alter-config")
@click.argument("name")
@click.option("--set", "set_", multiple=True, metavar="KEY=VALUE", help="Set a topic config; repeatable.")
@click.option("--delete", multiple=True, metavar="KEY", help="Remove an override; repeatable.")
@wire_command
def topics_alter_config(client: WireClient, as_json: bool, name: str, set_: tuple[str, ...],
                        delete: tuple[str, ...]) -> None:
    """Change a topic's configs (IncrementalAlterConfigs); prints the overrides now in force.

    Keys and valid values are listed in docs/configuration.md (and by `pybroker configs keys`)."""
    configs = topic_ops.alter_topic_config(client, name, pairs(set_, "--set"), delete)
    emit([{"config": k, "value": v} for k, v in sorted(configs.items())], ["config", "value"], as_json,
         empty="(no overrides)")


# -- users (SCRAM) -----------------------------------------------------------------------------------
@click.group(short_help="List, add and delete SCRAM users.")
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


def _password(given: str | None) -> str:
    """The password: given, typed twice at a terminal (hidden), or the first line of a pipe. Not through
    getpass on a pipe: it warns (GetPassWarning) and would echo; nobody is there to confirm it either."""
    if given is not None:
        return given
    if sys.stdin.isatty():
        return str(click.prompt("Password", hide_input=True, confirmation_prompt=True))
    line = sys.stdin.readline().rstrip("\r\n")
    if not line:
        raise click.BadParameter("no password given and none on standard input", param_hint="--password")
    return line


@users.command("add")
@click.argument("name")
@_MECHANISM
@click.option("--password", callback=lambda ctx, param, value: _password(value),
              help="Asked for when not given (better than on the command line, where ps shows it); read from "
                   "the first line of standard input when that is a pipe.")
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
@click.group(short_help="Describe and alter client quotas.")
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
        fail("--entity-name and --entity-default need --entity-type")
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
        fail("give --entity-type and exactly one of --entity-name / --entity-default")
    add = pairs(tuple(p for p in add_config.split(",") if p), "--add-config")
    delete = [k.strip() for k in delete_config.split(",") if k.strip()]
    if not add and not delete:
        fail("nothing to do: give --add-config and/or --delete-config")
    assert entity_type is not None
    quota_ops.alter(client, entity_type, None if entity_default else entity_name, add, delete)
    emit([{"entity_type": entity_type, "entity": entity_name or "<default>", "set": ",".join(add),
           "removed": ",".join(delete)}], ["entity_type", "entity", "set", "removed"], as_json)


ADMIN_COMMANDS = (topics, groups, share_groups, produce, consume, transactions, acls, users, quotas, log_dirs, configs, health,
                  dump_log, check_log, completion)
