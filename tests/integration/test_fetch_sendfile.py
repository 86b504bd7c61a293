"""A consumer of large batches over plain TCP gets byte-identical records, and the broker sent them
from the segment files with sendfile rather than copying them (`pybroker_fetch_bytes_total{path}`).
The broker's send buffer is Kafka's default (100 KB): a 1 MiB partition answer never fits the socket at
once, so every fetch goes through partial sendfiles resumed on writability."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.clients import ck_flush, ck_producer, ck_read
from tests.integration.metrics_broker import MetricsBrokerProcess

pytestmark = [pytest.mark.integration]

RECORDS = 600
RECORD_BYTES = 10 * 1024
PARTITIONS = 2


@pytest.fixture
def metrics_broker(tmp_path: Path, broker_target: str) -> Iterator[MetricsBrokerProcess]:
    if broker_target != "pybroker":
        pytest.skip("pybroker's own metric")
    proc = MetricsBrokerProcess(tmp_path / "broker", {"num.partitions": str(PARTITIONS)})
    try:
        yield proc.start()
    finally:
        proc.close()


def _fetch_bytes(broker: MetricsBrokerProcess) -> dict[str, float]:
    status, page = broker.http_get("/metrics")
    assert status == 200
    found = re.findall(r'^pybroker_fetch_bytes_total\{path="(\w+)"\} (\S+)$', page, re.MULTILINE)
    return {path: float(value) for path, value in found}


def test_large_batches_arrive_byte_identical_and_by_sendfile(metrics_broker: MetricsBrokerProcess) -> None:
    payloads = {p: [os.urandom(RECORD_BYTES) for _ in range(RECORDS)] for p in range(PARTITIONS)}
    producer = ck_producer(metrics_broker.bootstrap, **{"linger.ms": 50, "batch.size": 1_000_000})
    for p, values in payloads.items():
        for value in values:
            producer.produce("zero-copy", value, partition=p)
    ck_flush(producer)
    before = _fetch_bytes(metrics_broker)
    got = ck_read(metrics_broker.bootstrap, "zero-copy", PARTITIONS, expected=RECORDS * PARTITIONS)
    for p in range(PARTITIONS):
        assert [m.value() for m in got[p]] == payloads[p]
    after = _fetch_bytes(metrics_broker)
    sent = after.get("sendfile", 0.0) - before.get("sendfile", 0.0)
    copied = after.get("copy", 0.0) - before.get("copy", 0.0)
    assert sent >= RECORDS * PARTITIONS * RECORD_BYTES
    assert sent / (sent + copied) > 0.95
