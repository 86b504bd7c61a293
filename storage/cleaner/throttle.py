"""`log.cleaner.io.max.bytes.per.second`: one throttle shared by every cleaner thread (Kafka's Throttler).

Cleaner threads report the bytes they read and write; once per check interval the observed rate is
compared with the allowed one, and a thread that ran ahead sleeps for as long as it takes the average
to fall back to the limit. The clock and the sleep are injected so tests need not wait.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

#: how often the rate is measured: long enough to average over several chunks, short enough to be smooth
CHECK_INTERVAL_S = 0.1
#: at or above this the throttle is off (Kafka's default is Double.MAX_VALUE)
UNLIMITED = 1e300


class Throttler:
    def __init__(self, bytes_per_second: float, *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep, check_interval_s: float = CHECK_INTERVAL_S) -> None:
        self.bytes_per_second = bytes_per_second
        self._clock = clock
        self._sleep = sleep
        self._interval = check_interval_s
        self._lock = threading.Lock()
        self._period_start = clock()
        self._observed = 0.0
        #: seconds slept in total (for stats and tests)
        self.slept_s = 0.0

    @property
    def enabled(self) -> bool:
        return 0 < self.bytes_per_second < UNLIMITED

    def maybe_throttle(self, nbytes: int) -> None:
        """Account for `nbytes` of cleaner I/O; sleep if the threads together went over the limit."""
        if not self.enabled:
            return
        with self._lock:
            self._observed += nbytes
            now = self._clock()
            elapsed = now - self._period_start
            if elapsed < self._interval:
                return
            wanted = self._observed / self.bytes_per_second
            pause = wanted - elapsed
            if pause > 0:
                self._sleep(pause)
                self.slept_s += pause
            self._period_start = self._clock()
            self._observed = 0.0
