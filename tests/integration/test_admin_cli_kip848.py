"""KIP-848 groups in pybroker's own tools: two confluent-kafka consumers with `group.protocol=consumer`
show as Stable with their members and assignments in `pybroker groups list/describe` and on the console's
group pages (both ask ConsumerGroupDescribe; DescribeGroups calls such a group Dead)."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

import pytest

from tests.integration.brokers import BrokerProcess, free_port
from tests.integration.test_admin_cli import pybroker
from tests.integration.test_consumer_protocol import FAST, PARTITIONS, _consumer, _create, _poll_until, _split


def _cli(broker: BrokerProcess, *args: str) -> Any:
    result = pybroker(*args, "--bootstrap-server", broker.bootstrap, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _console(port: int, path: str) -> Any:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/console/{path}", timeout=10) as page:
        return json.loads(page.read())


def test_consumer_protocol_group_is_stable_with_members_in_the_cli_and_the_console(
        broker_target: str, broker_factory: Callable[..., BrokerProcess], new_topic: Callable[..., str]) -> None:
    if broker_target != "pybroker":
        pytest.skip("pybroker's own command line and console")
    console_port = free_port()
    broker = broker_factory({**FAST, "console.port": str(console_port)})
    topic = new_topic()
    _create(broker.bootstrap, topic)
    with ExitStack() as stack:
        consumers = [stack.enter_context(_consumer(broker.bootstrap, "kip848", **{"client.id": f"c{i}"}))
                     for i in range(2)]
        for consumer in consumers:
            consumer.subscribe([topic])
        _poll_until(consumers, _split(consumers))
        for consumer in consumers:  # the split the clients see is reconciled: the group is Stable
            consumer.poll(0.5)

        listed = {row["group"]: row for row in _cli(broker, "groups", "list")}
        assert listed["kip848"]["group_type"] == "consumer"
        described = _cli(broker, "groups", "describe", "kip848")
        assert described["state"] == "Stable", described
        assert described["group_type"] == "consumer" and described["group_epoch"] > 0
        members = _cli(broker, "groups", "describe", "kip848", "--members", "--verbose")
        assert sorted(m["client_id"] for m in members) == ["c0", "c1"]
        assigned = sorted(a for m in members for a in m["assignment"])
        assert assigned == sorted(f"{topic}-{p}" for p in range(PARTITIONS))
        assert all(m["member_epoch"] > 0 for m in members)
        text = pybroker("groups", "describe", "kip848", "--bootstrap-server", broker.bootstrap)
        assert text.returncode == 0 and "Stable, 2 member(s)" in text.stdout, text.stdout

        rows = {row["group"]: row for row in _console(console_port, "api/groups")}
        assert rows["kip848"]["state"] == "Stable" and rows["kip848"]["members"] == 2
        page = _console(console_port, "api/group?id=kip848")
        assert page["state"] == "Stable" and page["group_type"] == "consumer"
        assert sorted(a for m in page["members"] for a in m["assignment"]) == assigned
        assert {row["member_id"] for row in page["offsets"]} == {m["member_id"] for m in members}
