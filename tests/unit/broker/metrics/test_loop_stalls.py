"""The loop-stall families: a blocked event loop is seen as lag of about the block's length, and a full
collection is timed under its generation, so a latency tail can be told from a pause of the host."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time

from prometheus_client import REGISTRY

from pybroker.broker.metrics import loop_stalls


def _sample(name: str, labels: dict[str, str]) -> float:
    value = REGISTRY.get_sample_value(name, labels)
    return 0.0 if value is None else value


def test_a_blocked_loop_is_one_late_wake_of_about_the_blocks_length() -> None:
    above_tenth = {"le": "0.1"}
    before_total = _sample("pybroker_event_loop_lag_seconds_count", {})
    before_quick = _sample("pybroker_event_loop_lag_seconds_bucket", above_tenth)

    async def scenario() -> None:
        watcher = asyncio.create_task(loop_stalls.watch(interval_s=0.02))
        await asyncio.sleep(0.1)  # a few prompt wakes
        time.sleep(0.3)  # the loop held, as a blocking call would hold it
        await asyncio.sleep(0.1)
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher

    asyncio.run(scenario())
    wakes = _sample("pybroker_event_loop_lag_seconds_count", {}) - before_total
    quick = _sample("pybroker_event_loop_lag_seconds_bucket", above_tenth) - before_quick
    assert wakes >= 3
    assert wakes - quick == 1  # the one wake that came after the block, and only it, was late by over 0.1 s
    assert _sample("pybroker_event_loop_lag_seconds_sum", {}) >= 0.25


def test_collections_are_timed_by_generation_once_however_often_installed() -> None:
    loop_stalls.time_collections()
    loop_stalls.time_collections()
    assert gc.callbacks.count(loop_stalls._on_collection) == 1
    before = _sample("pybroker_gc_pause_seconds_count", {"generation": "2"})
    gc.collect(2)
    gc.collect(2)
    assert _sample("pybroker_gc_pause_seconds_count", {"generation": "2"}) - before == 2
    before_young = _sample("pybroker_gc_pause_seconds_count", {"generation": "0"})
    gc.collect(0)
    assert _sample("pybroker_gc_pause_seconds_count", {"generation": "0"}) - before_young == 1
