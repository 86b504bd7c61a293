"""Metrics through the real server: families present, values that move with traffic, the HTTP endpoints,
the error walk over responses, and consumer lag from a fake group provider."""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import pkgutil
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from pybroker.broker.app import BrokerApp
from pybroker.broker.metrics.collector import BrokerCollector
from pybroker.broker.metrics.groups import consumer_lag
from pybroker.broker.metrics.response_errors import error_codes
from pybroker.config.broker_config import BrokerConfig
from pybroker.protocol import messages
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages import fetch as fetch_messages
from pybroker.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from pybroker.protocol.messages.metadata import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from pybroker.protocol.messages.produce import (
    PartitionProduceData,
    PartitionProduceResponse,
    ProduceRequest,
    ProduceResponse,
    TopicProduceData,
    TopicProduceResponse,
)
from pybroker.protocol.records.record import Record, build_batch
from tests.unit.broker.conftest import RawClient

FAMILIES = [
    "pybroker_requests", "pybroker_request_duration_seconds", "pybroker_request_errors", "pybroker_bytes_in",
    "pybroker_bytes_out", "pybroker_messages_in", "pybroker_connections", "pybroker_partition_log_end_offset",
    "pybroker_partition_log_start_offset", "pybroker_log_size_bytes", "pybroker_log_dirs_offline",
    "pybroker_log_flush_duration_seconds", "pybroker_groups", "pybroker_group_members",
    "pybroker_consumer_group_lag",
]


@pytest.fixture
async def metrics_app(tmp_path: Path) -> AsyncIterator[BrokerApp]:
    config = BrokerConfig.load({"log.dirs": str(tmp_path / "data"), "listeners": "PLAINTEXT://127.0.0.1:0"})
    app = BrokerApp(config, metrics_port=0)
    await app.start()
    try:
        yield app
    finally:
        await app.stop()


async def _http(port: int, request: bytes) -> tuple[int, str]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    data = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    head, _, body = data.decode().partition("\r\n\r\n")
    return int(head.split()[1]), body


async def _scrape(app: BrokerApp) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    assert app.metrics_bound_port is not None
    status, body = await _http(app.metrics_bound_port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status == 200
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(body):
        samples = out.setdefault(family.name, {})
        for sample in family.samples:
            if sample.name in (family.name, f"{family.name}_total", f"{family.name}_count"):
                samples[tuple(sorted(sample.labels.items()))] = sample.value
    return out


def _produce(topic: str, n: int) -> ProduceRequest:
    batch = build_batch([Record(i, 0, b"k", b"value-%d" % i) for i in range(n)],
                        base_timestamp=int(time.time() * 1000))
    return ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[
        TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=0, records=batch)])])


def _fetch(topic: str) -> FetchRequest:
    return FetchRequest(max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, topics=[
        FetchTopic(topic=topic, partitions=[FetchPartition(partition=0, fetch_offset=0,
                                                           partition_max_bytes=1 << 20)])])


