"""The connection layer's limits against raw sockets: request memory, connection slots, timeouts.

Each test starts an in-process broker with small limits, so the limits are reached with a few
connections and timeouts fire within a second.
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path

from prometheus_client import REGISTRY

from pybroker.broker.app import BrokerApp
from pybroker.config.broker_config import BrokerConfig
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.frame_codec import encode_request
from pybroker.protocol.messages.api_versions import ApiVersionsRequest
from pybroker.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from pybroker.protocol.records.record import Record, build_batch
from tests.unit.broker.conftest import RawClient


@asynccontextmanager
async def _broker(tmp_path: Path, overrides: Mapping[str, str]) -> AsyncIterator[BrokerApp]:
    config = BrokerConfig.load({"log.dirs": str(tmp_path / "data"), "listeners": "PLAINTEXT://127.0.0.1:0",
                                "socket.request.max.bytes": "10000000", **overrides})
    app = BrokerApp(config)
    await app.start()
    try:
        yield app
    finally:
        while _OPENED:
            _OPENED.pop().close()
        await app.stop()


_OPENED: list[RawClient] = []


def _count(family: str, reason: str) -> float:
    return REGISTRY.get_sample_value(family, {"reason": reason}) or 0.0


async def _client(app: BrokerApp) -> RawClient:
    """A connection, closed by `_broker` at the end if the test did not close it."""
    reader, writer = await asyncio.open_connection("127.0.0.1", app.bound_ports[0])
    client = RawClient(reader, writer)
    _OPENED.append(client)
    return client


async def _serves(client: RawClient) -> bool:
    try:
        answer = await client.call(ApiVersionsRequest(), 0, timeout=5)
    except (ConnectionError, asyncio.IncompleteReadError):
        return False
    return bool(answer.error_code == 0)


async def _closed(client: RawClient, timeout: float = 20.0) -> bool:
    try:
        return await asyncio.wait_for(client.reader.read(), timeout) == b""
    except ConnectionError:
        return True


async def _eventually(check: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.01)


def _big_produce(topic: str, value_bytes: int) -> bytes:
    """A whole Produce v9 frame (size prefix included) carrying one record of `value_bytes`."""
    records = build_batch([Record(0, 0, b"k", b"x" * value_bytes)], base_timestamp=int(time.time() * 1000))
    request = ProduceRequest(acks=1, timeout_ms=5000, topic_data=[
        TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=0, records=records)])])
    return encode_request(request, 9, 1)


async def test_a_frame_that_does_not_fit_waits_for_memory_while_small_requests_go_on(tmp_path: Path) -> None:
    async with _broker(tmp_path, {"queued.max.request.bytes": "1000000"}) as app:
        pool = app.state.guard.pool
        holder = await _client(app)
        holder.writer.write(struct.pack(">i", 800_000) + b"\0" * 400_000)  # admitted, then stalls half way
        await _eventually(lambda: pool.used == 800_000)
        waiter = await _client(app)
        frame = _big_produce("mem", 790_000)
        waiter.writer.write(frame)  # 790 KB more does not fit beside the 800 KB held
        await _eventually(lambda: pool.waiting == 1)
        assert pool.used == 800_000
        bystander = await _client(app)
        for _ in range(20):
            assert await _serves(bystander)  # small frames are always admitted
        holder.close()  # its memory goes back, and the waiting frame is read and handled
        answer = await waiter.receive(ApiKey.PRODUCE, 9)
        assert answer.responses[0].partition_responses[0].error_code == 0
        await _eventually(lambda: pool.used == 0 and pool.waiting == 0)
        for client in (waiter, bystander):
            client.close()


async def test_a_frame_larger_than_the_whole_pool_is_served_when_nothing_else_is_held(tmp_path: Path) -> None:
    async with _broker(tmp_path, {"queued.max.request.bytes": "100000"}) as app:
        client = await _client(app)
        client.writer.write(_big_produce("huge", 300_000))
        answer = await client.receive(ApiKey.PRODUCE, 9)
        assert answer.responses[0].partition_responses[0].error_code == 0
        assert app.state.guard.pool.used == 0
        client.close()


async def test_a_stalled_frame_is_closed_and_its_memory_released(tmp_path: Path) -> None:
    before = _count("pybroker_connections_expired_total", "stalled_frame")
    async with _broker(tmp_path, {"connections.max.idle.ms": "400"}) as app:
        client = await _client(app)
        client.writer.write(struct.pack(">i", 200_000) + b"\0" * 100_000)
        await _eventually(lambda: app.state.guard.pool.used == 200_000)
        assert await _closed(client)
        await _eventually(lambda: app.state.guard.pool.used == 0)
    assert _count("pybroker_connections_expired_total", "stalled_frame") == before + 1


async def test_idle_connections_are_closed_but_not_while_a_request_is_in_progress(tmp_path: Path) -> None:
    from pybroker.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic

    before = _count("pybroker_connections_expired_total", "idle")
    async with _broker(tmp_path, {"connections.max.idle.ms": "300"}) as app:
        idle = await _client(app)
        polling = await _client(app)
        assert await _serves(polling)
        polling.writer.write(_big_produce("quiet", 10))
        assert (await polling.receive(ApiKey.PRODUCE, 9)).responses[0].partition_responses[0].error_code == 0
        fetch = FetchRequest(max_wait_ms=1200, min_bytes=1, max_bytes=1 << 20, topics=[FetchTopic(
            topic="quiet", partitions=[FetchPartition(partition=0, fetch_offset=1, partition_max_bytes=1 << 20)])])
        started = time.monotonic()
        await polling.send(fetch, 12)  # in progress before either connection has been quiet for long
        assert await _closed(idle)
        answer = await polling.receive(ApiKey.FETCH, 12, timeout=20)  # the long poll outlived the idle timeout
        assert answer is not None and time.monotonic() - started > 0.3
        assert await _closed(polling)
    assert _count("pybroker_connections_expired_total", "idle") >= before + 2


async def test_connections_over_the_per_ip_limit_are_closed_at_once(tmp_path: Path) -> None:
    before = _count("pybroker_connections_refused_total", "max.connections.per.ip")
    async with _broker(tmp_path, {"max.connections.per.ip": "3"}) as app:
        clients = [await _client(app) for _ in range(3)]
        extra = await _client(app)
        assert await _closed(extra)
        for client in clients:
            assert await _serves(client)
        clients[0].close()
        await _eventually(lambda: app.state.guard.limits.total == 2)
        again = await _client(app)
        assert await _serves(again)
        for client in (*clients[1:], again):
            client.close()
    assert _count("pybroker_connections_refused_total", "max.connections.per.ip") == before + 1


async def test_per_ip_overrides_and_the_broker_wide_limit(tmp_path: Path) -> None:
    async with _broker(tmp_path, {"max.connections.per.ip": "1",
                                  "max.connections.per.ip.overrides": "127.0.0.1:4,10.0.0.1:0",
                                  "max.connections": "3"}) as app:
        clients = [await _client(app) for _ in range(3)]  # the override lifts localhost above 1
        for client in clients:
            assert await _serves(client)
        fourth = await _client(app)
        assert await _closed(fourth)  # but max.connections is 3
        assert app.state.guard.limits.total == 3
        for client in clients:
            client.close()
