"""How long fsyncs take, told to one listener (the broker's metrics) without storage knowing about metrics.

`Log.flush` is the single place every fsync of partition data goes through (group commit and the flush
policy alike), so it reports here; the broker installs the observer at startup. Observers are called on
the flushing thread and must be thread-safe and quick (a histogram's `observe` is both).
"""

from __future__ import annotations

from collections.abc import Callable

FlushObserver = Callable[[float], None]

_observer: FlushObserver | None = None


def set_flush_observer(observer: FlushObserver | None) -> None:
    global _observer
    _observer = observer


def report_flush(seconds: float) -> None:
    observer = _observer
    if observer is not None:
        observer(seconds)
