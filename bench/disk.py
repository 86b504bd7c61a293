"""The disk in the same state before every produce phase, and what it takes written the way pybroker writes.

Why: pybroker writes its log and fsyncs it before it answers acks=all; Tansu (memory://) and the null
broker write nothing. A disk takes a short burst much faster than it sustains (here ~1.2 GB/s for 2 s,
~370-550 MB/s sustained), so a phase that followed another phase's writes ran while the kernel was still
writing back the previous one's dirty pages, and pybroker's produce figure depended on its place in the
grid (10 KiB produce: 58k msgs/s in a first cell, 25k in later ones). `settle_disk` before every produce
phase, on every target alike, starts each one with the write-back done; `write_bandwidth` is the disk's
own ceiling, measured once at the start for each partition count of the grid (one file per partition,
`files`) and printed beside pybroker's produce figures, which it bounds: an acks=all answer waits for the
fsync.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
import time
from pathlib import Path

from pybroker.config.definitions import BROKER
from pybroker.storage.page_cache import PageCache

MEMINFO = Path("/proc/meminfo")
#: Dirty + Writeback below this counts as settled (a few hundred ms of the disk's sustained rate)
SETTLED_BYTES = 64 * 2**20
SETTLE_TIMEOUT_S = 30.0
_POLL_S = 0.05
#: fsyncs in flight at once, as pybroker's flusher keeps per log dir (`storage.flusher.WORKERS`)
SYNC_THREADS = 8


def unwritten_bytes(meminfo: Path = MEMINFO) -> int | None:
    """Dirty + Writeback of `/proc/meminfo` in bytes: page cache not yet on disk. None where it cannot be read."""
    try:
        text = meminfo.read_text()
    except OSError:
        return None
    values = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in ("Dirty", "Writeback"):
            values[key] = int(rest.split()[0]) * 1024  # the kernel writes kB (KiB)
    return sum(values.values()) if len(values) == 2 else None


def settle_disk(threshold: int = SETTLED_BYTES, timeout_s: float = SETTLE_TIMEOUT_S,
                meminfo: Path = MEMINFO) -> str:
    """`os.sync()`, then wait until Dirty + Writeback are below `threshold` or `timeout_s` has passed, so the
    next phase does not pay for the previous one's write-back. Returns "" when settled, else a short note
    (nothing to wait for where meminfo cannot be read)."""
    deadline = time.monotonic() + timeout_s
    os.sync()
    while True:
        unwritten = unwritten_bytes(meminfo)
        if unwritten is None or unwritten < threshold:
            return ""
        if time.monotonic() >= deadline:
            return f"disk not settled in {timeout_s:g} s ({unwritten / 1e6:,.0f} MB dirty or in write-back)"
        time.sleep(_POLL_S)


class _Synced:
    """A ceiling file as pybroker's page-cache budget sees a segment (`storage.page_cache.Droppable`)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.cache_dropped_to = 0
        self.cache_counted_to = 0

    def open_file(self) -> _Synced:
        return self

    def fileno(self) -> int:
        return self.fd


def write_bandwidth(directory: Path, seconds: float = 2.0, files: int = 1, chunk: int | None = None,
                    unsynced_cap: int = 256 * 2**20, cache_bytes: int | None = None) -> float:
    """MB/s (10^6) made durable in `files` temporary files in `directory` in about `seconds`, the way
    pybroker's log and flusher work: one thread appends `chunk`-sized writes to the files in turn (a
    request's batch per partition: 1 MiB over the partitions, at least 64 KiB), while `SYNC_THREADS` threads
    `fdatasync` the files over and over, each sync covering whatever was appended since the last one (group
    commit). The appender stops `unsynced_cap` bytes ahead of what is synced (the producers' queues bound
    pybroker the same way); the clock stops once the last byte is synced. What is synced is counted by
    pybroker's own page-cache budget (`log.page.cache.max.bytes`, its default unless `cache_bytes`), which
    drops the oldest from the page cache as pybroker does. The files are deleted and the disk settled
    after. NaN where the directory cannot be written.

    With `files` = a phase's partition count it is that phase's disk-only ceiling: the same writes and
    fsyncs with no broker, no network and no client, so a produce figure near it is the disk's limit."""
    # at least 64 KiB a write: smaller ones make this Python appender, not the disk, the limit (1,024
    # files of 4 KiB measured 320 MB/s where pybroker itself reached 447)
    size = chunk or max(64 * 1024, 2**20 // files)
    data = os.urandom(size)  # incompressible, should the storage below compress
    written = [0] * files  # per file: appended, and made durable
    synced = [0] * files
    totals = {"written": 0, "synced": 0, "stop": False}
    cond = threading.Condition()  # appends wake the syncers, syncs wake an appender held at the cap
    cache = PageCache(int(BROKER["log.page.cache.max.bytes"].default) if cache_bytes is None else cache_bytes)
    handles: list[_Synced] = []

    def syncer(mine: list[int]) -> None:
        while True:
            with cond:
                while not totals["stop"] and all(written[i] == synced[i] for i in mine):
                    cond.wait()
                if totals["stop"]:
                    return
            for index in mine:
                target = written[index]
                if target > synced[index]:
                    os.fdatasync(fds[index])
                    cache.fsynced(handles[index], target)
                    with cond:
                        totals["synced"] += target - synced[index]
                        synced[index] = target
                        cond.notify_all()

    def finish() -> None:
        with cond:
            totals["stop"] = True
            cond.notify_all()

    try:
        with contextlib.ExitStack() as stack:
            fds = [stack.enter_context(tempfile.NamedTemporaryFile(dir=directory, prefix="disk-ceiling-")).fileno()
                   for _ in range(files)]
            handles.extend(_Synced(fd) for fd in fds)
            stack.callback(cache.close)
            threads = [threading.Thread(target=syncer, args=(list(range(t, files, SYNC_THREADS)),), daemon=True)
                       for t in range(min(SYNC_THREADS, files))]
            started = time.monotonic()
            stop_at = started + seconds
            for thread in threads:
                thread.start()
            index = 0
            while time.monotonic() < stop_at:
                with cond:
                    while totals["written"] - totals["synced"] > unsynced_cap:
                        cond.wait()
                appended = 0
                for _ in range(64):  # only this thread appends, so `written` needs no lock to grow
                    done = os.write(fds[index], data)
                    written[index] += done
                    appended += done
                    index = (index + 1) % files
                with cond:
                    totals["written"] += appended
                    cond.notify_all()
            finish()
            for thread in threads:
                thread.join()
            for fd in fds:  # what the syncers had not reached yet
                os.fdatasync(fd)
            elapsed = time.monotonic() - started
    except OSError:
        return float("nan")
    finally:
        finish()
        settle_disk(timeout_s=5.0)
    return totals["written"] / 1e6 / elapsed
