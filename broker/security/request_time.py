"""`request_percentage`: the share of one request thread's time a client's requests may take (Kafka's).

Kafka records each request's handler time in a windowed rate as a percentage of one thread
(time x 100 / 1 s), so the rate is directly comparable with `request_percentage`: 100 is one whole
thread. Here the one thread is the event loop: what is measured is the synchronous part of a request's
handler (work it sends off the loop, e.g. `asyncio.to_thread`, holds no loop time). A request that puts
its client over the quota gets the same throttle as the byte quotas (its response's `throttle_time_ms`,
the connection muted for that long); where both apply the longer throttle wins, as in Kafka.

Exempt, as in Kafka: the SASL exchange (served before the client has a principal) and the cluster
actions (inter-broker requests; here WriteTxnMarkers).
"""

from __future__ import annotations

from pybroker.broker.security.quota_entities import REQUEST_PERCENTAGE
from pybroker.broker.security.quotas import ClientQuotas
from pybroker.protocol.api_keys import ApiKey

#: requests never charged to a client's request time (Kafka: the SASL requests and the cluster actions)
EXEMPT = frozenset({ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE, ApiKey.WRITE_TXN_MARKERS})
#: a second of handler time as a percentage of one thread
PERCENT_PER_SECOND = 100.0


def timed(quotas: ClientQuotas | None, api_key: int) -> bool:
    """Must this request's handler time be measured? False, at the cost of a flag, without a quota."""
    return quotas is not None and quotas.times_requests and api_key not in EXEMPT


def charge(quotas: ClientQuotas, principal: str, client_id: str | None, seconds: float, now_ms: int) -> int:
    """Count `seconds` of handler time for this client; the throttle in ms its response must carry."""
    return quotas.record(REQUEST_PERCENTAGE, principal, client_id or "", seconds * PERCENT_PER_SECOND, now_ms)
