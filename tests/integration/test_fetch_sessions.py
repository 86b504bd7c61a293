"""Fetch sessions (KIP-227) with stock clients over 1,000 partitions, watched through the broker's metrics.

kafka-python (3.x) opens a session with its first full fetch and then sends incremental fetches, which the
metrics count. librdkafka (confluent-kafka) does not implement fetch sessions (its Fetch requests always
carry session id 0 and epoch -1, with an empty forgotten-topics list): it is checked to read everything
through sessionless fetches, which the same metrics count apart.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import pytest
from kafka import TopicPartition
from kafka.admin import NewTopic

from tests.integration.clients import ck_flush, ck_producer, ck_read, kp_admin, kp_consumer, kp_wait_for_topic
from tests.integration.metrics_broker import MetricsBrokerProcess

PARTITIONS = 1000
pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def metrics_broker(tmp_path_factory: pytest.TempPathFactory, broker_target: str) -> Iterator[MetricsBrokerProcess]:
    if broker_target != "pybroker":
        pytest.skip("pybroker's own metrics")
    proc = MetricsBrokerProcess(tmp_path_factory.mktemp("fetch-sessions") / "broker")
    proc.start()
    try:
        yield proc
    finally:
        proc.close()


def _metric(broker: MetricsBrokerProcess, name: str, labels: str = "") -> float:
    _, page = broker.http_get("/metrics")
    pattern = re.escape(name) + (re.escape("{" + labels + "}") if labels else "") + r" ([0-9.e+]+)"
    match = re.search(pattern, page, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


def _fill(broker: MetricsBrokerProcess, topic: str) -> None:
    with kp_admin(broker.bootstrap, request_timeout_ms=60_000) as admin:
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)], timeout_ms=60_000)
    kp_wait_for_topic(broker.bootstrap, topic, timeout=30)
    producer = ck_producer(broker.bootstrap, **{"linger.ms": 20})
    for p in range(PARTITIONS):
        producer.produce(topic, value=b"first-%d" % p, partition=p)
    ck_flush(producer)


def test_kafka_python_consumes_1000_partitions_through_incremental_fetches(
        metrics_broker: MetricsBrokerProcess) -> None:
    topic = "sessions-kp"
    _fill(metrics_broker, topic)
    incremental_before = _metric(metrics_broker, "pybroker_fetch_session_requests_total", 'kind="incremental"')
    full_before = _metric(metrics_broker, "pybroker_fetch_session_requests_total", 'kind="full"')
    with kp_consumer(metrics_broker.bootstrap, fetch_max_wait_ms=100) as consumer:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        got: dict[int, list[bytes]] = {}
        deadline = time.monotonic() + 60
        while sum(map(len, got.values())) < PARTITIONS and time.monotonic() < deadline:
            for tp, batch in consumer.poll(timeout_ms=300, max_records=5000).items():
                got.setdefault(tp.partition, []).extend(r.value for r in batch)
        # everything at once, in whichever order the polls gave it
        assert sorted(v for values in got.values() for v in values) == sorted(b"first-%d" % p for p in range(PARTITIONS))
        # records appended later to a few partitions arrive through the same session
        producer = ck_producer(metrics_broker.bootstrap)
        for p in (3, 500, 999):
            producer.produce(topic, value=b"second-%d" % p, partition=p)
        ck_flush(producer)
        later: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + 30
        while len(later) < 3 and time.monotonic() < deadline:
            for tp, batch in consumer.poll(timeout_ms=300).items():
                later += [(tp.partition, r.value) for r in batch]
        assert sorted(later) == [(3, b"second-3"), (500, b"second-500"), (999, b"second-999")]
        # a caught-up consumer goes on polling: each fetch is an incremental one naming no partition
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            assert not consumer.poll(timeout_ms=100)
    incremental = _metric(metrics_broker, "pybroker_fetch_session_requests_total", 'kind="incremental"')
    assert incremental - incremental_before >= 5, "kafka-python should have fetched incrementally"
    assert _metric(metrics_broker, "pybroker_fetch_session_requests_total", 'kind="full"') - full_before == 1
    assert _metric(metrics_broker, "pybroker_fetch_session_requests_total", 'kind="error"') == 0
    assert _metric(metrics_broker, "pybroker_fetch_session_partitions") >= PARTITIONS


def test_confluent_kafka_reads_1000_partitions_without_sessions(metrics_broker: MetricsBrokerProcess) -> None:
    topic = "sessions-ck"
    _fill(metrics_broker, topic)
    sessionless_before = _metric(metrics_broker, "pybroker_fetch_session_requests_total", 'kind="sessionless"')
    got = ck_read(metrics_broker.bootstrap, topic, PARTITIONS, timeout=90, expected=PARTITIONS)
    assert {p: [m.value() for m in msgs] for p, msgs in got.items()} == \
        {p: [b"first-%d" % p] for p in range(PARTITIONS)}
    assert _metric(metrics_broker, "pybroker_fetch_session_requests_total", 'kind="sessionless"') > sessionless_before


def test_sessions_are_counted_on_the_metrics_page(metrics_broker: MetricsBrokerProcess) -> None:
    _, page = metrics_broker.http_get("/metrics")
    for family in ("pybroker_fetch_sessions", "pybroker_fetch_session_partitions",
                   "pybroker_fetch_session_evictions_total"):
        assert re.search(rf"^{family} ", page, re.MULTILINE), family
