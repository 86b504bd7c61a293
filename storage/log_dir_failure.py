"""The one place an I/O error on a log dir goes: it takes the whole dir offline, once, for good.

Kafka's rule (its LogDirFailureChannel): after ENOSPC, EIO, EROFS or a vanished dir, nothing on that dir
can be trusted to be written as asked, so every partition on it goes offline together rather than some
limping on. Whoever meets the error (an append, an fsync, a checkpoint, the cleaner, retention) calls
`report`; readers of the state ask `is_online`. Listeners hear of each dir once (the broker stops when
the last one goes). An offline dir stays offline until the broker restarts.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import structlog

log = structlog.get_logger("pybroker.storage.log_dir_failure")

OfflineListener = Callable[[Path, BaseException], None]


class LogDirFailureChannel:
    def __init__(self) -> None:
        self._offline: dict[Path, str] = {}
        self._lock = threading.Lock()
        self._listeners: list[OfflineListener] = []

    def on_offline(self, listener: OfflineListener) -> None:
        self._listeners.append(listener)

    def report(self, directory: Path, exc: BaseException) -> bool:
        """Take `directory` offline because of `exc`; True if this report did it (the first one)."""
        with self._lock:
            if directory in self._offline:
                return False
            self._offline[directory] = repr(exc)
        log.error("log dir offline", log_dir=str(directory), error=repr(exc),
                  reason="an I/O error: its partitions answer KAFKA_STORAGE_ERROR until the broker restarts")
        for listener in self._listeners:
            try:
                listener(directory, exc)
            except Exception:
                log.exception("log dir offline listener failed", log_dir=str(directory))
        return True

    def is_online(self, directory: Path) -> bool:
        return directory not in self._offline

    @property
    def offline(self) -> dict[Path, str]:
        """Offline dirs and the error that took each one down."""
        with self._lock:
            return dict(self._offline)
