"""The command line's rough edges a new user met (issue 29): help for a bare command group, `--json` that
honours `--no-partitions`, config values refused in Kafka's words, a typo'd `--override` refused with the
nearest key, a bad `--bootstrap-server` as a usage error (exit 2, docs/cli.md), an HTTP port named as such,
and a password piped into `users add` without Python's GetPassWarning. Each runs the installed entry point
(`main`) in its own process, as a user's shell does."""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path

import pytest

from tests.integration.brokers import BrokerProcess, free_port
from tests.integration.test_admin_cli import pybroker_process


@pytest.fixture
def ours(broker_target: str) -> None:
    if broker_target != "pybroker":
        pytest.skip("pybroker's own command line")


@pytest.mark.parametrize("args", [[], ["topics"], ["groups"], ["users"]], ids=["pybroker", "topics", "groups", "users"])
def test_a_bare_command_group_prints_its_help(ours: None, args: list[str]) -> None:
    result = pybroker_process(*args)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"Usage: pybroker {' '.join(args)}".rstrip() + " [OPTIONS] COMMAND")
    assert "Commands:\n" in result.stdout and result.stderr == ""


def test_log_dirs_json_honours_no_partitions(ours: None, broker: BrokerProcess) -> None:
    common = ["--bootstrap-server", broker.bootstrap, "--json"]
    with_partitions = json.loads(pybroker_process("log-dirs", *common).stdout)
    assert all("partitions" in d for d in with_partitions)
    for args in (["log-dirs"], ["log-dirs", "describe"]):
        result = pybroker_process(*args, "--no-partitions", *common)
        assert result.returncode == 0, result.stderr
        dirs = json.loads(result.stdout)
        assert dirs and all("partitions" not in d for d in dirs), dirs


@pytest.mark.parametrize(("override", "words"), [
    ("num.partitions=abc", "Invalid value abc for configuration num.partitions: Not a number of type INT"),
    ("log.retention.ms=soon", "Invalid value soon for configuration log.retention.ms: Not a number of type LONG"),
    ("auto.create.topics.enable=yes",
     "Invalid value yes for configuration auto.create.topics.enable: Expected value to be either true or false"),
    ("num.partitions=0", "Invalid value 0 for configuration num.partitions: Value must be at least 1"),
    ("num.partitons=3", "unknown config key 'num.partitons' (did you mean num.partitions?)"),
    ("retention.ms=1000", "unknown config key 'retention.ms' (a topic config: set it per topic; did you mean "
                          "log.retention.ms"),
])
def test_start_refuses_a_bad_or_unknown_override_in_one_line(ours: None, tmp_path: Path, override: str,
                                                             words: str) -> None:
    result = pybroker_process("start", "--log-dirs", str(tmp_path / "data"), "--listeners",
                              f"PLAINTEXT://127.0.0.1:{free_port()}", "--override", override)
    assert result.returncode == 2, result.stdout[-2000:]
    assert words in result.stderr and len(result.stderr.splitlines()) == 1, result.stderr
    assert "invalid literal" not in result.stderr and "Traceback" not in result.stderr


def test_topic_config_values_are_refused_in_kafkas_words(ours: None, broker: BrokerProcess) -> None:
    result = pybroker_process("topics", "create", "edges-bad-config", "--config", "retention.ms=abc",
                              "--bootstrap-server", broker.bootstrap)
    assert result.returncode == 1
    assert "Invalid value abc for configuration retention.ms: Not a number of type LONG" in result.stderr, \
        result.stderr
    assert "invalid literal" not in result.stderr


@pytest.mark.parametrize("address", ["nonsense", "127.0.0.1", "host:port", "127.0.0.1:99999", ","])
def test_a_bootstrap_server_that_does_not_parse_is_a_usage_error(ours: None, address: str) -> None:
    for args in (["topics", "list"], ["groups", "list", "--json"]):
        result = pybroker_process(*args, "--bootstrap-server", address)
        assert result.returncode == 2, (address, result.stderr)
        assert "HOST:PORT" in result.stderr and "Traceback" not in result.stderr


def test_an_http_port_is_named_as_such(ours: None) -> None:
    """A web server that answers what it cannot parse at once, as most do ("HTTP/1.1 400 ..."): its
    first four bytes, read as a Kafka size prefix, would claim 1213486160 bytes."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        def answer() -> None:
            conn, _ = server.accept()
            with conn:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        thread = threading.Thread(target=answer, daemon=True)
        thread.start()
        result = pybroker_process("topics", "list", "--bootstrap-server", f"127.0.0.1:{server.getsockname()[1]}")
        thread.join(10)
    assert result.returncode == 1
    assert "is an HTTP server, not a Kafka broker" in result.stderr, result.stderr
    assert "1213486160" not in result.stderr


def test_a_piped_password_needs_no_terminal(ours: None, broker: BrokerProcess) -> None:
    result = pybroker_process("users", "add", "piped-user", "--mechanism", "SCRAM-SHA-256",
                              "--bootstrap-server", broker.bootstrap, "--json", stdin="piped-Pw-1\n")
    assert result.returncode == 0, result.stderr
    assert "GetPassWarning" not in result.stderr and "Warning" not in result.stderr, result.stderr
    assert json.loads(result.stdout)[0]["user"] == "piped-user"
    empty = pybroker_process("users", "add", "piped-user", "--bootstrap-server", broker.bootstrap, stdin="")
    assert empty.returncode == 2 and "no password given" in empty.stderr, empty.stderr
