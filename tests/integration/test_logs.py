"""The broker's output is JSON lines with the documented keys: startup, recovery, listeners, and no line
per request at info level; secrets never appear."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.clients import kp_producer
from tests.integration.metrics_broker import MetricsBrokerProcess

SECRET = "hunter2-never-logged"
EVERY_LINE = {"timestamp", "level", "logger", "event"}


@pytest.fixture
def json_broker(tmp_path: Path, broker_target: str) -> Iterator[MetricsBrokerProcess]:
    if broker_target != "pybroker":
        pytest.skip("pybroker's own logs")
    properties = tmp_path / "server.properties"  # an unknown key in a file is a warning (on the command line, refused)
    properties.write_text("log.retention.hourz=1\n")
    proc = MetricsBrokerProcess(tmp_path / "broker", {"ssl.keystore.password": SECRET, "num.partitions": "2"},
                                extra_args=["--log-format", "json", "--log-level", "info", "--config", str(properties)])
    try:
        yield proc
    finally:
        proc.close()


def _events(lines: list[dict[str, Any]], event: str) -> list[dict[str, Any]]:
    return [line for line in lines if line["event"] == event]


def test_json_lines_with_effective_config_recovery_and_listeners(
        json_broker: MetricsBrokerProcess, new_topic: Callable[..., str]) -> None:
    json_broker.start()
    topic = new_topic()
    with kp_producer(json_broker.bootstrap, acks=1) as producer:
        producer.send(topic, b"first").get(timeout=10)
    before = len(json_broker.log_lines())
    with kp_producer(json_broker.bootstrap, acks=1) as producer:
        for i in range(200):
            producer.send(topic, b"m%d" % i)
        producer.flush(timeout=20)
    assert len(json_broker.log_lines()) == before, "info-level lines were written per request"
    json_broker.restart()  # after a clean stop
    json_broker.kill9()
    json_broker.start()  # after a crash: recovery runs
    json_broker.stop()

    text = json_broker.log_path.read_text()
    assert SECRET not in text
    lines = json_broker.log_lines()  # every line parses as JSON
    for line in lines:
        assert set(line) >= EVERY_LINE, line
        assert line["timestamp"].endswith("Z")
    starting = _events(lines, "starting")
    assert len(starting) == 3
    assert starting[0]["unknown_config_keys"] == ["log.retention.hourz"]
    unknown = _events(lines, "unknown config keys ignored")
    assert len(unknown) == 3 and unknown[0]["keys"] == ["log.retention.hourz"] and unknown[0]["level"] == "warning"
    config = starting[0]["config"]
    assert config["ssl.keystore.password"] == "[hidden]"
    assert config["num.partitions"] == "2" and config["log.segment.bytes"] == "1073741824"
    assert "num.partitions" in starting[0]["explicitly_set"]
    # a fresh dir is new (not an unclean shutdown); then a clean restart; then a restart after kill -9
    first = _events(lines, "new log dir")
    assert len(first) == 1 and "clean_shutdown" not in first[0]
    loaded = _events(lines, "log dir loaded")
    assert [line["clean_shutdown"] for line in loaded] == [True, False]
    for line in [*first, *loaded]:
        assert {"log_dir", "partitions", "segments_recovered", "bytes_truncated", "seconds"} <= set(line)
    assert loaded[1]["partitions"] == 2
    listening = _events(lines, "listening")
    assert listening and listening[0]["port"] == json_broker.port
    assert _events(lines, "metrics listening")[0]["port"] == json_broker.metrics_port
    assert _events(lines, "stopped cleanly")
