"""`pybroker produce` and `pybroker consume`: kafka-console-producer / -consumer (and rpk's produce and
consume) over our own wire client. See `formats` for the line formats, `producer` and `consumer` for
what goes over the wire.
"""

from __future__ import annotations

import io
import json
import re
import select
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import click

from pybroker.clients.admin.cli_support import fail, pairs, progress, warn, wire_command
from pybroker.clients.admin.consumer import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    Consumer,
    GroupMember,
    StartAt,
    parse_start,
    start_positions,
    topic_partitions,
)
from pybroker.clients.admin.formats import (
    ENCODINGS,
    InputError,
    LineFormat,
    OutgoingRecord,
    PrintFormat,
    check_template,
    json_object,
    parse_json_line,
    parse_line,
    templated,
    text_line,
)
from pybroker.clients.admin.output import emit
from pybroker.clients.admin.producer import CODECS, Producer
from pybroker.clients.admin.times import DATETIME
from pybroker.clients.admin.topics import LATEST, list_offsets, list_topics
from pybroker.clients.wire import WireClient, WireError

ACKS = {"all": -1, "-1": -1, "0": 0, "1": 1}
#: kafka-console-producer's reader properties we take with --property
READER_PROPERTIES = ("parse.key", "key.separator", "parse.headers", "headers.delimiter", "headers.separator",
                     "headers.key.separator", "null.marker", "ignore.error")
#: kafka-console-consumer's formatter properties we take with --property
PRINT_PROPERTIES = ("print.key", "print.headers", "print.timestamp", "print.partition", "print.offset",
                    "key.separator", "null.literal")


def _true(text: str) -> bool:
    return text.strip().lower() == "true"


def _unknown_properties(given: dict[str, str], known: tuple[str, ...]) -> None:
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise click.BadParameter(f"unknown {', '.join(unknown)} (known: {', '.join(known)})", param_hint="--property")


def _lines(stream: IO[str]) -> Iterator[tuple[int, str, int]]:
    """(number, line without its end, bytes read) of each input line."""
    for number, raw in enumerate(stream, start=1):
        yield number, raw.rstrip("\r\n"), len(raw.encode())


# -- produce -------------------------------------------------------------------------------------------
@click.command("produce", short_help="Send records from stdin, a file or arguments.")
@click.argument("topic")
@click.option("--value", "values", multiple=True, help="Records as arguments instead of lines (each read as a line would be); repeatable.")
@click.option("--file", "input_file", type=click.File("r", encoding="utf-8"), default=None,
              help="Read records from this file instead of stdin ('-': stdin).")
@click.option("--key", "fixed_key", default=None, help="The key of every record.")
@click.option("--key-separator", default=None, metavar="SEP",
              help="Each line is KEY<SEP>VALUE (kafka-console-producer's parse.key=true key.separator=SEP).")
@click.option("--parse-key", is_flag=True, help="Each line is KEY<TAB>VALUE (or --key-separator).")
@click.option("--parse-headers", is_flag=True,
              help="Each line starts with headers: k1:v1,k2:v2<TAB> (Kafka's parse.headers=true).")
@click.option("--header", "headers", multiple=True, metavar="KEY=VALUE", help="A header on every record; repeatable.")
@click.option("--null-marker", default=None, help="A key or value equal to this is sent as null.")
@click.option("--input-format", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help='json: one object a line, {"key", "value", "headers", "partition", "timestamp"}.')
@click.option("--encoding", type=click.Choice(["text", "hex", "base64"]), default="text", show_default=True,
              help="How keys, values and header values are written (hex, base64: binary data).")
@click.option("--property", "properties", multiple=True, metavar="KEY=VALUE",
              help="kafka-console-producer's reader properties: " + ", ".join(READER_PROPERTIES) + ".")
@click.option("--partition", "-p", type=click.IntRange(0), default=None,
              help="Send every record to this partition (default: by key, keyless ones spread).")
@click.option("--acks", type=click.Choice(list(ACKS)), default="all", show_default=True)
@click.option("--compression", type=click.Choice(sorted(CODECS)), default="none", show_default=True)
@click.option("--batch-size", type=click.IntRange(1, 100_000), default=1000, show_default=True,
              help="Records per request (input from a terminal is sent line by line).")
