"""Apache Kafka's share consumer (KIP-932, `KafkaShareConsumer` from the pinned 4.4.0 jars) against pybroker.

Each step is a tour of `java/ShareTour.java` (one JVM). The group is set to start at the earliest offset with
`Admin.incrementalAlterConfigs` on its GROUP resource, as a Kafka user does; then a producer writes, and:

- explicit acknowledgement: every record is accepted, one after being released once (it must come back with
  delivery count 2);
- implicit acknowledgement: every record is delivered and accepted by the next poll or commit;
- kill -9: a consumer accepts some records and halts holding others; the broker is killed with SIGKILL and
  restarted; a new consumer gets exactly the records never accepted (none accepted comes again, none is lost).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.ecosystem.jvm import Tours
from tests.integration.brokers import BrokerProcess

pytestmark = pytest.mark.slow

COUNT = 30


@pytest.fixture
def share_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker of the test's own (it is killed), with a small share state topic."""
    proc = BrokerProcess(tmp_path / "broker", {"share.coordinator.state.topic.num.partitions": "3",
                                               "offsets.topic.num.partitions": "3",
                                               "group.initial.rebalance.delay.ms": "0"})
    proc.start()
    try:
        yield proc
    finally:
        proc.close()


def _names() -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:8]
    return f"share-{suffix}", f"share-group-{suffix}"


def _ready(tours: Tours, bootstrap: str, topic: str, group: str) -> None:
    assert tours.run("configure", bootstrap, topic, group, main="ShareTour")["configure"]["reset"] == "earliest"
    assert tours.run("produce", bootstrap, topic, group, str(COUNT), main="ShareTour")["produce"]["ok"]


@pytest.mark.parametrize("mode", ["explicit", "implicit"])
def test_share_consumer_reads_every_record(tours: Tours, share_broker: BrokerProcess, mode: str) -> None:
    topic, group = _names()
    _ready(tours, share_broker.bootstrap, topic, group)
    args = [str(COUNT), mode] + (["release"] if mode == "explicit" else [])
    consumed = tours.run("consume", share_broker.bootstrap, topic, group, *args, main="ShareTour")["consume"]
    assert consumed["ok"], consumed
    assert sorted(consumed["values"]) == sorted(f"v{i}" for i in range(COUNT))
    if mode == "explicit":
        assert consumed["redelivery_count"] == 2, consumed  # the released record came back, counted


def test_kill_9_keeps_acknowledged_records_done_and_hands_back_the_rest(
        tours: Tours, share_broker: BrokerProcess) -> None:
    topic, group = _names()
    _ready(tours, share_broker.bootstrap, topic, group)
    first = tours.run("accept-then-halt", share_broker.bootstrap, topic, group, "10",
                      main="ShareTour")["accept-then-halt"]
    assert first["ok"], first
    share_broker.kill9()
    share_broker.start()
    rest = COUNT - len(first["values"])
    consumed = tours.run("consume", share_broker.bootstrap, topic, group, str(rest), "explicit",
                         main="ShareTour")["consume"]
    assert consumed["ok"], consumed
    assert set(consumed["values"]).isdisjoint(first["values"])  # no acknowledged record delivered again
    assert set(consumed["values"]) | set(first["values"]) == {f"v{i}" for i in range(COUNT)}  # none lost
