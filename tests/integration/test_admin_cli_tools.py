"""The admin CLI's issue-16 commands and fixes against one live broker (shared by the module):

produce and consume (keys, headers, formats, offsets and times, alone or in a group beside a librdkafka
member), topics add-partitions and the hidden internal topics, groups describe of a missing group and
the members and state views, groups delete and delete-offsets, every reset target, log-dirs, configs
describe with sources, health, a bootstrap list and PYBROKER_BOOTSTRAP_SERVER, errors as JSON, and the
offline tools beside a running broker (check-log refuses its dir; dump-log decodes __consumer_offsets).

Commands run in-process with click's CliRunner (a subprocess only where two must run at once), with the
bootstrap taken from PYBROKER_BOOTSTRAP_SERVER as a user's shell would give it.
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from pybroker.broker.cli import cli
from pybroker.clients.admin import cli_support
from pybroker.clients.admin.output import human_bytes
from pybroker.protocol.partitioner import partition_for_key
from tests.integration.brokers import REPO_ROOT, BrokerProcess, free_port
from tests.integration.clients import ck_consumer, ck_producer, kp_consumer


@pytest.fixture(scope="module")
def tools_broker(tmp_path_factory: pytest.TempPathFactory, broker_target: str) -> Iterator[BrokerProcess]:
    """One broker for the module; groups rebalance at once (no initial delay) to keep the tests short."""
    if broker_target != "pybroker":
        pytest.skip("pybroker's own command line")
    proc = BrokerProcess(tmp_path_factory.mktemp("tools"), {"group.initial.rebalance.delay.ms": "0",
                                                            "log.retention.hours": "100"})
    proc.start()
    try:
        yield proc
    finally:
        proc.stop(expect_code=0)
        proc.close()


def run(broker: BrokerProcess, *args: str, input: str | None = None, code: int = 0,
        bootstrap: str | None = None) -> Result:
    env = {"PYBROKER_BOOTSTRAP_SERVER": bootstrap or broker.bootstrap}
    result = CliRunner().invoke(cli, list(args), input=input, env=env)
    assert result.exit_code == code, (result.stdout, result.stderr, result.exception)
    return result


def js(broker: BrokerProcess, *args: str, input: str | None = None) -> Any:
    return json.loads(run(broker, *args, "--json", input=input).stdout)


def lines(broker: BrokerProcess, *args: str) -> list[Any]:
    return [json.loads(line) for line in run(broker, *args, "--json").stdout.splitlines()]


def test_produce_and_consume_keys_headers_formats_offsets_and_times(tools_broker: BrokerProcess,
                                                                    new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    run(tools_broker, "topics", "create", topic, "--partitions", "3")
    sent = js(tools_broker, "produce", topic, "--key-separator", ":", "--header", "src=cli",
              input="alpha:1\nbeta:2\ngamma:3\n")
    assert sum(row["records"] for row in sent) == 3
    got = lines(tools_broker, "consume", topic, "--from-beginning", "--exit-at-end")
    assert sorted((r["key"], r["value"]) for r in got) == [("alpha", "1"), ("beta", "2"), ("gamma", "3")]
    for record in got:  # where a Java producer's partitioner puts each key
        assert record["partition"] == partition_for_key(record["key"].encode(), 3)
        assert record["headers"] == [{"key": "src", "value": "cli"}]

    # kafka-console-producer's properties, per-line headers, a null marker; JSON input with time and partition
    run(tools_broker, "produce", topic, "-p", "0", "--property", "parse.key=true", "--property", "parse.headers=true",
        "--property", "null.marker=NULL", input="h1:x,h2:y\tNULL\tdelta\n")
    run(tools_broker, "produce", topic, "--input-format", "json",
        input='{"key": "k", "value": {"n": 1}, "partition": 0, "timestamp": 1000}\n')
    bad = run(tools_broker, "produce", topic, "-p", "2", "--key-separator", ":", input="ok:1\nno-separator\nz:9\n",
              code=1)
    assert "line 2: no key separator" in bad.stderr and "the 1 line(s) before it were sent" in bad.stderr
    assert lines(tools_broker, "consume", topic, "-p", "2", "--offset", "-1", "-e")[0]["key"] == "ok"
    text = run(tools_broker, "consume", topic, "-p", "0", "--offset", "-2", "-e", "--print-key", "--print-headers",
               "--print-offset").stdout.splitlines()
    assert text[0].endswith("h1:x,h2:y\tnull\tdelta") and text[1].endswith('NO_HEADERS\tk\t{"n":1}')
    assert text[0].startswith("Offset:")
    assert [r["value"] for r in lines(tools_broker, "consume", topic, "-p", "0", "--from-timestamp", "1970-01-01T00:00:00.5Z",
                                      "-e", "--encoding", "json")][-1] == {"n": 1}
    assert lines(tools_broker, "consume", topic, "--from-timestamp", "2000-01-01T00:00:00+01:00", "-n", "1")
    templated = run(tools_broker, "consume", topic, "-p", "0", "--offset", "-1", "-e", "--format", r"%o|%k|%v|%h\n")
    assert re.fullmatch(r'\d+\|k\|\{"n":1\}\|\n', templated.stdout), templated.stdout
    two = lines(tools_broker, "consume", topic, "--from-beginning", "-n", "2", "--encoding", "hex")
    assert len(two) == 2 and all(set(r["value"]) <= set("0123456789abcdef") for r in two)
    run(tools_broker, "produce", topic, "-p", "1", "--encoding", "base64", "--value", "AP8=")  # binary: 00 ff
    assert lines(tools_broker, "consume", topic, "-p", "1", "--offset", "-1", "-e", "--encoding", "hex")[0][
        "value"] == "00ff"
    run(tools_broker, "produce", topic, "-p", "1", "--acks", "0", "--value", "fire-and-forget")
    _until(lambda: any(r["value"] == "fire-and-forget" for r in lines(tools_broker, "consume", topic, "-p", "1",
                                                                       "--from-beginning", "-e")))
    pattern = re.escape(topic[:-4]) + ".*"  # this topic and no other
    assert {r["topic"] for r in lines(tools_broker, "consume", "--regex", pattern, "--from-beginning", "-e")} == {
        topic}
    assert "no topic matches" in run(tools_broker, "consume", "-r", "no-such-.*", "-e", code=1).stderr
    start = time.monotonic()
    assert lines(tools_broker, "consume", topic, "--idle-timeout", "0.5") == []  # from the end: nothing comes
    assert time.monotonic() - start < 30  # it gave up idle, not never (slack for a busy machine)


def test_consume_in_a_group_commits_resumes_and_shares_with_a_librdkafka_member(
        tools_broker: BrokerProcess, new_topic: Callable[..., str]) -> None:
    topic, group = new_topic(), new_topic("group")
    run(tools_broker, "topics", "create", topic, "--partitions", "2")
    for partition in (0, 1):
        run(tools_broker, "produce", topic, "-p", str(partition), input="".join(f"{partition}-{i}\n" for i in range(5)))
    first = lines(tools_broker, "consume", topic, "-g", group, "--from-beginning", "-n", "3")
    assert len(first) == 3
    described = js(tools_broker, "groups", "describe", group)  # it committed what it printed, and left
    assert described["state"] == "Empty" and described["members"] == []
    printed = {(r["partition"], r["offset"]) for r in first}
    after = {p: max(o for q, o in printed if q == p) + 1 for p, _ in printed}
    # a partition it printed nothing from is committed where it started (as a Kafka consumer's position)
    assert {(r["partition"], r["current_offset"]) for r in described["offsets"]} == {
        (p, after.get(p, 0)) for p in (0, 1)}
    # --from-beginning applies only where the group has no committed offset
    rest = lines(tools_broker, "consume", topic, "-g", group, "--from-beginning", "-e")
    assert len(rest) == 7 and not {(r["partition"], r["offset"]) for r in first} & {
        (r["partition"], r["offset"]) for r in rest}
    assert js(tools_broker, "groups", "describe", group)["total_lag"] == 0

    # with a librdkafka member: ours leads and assigns; when the other joins, ours notices the rebalance by its
    # heartbeat and rejoins, each gets one partition by range; when the other leaves, ours takes both back
    shared = new_topic("shared")
    cli_member = subprocess.Popen(
        [sys.executable, "-m", "pybroker.broker.cli", "consume", topic, "-g", shared, "--from-beginning", "--json",
         "--bootstrap-server", tools_broker.bootstrap], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        cwd=REPO_ROOT, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        _until(lambda: _member_partitions(tools_broker, shared) == [2])
        stop = threading.Event()
        with ck_consumer(tools_broker.bootstrap, **{"group.id": shared, "partition.assignment.strategy": "range",
                                                    "session.timeout.ms": 10_000}) as other:
            other.subscribe([topic])

            def poll() -> None:
                while not stop.is_set():
                    other.poll(0.1)

            poller = threading.Thread(target=poll, daemon=True)
            poller.start()
            try:
                _until(lambda: _member_partitions(tools_broker, shared) == [1, 1], timeout=30)
                members = js(tools_broker, "groups", "describe", shared, "--members", "--verbose")
                assert "pybroker-consume" in {m["client_id"] for m in members}
                assert sorted(p for m in members for p in m["assignment"]) == [f"{topic}-0", f"{topic}-1"]
                state = js(tools_broker, "groups", "describe", shared, "--state")
                assert state[0]["state"] == "Stable" and state[0]["members"] == 2
                assert state[0]["assignment_strategy"] == "range"
                active = run(tools_broker, "groups", "reset-offsets", shared, "--to-earliest", "--execute", code=1)
                assert "Stable" in active.stderr
            finally:
                stop.set()
                poller.join(timeout=10)
        _until(lambda: _member_partitions(tools_broker, shared) == [2], timeout=30)
        cli_member.send_signal(signal.SIGINT)
        out, err = cli_member.communicate(timeout=30)
    finally:
        cli_member.kill()
    assert cli_member.returncode == 0, err
    got = sorted((json.loads(line)["partition"], json.loads(line)["offset"]) for line in out.splitlines())
    assert got == [(p, o) for p in (0, 1) for o in range(5)]  # each record once, across the rebalances


def _members(broker: BrokerProcess, group: str) -> list[dict[str, Any]]:
    """The group's members; none while the group does not exist yet."""
    result = CliRunner().invoke(cli, ["groups", "describe", group, "--members", "--json"],
                                env={"PYBROKER_BOOTSTRAP_SERVER": broker.bootstrap})
    return json.loads(result.stdout) if result.exit_code == 0 else []


