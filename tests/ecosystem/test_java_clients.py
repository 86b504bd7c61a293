"""Apache Kafka's Java clients against pybroker: producer, consumer (classic and KIP-848) and admin client.

Each test runs a tour of `java/ClientTour.java` (one JVM) against a real `pybroker start`. The admin tour runs
against Apache Kafka too, and the two tours must agree step by step: the same calls succeed, the same ones
fail with the same exception and, where the client shows it, the same message. What this found the first
time it ran (fixed, each with a unit test beside its handler): Java's `describeTopics` failed with a
NullPointerException (DescribeTopicPartitions sent null ELR lists; Kafka sends empty ones); Java's KIP-848
consumer never got its regex subscription's partitions (it resolves assigned topic ids with Metadata entries
named "" beside the id, which we read as the invalid topic name ""); and our messages for a fenced
transactional produce and for ACL calls without an authorizer were not Kafka's.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest

from tests.ecosystem.jvm import Tours
from tests.integration.metrics_broker import MetricsBrokerProcess
from tests.kafka_node import KafkaNode

pytestmark = pytest.mark.slow

#: what the admin tour's calls answer on a single node without an authorizer, as Kafka answers them
EXPECTED_ADMIN_ERRORS = {
    "createTopics-exists": "TopicExistsException",
    "describeTopics-unknown": "UnknownTopicOrPartitionException",
    "incrementalAlterConfigs-invalid": "InvalidConfigurationException",
    "deleteConsumerGroups-unknown": "GroupIdNotFoundException",
    "describeTransactions-unknown": "TransactionalIdNotFoundException",
    "describeAcls": "SecurityDisabledException",
    "createAcls": "SecurityDisabledException",
    "deleteAcls": "SecurityDisabledException",
    "deleteTopics-unknown": "UnknownTopicOrPartitionException",
}


def _name(kind: str) -> str:
    return f"java-{kind}-{uuid.uuid4().hex[:8]}"


def _failed(steps: Any) -> dict[str, str]:
    return {step: error for step, (ok, error) in steps.outcomes().items() if not ok}


def test_admin_client_calls_every_admin_api_and_agrees_with_kafka(
        tours: Tours, java_broker: MetricsBrokerProcess, kafka_oracle: KafkaNode) -> None:
    topic = _name("admin")
    ours = tours.run("admin", java_broker.bootstrap, topic)
    theirs = tours.run("admin", f"127.0.0.1:{kafka_oracle.port}", topic)
    assert _failed(theirs) == EXPECTED_ADMIN_ERRORS, "Kafka itself answered differently: the tour needs a look"
    assert _failed(ours) == EXPECTED_ADMIN_ERRORS
    assert list(ours.outcomes()) == list(theirs.outcomes())
    for step in EXPECTED_ADMIN_ERRORS:  # the messages the client shows (its exception's text)
        assert ours[step]["message"].replace(topic, "T") == theirs[step]["message"].replace(topic, "T"), step
    # what the answers carried, where it is deterministic
    assert "nodes=1" in ours["describeCluster"]["detail"]
    assert "transaction.version" in ours["describeFeatures"]["detail"]
    assert "offset=5" in ours["listOffsets-afterDelete"]["detail"]
    assert "offset=7" in ours["listConsumerGroupOffsets"]["detail"] and "metadata='meta'" in ours[
        "listConsumerGroupOffsets"]["detail"]
    assert "SCRAM_SHA_256, iterations=4096" in ours["describeUserScramCredentials-after"]["detail"]
    assert "producer_byte_rate=1048576.0" in ours["describeClientQuotas"]["detail"]
    assert "ElectionNotNeededException" in ours["electLeaders"]["detail"]


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_idempotent_producer_gets_consecutive_offsets_with_each_codec(
        tours: Tours, java_broker: MetricsBrokerProcess, codec: str) -> None:
    topic = _name(f"produce-{codec}")
    sent = tours.run("produce", java_broker.bootstrap, topic, "40", codec).all("sent")
    assert [line["ok"] for line in sent] == [True] * 40
    assert sorted(line["offset"] for line in sent) == list(range(40))
    got = tours.run("consume", java_broker.bootstrap, topic, _name("g"), "classic", "40", "read_uncommitted")
    assert got["consumed"]["count"] == 40 and got["consumed"]["keys"] == [f"k{i}" for i in range(40)]


@pytest.fixture(scope="module")
def transacted(tours: Tours, java_broker: MetricsBrokerProcess) -> tuple[str, Any]:
    """One transactional tour (commit 10, abort 5, commit 10, then fenced) shared by the consumer tests."""
    topic = _name("txn")
    return topic, tours.run("transact", java_broker.bootstrap, topic, _name("tid"), _name("txn-group"))


def test_transactional_producer_commits_aborts_and_is_fenced_as_on_kafka(transacted: tuple[str, Any]) -> None:
    _, steps = transacted
    assert _failed(steps) == {"fenced-begin": "InvalidProducerEpochException"}
    assert steps["fenced-begin"]["message"] == "Producer attempted to produce with an old epoch."
    assert steps["commit-a"]["detail"] == str(list(range(10)))
    assert steps["abort-x"]["detail"] == str(list(range(11, 16)))  # after commit-a's marker at 10
    assert steps["commit-b"]["detail"] == str(list(range(17, 27)))


def _requests(broker: MetricsBrokerProcess) -> dict[tuple[str, str], float]:
    """(API, version) -> requests received, from the broker's own metric."""
    status, text = broker.http_get("/metrics")
    assert status == 200
    counts: dict[tuple[str, str], float] = {}
    for line in text.splitlines():
        found = re.match(r'pybroker_requests_total\{api="([^"]+)",version="(\d+)"\} (\S+)', line)
        if found:
            counts[(found[1], found[2])] = float(found[3])
    return counts


