"""The page-cache budget with stock clients: a broker that keeps only 2 MiB of its logs cached drops the
rest as it reaches the disk (fsynced for acks=all; written back for acks=1, which nothing fsyncs), and a
consumer reading all of it from the start (from the disk, behind the budget) still gets every record byte
for byte, as does a consumer following the log end. The scrape shows the drops
(`pybroker_page_cache_dropped_bytes_total`)."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.clients import kp_producer, kp_read
from tests.integration.metrics_broker import MetricsBrokerProcess, running_pybroker

pytestmark = [pytest.mark.integration]

RECORDS = 2_000
RECORD_BYTES = 10 * 1024
PARTITIONS = 2


@pytest.fixture
def small_cache_broker(tmp_path: Path, broker_target: str) -> Iterator[MetricsBrokerProcess]:
    settings = {"num.partitions": str(PARTITIONS), "log.page.cache.max.bytes": str(2 << 20),
                "log.segment.bytes": str(8 << 20)}
    with running_pybroker(tmp_path / "broker", broker_target, settings, why="pybroker's own setting") as broker:
        yield broker


def _metric(broker: MetricsBrokerProcess, name: str) -> float:
    status, page = broker.http_get("/metrics")
    assert status == 200
    found = re.search(rf"^{name} (\S+)$", page, re.MULTILINE)
    assert found, name
    return float(found.group(1))


def _dropped_beyond(broker: MetricsBrokerProcess, floor: float) -> float:
    """The drop counter once it passed `floor` (drops run on their own thread, a moment after the fsync)."""
    deadline = time.monotonic() + 10
    while (dropped := _metric(broker, "pybroker_page_cache_dropped_bytes_total")) <= floor:
        assert time.monotonic() < deadline, f"dropped {dropped:,.0f} bytes, not above {floor:,.0f}"
        time.sleep(0.05)
    return dropped


@pytest.mark.parametrize("acks", ["all", 1])
def test_records_past_the_budget_read_back_byte_identical(small_cache_broker: MetricsBrokerProcess,
                                                          acks: str | int) -> None:
    broker = small_cache_broker
    sent: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    with kp_producer(broker.bootstrap, acks=acks, linger_ms=20, batch_size=256 * 1024) as producer:
        futures = []
        for i in range(RECORDS):
            value = os.urandom(RECORD_BYTES)
            sent[i % PARTITIONS].append(value)
            futures.append(producer.send("cold", value, partition=i % PARTITIONS))
        producer.flush()
        for future in futures:
            future.get(timeout=30)
    total = RECORDS * RECORD_BYTES
    dropped = _dropped_beyond(broker, total / 2)  # all but the newest 2 MiB go, in 2 MiB steps
    assert _metric(broker, "pybroker_page_cache_log_bytes") <= 4 << 20
    for _ in range(2):  # a consumer far behind, twice: the second reads what the first's drops let go
        got = kp_read(broker.bootstrap, "cold", PARTITIONS, expected=RECORDS)
        by_partition: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
        for record in sorted(got, key=lambda r: (r.partition, r.offset)):
            by_partition[record.partition].append(record.value)
        assert by_partition == sent
    _dropped_beyond(broker, dropped)  # what was read from the disk went again once sent
