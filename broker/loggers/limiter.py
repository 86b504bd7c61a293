"""Warnings a client can cause, rate-limited per kind: a fuzzer must not be able to fill the disk with logs.

The first `lines` warnings of a kind in an interval are written as they come (so the first bad frame of
an incident is logged in full, with its peer and reason); the rest of that interval are only counted,
and one line says how many were suppressed once the interval is over (`flush`, called by the
connection sweeper every second, writes it even when no further warning comes).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

#: lines written per kind and interval before the rest are counted
LINES_PER_INTERVAL = 10
INTERVAL_S = 60.0


class _Window:
    __slots__ = ("logged", "started", "suppressed")

    def __init__(self, started: float) -> None:
        self.started = started
        self.logged = 0
        self.suppressed = 0


class RateLimitedLog:
    def __init__(self, logger: Any, lines: int = LINES_PER_INTERVAL, interval_s: float = INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.logger = logger
        self.lines = lines
        self.interval_s = interval_s
        self.clock = clock
        self._windows: dict[str, _Window] = {}

    def warning(self, kind: str, event: str, **context: Any) -> None:
        """Write `event` unless `kind` already wrote its share in this interval."""
        now = self.clock()
        window = self._windows.get(kind)
        if window is None or now - window.started >= self.interval_s:
            if window is not None:
                self._summarize(kind, window)
            window = self._windows[kind] = _Window(now)
        if window.logged < self.lines:
            window.logged += 1
            self.logger.warning(event, **context)
        else:
            window.suppressed += 1

    def flush(self) -> None:
        """Close the windows whose interval is over, writing one line for each that suppressed some."""
        now = self.clock()
        for kind, window in list(self._windows.items()):
            if now - window.started >= self.interval_s:
                self._summarize(kind, window)
                del self._windows[kind]

    def _summarize(self, kind: str, window: _Window) -> None:
        if window.suppressed:
            self.logger.warning("similar warnings suppressed", kind=kind, suppressed=window.suppressed,
                                interval_s=self.interval_s, logged=window.logged)
