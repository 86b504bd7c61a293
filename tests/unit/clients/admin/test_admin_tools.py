"""The admin CLI's pure parts: the producer's partitioner (kafka-python's murmur2 as the oracle), the line
formats of produce and consume, times and durations, the reset CSV, the range assignor, the
`__consumer_offsets` decoder of dump-log, bootstrap lists, usage errors (as JSON under --json), and byte
counts humanized for tables."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from types import SimpleNamespace
from typing import cast

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as kafka_murmur2

from pybroker.broker.cli import cli
from pybroker.clients.admin import groups as group_ops
from pybroker.clients.admin.consumer import READ_COMMITTED, Consumer, StartAt, parse_start, range_assignment
from pybroker.clients.admin.dump_log import decode_offsets_record, decode_transaction_log_record
from pybroker.clients.admin.formats import (
    ConsumedRecord,
    InputError,
    LineFormat,
    PrintFormat,
    check_template,
    json_object,
    parse_json_line,
    parse_line,
    templated,
    text_line,
)
from pybroker.clients.admin.output import human_bytes
from pybroker.clients.admin.times import parse_datetime_ms, parse_duration_ms
from pybroker.clients.wire import WireClient, WireError, parse_bootstrap_list
from pybroker.protocol.messages.coordinator_records import (
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitValue,
)
from pybroker.protocol.offsets_topic_records import (
    group_metadata_key,
    group_metadata_value,
    offset_commit_key,
    offset_commit_value,
)
from pybroker.protocol.partitioner import murmur2, partition_for_key
from pybroker.protocol.records.record import Record, build_batch
from pybroker.protocol.transaction_log_records import (
    TransactionStatus,
    encode_transaction_key,
    encode_transaction_value,
    transaction_log_value,
)


@given(st.binary(max_size=64))
def test_murmur2_is_kafkas(data: bytes) -> None:
    assert murmur2(data) & 0xFFFFFFFF == kafka_murmur2(data) & 0xFFFFFFFF


def test_keys_land_where_a_java_producer_puts_them() -> None:
    # the partition Kafka's default partitioner picks: toPositive(murmur2(key)) % partitions
    for key in (b"", b"a", b"user-42", "ключ".encode()):
        assert partition_for_key(key, 7) == (kafka_murmur2(key) & 0x7FFFFFFF) % 7


def test_lines_split_as_kafka_console_producer_splits_them() -> None:
    assert parse_line("a\tb", 1, LineFormat()).value == b"a\tb"
    keyed = parse_line("k:v:w", 1, LineFormat(key_separator=":"))
    assert (keyed.key, keyed.value) == (b"k", b"v:w")
    with pytest.raises(InputError, match="line 3: no key separator"):
        parse_line("novalue", 3, LineFormat(key_separator=":"))
    full = parse_line("h1:x,h2:y\tk\tv", 1, LineFormat(key_separator="\t", parse_headers=True))
    assert (full.headers, full.key, full.value) == ([("h1", b"x"), ("h2", b"y")], b"k", b"v")
    nulls = parse_line("NULL:NULL", 1, LineFormat(key_separator=":", null_marker="NULL"))
    assert (nulls.key, nulls.value) == (None, None)


def test_binary_input_as_hex_or_base64() -> None:
    hexed = parse_line("6b:00ff", 1, LineFormat(key_separator=":", encoding="hex"))
    assert (hexed.key, hexed.value) == (b"k", b"\x00\xff")
    assert parse_line("AP8=", 1, LineFormat(encoding="base64")).value == b"\x00\xff"
    assert parse_json_line('{"value": "00ff"}', 1, "hex").value == b"\x00\xff"
    for encoding, bad in (("hex", "zz"), ("base64", "!!")):
        with pytest.raises(InputError, match=f"line 5: .* is not {encoding}"):
            parse_line(bad, 5, LineFormat(encoding=encoding))


def test_json_input_lines() -> None:
    record = parse_json_line('{"key": "k", "value": {"a": 1}, "headers": {"h": "v"}, "partition": 2, '
                             '"timestamp": 1000}', 1)
    assert (record.key, record.value, record.headers, record.partition, record.timestamp_ms) == (
        b"k", b'{"a":1}', [("h", b"v")], 2, 1000)
    for bad in ("[1]", "{", '{"value": "x", "partition": -1}'):
        with pytest.raises(InputError, match="line 4"):
            parse_json_line(bad, 4)


def test_printed_records() -> None:
    record = ConsumedRecord("t", 1, 7, 1000, 0, b"k", b'{"a": 1}', (("h", b"x"),))
    assert text_line(record, PrintFormat()) == '{"a": 1}'
    every = PrintFormat(print_key=True, print_headers=True, print_timestamp=True, print_partition=True,
                        print_offset=True)
    assert text_line(record, every) == 'CreateTime:1000\tPartition:1\tOffset:7\th:x\tk\t{"a": 1}'
    assert text_line(ConsumedRecord("t", 0, 0, 0, 1, None, b"\xff"), PrintFormat(print_key=True)) == "null\t\\xff"
    assert json_object(record, "json")["value"] == {"a": 1}
    assert json_object(record, "hex")["key"] == "6b" and json_object(record, "base64")["key"] == "aw=="


def test_templates_as_rpk_and_kcat() -> None:
    record = ConsumedRecord("t", 1, 7, 1000, 0, b"k", None, (("h", b"x"), ("i", b"y")))
    template = r"%t/%p@%o %k=%v [%h] %K %V %T 100%%\n"
    check_template(template)
    assert templated(record, template, "text") == "t/1@7 k= [h:x,i:y] 1 -1 1000 100%\n"
    assert templated(record, r"%k\t%o", "hex") == "6b\t7"
    for bad, problem in (("%z", "%z is not a placeholder"), ("x\\q", "not an escape"), ("50%", "lone")):
        with pytest.raises(ValueError, match=problem):
            check_template(bad)


def test_start_specs() -> None:
    assert parse_start("earliest") == StartAt("earliest") and parse_start("end") == StartAt("latest")
    assert parse_start("12") == StartAt("offset", 12) and parse_start("-3") == StartAt("back", 3)
    assert parse_start("@1700000000000") == StartAt("timestamp", 1700000000000)
    with pytest.raises(ValueError):
        parse_start("soon")


def test_datetimes_take_zones_and_durations_both_forms() -> None:
    assert parse_datetime_ms("2024-01-01T00:00:00") == 1704067200000
    assert parse_datetime_ms("2024-01-01T02:00:00+02:00") == 1704067200000
    assert parse_datetime_ms("2024-01-01T02:00:00+0200") == 1704067200000
    assert parse_datetime_ms("2023-12-31T23:00:00.000-01:00") == 1704067200000
    assert parse_datetime_ms("2024-01-01T00:00:00Z") == parse_datetime_ms("2024-01-01") == 1704067200000
    assert parse_datetime_ms("1704067200000") == 1704067200000
    assert parse_duration_ms("PT15M") == parse_duration_ms("15m") == 900_000
    assert parse_duration_ms("P1DT2H") == 26 * 3_600_000 and parse_duration_ms("PT0.5S") == 500
    for bad in ("P", "PT", "15", "1w", "P1DT"):
        with pytest.raises(ValueError):
            parse_duration_ms(bad)


def test_reset_csv_round_trip() -> None:
    plan = [{"group": "g", "topic": "t", "partition": 0, "new_offset": 5},
            {"group": "h", "topic": "t", "partition": 1, "new_offset": 9}]
    assert group_ops.parse_offsets_file(group_ops.export_plan(plan, with_group=False)) == {"": {("t", 0): 5,
                                                                                             ("t", 1): 9}}
    assert group_ops.parse_offsets_file(group_ops.export_plan(plan, with_group=True)) == {"g": {("t", 0): 5},
                                                                                          "h": {("t", 1): 9}}
    with pytest.raises(ValueError, match="line 2"):
        group_ops.parse_offsets_file("t,0,1\nt,zero,1\n")
    assert group_ops.parse_topic_spec("t:0,2") == ("t", [0, 2]) and group_ops.parse_topic_spec("a:b") == ("a:b", None)


def test_range_assignment_is_kafkas() -> None:
    got = range_assignment({"m2": ["t"], "m1": ["t", "u"]}, {"t": 5, "u": 1})
    assert got == {"m1": [("t", 0), ("t", 1), ("t", 2), ("u", 0)], "m2": [("t", 3), ("t", 4)]}


def test_offsets_topic_records_decode_in_kafkas_schemas() -> None:
    key, payload = decode_offsets_record(offset_commit_key("g", "t", 3), offset_commit_value(
        OffsetCommitValue(offset=42, leader_epoch=1, metadata="m", commit_timestamp=5, expire_timestamp=-1)))
    assert key == {"type": "1", "data": {"group": "g", "topic": "t", "partition": 3}}
    assert payload == {"version": "3", "data": {"offset": 42, "leaderEpoch": 1, "metadata": "m",
                                                "commitTimestamp": 5}}
    member = MemberMetadata(member_id="m-1", client_id="c", client_host="/h", rebalance_timeout=1, session_timeout=2,
                            subscription=b"\x00\x00\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff",
                            assignment=b"\x00\x00\x00\x00\x00\x01\x00\x01t\x00\x00\x00\x01\x00\x00\x00\x00\xff\xff"
                                       b"\xff\xff")
    key, payload = decode_offsets_record(group_metadata_key("g"), group_metadata_value(GroupMetadataValue(
        protocol_type="consumer", generation=3, protocol="range", leader="m-1", members=[member])))
    assert key == {"type": "2", "data": {"group": "g"}}
    assert payload["data"]["generation"] == 3
    assert payload["data"]["members"][0]["subscription"] == ["t"]
    assert payload["data"]["members"][0]["assignment"] == ["t-0"]
    assert decode_offsets_record(group_metadata_key("g"), None) == (key, None)  # a tombstone
    assert decode_offsets_record(b"\x00\x09xyz", b"v")[0] == {"type": "9", "data": "unknown"}
    assert "error" in decode_offsets_record(offset_commit_key("g", "t", 0), b"\x00\x63zz")[0]  # value v99


def test_bootstrap_lists() -> None:
    assert parse_bootstrap_list("a:1,b:2") == [("a", 1), ("b", 2)]
    assert parse_bootstrap_list("[::1]:9092") == [("::1", 9092)]
    for bad in ("", "a", "a:x", "a:1,b", "a:70000"):
        with pytest.raises(WireError, match="HOST:PORT"):
            parse_bootstrap_list(bad)


def test_version_and_completion() -> None:
    runner = CliRunner()
    version = runner.invoke(cli, ["--version"])
    assert version.exit_code == 0 and version.output.startswith("pybroker ")
    for shell in ("bash", "zsh", "fish"):
        script = runner.invoke(cli, ["completion", shell])
        assert script.exit_code == 0 and "_PYBROKER_COMPLETE" in script.output


def _pybroker(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pybroker.broker.cli", *args], capture_output=True, text=True,
                          timeout=60, check=False, env={**os.environ, **env})


def test_start_does_not_import_the_admin_tools_and_every_tool_is_still_found() -> None:
    """The admin commands load when a command line names one (or asks for the list): a broker's start
    skips them. A fresh interpreter, since this one has imported them already."""
    probe = ("import sys\n"
             "from pybroker.broker.cli import cli\n"
             "try:\n"
             "    cli.main(['start', '--help'], prog_name='pybroker')\n"
             "except SystemExit:\n"
             "    pass\n"
             "assert 'pybroker.clients.admin.commands' not in sys.modules, 'start imported the admin tools'\n")
    ran = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False)
    assert ran.returncode == 0, ran.stderr
    listed = CliRunner().invoke(cli, ["--help"])
    for name in ("start", "topics", "groups", "produce", "consume", "acls", "users", "quotas", "dump-log"):
        assert f"  {name} " in listed.output
    assert CliRunner().invoke(cli, ["topics", "--help"]).exit_code == 0
    assert CliRunner().invoke(cli, ["no-such-command"]).exit_code == 2


def test_usage_errors_are_one_line_and_json_under_json() -> None:
    plain = _pybroker("topics", "list", "--timeout", "-1")
    assert plain.returncode == 2 and "Traceback" not in plain.stderr
    assert plain.stderr.startswith("pybroker: error: ") and "--timeout" in plain.stderr
    as_json = _pybroker("topics", "list", "--timeout", "-1", "--json")
    assert as_json.returncode == 2 and "--timeout" in json.loads(as_json.stderr)["error"]
    unreachable = _pybroker("health", "--json", PYBROKER_BOOTSTRAP_SERVER="127.0.0.1:1")
    assert unreachable.returncode == 1 and unreachable.stdout == ""
    assert json.loads(unreachable.stderr)["error"].startswith("cannot reach the broker at 127.0.0.1:1")


def test_transaction_log_records_decode_in_kafkas_schemas() -> None:
    value = transaction_log_value(producer_id=7, producer_epoch=2, transaction_timeout_ms=60_000,
                                  status=TransactionStatus.ONGOING, partitions=[("t", 0), ("t", 1)],
                                  last_update_timestamp_ms=20, start_timestamp_ms=10)
    key, payload = decode_transaction_log_record(encode_transaction_key("tx-1"), encode_transaction_value(value))
    assert key == {"type": "0", "data": {"transactionalId": "tx-1"}}
    data = payload["data"]
    assert payload["version"] == "1" and data["state"] == "Ongoing" and data["transactionStatus"] == 1
    assert (data["producerId"], data["producerEpoch"], data["nextProducerEpoch"]) == (7, 2, -1)
    assert data["transactionPartitions"] == [{"topic": "t", "partitionIds": [0, 1]}]
    _, old = decode_transaction_log_record(encode_transaction_key("tx-1"), encode_transaction_value(value, 0))
    assert old["version"] == "0" and "nextProducerEpoch" not in old["data"]
    assert decode_transaction_log_record(encode_transaction_key("tx-1"), None) == (key, None)
    assert "error" in decode_transaction_log_record(encode_transaction_key("tx-1"), b"\x00\x07xx")[0]


def test_a_silent_listener_times_out_in_one_line() -> None:
    with socket.socket() as silent:  # accepts connections (the kernel's backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        result = CliRunner().invoke(cli, ["topics", "list", "--timeout", "0.3", "--bootstrap-server",
                                          f"127.0.0.1:{port}"])
    assert result.exit_code == 1
    assert result.stderr == f"pybroker: error: the broker at 127.0.0.1:{port} did not answer within 0.3s (see --timeout)\n"


def test_read_committed_skips_aborted_transactions_and_markers() -> None:
    def batch(base: int, values: list[bytes], *, pid: int = -1, txn: bool = False, control: bool = False) -> bytes:
        return bytes(build_batch([Record(i, 0, None, v) for i, v in enumerate(values)], base_offset=base,
                                 producer_id=pid, producer_epoch=0 if pid >= 0 else -1, is_transactional=txn,
                                 is_control=control, base_timestamp=1000))

    data = (batch(0, [b"plain"]) + batch(1, [b"aborted-1", b"aborted-2"], pid=5, txn=True)
            + batch(3, [b"\x00\x00\x00\x00"], pid=5, txn=True, control=True)  # the abort marker
            + batch(4, [b"committed"], pid=5, txn=True) + batch(5, [b"other"], pid=6, txn=True))
    aborted = [SimpleNamespace(producer_id=5, first_offset=1)]
    committed = Consumer(cast(WireClient, None), isolation=READ_COMMITTED)
    committed.assign({("t", 0): 0})
    assert [r.value for r in committed._records(("t", 0), data, aborted)] == [b"plain", b"committed", b"other"]
    assert committed.positions[("t", 0)] == 6
    everything = Consumer(cast(WireClient, None))
    everything.assign({("t", 0): 2})  # and records before the position are not handed out again
    assert [r.value for r in everything._records(("t", 0), data, aborted)] == [
        b"aborted-2", b"committed", b"other"]


@pytest.mark.parametrize(("count", "shown"), [
    (None, None), (0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (1536, "1.5 KiB"),
    (5 * 1024**2 + 1, "5.0 MiB"), (17_234_567_890, "16.1 GiB"), (3 * 1024**4, "3.0 TiB"), (2**63 - 1, "8.0 EiB"),
])
def test_tables_show_byte_counts_as_people_read_them(count: int | None, shown: str | None) -> None:
    assert human_bytes(count) == shown
