"""What the broker's connections share so no client can take more than its part: memory, slots and time.

- the request memory pool (`queued.max.request.bytes`, see `memory_pool`);
- connection slots: `max.connections` in total and `max.connections.per.ip` (with
  `max.connections.per.ip.overrides`); a connection over a limit is closed as soon as it is accepted;
- connection creation rates: `max.connection.creation.rate` and the `connection_creation_rate` quota
  of ip entities (`security.connection_rate`); a connection over a rate is closed as soon as accepted;
- a sweeper, once a second, that closes connections silent for `connections.max.idle.ms` and those
  whose frame stopped arriving half way for `STALLED_FRAME_S` (both release their memory), and that
  writes the summaries of rate-limited warnings;
- the descriptor budget (`descriptor_budget`, set at start from the open-file limit): at the budget a new
  connection replaces the longest idle one or is refused, before the process meets EMFILE;
- those rate-limited warnings (`log_limiter`), for everything a client can make us log.

Event-loop thread only.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterable
from typing import Any, Protocol

from pybroker.broker.descriptor_budget import EVICT_IDLE_S, REASON, DescriptorBudget
from pybroker.broker.loggers.limiter import RateLimitedLog
from pybroker.broker.loggers.structlog_setup import get_logger
from pybroker.broker.memory_pool import MemoryPool
from pybroker.broker.metrics.connections import CONNECTIONS_EXPIRED
from pybroker.broker.security.connection_rate import ConnectionRates
from pybroker.config.host_counts import parse_host_counts

log = get_logger("pybroker.connection")

#: a frame that receives no byte for this long (while we are reading) is given up on
STALLED_FRAME_S = 30.0
SWEEP_EVERY_S = 1.0
#: at the descriptor budget with no connection idle long enough, the connections are looked at again at
#: most this often (new ones are refused meanwhile without a look)
RESCAN_S = 0.5


class Sweepable(Protocol):
    def expire_if_silent(self, now: float, idle_s: float, stalled_s: float) -> None: ...


class Evictable(Protocol):
    peer: str

    def silent_for(self, now: float) -> float | None:
        """Seconds since the connection last did anything; None while something is in progress."""

    def evict(self) -> None:
        """Close now, and stop counting as an open connection at once."""


class IdleRanking:
    """Which connection makes way at the descriptor budget: the one silent the longest, found without a
    scan of every connection per new one.

    Measured at the real budget (13,750 connections under an open-file limit of 20,000), a scan per new
    connection cost 13 ms of the loop each: a flood of 1,000 connections past the budget took 75 s and
    starved every client. Here one scan ranks every connection idle for `EVICT_IDLE_S` (longest last) and
    serves the evictions after it, each candidate checked again when its turn comes (one that did
    something since is skipped: it is no longer idle). So a connection is the longest idle as of the
    last scan (one busy at the scan and idle since is seen at the next). A scan that finds none is not
    repeated before the most silent idle connection can qualify, nor more often than every `RESCAN_S`,
    so refusals at the budget cost no scan each either.
    """

    __slots__ = ("_next_scan", "_ranked")

    def __init__(self) -> None:
        self._ranked: list[tuple[float, Evictable]] = []
        self._next_scan = 0.0

    def forget(self) -> None:
        """Below the budget: drop the ranking (it holds connections that may close meanwhile)."""
        if self._ranked:
            self._ranked = []
        self._next_scan = 0.0

    def take(self, connections: Iterable[Evictable], now: float) -> tuple[Evictable, float] | None:
        """The connection to close for a new one and its seconds of silence; None: none has been idle
        for `EVICT_IDLE_S`."""
        found = self._pop(now)
        if found is not None or now < self._next_scan:
            return found
        most_silent = 0.0
        ranked = []
        for conn in connections:
            silent = conn.silent_for(now)
            if silent is None:
                continue
            if silent >= EVICT_IDLE_S:
                ranked.append((silent, conn))
            elif silent > most_silent:
                most_silent = silent
        ranked.sort(key=lambda pair: pair[0])
        self._ranked = ranked
        self._next_scan = now if ranked else now + min(RESCAN_S, EVICT_IDLE_S - most_silent)
        return self._pop(now)

    def _pop(self, now: float) -> tuple[Evictable, float] | None:
        ranked = self._ranked
        while ranked:
            _, conn = ranked.pop()
            silent = conn.silent_for(now)
            if silent is not None and silent >= EVICT_IDLE_S:
                return conn, silent
        return None


def _schedule_on_loop(fn: Callable[[], None]) -> None:
    asyncio.get_running_loop().call_soon(fn)


class ConnectionLimits:
    """Open connections per IP and in total, against Kafka's limits."""

    def __init__(self, max_total: int, per_ip: int, overrides: dict[str, int]) -> None:
        self.max_total = max_total
        self.per_ip = per_ip
        self.overrides = {_address_of(host): count for host, count in overrides.items()}
        self.by_ip: Counter[str] = Counter()
        self.total = 0

    def acquire(self, ip: str) -> str | None:
        """Take a slot for a connection from `ip`; the name of the limit it is over, or None."""
        if self.total >= self.max_total:
            return "max.connections"
        if self.by_ip[ip] >= self.overrides.get(ip, self.per_ip):
            return "max.connections.per.ip"
        self.by_ip[ip] += 1
        self.total += 1
        return None

    def release(self, ip: str) -> None:
        self.total -= 1
        self.by_ip[ip] -= 1
        if self.by_ip[ip] <= 0:
            del self.by_ip[ip]


