"""The targets that wait while another is measured run at the lowest CPU priority (nice 19).

Why: every target of the grid is up for the whole run, and on the 2-core bench machine a measured phase
uses all of both cores (two client processes and the broker). A waiting JVM is not idle: measured on
10 KiB x 1,024-partition consume phases, the two waiting Kafka processes (log flusher, scheduler, GC)
took 8-16% of a core during pybroker's phases, while a waiting pybroker took 0-2% during Kafka's. That
is the measured target's and its clients' time, taken unevenly. At nice 19 a waiting broker still runs
whenever a core is free, so its timers and heartbeats (a KRaft node's own broker session) keep going,
but it no longer takes a share of a busy machine's time (about 1.5% of a nice-0 thread's, by the
kernel's weights).

Nice is per thread on Linux: every thread of the process and of its worker processes is set, and set
back to what it had before (pybroker's cleaner and validation workers run at a nice of their own).
Threads started while a broker waited inherited 19; they are set back to the nice of their process's
main thread before it waited (or, without one, of a thread of it). Lowering a nice value needs privilege (CAP_SYS_NICE): where the harness
lacks it `PRIORITIES_CAN_RETURN` is False and `waiting` does nothing, so no target is left slowed.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator

from bench.procfs import descendants

WAITING_NICE = 19


def _can_raise_priority() -> bool:
    """Whether this process may lower a nice value again (root, or CAP_SYS_NICE in its effective set)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("CapEff:"):
                    return bool(int(line.split()[1], 16) & (1 << 23))  # CAP_SYS_NICE
    except (OSError, ValueError):
        pass
    return os.geteuid() == 0


PRIORITIES_CAN_RETURN = _can_raise_priority()


def _threads(pid: int) -> list[int]:
    try:
        return [int(tid) for tid in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []


def _nice(tid: int) -> int | None:
    try:
        return os.getpriority(os.PRIO_PROCESS, tid)
    except OSError:  # gone
        return None


def _set(tid: int, nice: int) -> None:
    with contextlib.suppress(OSError):  # gone meanwhile
        os.setpriority(os.PRIO_PROCESS, tid, nice)


@contextlib.contextmanager
def waiting(pids: Iterable[int | None]) -> Iterator[None]:
    """While the block runs, the processes `pids` (their worker processes too) run at nice 19."""
    if not PRIORITIES_CAN_RETURN:
        yield
        return
    before: dict[int, int] = {}  # thread -> its nice before
    # process -> the nice its new threads get back: its main thread's (any thread's, if that one is gone),
    # so every process that had a thread lowered is set back
    usual: dict[int, int] = {}
    for pid in (p for p in pids if p is not None):
        for process in (pid, *descendants(pid)):
            for tid in _threads(process):
                nice = _nice(tid)
                if nice is None:
                    continue
                before[tid] = nice
                if tid == process or process not in usual:
                    usual[process] = nice
                _set(tid, WAITING_NICE)
    try:
        yield
    finally:
        for process, nice in usual.items():
            for tid in _threads(process):
                _set(tid, before.get(tid, nice))
