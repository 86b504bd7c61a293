"""Waiting in a test for what it checks, not for a fixed time.

An in-process broker parks a request, wakes a long poll or drops a connection on its own event loop; a test
that sleeps 100 ms and then asserts it happened passes alone and fails on a busy 2-core machine. `until`
polls the condition (on the test's event loop, so the broker's tasks run between polls) and fails with
`what` only after a deadline far beyond any load."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

#: long enough for any load we have seen, short enough that a real hang fails the test rather than the run
WAIT_S = 60.0


async def until(check: Callable[[], bool], what: str, timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"{what}: not within {timeout_s:.0f} s"
        await asyncio.sleep(0.01)