def _address_of(host: str) -> str:
    """An override's host as the peer address it will be compared with (names resolved once, at start)."""
    with contextlib.suppress(ValueError):
        return str(ipaddress.ip_address(host))
    try:
        return socket.gethostbyname(host)
    except OSError:
        log.warning("max.connections.per.ip.overrides: host name not resolved; its override is not applied",
                    host=host)
        return host


class ConnectionGuard:
    def __init__(self, config: Any) -> None:
        self.pool = MemoryPool(int(config.get("queued.max.request.bytes")), schedule=_schedule_on_loop)
        self.limits = ConnectionLimits(int(config.get("max.connections")), int(config.get("max.connections.per.ip")),
                                       parse_host_counts(config.get("max.connections.per.ip.overrides") or ""))
        self.creation = ConnectionRates.from_config(config)
        self.idle_s = int(config.get("connections.max.idle.ms")) / 1000
        self.stalled_s = min(STALLED_FRAME_S, self.idle_s)
        self.warnings = RateLimitedLog(log)
        #: the connections the open-file limit allows (set at start; None: not checked)
        self.descriptors: DescriptorBudget | None = None
        self._idle = IdleRanking()
        self._sweeper: asyncio.Task[None] | None = None

    def descriptor_room(self, connections: Collection[Evictable], now: float) -> bool:
        """Whether a new connection may keep its descriptor: below the budget, or once the longest idle
        connection was closed for it (`IdleRanking`); False while backing off after a descriptor error."""
        budget = self.descriptors
        if budget is None:
            return True
        if budget.backing_off(now):
            return False
        if not budget.full(len(connections)):
            self._idle.forget()
            return True
        found = self._idle.take(connections, now)
        if found is None:
            return False
        victim, longest = found
        CONNECTIONS_EXPIRED.labels(REASON).inc()
        self.warnings.warning("connection closed for a new one", "closing the longest idle connection: "
                              "the open-file budget is reached", peer=victim.peer, idle_s=round(longest, 1),
                              budget=budget.connections)
        victim.evict()
        return True

    def start(self, connections: Iterable[Sweepable]) -> None:
        """Sweep `connections` (a live collection) until `stop`."""
        if self._sweeper is None:
            self._sweeper = asyncio.get_running_loop().create_task(self._sweep_forever(connections))

    async def stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
            self._sweeper = None
        self.warnings.flush()

    async def _sweep_forever(self, connections: Iterable[Sweepable]) -> None:
        every = min(SWEEP_EVERY_S, self.stalled_s / 2)
        while True:
            await asyncio.sleep(every)
            try:
                self.sweep(connections, time.monotonic())
            except Exception:
                log.exception("connection sweep failed")

    def sweep(self, connections: Iterable[Sweepable], now: float) -> None:
        for conn in list(connections):
            conn.expire_if_silent(now, self.idle_s, self.stalled_s)
        self.warnings.flush()