@click.option("--ignore-error", is_flag=True, help="Skip a line that cannot be parsed (with a warning) and go on.")
@click.option("--client-id", default="pybroker-produce", show_default=True)
@wire_command
def produce(client: WireClient, as_json: bool, topic: str, values: tuple[str, ...], input_file: IO[str] | None,
            fixed_key: str | None, key_separator: str | None, parse_key: bool, parse_headers: bool,
            headers: tuple[str, ...], null_marker: str | None, input_format: str, encoding: str,
            properties: tuple[str, ...],
            partition: int | None, acks: str, compression: str, batch_size: int, ignore_error: bool,
            client_id: str) -> None:
    """Send records to a topic: --value arguments, or one record per line of a file or stdin.

    Prints, per partition, the first offset written and how many records went there."""
    client.client_id = client_id
    props = pairs(properties, "--property")
    _unknown_properties(props, READER_PROPERTIES)
    separator = key_separator if key_separator is not None else props.get("key.separator")
    keyed = parse_key or _true(props.get("parse.key", "false")) or key_separator is not None
    fmt = LineFormat(key_separator=(separator if separator is not None else "\t") if keyed else None,
                     parse_headers=parse_headers or _true(props.get("parse.headers", "false")),
                     headers_delimiter=props.get("headers.delimiter", "\t"),
                     headers_separator=props.get("headers.separator", ","),
                     headers_key_separator=props.get("headers.key.separator", ":"),
                     null_marker=null_marker if null_marker is not None else props.get("null.marker"),
                     encoding=encoding)
    ignore_error = ignore_error or _true(props.get("ignore.error", "false"))
    static_headers = [(k, v.encode()) for k, v in pairs(headers, "--header").items()]
    key_bytes = None if fixed_key is None else fixed_key.encode()
    producer = Producer(client, topic, acks=ACKS[acks], compression=compression, partition=partition)
    stream: IO[str] = input_file if input_file is not None else sys.stdin
    interactive = not values and stream.isatty()
    size = _input_size(stream) if not values else 0
    totals: dict[int, dict[str, Any]] = {}
    pending: list[OutgoingRecord] = []

    def flush() -> None:
        for row in producer.send(pending):
            seen = totals.setdefault(row["partition"], {**row, "records": 0})
            seen["records"] += row["records"]
        pending.clear()

    lines = ((i, v, 0) for i, v in enumerate(values, start=1)) if values else _lines(stream)
    if interactive:
        click.echo(f"producing to {topic}: one record per line, Ctrl-D to finish", err=True)
    with progress(size, f"producing to {topic}", as_json or interactive or size == 0) as bar:
        for number, line, nbytes in lines:
            bar.update(nbytes)
            try:
                record = parse_json_line(line, number, encoding) if input_format == "json" \
                    else parse_line(line, number, fmt)
            except InputError as exc:
                if not ignore_error:
                    flush()  # the lines before it go, as kafka-console-producer would have sent them
                    fail(f"{exc}; the {number - 1} line(s) before it were sent" if number > 1 else str(exc))
                warn(f"skipped {exc}")
                continue
            if key_bytes is not None and record.key is None:
                record.key = key_bytes
            record.headers = static_headers + record.headers
            pending.append(record)
            if interactive or len(pending) >= batch_size or (not values and not _more_waiting(stream)):
                flush()
        flush()
    emit([totals[p] for p in sorted(totals)], ["topic", "partition", "offset", "records"], as_json,
         empty="(no records sent)")


def _more_waiting(stream: IO[str]) -> bool:
    """Whether more input is ready now: a pipe that went quiet (`tail -f log | pybroker produce t`) has its
    records sent at once instead of waiting for a full batch."""
    try:
        return bool(select.select([stream], [], [], 0)[0])
    except (OSError, ValueError, io.UnsupportedOperation):
        return True  # not a descriptor (a test's string stream): batch


def _input_size(stream: IO[str]) -> int:
    try:
        return Path(stream.name).stat().st_size if isinstance(stream.name, str) and stream.name != "<stdin>" else 0
    except (OSError, AttributeError):
        return 0


