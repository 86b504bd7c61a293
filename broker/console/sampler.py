"""History for the live charts, sampled from the broker's own prometheus-client metrics.

Every `INTERVAL_S` from the broker's start the sampler reads the same counters `/metrics` serves: the
per-topic traffic behind `pybroker_bytes_in`, `pybroker_bytes_out` and `pybroker_messages_in` (summed by
`traffic`, a few additions per topic), and the request families `pybroker_requests` and
`pybroker_request_duration_seconds`; so the first look at the charts draws the history there is, up to
`POINTS` samples (a bounded ring). The dearer read, the whole collector for `pybroker_consumer_group_lag`
(one figure per committed partition), runs only while someone has looked at the console within
`IDLE_AFTER_S`. Without a `traffic` callable (tests), the totals come from the collector's families. Counters become rates
between two samples; the latency histogram's bucket deltas give p50 and p99 of the requests answered in
the interval. Fetch, JoinGroup and SyncGroup are left out of the latency: their time is mostly a wait the
client asked for (long polls, rebalances). Each series keeps `POINTS` samples; lag keeps at most
`MAX_LAG_SERIES` partitions, and forgets a partition as soon as the metrics stop showing it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from pybroker.broker.loggers.structlog_setup import get_logger
from pybroker.broker.metrics.requests import REQUEST_DURATION, REQUESTS

log = get_logger("pybroker.console")

INTERVAL_S = 2.0
IDLE_AFTER_S = 120.0
POINTS = 900  # 30 minutes
MAX_LAG_SERIES = 5000
WAITING_APIS = frozenset({"Fetch", "JoinGroup", "SyncGroup"})
SERIES = ("bytes_in_per_s", "bytes_out_per_s", "messages_in_per_s", "requests_per_s", "latency_p50_ms",
          "latency_p99_ms")


def _samples(families: Iterable[Any]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for family in families:
        for sample in family.samples:
            out.setdefault(sample.name, []).append(sample)
    return out


def _quantile(buckets: list[tuple[float, float]], q: float) -> float | None:
    """The q-quantile's upper bucket bound from cumulative (le, count) pairs; None without requests."""
    total = buckets[-1][1] if buckets else 0
    if total <= 0:
        return None
    for le, count in buckets:
        if count >= q * total:
            return le
    return buckets[-1][0]


class Sampler:
    def __init__(self, broker_families: Callable[[], Iterable[Any]],
                 clock: Callable[[], float] = time.monotonic, wall_ms: Callable[[], int] | None = None,
                 traffic: Callable[[], tuple[int, int, int]] | None = None) -> None:
        self.broker_families = broker_families
        self.traffic = traffic
        self.clock = clock
        self.wall_ms = wall_ms or (lambda: time.time_ns() // 1_000_000)
        self.times: deque[int] = deque(maxlen=POINTS)
        self.series: dict[str, deque[float | None]] = {name: deque(maxlen=POINTS) for name in SERIES}
        self.lag: dict[tuple[str, str, int], deque[tuple[int, int]]] = {}
        self.last_seen = -IDLE_AFTER_S
        self._previous: tuple[float, dict[str, float], dict[float, float]] | None = None
        self._task: asyncio.Task[None] | None = None

    def touch(self) -> None:
        """Someone is looking: keep sampling (and take a first sample soon)."""
        self.last_seen = self.clock()

    def watched(self) -> bool:
        return self.clock() - self.last_seen <= IDLE_AFTER_S

    def sample(self) -> None:
        now = self.clock()
        watched = self.watched()
        broker = _samples(self.broker_families()) if watched or self.traffic is None else {}
        requests = _samples(REQUESTS.collect())
        durations = _samples(REQUEST_DURATION.collect())
        if self.traffic is not None:
            bytes_in, messages_in, bytes_out = self.traffic()
        else:
            bytes_in, messages_in, bytes_out = (sum(s.value for s in broker.get(f"pybroker_{name}_total", []))
                                                for name in ("bytes_in", "messages_in", "bytes_out"))
        totals = {"bytes_in": bytes_in, "bytes_out": bytes_out, "messages_in": messages_in,
                  "requests": sum(s.value for s in requests.get("pybroker_requests_total", []))}
        buckets: dict[float, float] = {}
        for s in durations.get("pybroker_request_duration_seconds_bucket", []):
            if s.labels.get("api") not in WAITING_APIS:
                le = float(s.labels["le"])
                buckets[le] = buckets.get(le, 0.0) + s.value
        previous = self._previous
        self._previous = (now, totals, buckets)
        wall = self.wall_ms()
        seen: set[tuple[str, str, int]] = set()
        for s in broker.get("pybroker_consumer_group_lag", []):
            key = (s.labels["group"], s.labels["topic"], int(s.labels["partition"]))
            seen.add(key)
            history = self.lag.get(key)
            if history is None:
                if len(self.lag) >= MAX_LAG_SERIES:
                    continue
                history = self.lag[key] = deque(maxlen=POINTS)
            history.append((wall, int(s.value)))
        if watched:
            for gone in [key for key in self.lag if key not in seen]:  # a deleted group, topic or commit
                del self.lag[gone]
        if previous is None:
            return
        then, before, old_buckets = previous
        elapsed = max(now - then, 1e-6)
        self.times.append(wall)
        for name in ("bytes_in", "bytes_out", "messages_in", "requests"):
            rate = max(0.0, totals[name] - before[name]) / elapsed
            self.series[f"{name}_per_s"].append(round(rate, 3))
        delta = sorted((le, max(0.0, count - old_buckets.get(le, 0.0))) for le, count in buckets.items())
        for q, name in ((0.5, "latency_p50_ms"), (0.99, "latency_p99_ms")):
            value = _quantile(delta, q)
            self.series[name].append(None if value is None else round(value * 1000, 3))

    def charts(self) -> dict[str, Any]:
        return {"interval_s": INTERVAL_S, "times": list(self.times),
                "series": {name: list(values) for name, values in self.series.items()}}

    def lag_history(self, group: str) -> dict[str, list[int]]:
        """`topic-partition` -> recent lag figures of one group."""
        return {f"{t}-{p}": [v for _, v in history] for (g, t, p), history in sorted(self.lag.items()) if g == group}

    async def run(self) -> None:
        while True:
            try:
                self.sample()
            except Exception:
                log.exception("console sample failed")
            await asyncio.sleep(INTERVAL_S)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.ensure_future(self.run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
