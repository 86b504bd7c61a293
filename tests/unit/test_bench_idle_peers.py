"""The bench's waiting targets at nice 19 (`bench/idle_peers.py`): every thread of the process and of its
worker processes is lowered while another target runs its cell, and each gets back what it had, a worker
process's own nice included; a thread started meanwhile gets its process's. A real process tree."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from bench import idle_peers
from bench.procfs import descendants

pytestmark = pytest.mark.skipif(not idle_peers.PRIORITIES_CAN_RETURN,
                                reason="lowering a nice value again needs CAP_SYS_NICE")

#: a broker stand-in: two threads, a worker process at nice 5, and a thread started on a signal file
TREE = """
import os, subprocess, sys, threading, time
worker = subprocess.Popen([sys.executable, "-c", "import os, time; os.nice(5); time.sleep(60)"])
threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
flag = sys.argv[1]
while not os.path.exists(flag):
    time.sleep(0.01)
threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
open(flag + ".done", "w").close()
time.sleep(60)
"""


def _nices(pid: int) -> dict[int, dict[int, int]]:
    """process -> thread -> nice, for `pid` and its worker processes."""
    return {process: {int(tid): os.getpriority(os.PRIO_PROCESS, int(tid))
                      for tid in os.listdir(f"/proc/{process}/task")}
            for process in (pid, *descendants(pid))}


def _wait_for(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the stand-in broker did not get there"
        time.sleep(0.01)


def test_a_waiting_target_runs_at_nice_19_and_gets_its_priorities_back(tmp_path: Path) -> None:
    flag = tmp_path / "start-a-thread"
    tree = subprocess.Popen([sys.executable, "-c", TREE, str(flag)])
    try:
        def settled() -> bool:
            nices = _nices(tree.pid)
            return (len(nices) == 2 and len(nices[tree.pid]) == 2
                    and all(n == 5 for p, threads in nices.items() if p != tree.pid for n in threads.values()))
        _wait_for(settled)
        before = _nices(tree.pid)
        (worker,) = [p for p in before if p != tree.pid]

        with idle_peers.waiting([tree.pid, None]):
            during = _nices(tree.pid)
            assert all(n == 19 for threads in during.values() for n in threads.values()), during
            flag.touch()  # a thread started while it waits inherits 19
            _wait_for(lambda: Path(str(flag) + ".done").exists())
            assert len(_nices(tree.pid)[tree.pid]) == 3

        after = _nices(tree.pid)
        assert after[worker] == before[worker]  # its own nice 5, not 0
        assert set(after[tree.pid].values()) == {before[tree.pid][tree.pid]}  # the new thread too
    finally:
        for pid in descendants(tree.pid):
            os.kill(pid, 9)
        tree.kill()
        tree.wait()


def test_a_target_gone_while_it_waited_is_no_error() -> None:
    gone = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    with idle_peers.waiting([gone.pid]):
        gone.kill()
        gone.wait()
