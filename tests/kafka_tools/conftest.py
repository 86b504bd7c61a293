"""One pybroker and one Apache Kafka node for every test of Kafka's own tools, both with the ACL authorizer.

Both brokers run Kafka's `StandardAuthorizer` with `User:ANONYMOUS` (every PLAINTEXT client) as a super
user, so `kafka-acls` has an authorizer to manage while every other tool is allowed everything: the
authorizer is a static setting in Kafka, and one node for the whole folder (8-12 s to start) is what keeps
it fast. It is a second node beside tests/conformance's, which runs without an authorizer because the
answers it compares depend on that. Tests share the brokers, so each uses topic and group names of its own (`names`).

Outside `make test`, a missing Java or unresolved Kafka skips with the reason; under it (where
PYBROKER_KAFKA_HOME is set) it fails. Every test here is marked `integration`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.integration.brokers import BrokerProcess
from tests.integration.clients import close_clients
from tests.kafka_node import KafkaNode, missing_reason, required
from tests.kafka_tools.runner import Targets, make_archive

HERE = Path(__file__).resolve().parent
SECURED = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
           "super.users": "User:ANONYMOUS", "allow.everyone.if.no.acl.found": "false"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def kafka_ready() -> None:
    reason = missing_reason()
    if reason is not None:
        if required():
            pytest.fail(reason)
        pytest.skip(reason)


@pytest.fixture(scope="session")
def secured_kafka(kafka_ready: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaNode]:
    # streams groups assigned at once, as pybroker assigns them (Kafka delays a new group's first assignment)
    node = KafkaNode(tmp_path_factory.mktemp("kafka-tools-node"),
                     {**SECURED, "group.streams.initial.rebalance.delay.ms": "0"})
    node.start()
    try:
        yield node
    finally:
        node.stop()


@pytest.fixture(scope="session")
def secured_pybroker(kafka_ready: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path_factory.mktemp("kafka-tools-pybroker"),
                         {**SECURED, "group.initial.rebalance.delay.ms": "0"})
    proc.start()
    try:
        yield proc
    finally:
        close_clients()
        if proc.is_running():
            proc.stop()
        proc.close()


@pytest.fixture(scope="session")
def targets(secured_pybroker: BrokerProcess, secured_kafka: KafkaNode,
            tmp_path_factory: pytest.TempPathFactory) -> Targets:
    make_archive(tmp_path_factory.mktemp("kafka-tools-cds") / "tools.jsa", secured_pybroker.bootstrap)
    return Targets(ours=secured_pybroker.bootstrap, kafkas=f"127.0.0.1:{secured_kafka.port}")


@pytest.fixture
def names(request: pytest.FixtureRequest) -> Callable[[str], str]:
    """`names("t")`: a topic or group name unique to this test (both brokers are shared)."""
    base = request.node.name.replace("[", "-").replace("]", "")[:40]

    def make(kind: str) -> str:
        return f"{base}-{kind}-{uuid.uuid4().hex[:6]}"

    return make