# -- consume -------------------------------------------------------------------------------------------
@click.command("consume", short_help="Print records (alone or in a consumer group).")
@click.argument("topics", nargs=-1, required=True)
@click.option("--regex", "-r", is_flag=True,
              help="TOPICS are regular expressions: consume every (non-internal) topic one matches whole, as "
                   "kafka-console-consumer's --include (topics created later are not picked up).")
@click.option("--partition", "-p", "partitions", type=click.IntRange(0), multiple=True,
              help="Only these partitions; repeatable (not with --group).")
@click.option("--offset", "start", default=None, metavar="SPEC",
              help="Where to start: earliest, latest (the default), an offset N, -N (N before the end) or "
                   "@MS (a timestamp in ms); not with --group.")
@click.option("--from-beginning", is_flag=True, help="Start at the earliest offset (with --group: where the "
              "group has no committed offset).")
@click.option("--from-timestamp", type=DATETIME, default=None,
              help="Start at the first record at or after this time (ISO 8601, UTC without a zone, or ms).")
@click.option("--group", "-g", default=None, help="Consume as a member of this group, committing its offsets.")
@click.option("--commit/--no-commit", default=True, show_default=True, help="With --group: commit offsets.")
@click.option("--max-messages", "-n", type=click.IntRange(1), default=None, help="Stop after this many records.")
@click.option("--idle-timeout", type=click.FloatRange(0, min_open=True), default=None, metavar="SECONDS",
              help="Stop when no record came for this long (kafka-console-consumer's --timeout-ms).")
@click.option("--exit-at-end", "-e", is_flag=True, help="Stop at the end offsets the partitions had at start.")
@click.option("--encoding", type=click.Choice(ENCODINGS), default="text", show_default=True,
              help="How keys, values and header values are shown.")
@click.option("--print-key", is_flag=True)
@click.option("--print-headers", is_flag=True)
@click.option("--print-timestamp", is_flag=True)
@click.option("--print-partition", is_flag=True)
@click.option("--print-offset", is_flag=True)
@click.option("--key-separator", default=None, metavar="SEP", help="Between the printed fields (a tab).")
@click.option("--format", "template", default=None, metavar="TEMPLATE",
              help=r"Print each record through a template, as rpk and kcat: %t topic, %p partition, %o offset, "
                   r"%k key, %v value, %T timestamp, %h headers, %K/%V key/value size, %% a percent sign, "
                   r"\n \t escapes (e.g. '%k=%v\n').")
@click.option("--property", "properties", multiple=True, metavar="KEY=VALUE",
              help="kafka-console-consumer's formatter properties: " + ", ".join(PRINT_PROPERTIES) + ".")
@click.option("--isolation-level", type=click.Choice(["read_uncommitted", "read_committed"]),
              default="read_uncommitted", show_default=True)
@click.option("--client-id", default="pybroker-consume", show_default=True,
              help="What groups describe --members shows for this member.")
