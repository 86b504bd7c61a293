"""Kafka Streams with group.protocol=streams (KIP-1071) against pybroker: the broker assigns the tasks.

The stateful exactly-once application of `test_kafka_streams.py` (`java/StreamsApp.java`: a repartition
topic, a state store with its changelog, a table join) runs as a streams group: the broker validates its
topology, creates its repartition and changelog topics, and hands out active and standby tasks
(group.streams.num.standby.replicas=1). Two instances share the tasks; a third joins and later leaves
(a clean close: it leaves the group); the broker is killed with SIGKILL and restarted in between, so the
group comes back from `__consumer_offsets`. Orders arrive in rounds between those events; at the end the
last value per customer, read with read_committed, must be the exact total, and StreamsGroupDescribe must
show every task active on exactly one member.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from pybroker.clients.wire import Connection, WireError, parse_bootstrap
from pybroker.protocol.messages.streams_group_describe import StreamsGroupDescribeRequest
from tests.ecosystem.jvm import Tours
from tests.ecosystem.test_kafka_streams import CUSTOMERS, App, _region, _totals
from tests.integration.brokers import BrokerProcess

pytestmark = pytest.mark.slow

ORDERS_PER_ROUND = 120
DEADLINE_S = 300.0


@pytest.fixture
def streams_broker(tmp_path: Path) -> BrokerProcess:
    proc = BrokerProcess(tmp_path / "broker", {
        "group.initial.rebalance.delay.ms": "0",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
        # a killed instance's tasks move within seconds, not the default 45
        "group.streams.session.timeout.ms": "10000",
        "group.streams.heartbeat.interval.ms": "1000",
        "group.streams.num.standby.replicas": "1"})
    proc.start()
    try:
        yield proc
    finally:
        proc.close()


def describe(bootstrap: str, group: str) -> object:
    host, port = parse_bootstrap(bootstrap)
    connection = Connection(host, port, timeout_s=30)
    try:
        return connection.request(StreamsGroupDescribeRequest(group_ids=[group], include_authorized_operations=False),
                                  0).groups[0]
    finally:
        connection.close()


def wait_stable(bootstrap: str, group: str, members: int, deadline: float) -> object:
    """The group Stable with `members` members, each at the assignment epoch (polled)."""
    described = None
    while time.monotonic() < deadline:
        try:
            described = describe(bootstrap, group)
        except (OSError, WireError):  # the broker restarting
            time.sleep(0.5)
            continue
        if described.error_code == 0 and described.group_state == "Stable" and len(described.members) == members:
            return described
        time.sleep(0.5)
    raise AssertionError(f"group not Stable with {members} members in time: {described}")


def test_streams_group_runs_the_exactly_once_app_with_instances_joining_leaving_and_a_killed_broker(
        tours: Tours, streams_broker: BrokerProcess, tmp_path: Path) -> None:
    bootstrap = streams_broker.bootstrap
    prefix = f"sg-{uuid.uuid4().hex[:6]}"
    app_id = f"{prefix}-app"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(f"{prefix}-orders", 2, 1), NewTopic(f"{prefix}-customers", 2, 1),
                                       NewTopic(f"{prefix}-totals", 1, 1)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                         "partitioner": "murmur2_random"})
    for customer in range(CUSTOMERS):
        producer.produce(f"{prefix}-customers", key=f"c{customer}", value=_region(customer))
    producer.flush(30)

    apps = [App(tours, bootstrap, app_id, tmp_path / f"state{i}", prefix, tmp_path / f"app{i}.out") for i in range(3)]
    for app in apps:
        app.command.append("streams")
    deadline = time.monotonic() + DEADLINE_S
    expected = {f"c{c}": 0 for c in range(CUSTOMERS)}
    order = 0

    def produce_round() -> None:
        nonlocal order
        for _ in range(ORDERS_PER_ROUND):
            customer, amount = order % CUSTOMERS, order % 7 + 1
            producer.produce(f"{prefix}-orders", key=f"o{order}", value=f"c{customer},{amount}")
            expected[f"c{customer}"] += amount
            order += 1
        producer.flush(60)

    try:
        for app in apps[:2]:
            app.start()
        for app in apps[:2]:
            app.wait_running(deadline)
        described = wait_stable(bootstrap, app_id, 2, deadline)
        # the broker made the topology's internal topics
        topics = admin.list_topics(timeout=30).topics
        assert f"{app_id}-totals-store-changelog" in topics and f"{app_id}-by-customer-repartition" in topics
        _check_tasks(described, members=2)
        produce_round()
        apps[2].start()  # a third instance joins: tasks move to it
        apps[2].wait_running(deadline)
        _check_tasks(wait_stable(bootstrap, app_id, 3, deadline), members=3)
        produce_round()
        streams_broker.restart(kill=True)  # the group comes back from __consumer_offsets
        produce_round()
        assert apps[2].process is not None
        apps[2].process.terminate()  # a clean close: the instance leaves the group
        apps[2].process.wait(timeout=60)
        produce_round()
        _check_tasks(wait_stable(bootstrap, app_id, 2, deadline), members=2)
        want = {key: f"{_region(int(key[1:]))}:{total}" for key, total in expected.items()}
        got: dict[str, str] = {}
        while time.monotonic() < deadline:
            got = _totals(bootstrap, f"{prefix}-totals")
            if got == want:
                break
            time.sleep(1.0)
        assert got == want
        assert "Traceback" not in streams_broker.log_path.read_text(errors="replace")
    finally:
        for app in apps:
            app.kill9()


def _check_tasks(described: object, members: int) -> None:
    """Every task active on exactly one member, actives balanced, and standbys on other members."""
    active: list[tuple[str, int]] = []
    per_member = []
    for member in described.members:  # type: ignore[attr-defined]
        mine = [(t.subtopology_id, p) for t in member.assignment.active_tasks for p in t.partitions]
        standby = {(t.subtopology_id, p) for t in member.assignment.standby_tasks for p in t.partitions}
        assert not standby & set(mine), member
        active += mine
        per_member.append(len(mine))
    assert len(active) == len(set(active)), active
    subtopologies = described.topology.subtopologies  # type: ignore[attr-defined]
    assert len(set(active)) == 2 * len(subtopologies), (active, subtopologies)  # 2 partitions each
    assert len(per_member) == members and max(per_member) - min(per_member) <= 1, per_member
