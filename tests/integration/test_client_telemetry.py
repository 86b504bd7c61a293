"""Client metrics (KIP-714) from confluent-kafka (librdkafka) visible on the broker's /metrics.

A client-metrics subscription is set with kafka-python's admin (IncrementalAlterConfigs on resource type
16); a librdkafka producer asks for its subscription, pushes its metrics every second, and they appear
as `pybroker_client_*` families labelled with its client id.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka.admin import ConfigResource, ConfigResourceType

from tests.integration.clients import ck_producer, kp_admin
from tests.integration.metrics_broker import MetricsBrokerProcess


@pytest.fixture
def metrics_broker(tmp_path: Path, broker_target: str) -> Iterator[MetricsBrokerProcess]:
    if broker_target != "pybroker":
        pytest.skip("pybroker's own metrics")
    proc = MetricsBrokerProcess(tmp_path / "broker")
    proc.start()
    try:
        yield proc
    finally:
        proc.close()


@pytest.mark.slow
def test_librdkafka_pushes_its_metrics_to_the_prometheus_endpoint(metrics_broker: MetricsBrokerProcess) -> None:
    with kp_admin(metrics_broker.bootstrap) as admin:
        result = admin.alter_configs([ConfigResource(ConfigResourceType.CLIENT_METRICS, "every-producer", configs={
            "metrics": "org.apache.kafka.producer.", "interval.ms": "1000",
            "match": "client_software_name=.*kafka.*"})], incremental=True,
            raise_on_unknown=False)
        assert result == {"client_metrics": {"every-producer": "OK"}}
        assert admin.list_config_resources(["CLIENT_METRICS"]) == {"client_metrics": ["every-producer"]}
    producer = ck_producer(metrics_broker.bootstrap, **{"client.id": "telemetry-test"})
    page = ""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        producer.produce("telemetry-topic", b"value")
        producer.poll(0.5)
        _, page = metrics_broker.http_get("/metrics")
        if "pybroker_client_org_apache_kafka_producer" in page and 'client_id="telemetry-test"' in page:
            break
    producer.flush(10)
    lines = [line for line in page.splitlines() if line.startswith("pybroker_client_org_apache_kafka_producer")]
    assert lines, "no pushed producer metric appeared on /metrics"
    assert all('client_id="telemetry-test"' in line for line in lines)
    assert "pybroker_client_telemetry_instances 1.0" in page
