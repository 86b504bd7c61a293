"""A consumer of large batches over plain TCP gets byte-identical records, and the broker sent them
from the segment files by the zero-copy path rather than copying them (`pybroker_fetch_bytes_total{path}`:
sendfile, or for regions above 64 KiB splice through a pipe). The broker's send buffer is Kafka's default
(100 KB): a 1 MiB partition answer never fits the socket at once, so every fetch goes through partial
sends resumed on writability."""

from __future__ import annotations

import os
import re
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from pybroker.protocol.messages.api_versions import ApiVersionsRequest
from pybroker.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from tests.integration.clients import ck_flush, ck_producer, ck_read
from tests.integration.hostile import RawClient, rss_bytes
from tests.integration.metrics_broker import MetricsBrokerProcess, running_pybroker

pytestmark = [pytest.mark.integration]

RECORDS = 600
RECORD_BYTES = 10 * 1024
PARTITIONS = 2


@pytest.fixture
def metrics_broker(tmp_path: Path, broker_target: str) -> Iterator[MetricsBrokerProcess]:
    with running_pybroker(tmp_path / "broker", broker_target, {"num.partitions": str(PARTITIONS)},
                          why="pybroker's own metric") as broker:
        yield broker


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


def test_a_client_that_does_not_read_pauses_its_connection_and_gets_every_answer_in_order(
        metrics_broker: MetricsBrokerProcess) -> None:
    """40 pipelined 8 MB fetches from a client that reads nothing for a while: the broker stops reading
    its requests instead of piling answers up in memory, serves others meanwhile, and once the client
    reads, every answer arrives whole, in order, with the same bytes."""
    producer = ck_producer(metrics_broker.bootstrap, **{"linger.ms": 50, "batch.size": 1_000_000})
    for _ in range(800):
        producer.produce("slow-reader", os.urandom(RECORD_BYTES), partition=0)
    ck_flush(producer)
    wanted = 8 << 20
    fetch = FetchRequest(max_wait_ms=0, min_bytes=0, max_bytes=wanted, topics=[FetchTopic(
        topic="slow-reader", topic_id=uuid.UUID(int=0),
        partitions=[FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=wanted)])])
    assert metrics_broker.pid is not None
    idle_rss = rss_bytes(metrics_broker.pid)
    with RawClient(metrics_broker.host, metrics_broker.port, timeout=30) as slow:
        slow.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        ids = [slow.send(fetch, 12) for _ in range(40)]
        time.sleep(1.0)
        with RawClient(metrics_broker.host, metrics_broker.port) as other:  # the broker is not stuck
            assert other.call(ApiVersionsRequest(), 3) is not None
        assert rss_bytes(metrics_broker.pid) - idle_rss < 64 << 20
        answers = []
        for expected_id in ids:
            head = slow.recv_exact(8)
            assert head is not None
            size, correlation_id = int.from_bytes(head[:4], "big"), int.from_bytes(head[4:], "big")
            assert correlation_id == expected_id
            frame = slow.recv_exact(size - 4)
            assert frame is not None
            answers.append(frame)
    assert len(set(answers)) == 1 and len(answers[0]) > 8_000_000
