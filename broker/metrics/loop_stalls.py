"""How long the event loop stood still, and how long the cyclic garbage collector held the interpreter.

Why: every request of a connection is served on the one event loop, so anything that holds it (a handler
that runs long, a system call that blocks where it should not, a full collection of a grown heap) is felt
by every client at once, as a tail of request latency. From outside, such a stall looks like the host
pausing the machine; these two families tell them apart:

- `pybroker_event_loop_lag_seconds`: a task on the loop asks to wake every `INTERVAL_S` and records how
  late it woke. A stall of 150 ms anywhere on the loop is one sample above 0.1 s, whatever held it.
- `pybroker_gc_pause_seconds{generation}`: each collection's duration, timed by `gc.callbacks` (the
  callbacks run on whichever thread's allocation started the collection, with the interpreter held, so
  one collection is timed at a time).

The watcher costs one timer every `INTERVAL_S`; the timing of a collection two clock reads. `make bench`
reads the lag over each end-to-end latency window, so a window's tail says whether the loop stalled.

Threads: `watch` runs on the event loop; `time_collections` may be called from any thread, once or more
(later calls do nothing).
"""

from __future__ import annotations

import asyncio
import gc
import threading
import time
from typing import Any

from prometheus_client import Histogram

#: how often the watcher asks to wake: a stall shorter than this may fall between two asks and be missed
INTERVAL_S = 0.1
_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)

LOOP_LAG = Histogram("pybroker_event_loop_lag_seconds",
                     "How late the event loop ran a timer it sets every 0.1 s: a stall of the loop (a long "
                     "handler, a blocking call, a collection) shows as one sample of about its length.",
                     buckets=_BUCKETS)
GC_PAUSES = Histogram("pybroker_gc_pause_seconds",
                      "Duration of each cyclic garbage collection, by generation (2: a full collection).",
                      ["generation"], buckets=_BUCKETS)
_PAUSE_CHILDREN = {generation: GC_PAUSES.labels(generation=str(generation)) for generation in range(3)}

_installed = threading.Lock()
_started_at: list[float] = []  # the running collection's start (one at a time: the interpreter is held)


async def watch(interval_s: float = INTERVAL_S) -> None:
    """Until cancelled: ask to wake every `interval_s`, and record how late each wake came."""
    loop = asyncio.get_running_loop()
    observe = LOOP_LAG.observe
    while True:
        asked = loop.time()
        await asyncio.sleep(interval_s)
        observe(max(0.0, loop.time() - asked - interval_s))


def _on_collection(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _started_at[:] = [time.perf_counter()]
    elif _started_at:
        child = _PAUSE_CHILDREN.get(info.get("generation", -1))
        if child is not None:
            child.observe(time.perf_counter() - _started_at[0])
        _started_at.clear()


def time_collections() -> None:
    """Time every collection from now on (once per process, however often called)."""
    with _installed:
        if _on_collection not in gc.callbacks:
            gc.callbacks.append(_on_collection)
