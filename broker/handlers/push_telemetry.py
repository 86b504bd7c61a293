"""PushTelemetry (key 72), version 0: a client's metrics, exported on our Prometheus endpoint (KIP-714).

The push is checked as Kafka checks it (the instance and subscription ids, throttling, compression,
`telemetry.max.bytes`: `pybroker.broker.telemetry.clients`), then decompressed under a cap (8 times
`telemetry.max.bytes`) and its OTLP `MetricsData` decoded (`pybroker.protocol.otlp_metrics`) on a worker
thread, never on the event loop. The points of the metrics the client's plan asked for become series of
that client instance, served by the next scrape as `pybroker_client_<metric name>` (bounded: at most
1,000 instances, 1,000 series each, 50,000 in all). Undecodable metrics are INVALID_RECORD.

Authorizes: nothing (any client may send its own metrics, as in Kafka).
"""

from __future__ import annotations

import asyncio
from typing import Any

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.broker.handlers.get_telemetry_subscriptions import client_selectors
from pybroker.broker.security.authorization_check import anyone
from pybroker.broker.telemetry.clients import ClientInstance, ClientMetrics
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.push_telemetry import PushTelemetryRequest, PushTelemetryResponse


@handler(ApiKey.PUSH_TELEMETRY, versions=(0, 0), authorize=anyone)
def handle_push_telemetry(ctx: RequestContext, request: PushTelemetryRequest) -> Any:
    telemetry = ctx.state.client_metrics
    code, instance = telemetry.admit(
        request.client_instance_id, request.subscription_id, bool(request.terminating), request.compression_type,
        len(request.metrics), client_selectors(ctx), ctx.state.clock_ms())
    if code != ErrorCode.NONE or instance is None or not request.metrics:
        return PushTelemetryResponse(throttle_time_ms=0, error_code=code)
    return _export(telemetry, instance, request.compression_type, bytes(request.metrics))


async def _export(telemetry: ClientMetrics, instance: ClientInstance, compression: int,
                  metrics: bytes) -> PushTelemetryResponse:
    code, points = await asyncio.to_thread(telemetry.decode, compression, metrics)
    telemetry.record(instance, code, points)
    return PushTelemetryResponse(throttle_time_ms=0, error_code=code)
