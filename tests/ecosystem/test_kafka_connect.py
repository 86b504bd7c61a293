"""Kafka Connect in distributed mode against pybroker, with an exactly-once source (KIP-618).

A real worker (`ConnectDistributed`) keeps its connector configs, source offsets and statuses in three
compacted topics on pybroker. A FileStreamSource connector with `exactly.once.support=required` copies a file
into a topic inside transactions; a FileStreamSink writes the topic back to a file. Lines arrive in rounds;
between rounds the broker is killed with SIGKILL and restarted, then the worker is. Afterwards the worker still
knows both connectors (its config topic survived), the source went on from its stored offset (read_committed,
the topic holds every line exactly once) and the sink file holds every line.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from tests.ecosystem.jvm import JVM_FLAGS, connect_home, connect_missing, need
from tests.integration.brokers import BrokerProcess, free_port

pytestmark = pytest.mark.slow

DEADLINE_S = 180.0
ROUNDS = 3
LINES_PER_ROUND = 40


class Worker:
    """One Connect worker JVM in distributed mode; its REST API on `port`."""

    def __init__(self, workdir: Path, bootstrap: str, group: str) -> None:
        self.port = free_port()
        self.config = workdir / "worker.properties"
        self.config.write_text("".join(f"{k}={v}\n" for k, v in {
            "bootstrap.servers": bootstrap, "group.id": group,
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            "config.storage.topic": f"{group}-configs", "offset.storage.topic": f"{group}-offsets",
            "status.storage.topic": f"{group}-status", "config.storage.replication.factor": "1",
            "offset.storage.replication.factor": "1", "status.storage.replication.factor": "1",
            "offset.flush.interval.ms": "500", "listeners": f"http://127.0.0.1:{self.port}",
            "exactly.once.source.support": "enabled", "plugin.discovery": "only_scan",
        }.items()))
        self.log = workdir / "worker.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, deadline: float) -> None:
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                ["java", *JVM_FLAGS, "-cp", str(connect_home() / "libs" / "*"),
                 "org.apache.kafka.connect.cli.ConnectDistributed", str(self.config)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        while True:
            assert self.process.poll() is None, self.log.read_text(errors="replace")[-3000:]
            try:
                self.rest("GET", "/")
                return
            except OSError:
                assert time.monotonic() < deadline, "the Connect worker did not answer in time"
                time.sleep(0.5)

    def kill9(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)

    def rest(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as answer:
            return json.loads(answer.read() or b"null")

    def until_running(self, name: str, deadline: float) -> None:
        while True:
            try:
                status = self.rest("GET", f"/connectors/{name}/status")
                states = [status["connector"]["state"]] + [t["state"] for t in status["tasks"]]
                if len(states) > 1 and all(s == "RUNNING" for s in states):
                    return
                assert "FAILED" not in states, status
            except urllib.error.HTTPError as exc:  # 404 until the status topic has it
                assert exc.code in (404, 409), exc
            except OSError:
                pass
            assert time.monotonic() < deadline, f"{name} not RUNNING in time:\n{self.log.read_text()[-3000:]}"
            time.sleep(0.5)


@pytest.fixture(autouse=True)
def _connect() -> None:
    need(connect_missing())



def _committed_lines(bootstrap: str, topic: str) -> list[str]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex[:6]}",
                         "isolation.level": "read_committed", "enable.partition.eof": True, "log_level": 3})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        lines = []
        while True:
            message = consumer.poll(5.0)
            if message is None or (message.error() and message.error().code() == KafkaError._PARTITION_EOF):
                return lines
            assert not message.error(), message.error()
            lines.append(message.value().decode())
    finally:
        consumer.close()


def test_distributed_worker_with_an_exactly_once_source_survives_broker_and_worker_kills(
        fresh_broker: BrokerProcess, tmp_path: Path) -> None:
    deadline = time.monotonic() + DEADLINE_S
    group = f"connect-{uuid.uuid4().hex[:6]}"
    topic = f"{group}-lines"
    source_file, sink_file = tmp_path / "in.txt", tmp_path / "out.txt"
    source_file.write_text("")
    worker = Worker(tmp_path, fresh_broker.bootstrap, group)
    worker.start(deadline)
    try:
        worker.rest("PUT", "/connectors/source/config", {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector", "file": str(source_file),
            "topic": topic, "tasks.max": "1", "exactly.once.support": "required", "transaction.boundary": "poll"})
        worker.rest("PUT", "/connectors/sink/config", {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector", "file": str(sink_file),
            "topics": topic, "tasks.max": "1", "consumer.override.isolation.level": "read_committed"})
        worker.until_running("source", deadline)
        worker.until_running("sink", deadline)
        expected: list[str] = []
        for round_ in range(ROUNDS):
            batch = [f"round{round_}-line{i}" for i in range(LINES_PER_ROUND)]
            with source_file.open("a") as out:
                out.write("".join(f"{line}\n" for line in batch))
            expected += batch
            while _committed_lines(fresh_broker.bootstrap, topic) != expected:  # copied, in order
                assert time.monotonic() < deadline, _committed_lines(fresh_broker.bootstrap, topic)[-5:]
                time.sleep(0.5)
            if round_ == 0:
                fresh_broker.restart(kill=True)
            elif round_ == 1:  # the worker comes back from what its three topics hold
                worker.kill9()
                worker.start(deadline)
                assert sorted(worker.rest("GET", "/connectors")) == ["sink", "source"]
                worker.until_running("source", deadline)
        assert _committed_lines(fresh_broker.bootstrap, topic) == expected  # each line exactly once
        while set(sink_file.read_text().splitlines()) != set(expected):  # the sink is at-least-once
            assert time.monotonic() < deadline, "the sink file did not catch up"
            time.sleep(0.5)
        admin = AdminClient({"bootstrap.servers": fresh_broker.bootstrap})
        for suffix in ("configs", "offsets", "status"):
            described = admin.describe_configs([ConfigResource("topic", f"{group}-{suffix}")])
            assert next(iter(described.values())).result(30)["cleanup.policy"].value == "compact"
        assert "Traceback" not in fresh_broker.log_path.read_text(errors="replace")
    finally:
        worker.kill9()
