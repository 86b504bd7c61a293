"""The connection's quota hook: charge a produce or fetch response to its client, set its throttle.

Kafka (KIP-219) answers at once with `throttle_time_ms` and mutes the channel for that long; a client
older than the version where it throttles itself (Produce v6, Fetch v8) instead gets its response
delayed by the throttle, the channel muted meanwhile. Produce is charged the request's size, Fetch the
record bytes it returns (Kafka charges the response's size; the records are nearly all of it). As in
Kafka, a fetch that would put its client over quota is answered with no partitions (the same session
id) and its bytes are not charged: the client fetches the same offsets again after the throttle.
"""

from __future__ import annotations

from typing import Any

from pybroker.broker.security.quota_entities import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE
from pybroker.broker.security.quotas import ClientQuotas
from pybroker.protocol.api_keys import ApiKey

#: api key -> (quota key, first version whose clients throttle themselves on the response's throttle)
THROTTLED_APIS = {ApiKey.PRODUCE: (PRODUCER_BYTE_RATE, 6), ApiKey.FETCH: (CONSUMER_BYTE_RATE, 8)}


def fetch_bytes(response: Any) -> int:
    return sum(len(p.records) for t in response.responses for p in t.partitions if p.records is not None)


def charge(quotas: ClientQuotas | None, api_key: int, version: int, principal: str, client_id: str | None,
           request_bytes: int, response: Any, now_ms: int, request_delay_ms: int = 0) -> tuple[int, bool]:
    """(throttle ms, whether the response itself must wait that long); (0, False) when not over quota.
    `request_delay_ms` is the request-time throttle (`request_time`) the request already earned: the
    longer of the two is the one asked for, as Kafka does. Sets the response's `throttle_time_ms` when
    it has one."""
    spec = THROTTLED_APIS.get(api_key)
    delay, hold = 0, False
    if spec is not None and quotas is not None and quotas.quotas:
        key, self_throttling_from = spec
        amount = request_bytes if api_key == ApiKey.PRODUCE else fetch_bytes(response)
        fetch = api_key == ApiKey.FETCH
        delay = quotas.record(key, principal, client_id or "", amount, now_ms, keep_if_throttled=not fetch)
        if delay and fetch:
            response.responses = []  # Kafka's throttled fetch: no data (the client asks again after the throttle)
        hold = bool(delay) and version < self_throttling_from
        delay = max(delay, request_delay_ms)
    else:
        delay = request_delay_ms
    if delay and hasattr(response, "throttle_time_ms"):
        response.throttle_time_ms = max(response.throttle_time_ms or 0, delay)
    return delay, hold
