"""GetTelemetrySubscriptions (key 71), version 0: which metrics a client should push, and how (KIP-714).

The zero client instance id gets a new one. The answer is the union of the client-metrics
subscriptions the client matches (`pybroker.broker.telemetry`): the metric name prefixes wanted (none
when it matches none; one empty prefix for every metric), the shortest push interval among them
(Kafka's default of 5 minutes when none), the compression types a push may use (zstd, lz4, gzip,
snappy), `telemetry.max.bytes`, and cumulative temporality (we export what clients push to Prometheus,
which wants running totals). Asking again before the push interval is THROTTLING_QUOTA_EXCEEDED, as in
Kafka. The client's selectors are its client id, the software name and version its connection gave in
ApiVersions (v3+), and its source address and port.

Authorizes: nothing (any client may send its own metrics, as in Kafka).
"""

from __future__ import annotations

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.broker.security.authorization_check import anyone
from pybroker.broker.telemetry.clients import ACCEPTED_COMPRESSION
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages.get_telemetry_subscriptions import (
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
)


def client_selectors(ctx: RequestContext) -> dict[str, str]:
    """What a subscription's `match` patterns are tested against (besides the instance id)."""
    address, _, port = ctx.peer.rpartition(":")
    software, version = ctx.state.client_metrics.software_of(ctx.peer)
    return {"client_id": ctx.client_id or "", "client_software_name": software, "client_software_version": version,
            "client_source_address": address.strip("[]"), "client_source_port": port}


@handler(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, versions=(0, 0), authorize=anyone)
def handle_get_telemetry_subscriptions(
        ctx: RequestContext, request: GetTelemetrySubscriptionsRequest) -> GetTelemetrySubscriptionsResponse:
    telemetry = ctx.state.client_metrics
    code, instance = telemetry.get(request.client_instance_id, client_selectors(ctx), ctx.state.clock_ms())
    plan = instance.plan
    return GetTelemetrySubscriptionsResponse(
        throttle_time_ms=0, error_code=code, client_instance_id=instance.instance_id,
        subscription_id=plan.subscription_id, accepted_compression_types=list(ACCEPTED_COMPRESSION),
        push_interval_ms=plan.interval_ms, telemetry_max_bytes=telemetry.max_bytes, delta_temporality=False,
        requested_metrics=list(plan.metrics))