def _member_partitions(broker: BrokerProcess, group: str) -> list[int]:
    return sorted(m["partitions"] or 0 for m in _members(broker, group))


def _until(check: Callable[[], bool], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.2)


def test_missing_group_delete_and_delete_offsets(tools_broker: BrokerProcess, new_topic: Callable[..., str]) -> None:
    missing = run(tools_broker, "groups", "describe", "nosuch-group", code=1)
    assert missing.stderr == "pybroker: error: consumer group 'nosuch-group' does not exist\n"
    as_json = run(tools_broker, "groups", "describe", "nosuch-group", "--json", code=1)
    assert json.loads(as_json.stderr) == {"error": "consumer group 'nosuch-group' does not exist",
                                          "kafka_error": "GROUP_ID_NOT_FOUND"}
    assert as_json.stdout == ""

    topic, group = new_topic(), new_topic("group")
    run(tools_broker, "topics", "create", topic, "--partitions", "2")
    run(tools_broker, "produce", topic, "-p", "0", "--value", "a", "--value", "b")
    run(tools_broker, "groups", "reset-offsets", group, "--topic", topic, "--to-latest", "--execute")
    assert [r["current_offset"] for r in js(tools_broker, "groups", "describe", group)["offsets"]] == [2, 0]
    removed = js(tools_broker, "groups", "delete-offsets", group, "--topic", f"{topic}:0")
    assert removed == [{"group": group, "topic": topic, "partition": 0, "deleted": True, "error": None}]
    assert [r["partition"] for r in js(tools_broker, "groups", "describe", group)["offsets"]] == [1]
    deleted = run(tools_broker, "groups", "delete", group, "nosuch-group", "--json", code=1)
    assert json.loads(deleted.stdout) == [{"group": group, "deleted": True, "error": None},
                                          {"group": "nosuch-group", "deleted": False, "error": "GROUP_ID_NOT_FOUND"}]
    run(tools_broker, "groups", "describe", group, code=1)


