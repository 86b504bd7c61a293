"""request_percentage and connection_creation_rate with an in-process broker: a client-id over its share
of the event loop gets a throttle while another does not; connections opened from 127.0.0.1 faster than
its connection_creation_rate (or the broker's max.connection.creation.rate) are closed at once while
those within the rate are served."""

from __future__ import annotations

import asyncio
from pathlib import Path

from prometheus_client import REGISTRY

from pybroker.broker.app import BrokerApp
from pybroker.broker.security.quota_entities import CONNECTION_CREATION_RATE, REQUEST_PERCENTAGE, entity_of
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.frame_codec import encode_request
from pybroker.protocol.messages.metadata import MetadataRequest
from tests.unit.broker.conftest import RawClient
from tests.unit.broker.test_connection_limits import _broker, _client, _closed, _count, _serves


async def _metadata_throttle(app: BrokerApp, client_id: str) -> int:
    reader, writer = await asyncio.open_connection("127.0.0.1", app.bound_ports[0])
    client = RawClient(reader, writer)
    try:
        writer.write(encode_request(MetadataRequest(topics=[]), 12, 1, client_id))
        await writer.drain()
        response = await client.receive(ApiKey.METADATA, 12)
        return int(response.throttle_time_ms)
    finally:
        client.close()


async def test_a_client_over_its_request_percentage_is_throttled_and_another_is_not(app: BrokerApp) -> None:
    # a share of the loop no real handler stays under: the first request puts the client over it
    app.state.quotas.quotas = {entity_of([("client-id", "greedy")]): {REQUEST_PERCENTAGE: 1e-9}}
    assert await _metadata_throttle(app, "greedy") > 0
    assert await _metadata_throttle(app, "modest") == 0
    charged = REGISTRY.get_sample_value("pybroker_quota_throttled_responses_total",
                                        {"quota": REQUEST_PERCENTAGE, "entity": "client-id=greedy"})
    assert charged is not None and charged >= 1


async def test_without_a_request_percentage_nothing_is_throttled(app: BrokerApp) -> None:
    assert await _metadata_throttle(app, "greedy") == 0


async def test_connections_faster_than_the_ip_connection_creation_rate_are_closed(tmp_path: Path) -> None:
    before = _count("pybroker_connections_refused_total", CONNECTION_CREATION_RATE)
    async with _broker(tmp_path, {"quota.window.num": "2"}) as app:  # the rate is measured over >= 1 s
        app.state.quotas.quotas = {entity_of([("ip", "127.0.0.1")]): {CONNECTION_CREATION_RATE: 2}}
        within = [await _client(app) for _ in range(2)]
        excess = await _client(app)
        assert await _closed(excess)
        for client in within:
            assert await _serves(client)
    assert _count("pybroker_connections_refused_total", CONNECTION_CREATION_RATE) == before + 1


async def test_the_broker_wide_max_connection_creation_rate(tmp_path: Path) -> None:
    before = _count("pybroker_connections_refused_total", "max.connection.creation.rate")
    async with _broker(tmp_path, {"quota.window.num": "2", "max.connection.creation.rate": "2"}) as app:
        within = [await _client(app) for _ in range(2)]
        excess = await _client(app)
        assert await _closed(excess)
        for client in within:
            assert await _serves(client)
        await asyncio.sleep(2.1)  # the window moved on: a new connection is welcome again
        assert await _serves(await _client(app))
    assert _count("pybroker_connections_refused_total", "max.connection.creation.rate") == before + 1
