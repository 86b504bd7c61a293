"""The ecosystem tests: Apache Kafka's own Java clients (and later Streams, Connect, Spark's connector) run
against a real `pybroker start`, and where it helps, against Apache Kafka too, to compare what they see.

Java and the resolved jars come from `make test` (`make kafka`); outside it their absence skips with the
reason, under it (PYBROKER_KAFKA_HOME set) it fails. Every test here is `integration`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.ecosystem.jvm import Tours, compile_programs, ecosystem_missing, need
from tests.integration.brokers import BrokerProcess
from tests.integration.metrics_broker import MetricsBrokerProcess
from tests.kafka_node import KafkaNode, missing_reason

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.integration)


def _need_kafka_jars(streams: bool = True) -> None:
    need(missing_reason() or (ecosystem_missing() if streams else None))


@pytest.fixture(scope="session")
def tours(tmp_path_factory: pytest.TempPathFactory) -> Tours:
    """The Java tours, compiled once for the session."""
    _need_kafka_jars()
    return Tours(compile_programs(tmp_path_factory.mktemp("java-classes")))


@pytest.fixture(scope="session")
def kafka_oracle(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaNode]:
    """One Apache Kafka node for the session: the same tour runs against it and against pybroker. The node
    needs Kafka's own jars only (MirrorMaker 2 brings its own), not the resolved Streams jars."""
    _need_kafka_jars(streams=False)
    node = KafkaNode(tmp_path_factory.mktemp("kafka-oracle"))
    node.start()
    try:
        yield node
    finally:
        node.stop()


@pytest.fixture(scope="module")
def java_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MetricsBrokerProcess]:
    """A pybroker of the module's own, configured as the Kafka node is (topics auto-created), with its
    metrics port (the request counts by API and version say what the clients negotiated)."""
    proc = MetricsBrokerProcess(tmp_path_factory.mktemp("pybroker"), {"auto.create.topics.enable": "true",
                                                               "group.initial.rebalance.delay.ms": "0"})
    proc.start()
    try:
        yield proc
    finally:
        if proc.is_running():
            proc.stop(expect_code=0)
        proc.close()


@pytest.fixture
def fresh_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A pybroker of the test's own, for the tests that kill and restart it (no initial rebalance delay;
    timed-out transactions aborted within a second, as the kills leave some open)."""
    proc = BrokerProcess(tmp_path / "broker", {
        "group.initial.rebalance.delay.ms": "0",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000"})
    proc.start()
    try:
        yield proc
    finally:
        proc.close()