async def test_families_are_served_and_move_with_traffic(metrics_app: BrokerApp) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", metrics_app.bound_ports[0])
    client = RawClient(reader, writer)
    try:
        before = await _scrape(metrics_app)
        for family in FAMILIES:
            assert family in before, family
        produced = await client.call(_produce("m", 5), 9)
        assert produced.responses[0].partition_responses[0].error_code == 0
        await client.call(_produce("m", 3), 9)
        fetched = await client.call(_fetch("m"), 12)
        fetched_bytes = len(fetched.responses[0].partitions[0].records)
        bad = await client.call(ProduceRequest(acks=1, timeout_ms=1000, topic_data=[
            TopicProduceData(name="m", partition_data=[PartitionProduceData(index=9, records=b"x")])]), 9)
        assert bad.responses[0].partition_responses[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        after = await _scrape(metrics_app)
    finally:
        client.close()
    topic = (("topic", "m"),)
    part = (("partition", "0"), ("topic", "m"))
    assert after["pybroker_messages_in"][topic] == 8
    log = metrics_app.state.logs.get_log("m", 0)
    assert log is not None
    assert after["pybroker_bytes_in"][topic] == log.size_bytes
    assert after["pybroker_bytes_out"][topic] == fetched_bytes > 0
    assert after["pybroker_partition_log_end_offset"][part] == 8
    assert after["pybroker_partition_log_start_offset"][part] == 0
    size_key = (("log_dir", str(metrics_app.state.logs.dirs[0])), ("partition", "0"), ("topic", "m"))
    assert after["pybroker_log_size_bytes"][size_key] == log.size_bytes
    assert after["pybroker_connections"][()] >= 1
    assert after["pybroker_log_dirs_offline"][()] == 0
    produce_v9 = (("api", "Produce"), ("version", "9"))
    assert after["pybroker_requests"][produce_v9] - before["pybroker_requests"].get(produce_v9, 0) == 3
    errors = (("api", "Produce"), ("error", "UNKNOWN_TOPIC_OR_PARTITION"))
    assert after["pybroker_request_errors"][errors] - before["pybroker_request_errors"].get(errors, 0) == 1
    assert after["pybroker_request_duration_seconds"][(("api", "Produce"),)] >= 3
    assert after["pybroker_log_flush_duration_seconds"][()] > before["pybroker_log_flush_duration_seconds"][()]


async def test_health_ready_and_bad_http(metrics_app: BrokerApp) -> None:
    port = metrics_app.metrics_bound_port
    assert port is not None
    assert await _http(port, b"GET /healthz HTTP/1.1\r\n\r\n") == (200, "ok\n")
    assert await _http(port, b"GET /readyz HTTP/1.0\r\n\r\n") == (200, "ready\n")
    assert (await _http(port, b"GET /nope HTTP/1.1\r\n\r\n"))[0] == 404
    assert (await _http(port, b"POST /metrics HTTP/1.1\r\n\r\n"))[0] == 405
    assert (await _http(port, b"garbage\r\n\r\n"))[0] == 400
    metrics_app.serving = False
    status, body = await _http(port, b"GET /readyz HTTP/1.1\r\n\r\n")
    assert status == 503 and "starting" in body


def test_error_codes_walk_every_level() -> None:
    response = ProduceResponse(responses=[
        TopicProduceResponse(name="a", partition_responses=[
            PartitionProduceResponse(index=0, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER),
            PartitionProduceResponse(index=1),
            PartitionProduceResponse(index=2, error_code=ErrorCode.CORRUPT_MESSAGE)])])
    assert list(error_codes(response)) == [ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.CORRUPT_MESSAGE]


@dataclass
class FakeGroup:
    group_id: str
    state: str
    members: int
    committed: dict[tuple[str, int], int] = field(default_factory=dict)


def test_consumer_lag_is_log_end_minus_committed_never_negative() -> None:
    ends = {("t", 0): 10, ("t", 1): 4}
    group = FakeGroup("g", "Stable", 2, {("t", 0): 7, ("t", 1): 9, ("gone", 0): 1, ("t", 2): -1})
    assert list(consumer_lag(group, lambda t, p: ends.get((t, p)))) == [("t", 0, 3), ("t", 1, 0)]


async def test_collector_shows_groups_from_a_provider(metrics_app: BrokerApp) -> None:
    state = metrics_app.state
    state.topics.create("lagging", 2, 1, {})
    reader, writer = await asyncio.open_connection("127.0.0.1", metrics_app.bound_ports[0])
    client = RawClient(reader, writer)
    try:
        await client.call(_produce("lagging", 6), 9)
    finally:
        client.close()
    groups = [FakeGroup("g1", "Stable", 3, {("lagging", 0): 2, ("lagging", 1): 0}), FakeGroup("g2", "Empty", 0)]
    registry = CollectorRegistry()
    registry.register(BrokerCollector(state, lambda: groups))
    assert registry.get_sample_value("pybroker_consumer_group_lag",
                                     {"group": "g1", "topic": "lagging", "partition": "0"}) == 4
    assert registry.get_sample_value("pybroker_consumer_group_lag",
                                     {"group": "g1", "topic": "lagging", "partition": "1"}) == 0
    assert registry.get_sample_value("pybroker_group_members", {"group": "g1"}) == 3
    assert registry.get_sample_value("pybroker_groups", {"state": "Stable"}) == 1
    assert registry.get_sample_value("pybroker_groups", {"state": "Empty"}) == 1
    assert registry.get_sample_value("pybroker_groups", {"state": "Dead"}) == 0
    empty = CollectorRegistry()
    empty.register(BrokerCollector(state))
    assert empty.get_sample_value("pybroker_groups", {"state": "Stable"}) is None


def _reference_codes(obj: Any) -> list[int]:
    """The walk by reflection on each instance: what the planned walk must match."""
    codes: list[int] = []
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if f.name == "error_code" and value:
            codes.append(value)
        elif isinstance(value, list):
            for item in value:
                if dataclasses.is_dataclass(item):
                    codes.extend(_reference_codes(item))
    return codes


def _filled(cls: type, counter: list[int], depth: int = 0) -> Any:
    """An instance with two elements in every list of structs and a distinct code everywhere."""
    obj = cls()
    for f in dataclasses.fields(obj):
        if f.name == "error_code":
            counter[0] += 1
            setattr(obj, f.name, counter[0])
        annotation = str(f.type)
        if annotation.startswith("list[") and annotation[5:6].isupper() and depth < 4:
            element = getattr(sys.modules[cls.__module__], annotation[5:annotation.index("]")])
            setattr(obj, f.name, [_filled(element, counter, depth + 1) for _ in range(2)])
    return obj


def test_error_codes_match_a_reflective_walk_for_every_response() -> None:
    checked = 0
    for info in pkgutil.iter_modules(messages.__path__):
        module = importlib.import_module(f"{messages.__name__}.{info.name}")
        for name, cls in vars(module).items():
            if name.endswith("Response") and dataclasses.is_dataclass(cls) and cls.__module__ == module.__name__:
                response = _filled(cls, [0])
                assert sorted(error_codes(response)) == sorted(_reference_codes(response)), name
                checked += 1
    assert checked > 40


def test_error_codes_of_compiled_answers_match_a_reflective_walk() -> None:
    """Fetch and Metadata are compiled (setup.py): their list fields name no element class, so the walk
    reads each list by the class of its items."""
    f = fetch_messages
    fetch = f.FetchResponse(error_code=0, responses=[f.FetchableTopicResponse(topic=f"t{t}", partitions=[
        f.PartitionData(partition_index=p, error_code=7 if p % 3 else 0,
                        aborted_transactions=[f.AbortedTransaction(producer_id=1, first_offset=0)])
        for p in range(6)]) for t in range(2)])
    metadata = MetadataResponse(brokers=[MetadataResponseBroker(node_id=1, host="h", port=1)], topics=[
        MetadataResponseTopic(name="t", error_code=3, partitions=[
            MetadataResponsePartition(partition_index=p, error_code=9 if p % 2 else 0, replica_nodes=[1, 2],
                                      isr_nodes=[1]) for p in range(5)]),
        MetadataResponseTopic(name="empty", partitions=[])])
    for response in (fetch, metadata):
        assert sorted(error_codes(response)) == sorted(_reference_codes(response)) != []
