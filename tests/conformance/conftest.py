"""The two brokers of a differential test: a fresh in-process pybroker per scenario, one Kafka node per run.

`kafka` starts Apache Kafka once per setting (tests/conformance/settings.py) for a live run (`PYBROKER_CONFORMANCE=live` or `record`, see
tests/conformance/recording.py) and skips, with the reason, only where Java or the resolved jars are
missing outside `make conformance`; there their absence fails. A recorded run (`make test`) never asks for
it. Before the first scenario it waits until Kafka's group and transaction coordinators and its producer
id allocation answer, so that no scenario's answers depend on being the first to need one of them.
At the end of a `record` run the answers Kafka gave are merged into the recordings.
"""

from __future__ import annotations

import socket
import struct
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pybroker.protocol.frame_codec import decode_response, encode_request
from pybroker.protocol.messages.find_coordinator import FindCoordinatorRequest
from pybroker.protocol.messages.init_producer_id import InitProducerIdRequest
from tests.conformance import recording
from tests.conformance.registry import load
from tests.conformance.settings import kafka_overrides
from tests.kafka_node import KafkaNode, free_port, kafka_version, missing_reason, required

_started: list[KafkaNode] = []
# family -> scenario id -> Kafka's answers, in a `record` run
RECORDED_NOW: dict[str, dict[str, Any]] = defaultdict(dict)
COORDINATOR_WAIT = 60.0


# the first answers that are slower on a fresh Kafka node: the coordinators (their internal topics are
# made on first use) and a producer id (a block of them is asked of the controller)
WARM_UP = ((FindCoordinatorRequest(key="cf-warm-up", key_type=0), 3),
           (FindCoordinatorRequest(key="cf-warm-up", key_type=1), 3),
           (InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60_000), 4))


def _warm(port: int) -> bool:
    """True once every WARM_UP request is answered NONE."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        for request, version in WARM_UP:
            sock.sendall(encode_request(request, version, 1))
            size = struct.unpack(">i", _read(sock, 4))[0]
            answer = decode_response(_read(sock, size), type(request).API_KEY, version)[1]
            if answer.error_code != 0:
                return False
    return True


def _read(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


@dataclass
class KafkaNodes:
    """The live Kafka nodes of this run, one per setting (tests/conformance/settings.py), each started
    when a scenario first needs it; `port(setting)` is the client listener a scenario talks to."""

    workdirs: pytest.TempPathFactory
    nodes: dict[str, tuple[KafkaNode, int]] = field(default_factory=dict)

    def port(self, setting: str) -> int:
        if setting not in self.nodes:
            node = KafkaNode(self.workdirs.mktemp(f"kafka-{setting}"))
            client_port = node.port if setting == "plain" else free_port()
            node.overrides = kafka_overrides(setting, node.port, node.controller_port, client_port)
            node.start()
            self.nodes[setting] = (node, client_port)
            _started.append(node)
            deadline = time.monotonic() + COORDINATOR_WAIT
            while not _warm(node.port):
                assert time.monotonic() < deadline, f"Kafka's coordinators not ready:\n{node.log_tail()}"
                time.sleep(0.2)
        return self.nodes[setting][1]


@pytest.fixture(scope="session")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaNodes]:
    reason = missing_reason()
    if reason is not None:
        if required():
            pytest.fail(reason)
        pytest.skip(reason)
    nodes = KafkaNodes(tmp_path_factory)
    try:
        yield nodes
    finally:
        for node, _ in nodes.nodes.values():
            node.stop()


def pytest_sessionfinish(session: pytest.Session) -> None:
    if not RECORDED_NOW:
        return
    scenarios = load()
    for family, answers in RECORDED_NOW.items():
        recording.store(family, answers, keep={s.id for s in scenarios.values() if s.family == family})


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for node in _started:
        terminalreporter.write_line(
            f"Apache Kafka {kafka_version()}: start to ready in {node.start_seconds:.1f} s (log {node.log_path})")
    for family in RECORDED_NOW:
        terminalreporter.write_line(f"recorded Kafka's answers: {Path(recording.path_of(family)).name}")
