"""The connection's quota hook: charge a produce or fetch response to its client, set its throttle.

Kafka (KIP-219) answers at once with `throttle_time_ms` and mutes the channel for that long; a client
older than the version where it throttles itself (Produce v6, Fetch v8) instead gets its response
delayed by the throttle, the channel muted meanwhile. Produce is charged the request's size, Fetch and
ShareFetch the record bytes they return (Kafka charges the response's size; the records are nearly all of it). As in
Kafka, a fetch that would put its client over quota is answered with no partitions and its bytes are not
charged: the client fetches the same offsets again after the throttle. The fetch handler decides that
(`fetch_throttle`) before its fetch session sees the answer, as Kafka does since KAFKA-6946: a throttled
fetch leaves the session untouched; `charge` then only applies the throttle the handler set. A ShareFetch
has acquired its records by then (they are locked to the member), so it is answered whole and charged, and
its throttle delays the client's next request (confluent-kafka-python's throttle_cb tests wait for it).
"""

from __future__ import annotations

from typing import Any

from pybroker.broker.security.quota_entities import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE
from pybroker.broker.security.quotas import ClientQuotas
from pybroker.protocol.api_keys import ApiKey

#: api key -> (quota key, first version whose clients throttle themselves on the response's throttle)
THROTTLED_APIS: dict[int, tuple[str, int]] = {ApiKey.PRODUCE: (PRODUCER_BYTE_RATE, 6),
                                              ApiKey.FETCH: (CONSUMER_BYTE_RATE, 8),
                                              ApiKey.SHARE_FETCH: (CONSUMER_BYTE_RATE, 0)}


def fetch_bytes(response: Any) -> int:
    return sum(len(p.records) for t in response.responses for p in t.partitions if p.records is not None)


def fetch_throttle(quotas: ClientQuotas | None, principal: str, client_id: str | None, response: Any,
                   now_ms: int) -> int:
    """The throttle (ms) a fetch answering `response` earns under `consumer_byte_rate`: its record bytes
    are counted, or taken back when they put the client over its quota (then the answer must be empty)."""
    if quotas is None or not quotas.quotas:
        return 0
    return quotas.record(CONSUMER_BYTE_RATE, principal, client_id or "", fetch_bytes(response), now_ms,
                         keep_if_throttled=False)


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
        if api_key == ApiKey.FETCH:  # charged by the handler, before its session saw the answer
            delay = int(getattr(response, "throttle_time_ms", 0) or 0)
        elif api_key == ApiKey.SHARE_FETCH:  # its records are acquired already: charged and kept
            delay = quotas.record(key, principal, client_id or "", fetch_bytes(response), now_ms)
        else:
            delay = quotas.record(key, principal, client_id or "", request_bytes, now_ms)
        hold = bool(delay) and version < self_throttling_from
        delay = max(delay, request_delay_ms)
    else:
        delay = request_delay_ms
    if delay and hasattr(response, "throttle_time_ms"):
        response.throttle_time_ms = max(response.throttle_time_ms or 0, delay)
    return delay, hold
