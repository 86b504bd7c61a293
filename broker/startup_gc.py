"""Python's cyclic garbage collector held off while `pybroker start` imports and opens, then the start's heap frozen.

Why: a start allocates hundreds of thousands of long-lived objects (modules, classes, the generated
messages, the handler table), and every so many allocations the collector walks all of them looking for
cycles to free, of which a start makes next to none. Importing the broker took 0.30 to 0.34 s of CPU with
the collector off and 0.34 to 0.49 s with it on (three alternated pairs, 2 cores, load about 1): a tenth of
start-to-ready, spent finding nothing.

Once the listeners answer, the objects the start made are moved into the permanent generation
(`gc.freeze`) and collection is turned on again: the objects live as long as the process does, so later
full collections need not walk them either, which keeps those pauses (felt as request latency) short.
Whatever garbage the start did leave is kept for good with them: a one-off amount, not a leak that grows.

Only the broker's own start pauses the collector (`broker/cli.py`); a `BrokerApp` started any other way
(the tests' in-process brokers) finds it already on and leaves it alone.

Threads: the process's main thread (`pause`, before the event loop runs) and the event loop (`resume`).
"""

from __future__ import annotations

import gc

_paused = False


def pause() -> None:
    """Turn the collector off for the start, if it is on."""
    global _paused
    if gc.isenabled():
        gc.disable()
        _paused = True


def resume() -> None:
    """After the start: freeze what it made and turn the collector back on (only if `pause` turned it off)."""
    global _paused
    if _paused:
        _paused = False
        gc.freeze()
        gc.enable()
