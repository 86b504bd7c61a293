"""The one place an I/O error on a log dir goes: it takes the whole dir offline, once, for good.

Kafka's rule (its LogDirFailureChannel): after ENOSPC, EIO, EROFS or a vanished dir, nothing on that dir
can be trusted to be written as asked, so every partition on it goes offline together rather than some
limping on. Whoever meets the error (an append, an fsync, a checkpoint, the cleaner, retention) calls
`report`; readers of the state ask `is_online`. Listeners hear of each dir once (the broker stops when
the last one goes). An offline dir stays offline until the broker restarts.

Running out of a process or system resource is not a disk failure: EMFILE, ENFILE and ENOMEM say nothing
about the disk, and taking the dir offline for them would let one client that makes the broker open too
many files stop it. Such an error fails only the request that met it (`is_resource_exhaustion`): `report`
logs it (at most once per `RESOURCE_LOG_INTERVAL_S`) and leaves the dir online.
"""

from __future__ import annotations

import errno
import threading
import time
from collections.abc import Callable
from pathlib import Path

import structlog

log = structlog.get_logger("pybroker.storage.log_dir_failure")

OfflineListener = Callable[[Path, BaseException], None]

#: errors that mean "the process or the system ran short of something", not "the disk failed"
RESOURCE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM})
RESOURCE_LOG_INTERVAL_S = 10.0


def is_resource_exhaustion(exc: BaseException) -> bool:
    """True for out-of-descriptors or out-of-memory errors: the request fails, the log dir stays online."""
    return isinstance(exc, MemoryError) or (isinstance(exc, OSError) and exc.errno in RESOURCE_ERRNOS)


class LogDirFailureChannel:
    def __init__(self) -> None:
        self._offline: dict[Path, str] = {}
        self._lock = threading.Lock()
        self._listeners: list[OfflineListener] = []
        self._resource_logged_at = float("-inf")
        #: resource errors met (EMFILE, ENFILE, ENOMEM): each failed one request, none took a dir offline
        self.resource_errors = 0

    def on_offline(self, listener: OfflineListener) -> None:
        self._listeners.append(listener)

    def report(self, directory: Path, exc: BaseException) -> bool:
        """Take `directory` offline because of `exc`; True if this report did it (the first one).

        A resource error (`is_resource_exhaustion`) is counted and logged instead: the dir stays online.
        """
        if is_resource_exhaustion(exc):
            self._resource_error(directory, exc)
            return False
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

    def _resource_error(self, directory: Path, exc: BaseException) -> None:
        with self._lock:
            self.resource_errors += 1
            now = time.monotonic()
            if now - self._resource_logged_at < RESOURCE_LOG_INTERVAL_S:
                return
            self._resource_logged_at = now
            count = self.resource_errors
        log.warning("request refused: out of a resource", log_dir=str(directory), error=repr(exc),
                    resource_errors=count, reason="not a disk failure: the log dir stays online")

    def is_online(self, directory: Path) -> bool:
        return directory not in self._offline

    def all_online(self) -> bool:
        """No dir offline: the common case, which spares a read the lookup of its log's dir."""
        return not self._offline

    @property
    def offline(self) -> dict[Path, str]:
        """Offline dirs and the error that took each one down."""
        with self._lock:
            return dict(self._offline)
