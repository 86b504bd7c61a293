"""A kill at each point of the segment swap: startup finishes or undoes it, never loses a latest value,
never repeats a record, and leaves no temporary file behind.

The "kill" is a copy of the partition dir taken at that point (the files exactly as the process left
them), which is then opened the way a broker opens a dir after a crash.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pybroker.storage.cleaner.swap import SWAP_SUFFIX
from tests.unit.storage.cleaner.helpers import (
    Seen,
    abandon,
    append,
    clean_fully,
    cleaner,
    expected_after_clean,
    open_log,
    records_of,
)

pytestmark = pytest.mark.usefixtures("cleaner_kind")  # each test: in-process, then worker process


def _write(path: Path, *, last_is_unique: bool) -> Path:
    """Four small segments whose keys overlap, then an active segment."""
    log = open_log(path)
    for segment in range(4):
        for version in range(3):
            append(log, [(b"a", b"a%d.%d" % (segment, version)), (b"b%d" % (version % 2), b"b%d" % segment)])
        log.roll()
    if last_is_unique:
        segments = log.segments
        log.truncate_to(segments[-1].base_offset)  # end the last cleanable segment with a unique key
        append(log, [(b"z", b"only")])
        log.roll()
    append(log, [(b"a", b"active")])
    log.close()
    return path


def _clean_with_snapshots(path: Path, snapshots: Path) -> tuple[list[Seen], list[Seen], list[Path]]:
    """Clean `path`, copying the dir at every swap step; (before, after, the copies)."""
    log = open_log(path)
    before = records_of(log)
    copies: list[Path] = []

    def snapshot(step: str) -> None:
        copy = snapshots / f"{len(copies):02d}-{step.strip('.')}" / path.name
        shutil.copytree(path, copy)
        copies.append(copy)

    clean_fully(log, cleaner(swap_hook=snapshot))
    after = records_of(log)
    log.close()
    return before, after, copies


def _recover(copy: Path) -> list[Seen]:
    log = open_log(copy, clean=False)
    try:
        leftovers = [p.name for p in copy.iterdir() if p.name.endswith((SWAP_SUFFIX, ".cleaned", ".deleted"))]
        assert not leftovers
        return records_of(log)
    finally:
        log.close()


def _check_compacted_view(recovered: list[Seen], before: list[Seen], bound: int) -> None:
    """Nothing lost, nothing repeated, nothing changed: the invariants of every crash point."""
    offsets = [r[0] for r in recovered]
    assert offsets == sorted(set(offsets)), "a record repeated or out of order"
    original = {r[0]: r for r in before}
    assert all(original[r[0]] == r for r in recovered), "a record changed"
    for latest in expected_after_clean(before, bound):
        assert latest in recovered, f"lost {latest}"


@pytest.mark.parametrize("last_is_unique", [True, False])
def test_a_kill_at_every_swap_step_recovers_to_before_or_after(tmp_path: Path, last_is_unique: bool) -> None:
    path = _write(tmp_path / "data" / "t-0", last_is_unique=last_is_unique)
    before, after, copies = _clean_with_snapshots(path, tmp_path / "kills")
    bound = max(r[0] for r in before)  # the active segment holds only the last record
    assert len(copies) >= 8  # 3 to .swap, the old segments, 3 to live, done
    outcomes = []
    for copy in copies:
        recovered = _recover(copy)
        _check_compacted_view(recovered, before, bound)
        if last_is_unique:
            assert recovered in (before, after), f"{copy.parent.name}: neither the old log nor the new one"
        outcomes.append("after" if recovered == after else "before" if recovered == before else "mixed")
        # and a clean of the recovered log converges on the same result
        log = open_log(copy)
        clean_fully(log, cleaner())
        assert records_of(log) == after
        log.close()
    commit = next(i for i, c in enumerate(copies) if "swap-to-live" in c.parent.name or "delete-old" in c.parent.name)
    assert set(outcomes[:commit]) == {"before"}  # before the commit point: the old log
    assert set(outcomes[commit:]) == {"after"} or not last_is_unique  # after it: the new one


def test_a_kill_while_the_cleaned_segment_is_being_written(tmp_path: Path) -> None:
    path = _write(tmp_path / "data" / "t-0", last_is_unique=True)
    before, _, copies = _clean_with_snapshots(path, tmp_path / "kills")
    first = copies[0]  # the cleaned files complete, nothing renamed yet
    cleaned_log = next(first.glob("*.log.cleaned"))
    with cleaned_log.open("r+b") as file:  # torn: the kill came mid-write
        file.truncate(cleaned_log.stat().st_size // 2)
    (first / next(p.name for p in first.glob("*.index.cleaned"))).unlink()
    assert _recover(first) == before


def test_an_interrupted_swap_is_finished_at_startup_by_the_log_itself(tmp_path: Path) -> None:
    """No copying: the clean dies in the middle of its renames and the same dir is reopened."""
    path = _write(tmp_path / "t-0", last_is_unique=True)
    log = open_log(path)
    before = records_of(log)

    class Killed(BaseException):
        pass

    def die(step: str) -> None:
        if step.startswith("swap-to-live"):
            raise Killed(step)

    with pytest.raises(Killed):
        clean_fully(log, cleaner(swap_hook=die))
    assert list(path.glob("*.log.swap"))
    assert records_of(log) == before  # in memory the swap never happened: readers still see the old log
    abandon(log)
    recovered = _recover(path)
    _check_compacted_view(recovered, before, max(r[0] for r in before))
    assert len(recovered) < len(before)