def test_every_reset_target(tools_broker: BrokerProcess, new_topic: Callable[..., str], tmp_path: Path) -> None:
    topic, other, group, second = new_topic(), new_topic("other"), new_topic("g1"), new_topic("g2")
    for name in (topic, other):
        run(tools_broker, "topics", "create", name)
        run(tools_broker, "produce", name, "--input-format", "json",
            input="".join(json.dumps({"value": str(i), "timestamp": 1_000_000 + 1000 * i}) + "\n" for i in range(10)))

    def plan(*args: str, group_name: str = group) -> list[int]:
        return [r["new_offset"] for r in js(tools_broker, "groups", "reset-offsets", group_name, *args)]

    run(tools_broker, "groups", "reset-offsets", group, "--topic", topic, "--to-offset", "5", "--execute")
    assert plan("--shift-by", "-2") == [3] and plan("--shift-by", "100") == [10] and plan("--shift-by", "-99") == [0]
    assert plan("--to-current") == [5]
    assert plan("--to-datetime", "1970-01-01T01:16:43+01:00") == [3]  # 00:16:43 UTC = 1003 s
    assert plan("--to-datetime", "1970-01-01T00:16:43.500") == [4]
    assert plan("--by-duration", "PT1M") == [10] and plan("--by-duration", "P36500D") == [0]
    assert plan("--all-topics", "--to-earliest") == [0]  # only the committed topic
    assert plan("--topic", other, "--all-topics", "--to-earliest") == [0, 0]
    exported = run(tools_broker, "groups", "reset-offsets", group, "--to-offset", "7", "--export").stdout
    assert exported == f"{topic},0,7\n"
    csv_file = tmp_path / "offsets.csv"
    csv_file.write_text(exported)
    run(tools_broker, "groups", "reset-offsets", group, "--from-file", str(csv_file), "--execute")
    assert js(tools_broker, "groups", "describe", group)["offsets"][0]["current_offset"] == 7
    run(tools_broker, "groups", "reset-offsets", second, "--topic", other, "--to-offset", "1", "--execute")
    both = js(tools_broker, "groups", "reset-offsets", group, second, "--to-latest", "--execute")
    assert {(r["group"], r["new_offset"]) for r in both} == {(group, 10), (second, 10)}
    every = js(tools_broker, "groups", "reset-offsets", "--all-groups", "--topic", other, "--to-earliest")
    assert {group, second} <= {r["group"] for r in every}
    bad = run(tools_broker, "groups", "reset-offsets", group, "--to-datetime", "yesterday", code=2)
    assert "not a date and time" in bad.stderr
    run(tools_broker, "groups", "reset-offsets", group, "--to-earliest", "--to-latest", code=2)


