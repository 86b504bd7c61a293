"""The disk in the same state before every produce phase, and what it takes written the way pybroker writes.

Why: pybroker writes its log and fsyncs it before it answers acks=all; Tansu (memory://) and the null
broker write nothing. A disk takes a short burst much faster than it sustains (here ~1.2 GB/s for 2 s,
~370-550 MB/s sustained), so a phase that followed another phase's writes ran while the kernel was still
writing back the previous one's dirty pages, and pybroker's produce figure depended on its place in the
grid (10 KiB produce: 58k msgs/s in a first cell, 25k in later ones). `settle_disk` before every produce
phase, on every target alike, starts each one with the write-back done; `write_bandwidth` is the disk's
own ceiling, printed once in the header so a produce figure in MB/s can be read against it.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

MEMINFO = Path("/proc/meminfo")
#: Dirty + Writeback below this counts as settled (a few hundred ms of the disk's sustained rate)
SETTLED_BYTES = 64 * 2**20
SETTLE_TIMEOUT_S = 30.0
_POLL_S = 0.05


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


def write_bandwidth(directory: Path, seconds: float = 2.0, chunk: int = 2**20, sync_every: int = 4 * 2**20) -> float:
    """MB/s (10^6) written to a temporary file in `directory` for `seconds` the way pybroker writes its log:
    `chunk`-sized writes with an `fdatasync` every `sync_every` bytes. The file is deleted and the disk
    settled after. NaN where the directory cannot be written."""
    data = os.urandom(chunk)  # incompressible, should the storage below compress
    written = unsynced = 0
    try:
        with tempfile.NamedTemporaryFile(dir=directory, prefix="disk-ceiling-") as file:
            fd = file.fileno()
            started = time.monotonic()
            stop_at = started + seconds
            while True:
                done = os.write(fd, data)
                written += done
                unsynced += done
                if unsynced >= sync_every:
                    os.fdatasync(fd)
                    unsynced = 0
                    if time.monotonic() >= stop_at:
                        break
            elapsed = time.monotonic() - started
    except OSError:
        return float("nan")
    finally:
        settle_disk(timeout_s=5.0)
    return written / 1e6 / elapsed
