"""The C allocator's thresholds, set at start so request buffers are reused instead of faulted in anew.

Why: a produce request is received into a buffer of its own size (often about 1 MB), held while it is
validated and written, then freed. glibc's malloc serves such a block from the heap only while its
dynamic thresholds allow: it gives the top of the heap back to the kernel once more than twice the last
freed block is free there (the trim threshold), so the next frame's pages are faulted in and zeroed by
the kernel again. Under a produce load of 10 KiB records that cost a fifth of the broker's CPU (page
faults, measured with `perf`), more than the record walk and the CRC together.

So the broker keeps up to `TRIM_THRESHOLD` of freed heap for the next frames, and blocks up to
`MMAP_THRESHOLD` come from the heap. Bigger blocks (a frame of tens of MB is rare and may be hostile)
are still mapped and unmapped on their own, so they never stay behind; the request memory pool
(`queued.max.request.bytes`) bounds what frames may hold at once either way. An operator's own
`MALLOC_TRIM_THRESHOLD_` / `MALLOC_MMAP_THRESHOLD_` (glibc's environment variables) win: that threshold is
left alone. Elsewhere than glibc nothing is changed.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from collections.abc import Callable
from dataclasses import dataclass, field

#: glibc's mallopt parameters (malloc.h)
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3

#: freed heap kept for reuse (glibc's default is dynamic: twice the last freed mapped block)
TRIM_THRESHOLD = 64 * 1024 * 1024
#: blocks up to this size come from the heap (default dynamic, from 128 KiB up to 32 MiB)
MMAP_THRESHOLD = 8 * 1024 * 1024

#: (name in the start log, mallopt parameter, value, the environment variable that overrides it)
SETTINGS: tuple[tuple[str, int, int, str], ...] = (
    ("trim_threshold", M_TRIM_THRESHOLD, TRIM_THRESHOLD, "MALLOC_TRIM_THRESHOLD_"),
    ("mmap_threshold", M_MMAP_THRESHOLD, MMAP_THRESHOLD, "MALLOC_MMAP_THRESHOLD_"),
)


@dataclass(slots=True)
class AllocatorTuning:
    """What `tune_allocator` did, for the start log: the values set, and the ones left to the operator."""

    applied: dict[str, int] = field(default_factory=dict)
    from_environment: list[str] = field(default_factory=list)
    skipped: str | None = None


def _mallopt() -> Callable[[int, int], int] | None:
    if os.uname().sysname != "Linux":
        return None
    name = ctypes.util.find_library("c") or "libc.so.6"
    try:
        libc = ctypes.CDLL(name)
        libc.gnu_get_libc_version  # noqa: B018 - present in glibc only (musl has mallopt as a stub)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return None
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return mallopt


def tune_allocator(environ: dict[str, str] | None = None) -> AllocatorTuning:
    """Set glibc's trim and mmap thresholds (see the module's docstring); never raises."""
    env = os.environ if environ is None else environ
    tuning = AllocatorTuning()
    mallopt = _mallopt()
    if mallopt is None:
        tuning.skipped = "not glibc"
        return tuning
    for name, parameter, value, variable in SETTINGS:
        if env.get(variable):
            tuning.from_environment.append(variable)
        elif mallopt(parameter, value) == 1:
            tuning.applied[name] = value
    return tuning