def test_topics_internal_hidden_add_partitions_and_bootstrap_lists(tools_broker: BrokerProcess,
                                                                   new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    run(tools_broker, "topics", "create", topic)
    run(tools_broker, "consume", topic, "-g", new_topic("g"), "-e")  # the offsets topic exists from here
    described = {row["topic"] for row in js(tools_broker, "topics", "describe")}
    assert topic in described and "__consumer_offsets" not in described
    internal = js(tools_broker, "topics", "describe", "--include-internal")
    assert sum(row["topic"] == "__consumer_offsets" for row in internal) == 50
    assert {row["topic"] for row in js(tools_broker, "topics", "describe", "__consumer_offsets")} == {
        "__consumer_offsets"}
    assert js(tools_broker, "topics", "add-partitions", topic, "--total", "3") == [
        {"topic": topic, "partitions_before": 1, "partitions": 3}]
    assert js(tools_broker, "topics", "add-partitions", topic, "--num", "2")[0]["partitions"] == 5
    shrink = run(tools_broker, "topics", "add-partitions", topic, "--total", "2", "--json", code=1)
    assert json.loads(shrink.stderr)["kafka_error"] == "INVALID_PARTITIONS"

    run(tools_broker, "produce", topic, "-p", "0", "--input-format", "json",
        input="".join(json.dumps({"value": str(i), "timestamp": 5_000_000 + i * 1000}) + "\n" for i in range(6)))
    offsets = js(tools_broker, "topics", "offsets", topic, "-p", "0", "--time", "earliest")
    assert offsets == [{"topic": topic, "partition": 0, "offset": 0, "timestamp": None}]
    assert js(tools_broker, "topics", "offsets", topic, "-p", "0")[0]["offset"] == 6
    assert js(tools_broker, "topics", "offsets", topic, "-p", "0", "--time", "max-timestamp")[0] == {
        "topic": topic, "partition": 0, "offset": 5, "timestamp": 5_005_000}
    at = js(tools_broker, "topics", "offsets", topic, "-p", "0", "--time", "1970-01-01T02:23:22.5+01:00")
    assert at[0]["offset"] == 3 and at[0]["timestamp"] == 5_003_000  # 01:23:22.5 UTC = 5,002.5 s: the next is 3
    assert js(tools_broker, "topics", "offsets", topic, "-p", "0", "--time", "9999999999999")[0]["offset"] is None
    assert js(tools_broker, "topics", "delete-records", topic, "-p", "0", "--before", "4") == [
        {"topic": topic, "partition": 0, "low_watermark": 4}]
    assert [r["value"] for r in lines(tools_broker, "consume", topic, "-p", "0", "--from-beginning", "-e")] == [
        "4", "5"]
    assert js(tools_broker, "topics", "delete-records", topic, "--before", "latest")[0]["low_watermark"] == 6
    beyond = run(tools_broker, "topics", "delete-records", topic, "-p", "0", "--before", "99", "--json", code=1)
    assert json.loads(beyond.stderr)["kafka_error"] == "OFFSET_OUT_OF_RANGE"

    dead = f"127.0.0.1:{free_port()}"
    listed = json.loads(run(tools_broker, "topics", "list", "--json", bootstrap=f"{dead},{tools_broker.bootstrap}").stdout)
    assert topic in {row["topic"] for row in listed}
    none = run(tools_broker, "topics", "list", bootstrap=f"{dead},{dead}", code=1)
    assert none.stderr.startswith("pybroker: error: cannot reach any broker of 127.0.0.1:")
    flag = run(tools_broker, "topics", "list", "--bootstrap-server", tools_broker.bootstrap, bootstrap=dead)
    assert topic in flag.stdout  # the flag wins over the environment


def test_log_dirs_configs_and_health(tools_broker: BrokerProcess, new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    run(tools_broker, "topics", "create", topic, "--config", "retention.ms=3600000")
    run(tools_broker, "produce", topic, "--value", "x" * 1000)
    dirs = js(tools_broker, "log-dirs", "--topic", topic)
    assert len(dirs) == 1 and dirs[0]["error"] is None and dirs[0]["usable_bytes"] > 0
    assert [(p["topic"], p["partition"]) for p in dirs[0]["partitions"]] == [(topic, 0)]
    assert dirs[0]["partitions"][0]["size"] > 1000
    table = run(tools_broker, "log-dirs", "--topic", topic).stdout
    # The table humanizes byte counts; --json above keeps them exact
    dir_header, dir_row, _, part_header, part_row = table.splitlines()
    assert dir_header.split() == ["LOG-DIR", "STATE", "PARTITION-COUNT", "SIZE", "USABLE", "TOTAL"]
    # usable space moves with whatever else writes to the disk, so only its form is checked
    assert re.fullmatch(r"\S+ +online +1 +" + re.escape(human_bytes(dirs[0]["size"]) or "")
                        + r" +\d+\.\d [KMGTPE]iB +" + re.escape(human_bytes(dirs[0]["total_bytes"]) or ""),
                        dir_row), dir_row
    assert part_header.split() == ["TOPIC", "PARTITION", "SIZE", "LOG-DIR", "FUTURE", "OFFSET-LAG"]
    assert part_row.split()[:4] == [topic, "0", *str(human_bytes(dirs[0]["partitions"][0]["size"])).split()], part_row

    broker_configs = {row["name"]: row for row in js(tools_broker, "configs", "describe")}
    assert broker_configs["log.retention.hours"]["value"] == "100"
    assert broker_configs["log.retention.hours"]["source"] == "STATIC_BROKER_CONFIG"
    assert "num.io.threads" not in broker_configs  # defaults only with --all
    everything = {row["name"]: row for row in js(tools_broker, "configs", "describe", "--all")}
    assert everything["log.segment.bytes"]["source"] == "DEFAULT_CONFIG"
    topic_configs = {row["name"]: row for row in js(tools_broker, "configs", "describe", "--topic", topic)}
    assert topic_configs["retention.ms"] == {"name": "retention.ms", "value": "3600000",
                                             "source": "DYNAMIC_TOPIC_CONFIG", "read_only": False,
                                             "sensitive": False, "synonyms": topic_configs["retention.ms"]["synonyms"]}
    keyed = js(tools_broker, "configs", "describe", "--topic", topic, "--key", "cleanup.policy")
    assert [(r["name"], r["source"]) for r in keyed] == [("cleanup.policy", "DEFAULT_CONFIG")]
    assert "log.segment.bytes" in run(tools_broker, "configs", "keys").stdout
    assert "log.segment.bytes" in run(tools_broker, "configs").stdout  # as before it had subcommands
    run(tools_broker, "configs", "describe", "--topic", "nosuch-topic", code=1)
    altered = js(tools_broker, "configs", "alter", "--topic", topic, "--set", "retention.ms=7200000",
                 "--set", "cleanup.policy=compact")
    assert {(r["name"], r["value"], r["source"]) for r in altered} == {
        ("retention.ms", "7200000", "DYNAMIC_TOPIC_CONFIG"), ("cleanup.policy", "compact", "DYNAMIC_TOPIC_CONFIG")}
    dynamic = js(tools_broker, "configs", "alter", "--set", "log.retention.hours=100")  # the value it has
    assert [(r["name"], r["source"]) for r in dynamic] == [("log.retention.hours", "DYNAMIC_BROKER_CONFIG")]
    back = js(tools_broker, "configs", "alter", "--delete", "log.retention.hours")
    assert [(r["name"], r["source"]) for r in back] == [("log.retention.hours", "STATIC_BROKER_CONFIG")]
    refused = run(tools_broker, "configs", "alter", "--topic", topic, "--set", "retention.ms=soon", "--json", code=1)
    assert json.loads(refused.stderr)["kafka_error"] == "INVALID_CONFIG"

    report = js(tools_broker, "health")
    assert report["healthy"] is True
    assert {c["check"] for c in report["checks"]} == {"reachable", "brokers", "partitions", "log_dirs"}
    assert run(tools_broker, "health").stdout.startswith("healthy: yes")
    run(tools_broker, "health", bootstrap=f"127.0.0.1:{free_port()}", code=1)


def test_offline_tools_beside_a_running_broker(tools_broker: BrokerProcess, new_topic: Callable[..., str]) -> None:
    group = new_topic("group")
    topic = new_topic()
    run(tools_broker, "topics", "create", topic)
    run(tools_broker, "produce", topic, "--value", "v")
    run(tools_broker, "consume", topic, "-g", group, "--from-beginning", "-e")
    log_dir = tools_broker.log_dirs[0]
    refused = run(tools_broker, "check-log", str(log_dir), code=1)
    assert "in use by a running broker" in refused.stderr and "--force" in refused.stderr
    assert "in use" in json.loads(run(tools_broker, "check-log", str(log_dir), "--json", code=1).stderr)["error"]
    forced = run(tools_broker, "check-log", str(log_dir / f"{topic}-0"), "--force")
    assert "warning" in forced.stderr and "OK" in forced.stdout

    segments = [path for path in log_dir.glob("__consumer_offsets-*/*.log") if path.stat().st_size]
    records = [record for path in segments
               for batch in (json.loads(line) for line in run(tools_broker, "dump-log", str(path), "--json").stdout
                             .splitlines()) for record in batch.get("records", [])]
    commits = [r for r in records if r["key"]["type"] == "1" and r["key"]["data"]["group"] == group]
    assert commits and commits[-1]["key"]["data"] == {"group": group, "topic": topic, "partition": 0}
    assert commits[-1]["payload"]["data"]["offset"] == 1
    metadata = [r for r in records if r["key"]["type"] == "2" and r["key"]["data"]["group"] == group]
    assert metadata and metadata[0]["payload"]["data"]["protocolType"] == "consumer"
    raw = run(tools_broker, "dump-log", str(segments[0]), "--no-decoder", "--print-records").stdout
    assert '"type"' not in raw


def test_kafka_python_sees_what_produce_wrote(tools_broker: BrokerProcess, new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    run(tools_broker, "produce", topic, "--compression", "gzip", "--key", "k", "--header", "h=v",
        "--value", "one", "--value", "two")
    with kp_consumer(tools_broker.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.subscribe([topic])
        got: list[Any] = []
        deadline = time.monotonic() + 20
        while len(got) < 2 and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=200).values():
                got += batch
    assert [(r.key, r.value, r.headers) for r in got] == [(b"k", b"one", [("h", b"v")]), (b"k", b"two", [("h", b"v")])]


def test_ctrl_c_on_a_group_consumer_commits_and_leaves(tools_broker: BrokerProcess,
                                                       new_topic: Callable[..., str]) -> None:
    topic, group = new_topic(), new_topic("group")
    run(tools_broker, "produce", topic, "--value", "a", "--value", "b")
    consumer = subprocess.Popen(
        [sys.executable, "-m", "pybroker.broker.cli", "consume", topic, "-g", group, "--from-beginning",
         "--bootstrap-server", tools_broker.bootstrap], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        cwd=REPO_ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # as from a terminal
    try:
        assert consumer.stdout is not None
        printed = [consumer.stdout.readline(), consumer.stdout.readline()]
        time.sleep(0.5)  # it is waiting for more records now (printing, then noting the record, is not atomic)
        consumer.send_signal(signal.SIGINT)  # long before its periodic commit (a third of the session timeout)
        out, err = consumer.communicate(timeout=30)
    finally:
        consumer.kill()
    assert consumer.returncode == 0 and printed == ["a\n", "b\n"] and out == "", err
    assert err == "Processed a total of 2 messages\n"
    described = js(tools_broker, "groups", "describe", group)
    assert described["state"] == "Empty" and described["total_lag"] == 0


def test_produce_from_a_file_shows_progress_only_at_a_terminal(tools_broker: BrokerProcess, tmp_path: Path,
                                                               new_topic: Callable[..., str],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    topic = new_topic()
    source = tmp_path / "records.txt"
    source.write_text("".join(f"k{i}\tv{i}\n" for i in range(3000)))
    quiet = run(tools_broker, "produce", topic, "--file", str(source), "--parse-key", "--batch-size", "500")
    assert "producing to" not in quiet.stderr  # stderr is not a terminal here
    monkeypatch.setattr(cli_support, "shows_progress", lambda quiet: not quiet)  # as at a terminal
    shown = run(tools_broker, "produce", topic, "--file", str(source), "--parse-key")
    assert f"producing to {topic}" in shown.stderr  # click draws the bar itself only on a real terminal
    assert "producing to" not in run(tools_broker, "produce", topic, "--file", str(source), "--json").stderr
    assert sum(r["log_end_offset"] for r in js(tools_broker, "topics", "describe", topic)) == 9000


def test_produce_from_a_quiet_pipe_sends_at_once(tools_broker: BrokerProcess, new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    run(tools_broker, "topics", "create", topic)
    producer = subprocess.Popen([sys.executable, "-m", "pybroker.broker.cli", "produce", topic, "--bootstrap-server",
                                 tools_broker.bootstrap], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT)
    try:
        assert producer.stdin is not None
        producer.stdin.write("first\n")
        producer.stdin.flush()  # and nothing more for now, as `tail -f app.log | pybroker produce` does
        _until(lambda: js(tools_broker, "topics", "describe", topic)[0]["log_end_offset"] == 1)
        _, err = producer.communicate("second\n", timeout=30)
    finally:
        producer.kill()
    assert producer.returncode == 0, err
    assert js(tools_broker, "topics", "describe", topic)[0]["log_end_offset"] == 2


def test_health_wait_returns_once_a_starting_broker_is_healthy(broker_factory: Callable[..., BrokerProcess],
                                                               broker_target: str) -> None:
    if broker_target != "pybroker":
        pytest.skip("pybroker's own command line")
    unreachable = f"127.0.0.1:{free_port()}"
    start = time.monotonic()
    gave_up = CliRunner().invoke(cli, ["health", "--wait", "1", "--bootstrap-server", unreachable])
    assert gave_up.exit_code == 1 and "cannot reach the broker" in gave_up.stderr
    assert 1 <= time.monotonic() - start < 30  # after its 1 s, not never (slack for a busy machine)
    later = broker_factory(start=False)
    waiting = subprocess.Popen([sys.executable, "-m", "pybroker.broker.cli", "health", "--wait", "60",
                                "--bootstrap-server", later.bootstrap], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT)
    try:
        time.sleep(1)  # it is retrying against nothing now
        later.start()
        out, err = waiting.communicate(timeout=60)
    finally:
        waiting.kill()
    assert waiting.returncode == 0, err
    assert out.startswith("healthy: yes")


def test_read_committed_consume_and_the_transaction_log_decoder(tools_broker: BrokerProcess,
                                                                new_topic: Callable[..., str]) -> None:
    topic, txn_id = new_topic(), new_topic("txn")
    producer = ck_producer(tools_broker.bootstrap, **{"transactional.id": txn_id})
    producer.init_transactions(20)
    for value, commit in ((b"committed-1", True), (b"aborted", False), (b"committed-2", True)):
        producer.begin_transaction()
        producer.produce(topic, value, partition=0)
        producer.flush(10)
        (producer.commit_transaction if commit else producer.abort_transaction)(20)
    committed = [r["value"] for r in lines(tools_broker, "consume", topic, "--from-beginning", "-e",
                                           "--isolation-level", "read_committed")]
    assert committed == ["committed-1", "committed-2"]
    assert [r["value"] for r in lines(tools_broker, "consume", topic, "--from-beginning", "-e")] == [
        "committed-1", "aborted", "committed-2"]

    records = [record for path in tools_broker.log_dirs[0].glob("__transaction_state-*/*.log")
               for batch in (json.loads(line) for line in run(tools_broker, "dump-log", str(path), "--json").stdout
                             .splitlines()) for record in batch.get("records", [])]
    ours = [r for r in records if r["key"]["data"]["transactionalId"] == txn_id]
    assert ours and {r["payload"]["data"]["state"] for r in ours} >= {"Ongoing", "CompleteCommit", "CompleteAbort"}


def test_consume_into_a_pipe_shows_records_as_they_come(tools_broker: BrokerProcess,
                                                        new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    run(tools_broker, "produce", topic, "--value", "live")
    consumer = subprocess.Popen([sys.executable, "-m", "pybroker.broker.cli", "consume", topic, "--from-beginning",
                                 "--bootstrap-server", tools_broker.bootstrap], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT)  # a pipe: Python buffers it
    try:
        assert consumer.stdout is not None
        ready, _, _ = select.select([consumer.stdout], [], [], 30)  # it keeps running: no exit flushes for it
        assert ready and consumer.stdout.readline() == "live\n"
    finally:
        consumer.kill()
        consumer.communicate(timeout=30)
