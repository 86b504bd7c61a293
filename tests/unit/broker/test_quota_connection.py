"""The connection's quota hook with an in-process broker: over its producer_byte_rate, a client's answer
carries the throttle and the connection reads nothing more for that long; a client older than KIP-219
(Produce v5) gets its answer only after the throttle. No quota: nothing changes."""

from __future__ import annotations

import time

from pybroker.broker.app import BrokerApp
from pybroker.broker.security.quota_entities import PRODUCER_BYTE_RATE, entity_of
from pybroker.protocol.frame_codec import encode_request
from pybroker.protocol.messages.api_versions import ApiVersionsRequest
from pybroker.protocol.messages.produce import ProduceRequest
from tests.unit.broker.conftest import RawClient
from tests.unit.broker.test_connection_order import _produce

THROTTLE_S = 1.0
WINDOW_S = 10  # Kafka's minimum window: quota.window.num - 1 samples of 1 s


def _quota_for(app: BrokerApp, request: ProduceRequest, version: int) -> None:
    """A producer_byte_rate for client-id `pybroker` that one request of this size exceeds by just
    enough for a throttle of THROTTLE_S: (A / W - q) / q x W = T  =>  q = A / (W + T)."""
    size = len(encode_request(request, version, 1)) - 4
    app.state.quotas.quotas = {entity_of([("client-id", "pybroker")]): {
        PRODUCER_BYTE_RATE: size / (WINDOW_S + THROTTLE_S)}}


async def test_new_clients_get_the_throttle_at_once_and_the_connection_mutes(
        app: BrokerApp, client: RawClient) -> None:
    request = _produce("throttled", 50)
    _quota_for(app, request, 9)
    started = time.monotonic()
    response = await client.call(request, 9)
    answered = time.monotonic() - started
    assert abs(response.throttle_time_ms - THROTTLE_S * 1000) <= 20
    assert answered < THROTTLE_S * 0.8
    await client.call(ApiVersionsRequest(), 3)  # not read until the mute ends
    assert time.monotonic() - started >= THROTTLE_S * 0.9


async def test_old_clients_get_the_answer_after_the_throttle(app: BrokerApp, client: RawClient) -> None:
    request = _produce("throttled-old", 50)
    _quota_for(app, request, 5)
    started = time.monotonic()
    response = await client.call(request, 5)
    assert time.monotonic() - started >= THROTTLE_S * 0.9
    assert response.throttle_time_ms > 0


async def test_without_quotas_nothing_is_throttled(app: BrokerApp, client: RawClient) -> None:
    response = await client.call(_produce("free", 50), 9)
    assert response.throttle_time_ms == 0
