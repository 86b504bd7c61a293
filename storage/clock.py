"""The broker's wall clock: one definition for the broker state, the log manager, the cleaner and each log.

Any thread may call it; it reads the system clock and holds no state.
"""

from __future__ import annotations

import time


def wall_clock_ms() -> int:
    """The system's wall clock in milliseconds (what record timestamps and retention are measured in)."""
    return time.time_ns() // 1_000_000
