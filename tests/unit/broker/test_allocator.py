"""The allocator thresholds set at start: applied on glibc, the operator's environment wins, and the effect
the broker wants (a freed request buffer reused, not faulted in again) really happens."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from pybroker.broker.allocator import MMAP_THRESHOLD, TRIM_THRESHOLD, _mallopt, tune_allocator

glibc = pytest.mark.skipif(_mallopt() is None, reason="the thresholds are glibc's")


@glibc
def test_both_thresholds_are_set() -> None:
    tuning = tune_allocator({})
    assert tuning.applied == {"trim_threshold": TRIM_THRESHOLD, "mmap_threshold": MMAP_THRESHOLD}
    assert tuning.skipped is None


@glibc
def test_the_operators_environment_wins() -> None:
    tuning = tune_allocator({"MALLOC_TRIM_THRESHOLD_": "1048576"})
    assert tuning.from_environment == ["MALLOC_TRIM_THRESHOLD_"]
    assert "trim_threshold" not in tuning.applied


#: a child process frees and allocates 1 MB frames the way a produce load does (a few in flight, each
#: written to once) and prints its minor page faults
_FRAMES = textwrap.dedent("""
    import resource, sys
    if sys.argv[1] == "tuned":
        from pybroker.broker.allocator import tune_allocator
        tune_allocator({})
    held = []
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for i in range(400):
        frame = bytearray(1_000_000 + (i % 7) * 4096)
        frame[::4096] = b"x" * len(frame[::4096])
        held.append(frame)
        if len(held) > 3:
            held.pop(0)
    print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
""")


def _faults(mode: str) -> int:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    done = subprocess.run([sys.executable, "-c", _FRAMES, mode], capture_output=True, text=True, env=env,
                          check=True, timeout=60)
    return int(done.stdout.strip())


@glibc
def test_freed_frames_are_reused_instead_of_faulted_in_again() -> None:
    pages_per_frame = 1_000_000 // 4096
    tuned = _faults("tuned")
    assert tuned < 20 * pages_per_frame  # a handful of frames' worth, then reuse (400 frames allocated)
    assert _faults("default") > 5 * tuned  # what glibc's own thresholds cost the same pattern
