"""A move between log dirs killed at each of its steps (the process ends as with kill -9: `os._exit` at
the step, no shutdown, real files): the next start finds every record exactly once, at its offset, with
its log start offset, in the old dir (a copy not yet swapped is deleted) or the new one (once the old dir
was renamed away, the complete future is promoted), and no `-future` or `-delete` dir left behind."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pybroker.storage.log_manager import LogManager
from tests.unit.storage.test_log_mover import manager_of, values

RECORDS = 120  # 40 batches of 3
LOG_START = 30

CHILD = textwrap.dedent("""
    import os, sys
    from pathlib import Path
    from pybroker.storage.log import Log
    from tests.unit.storage.helpers import append, batch
    from tests.unit.storage.test_log_mover import manager_of, other

    step, a, b = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    manager = manager_of([a, b])
    manager.create_topic("t", 1, {"segment.bytes": "2000"})
    log = manager.get_log("t", 0)
    for i in range(40):
        append(log, batch(3, value=b"%d-" % i + b"p" * 200))
    manager.delete_records("t", 0, 30)
    log.flush()
    manager.checkpoint()
    print(manager.dir_of("t", 0), flush=True)

    def crash():
        os._exit(9)

    real_rename, real_copy = os.rename, Log.append_copied
    calls = []

    def rename(src, dst):
        src, dst = str(src), str(dst)
        if step == "before-renames" and dst.endswith("-delete"):
            crash()
        real_rename(src, dst)
        if step == "after-old-renamed" and dst.endswith("-delete"):
            crash()
        if step == "after-future-renamed" and src.endswith("-future"):
            crash()

    def copy(self, *args, **kwargs):
        calls.append(1)
        if step == "copy" and len(calls) == 3:
            crash()
        return real_copy(self, *args, **kwargs)

    os.rename = rename
    Log.append_copied = copy
    manager.moves.chunk_bytes = 1000
    manager.moves.move("t", 0, str(other(manager)))
    manager.moves._thread.join(20)
    os._exit(3)  # not reached: the step crashes first
""")


@pytest.mark.parametrize(("step", "moved"), [
    ("copy", False), ("before-renames", False), ("after-old-renamed", True), ("after-future-renamed", True)])
def test_a_move_killed_at_each_step_loses_and_repeats_nothing(tmp_path: Path, step: str, moved: bool) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    root = Path(__file__).resolve().parents[3]
    done = subprocess.run([sys.executable, "-c", CHILD, step, str(a), str(b)], cwd=root, capture_output=True,
                          timeout=60, check=False)
    assert done.returncode == 9, done.stderr.decode()[-2000:]
    source = Path(done.stdout.decode().split()[0])
    target = b if source == a else a
    manager: LogManager = manager_of([a, b])
    try:
        log = manager.get_log("t", 0)
        assert log is not None
        assert manager.dir_of("t", 0) == (target if moved else source)
        assert log.log_start_offset == LOG_START and log.log_end_offset == RECORDS
        got = values(log)
        assert [offset for offset, _ in got] == list(range(LOG_START, RECORDS))
        assert [value[:4] for _, value in got][:3] == [b"10-p"] * 3
        leftovers = [p.name for d in (a, b) for p in d.iterdir() if p.name.endswith(("-future", "-delete"))]
        assert leftovers == []
        assert [p.name for d in (a, b) for p in d.iterdir() if p.name.startswith("t-0")] == ["t-0"]
    finally:
        manager.shutdown()
