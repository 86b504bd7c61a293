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
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

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


def write_bandwidth(directory: Path, seconds: float = 2.0, chunk: int = 2**20, sync_every: int = 4 * 2**20,
                    files: int = 1) -> float:
    """MB/s (10^6) written to `files` temporary files in `directory` for `seconds` the way pybroker writes
    its logs: `sync_every` bytes per round, spread over the files in writes of at most `chunk`, then an
    `fdatasync` of every file written, `SYNC_THREADS` at a time (pybroker's flusher pool per log dir). The
    files are deleted and the disk settled after. NaN where the directory cannot be written.

    With `files` = a phase's partition count it is that phase's disk-only ceiling: the same writes and
    fsyncs with no broker, no network and no client, so a produce figure near it is the disk's limit."""
    per_file = max(1, min(chunk, sync_every // files))
    data = os.urandom(per_file)  # incompressible, should the storage below compress
    written = 0
    try:
        with contextlib.ExitStack() as stack:
            fds = [stack.enter_context(tempfile.NamedTemporaryFile(dir=directory, prefix="disk-ceiling-")).fileno()
                   for _ in range(files)]
            pool = stack.enter_context(ThreadPoolExecutor(max_workers=min(SYNC_THREADS, files)))
            started = time.monotonic()
            stop_at = started + seconds
            while True:
                for fd in fds:
                    for _ in range(max(1, sync_every // (per_file * files))):
                        written += os.write(fd, data)
                list(pool.map(os.fdatasync, fds))
                if time.monotonic() >= stop_at:
                    break
            elapsed = time.monotonic() - started
    except OSError:
        return float("nan")
    finally:
        settle_disk(timeout_s=5.0)
    return written / 1e6 / elapsed
