"""Client quotas: the configured limits, the measured rates, and the throttle each response gets.

Set with AlterClientQuotas (durable, `quota_store`), read with DescribeClientQuotas. Enforced as Kafka
does for `producer_byte_rate` (bytes of produce requests) and `consumer_byte_rate` (record bytes of
fetch responses): each (user, client-id) is governed by the most specific configured entity
(`quota_entities.resolve`), its bytes are recorded in a windowed rate (`quota_rate`), and a response
that puts it over the quota carries Kafka's `throttle_time_ms` while its connection stops reading for
that long (`quota_throttle`); a throttled fetch answers no records, as Kafka's does.
`request_percentage` is enforced the same way on the event-loop time a client's requests take
(`request_time`), `connection_creation_rate` on `ip` entities by `connection_rate`;
`controller_mutation_rate` is stored and described but not enforced (docs/skipped-features.md).

With no quota configured nothing is measured: a broker without quotas pays one dict check per produce
or fetch response, and one flag check per request and per accepted connection.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prometheus_client import Counter

from pybroker.broker.security import quota_store
from pybroker.broker.security.quota_entities import IP, REQUEST_PERCENTAGE, Entity, render, resolve
from pybroker.broker.security.quota_rate import Rate, throttle_ms

#: the most client rates measured at once (a default client-id quota gives each client-id its own);
#: past it the longest idle ones are forgotten
MAX_RATES = 10_000

QUOTA_BYTES = Counter("pybroker_quota_bytes",
                      "Bytes counted against client quotas, by quota key and the configured entity that "
                      "governs them (user=...,client-id=...; one label value per configured quota).",
                      ["quota", "entity"])
QUOTA_THROTTLE_MS = Counter("pybroker_quota_throttle_time_ms",
                            "Milliseconds of throttle asked of clients over their quota, by quota key and "
                            "governing entity.", ["quota", "entity"])
QUOTA_THROTTLED = Counter("pybroker_quota_throttled_responses",
                          "Responses that carried a throttle because their client was over its quota.",
                          ["quota", "entity"])


def user_of(principal: str) -> str:
    """Kafka's quota `user` is the principal's name (`User:alice` -> `alice`)."""
    return principal.split(":", 1)[1] if ":" in principal else principal


class ClientQuotas:
    def __init__(self, path: Path | None, window_num: int = 11, window_size_s: int = 1) -> None:
        self.path = path
        self.window_num = window_num
        self.window_size_ms = window_size_s * 1000
        self.quotas: dict[Entity, dict[str, float]] = quota_store.load(path) if path is not None else {}
        #: (quota key, (user, client-id) sharing the rate) -> its rate
        self._rates: dict[tuple[str, tuple[str, str]], Rate] = {}
        self._flags_of: object = None  # the `quotas` dict the flags below were computed for
        self._times_requests = self._limits_ips = False

    def _flags(self) -> None:
        quotas = self.quotas
        if quotas is not self._flags_of:  # `quotas` is replaced whole (here, or by a test), never edited
            self._flags_of = quotas
            self._times_requests = any(REQUEST_PERCENTAGE in values for values in quotas.values())
            self._limits_ips = any(entity[0][0] == IP for entity in quotas)

    @property
    def times_requests(self) -> bool:
        """Is a `request_percentage` configured (only then is a request's handler time measured)?"""
        self._flags()
        return self._times_requests

    @property
    def limits_ips(self) -> bool:
        """Is an `ip` entity configured (only then are connection creations counted per IP)?"""
        self._flags()
        return self._limits_ips

    @classmethod
    def from_config(cls, config: Any, path: Path | None) -> ClientQuotas:
        return cls(path, int(config.get("quota.window.num")), int(config.get("quota.window.size.seconds")))

    def replace(self, quotas: dict[Entity, dict[str, float]]) -> None:
        """Make `quotas` the configured set and write it (call off the event loop: it fsyncs)."""
        if self.path is not None:
            quota_store.save(self.path, quotas)
        self.quotas = quotas
        self._rates.clear()  # a changed quota may change who shares which rate

    def record(self, key: str, principal: str, client_id: str, amount: float, now_ms: int, *,
               keep_if_throttled: bool = True) -> int:
        """Count `amount` for this client under `key`; the throttle in ms its response must carry.
        With `keep_if_throttled` false an amount that puts the client over its quota is taken back
        (Kafka's fetch: a throttled fetch answers no records, so they are not charged)."""
        if not self.quotas:
            return 0
        found = resolve(self.quotas, user_of(principal), client_id, key)
        if found is None:
            return 0
        quota, entity, shared = found
        rate = self._rates.get((key, shared))
        if rate is None:
            rate = self._new_rate((key, shared), now_ms)
        rate.record(amount, now_ms)
        label = render(entity)
        delay = throttle_ms(rate, quota, now_ms)
        if delay and not keep_if_throttled:
            rate.record(-amount, now_ms)
        elif key != REQUEST_PERCENTAGE:
            QUOTA_BYTES.labels(key, label).inc(amount)
        if delay:
            QUOTA_THROTTLE_MS.labels(key, label).inc(delay)
            QUOTA_THROTTLED.labels(key, label).inc()
        return delay

    def _new_rate(self, name: tuple[str, tuple[str, str]], now_ms: int) -> Rate:
        if len(self._rates) >= MAX_RATES:
            idle = [k for k, r in self._rates.items() if r.idle_since(now_ms)]
            for k in idle or list(self._rates)[: MAX_RATES // 10]:
                del self._rates[k]
        rate = self._rates[name] = Rate(self.window_num, self.window_size_ms)
        return rate
