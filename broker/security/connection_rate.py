"""How fast new connections may come: `connection_creation_rate` per IP and `max.connection.creation.rate`.

Kafka's ConnectionQuotas counts each accepted connection in a windowed rate (`quota.window.num` samples
of `quota.window.size.seconds`, as the client quotas) for the whole broker and for the connection's IP,
whose quota is the `ip=<address>` entity's `connection_creation_rate`, else the default ip entity's.
Over the broker-wide rate Kafka's acceptor waits before accepting more; over an IP's rate it keeps the
new connection for the throttle time and then closes it. asyncio accepts for us, and holding a refused
socket open costs a file descriptor per attempt, so here both close the new connection at once (the
caller counts it in `pybroker_connections_refused_total` with the limit's name and logs one rate-limited
line). As in Kafka, a refused attempt still counts in the rate: a client that keeps hammering stays
refused until it slows down.

With neither configured this costs one flag check per accepted connection.
"""

from __future__ import annotations

import contextlib
import ipaddress
from typing import Any

from pybroker.broker.security.quota_entities import CONNECTION_CREATION_RATE, IP
from pybroker.broker.security.quota_rate import Rate, throttle_ms
from pybroker.broker.security.quotas import ClientQuotas

#: the broker-wide limit's name (the config key), and the IP quota's (the quota key): refusal reasons
BROKER_LIMIT = "max.connection.creation.rate"
IP_LIMIT = CONNECTION_CREATION_RATE
#: Kafka's default for max.connection.creation.rate (Int.MaxValue): no limit
UNLIMITED = 2_147_483_647
#: the most per-IP rates kept at once; past it the idle ones (or the oldest tenth) are forgotten
MAX_RATES = 10_000


def canonical_ip(address: str) -> str:
    """One spelling per address (`::FFFF:1.2.3.4` and `::ffff:1.2.3.4` are one IP)."""
    with contextlib.suppress(ValueError):
        return str(ipaddress.ip_address(address))
    return address


class ConnectionRates:
    def __init__(self, broker_rate: float = UNLIMITED, window_num: int = 11, window_size_s: int = 1) -> None:
        self.window_num = window_num
        self.window_size_ms = window_size_s * 1000
        self.broker_rate = None if broker_rate >= UNLIMITED else float(broker_rate)
        self._broker = Rate(window_num, self.window_size_ms)
        self._by_ip: dict[str, Rate] = {}
        self._quotas_of: object = None  # the quota dict `_ip_quotas` was built from
        self._ip_quotas: dict[str | None, float] = {}  # canonical ip (None: the default) -> its rate

    @classmethod
    def from_config(cls, config: Any) -> ConnectionRates:
        return cls(float(config.get("max.connection.creation.rate")), int(config.get("quota.window.num")),
                   int(config.get("quota.window.size.seconds")))

    def admit(self, quotas: ClientQuotas | None, ip: str, now_ms: int) -> str | None:
        """Count a new connection from `ip`; the name of the limit it is over (close it), or None."""
        if self.broker_rate is not None:
            if self.broker_rate <= 0:
                return BROKER_LIMIT  # Kafka's 0: no new connection at all
            self._broker.record(1, now_ms)
            if throttle_ms(self._broker, self.broker_rate, now_ms):
                return BROKER_LIMIT
        if quotas is None or not quotas.limits_ips:
            return None
        ip = canonical_ip(ip)
        quota = self._quota_for(quotas, ip)
        if quota is None:
            return None
        rate = self._by_ip.get(ip)
        if rate is None:
            rate = self._new_rate(ip, now_ms)
        rate.record(1, now_ms)
        return IP_LIMIT if throttle_ms(rate, quota, now_ms) else None

    def _quota_for(self, quotas: ClientQuotas, ip: str) -> float | None:
        if quotas.quotas is not self._quotas_of:
            self._quotas_of = quotas.quotas
            self._ip_quotas = {None if name is None else canonical_ip(name): values[CONNECTION_CREATION_RATE]
                               for ((entity_type, name), *_), values in quotas.quotas.items()
                               if entity_type == IP and CONNECTION_CREATION_RATE in values}
            self._by_ip.clear()  # a changed quota starts a fresh measure, as the client quotas do
        found = self._ip_quotas.get(ip)
        return found if found is not None else self._ip_quotas.get(None)

    def _new_rate(self, ip: str, now_ms: int) -> Rate:
        if len(self._by_ip) >= MAX_RATES:
            idle = [k for k, r in self._by_ip.items() if r.idle_since(now_ms)]
            for k in idle or list(self._by_ip)[: MAX_RATES // 10]:
                del self._by_ip[k]
        rate = self._by_ip[ip] = Rate(self.window_num, self.window_size_ms)
        return rate