def test_transactions_v2_are_negotiated(transacted: tuple[str, Any], java_broker: MetricsBrokerProcess) -> None:
    """Kafka 4's producer uses transactions v2 (KIP-890: Produce v12 adds the partition to the transaction,
    EndTxn v5 bumps the epoch) when the broker finalizes `transaction.version` 2, as pybroker does: it then
    sends no AddPartitionsToTxn at all."""
    counts = _requests(java_broker)
    assert counts.get(("Produce", "12"), 0) > 0
    assert counts.get(("EndTxn", "5"), 0) >= 3  # commit, abort, commit
    assert not any(api == "AddPartitionsToTxn" for api, _ in counts)
    assert transacted[1]["commit-b"]["ok"]


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
@pytest.mark.parametrize("isolation,expected", [("read_committed", 20), ("read_uncommitted", 25)])
def test_consumer_sees_committed_transactions_in_each_protocol(
        tours: Tours, java_broker: MetricsBrokerProcess, transacted: tuple[str, Any], protocol: str, isolation: str,
        expected: int) -> None:
    topic, _ = transacted
    got = tours.run("consume", java_broker.bootstrap, topic, _name("g"), protocol, str(expected), isolation)
    consumed = got["consumed"]
    assert consumed["count"] == expected
    committed = [f"a{i}" for i in range(10)] + [f"b{i}" for i in range(10)]
    if isolation == "read_committed":
        assert consumed["keys"] == committed
    else:  # the aborted five too (the fenced producer's "z" was refused, so it is nowhere)
        assert sorted(consumed["keys"]) == sorted(committed + [f"x{i}" for i in range(5)])
    assert consumed["assigned"] == [f"{topic}-0"]
    assert got["commit"]["ok"]


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_regex_subscription_gets_every_matching_topic(
        tours: Tours, java_broker: MetricsBrokerProcess, protocol: str) -> None:
    """KIP-848 regexes are the broker's (RE2J's SubscriptionPattern); classic ones are the client's."""
    prefix = _name("rx").replace("-", "")
    topics = [f"{prefix}-a", f"{prefix}-b"]
    for topic in topics:
        assert all(line["ok"] for line in tours.run("produce", java_broker.bootstrap, topic, "5").all("sent"))
    got = tours.run("consume", java_broker.bootstrap, f"regex:{prefix}-.*", _name("g"), protocol, "10",
                    "read_uncommitted")
    assert got["consumed"]["count"] == 10
    assert got["consumed"]["assigned"] == [f"{t}-0" for t in topics]


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_static_member_rejoins_with_its_instance_id(tours: Tours, java_broker: MetricsBrokerProcess, protocol: str) -> None:
    topic = _name("static")
    assert all(line["ok"] for line in tours.run("produce", java_broker.bootstrap, topic, "6").all("sent"))
    group = _name("g")
    first = tours.run("consume", java_broker.bootstrap, topic, group, protocol, "6", "read_uncommitted", "inst-1")
    assert first["consumed"]["count"] == 6 and first["commit"]["ok"]
    # the same instance id comes back: it resumes from the committed offsets (nothing more to read)
    again = tours.run("consume", java_broker.bootstrap, topic, group, protocol, "0", "read_uncommitted", "inst-1")
    assert again["consumed"]["count"] == 0 and again["consumed"]["assigned"] == [f"{topic}-0"]