@wire_command
def consume(client: WireClient, as_json: bool, topics: tuple[str, ...], regex: bool, partitions: tuple[int, ...],
            start: str | None, from_beginning: bool, from_timestamp: int | None, group: str | None, commit: bool,
            max_messages: int | None, idle_timeout: float | None, exit_at_end: bool, encoding: str,
            print_key: bool, print_headers: bool, print_timestamp: bool, print_partition: bool,
            print_offset: bool, key_separator: str | None, template: str | None, properties: tuple[str, ...],
            isolation_level: str, client_id: str) -> None:
    """Print records of topics: one line each (value, and the fields asked for), or JSON lines with --json.

    Runs until Ctrl-C unless --max-messages, --idle-timeout or --exit-at-end says when to stop."""
    client.client_id = client_id
    props = pairs(properties, "--property")
    _unknown_properties(props, PRINT_PROPERTIES)
    fmt = PrintFormat(encoding=encoding,
                      key_separator=key_separator if key_separator is not None else props.get("key.separator", "\t"),
                      print_key=print_key or _true(props.get("print.key", "false")),
                      print_headers=print_headers or _true(props.get("print.headers", "false")),
                      print_timestamp=print_timestamp or _true(props.get("print.timestamp", "false")),
                      print_partition=print_partition or _true(props.get("print.partition", "false")),
                      print_offset=print_offset or _true(props.get("print.offset", "false")),
                      null_literal=props.get("null.literal", "null"))
    if template is not None:
        if as_json:
            raise click.UsageError("--format and --json exclude each other")
        try:
            check_template(template)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--format") from None
    starts = [s for s in (start, "earliest" if from_beginning else None,
                          None if from_timestamp is None else f"@{from_timestamp}") if s is not None]
    if len(starts) > 1:
        raise click.UsageError("give one of --offset, --from-beginning, --from-timestamp")
    if group is not None and (partitions or start is not None or from_timestamp is not None):
        raise click.UsageError("with --group the group's committed offsets say where to start: "
                               "--partition, --offset and --from-timestamp do not apply")
    try:
        start_at = parse_start(starts[0]) if starts else StartAt("latest")
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--offset") from None
    if regex:
        topics = tuple(_matching_topics(client, topics))
    reset = "earliest" if from_beginning else "latest"
    consumer = Consumer(client, reset=reset,
                        isolation=READ_COMMITTED if isolation_level == "read_committed" else READ_UNCOMMITTED,
                        max_wait_ms=500 if idle_timeout is None else max(10, min(500, int(idle_timeout * 1000))))
    member = GroupMember(client, group, topics) if group is not None else None

    def assign() -> dict[tuple[str, int], int]:
        if member is not None:
            keys = member.join()
            consumer.assign(member.starting_positions(keys, reset))
        else:
            keys = topic_partitions(client, topics, partitions)
            consumer.assign(start_positions(client, keys, start_at))
        return list_offsets(client, keys, LATEST, consumer.isolation) if exit_at_end else {}

    count = 0
    interrupted = False
    try:
        ends = assign()
        last_record = time.monotonic()
        while max_messages is None or count < max_messages:
            records = consumer.poll()
            for record in records[:None if max_messages is None else max_messages - count]:
                if template is not None:
                    click.echo(templated(record, template, encoding), nl=False)
                else:
                    click.echo(json.dumps(json_object(record, encoding), default=str) if as_json
                               else text_line(record, fmt))
                consumer.delivered[(record.topic, record.partition)] = record.offset + 1
                count += 1
            if records:
                sys.stdout.flush()  # a pipe (consume | jq) sees each poll's records now, not a buffer later
            now = time.monotonic()
            if records:
                last_record = now
            elif idle_timeout is not None and now - last_record >= idle_timeout:
                break
            if exit_at_end and consumer.caught_up(ends):
                break
            if member is not None and member.heartbeat_due():
                if commit:
                    member.commit(consumer.delivered)
                if not member.heartbeat():
                    ends = assign()
    except KeyboardInterrupt:
        interrupted = True
    finally:
        if member is not None and member.member_id:
            _commit_and_leave(client, member, consumer.delivered if commit else None, reconnect=interrupted)
    if not as_json:
        click.echo(f"Processed a total of {count} messages", err=True)
    sys.stdout.flush()


def _matching_topics(client: WireClient, patterns: tuple[str, ...]) -> list[str]:
    try:
        compiled = [re.compile(p) for p in patterns]
    except re.error as exc:
        raise click.BadParameter(f"{exc.pattern!r}: {exc}", param_hint="TOPICS") from None
    names = [t["topic"] for t in list_topics(client, include_internal=False)]
    matched = [name for name in names if any(c.fullmatch(name) for c in compiled)]
    if not matched:
        raise WireError(f"no topic matches {', '.join(patterns)}", "UNKNOWN_TOPIC_OR_PARTITION")
    return matched


def _commit_and_leave(client: WireClient, member: GroupMember, offsets: dict[tuple[str, int], int] | None,
                      *, reconnect: bool) -> None:
    """The last commit and a clean leave (so the group rebalances at once, not after the session timeout).

    After Ctrl-C the connection may hold half an exchange: start a fresh one first."""
    try:
        if reconnect:
            client.close()
            client.connect()
        if offsets is not None:
            member.commit(offsets)
        member.leave()
    except WireError as exc:
        warn(f"could not commit and leave group {member.group}: {exc}")

