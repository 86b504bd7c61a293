"""The two brokers of a differential test: a fresh in-process pybroker per test, one Kafka node per session.

`kafka` starts Apache Kafka once for the whole run (tests/kafka_node.py) and skips, with the reason, only
where Java or the resolved jars are missing outside `make test`; under `make test` their absence fails.
`pair` hands a test one `RawClient` to each broker on the test's event loop; `Pair.call` sends the same
request to both and returns both answers, normalized (tests/conformance/normalize.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pybroker.broker.app import BrokerApp
from pybroker.config.broker_config import BrokerConfig
from tests.conformance.normalize import normalize
from tests.kafka_node import KafkaNode, kafka_version, missing_reason, required
from tests.unit.broker.conftest import RawClient

_started: list[KafkaNode] = []


@pytest.fixture(scope="session")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaNode]:
    reason = missing_reason()
    if reason is not None:
        if required():
            pytest.fail(reason)
        pytest.skip(reason)
    node = KafkaNode(tmp_path_factory.mktemp("kafka"))
    node.start()
    _started.append(node)
    try:
        yield node
    finally:
        node.stop()


@pytest.fixture
async def pybroker(tmp_path: Path) -> AsyncIterator[BrokerApp]:
    config = BrokerConfig.load({
        "log.dirs": str(tmp_path / "data"),
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "group.initial.rebalance.delay.ms": "0",
    })
    broker = BrokerApp(config)
    await broker.start()
    try:
        yield broker
    finally:
        await broker.stop()


@dataclass
class Pair:
    ours: RawClient
    theirs: RawClient

    async def call(self, request: Any, version: int) -> tuple[Any, Any]:
        """The same request to both brokers; both answers, normalized (pybroker's first)."""
        mine = await self.ours.call(request, version)
        kafkas = await self.theirs.call(request, version)
        return normalize(mine), normalize(kafkas)

    async def raw(self, request: Any, version: int) -> tuple[Any, Any]:
        """Both answers as decoded, for the tests that compare only part of them."""
        return await self.ours.call(request, version), await self.theirs.call(request, version)


@pytest.fixture
async def pair(pybroker: BrokerApp, kafka: KafkaNode) -> AsyncIterator[Pair]:
    ours = RawClient(*await asyncio.open_connection("127.0.0.1", pybroker.bound_ports[0]))
    theirs = RawClient(*await asyncio.open_connection("127.0.0.1", kafka.port))
    try:
        yield Pair(ours, theirs)
    finally:
        ours.close()
        theirs.close()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for node in _started:
        terminalreporter.write_line(
            f"Apache Kafka {kafka_version()}: start to ready in {node.start_seconds:.1f} s (log {node.log_path})")
