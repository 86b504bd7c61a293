"""The benchmark's disk settling: a settled disk lets the next phase start at once, an unsettled one is
waited for only as long as the timeout and then said so; and its fleet counts acks per partition without
a callback per ack, from what was sent round-robin less the failures reported."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from bench import disk
from bench.fleet import acked_per_partition

MEMINFO = "MemTotal:       16000000 kB\nDirty:          {dirty} kB\nWriteback:      {writeback} kB\n"


@pytest.fixture(autouse=True)
def no_real_sync(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(disk.os, "sync", lambda: None)  # the machine's own page cache is not the test's


def _meminfo(tmp_path: Path, dirty: int, writeback: int) -> Path:
    path = tmp_path / "meminfo"
    path.write_text(MEMINFO.format(dirty=dirty, writeback=writeback))
    return path


def test_unwritten_bytes_are_dirty_plus_writeback(tmp_path: Path) -> None:
    assert disk.unwritten_bytes(_meminfo(tmp_path, 3, 4)) == 7 * 1024
    assert disk.unwritten_bytes(tmp_path / "missing") is None


def test_a_settled_disk_returns_at_once(tmp_path: Path) -> None:
    started = time.monotonic()
    assert disk.settle_disk(threshold=64 * 2**20, timeout_s=30, meminfo=_meminfo(tmp_path, 1000, 200)) == ""
    assert time.monotonic() - started < 15  # at once, not after the 30 s timeout (slack for a busy machine)


def test_an_unsettled_disk_is_waited_for_until_the_timeout_and_said_so(tmp_path: Path) -> None:
    started = time.monotonic()
    note = disk.settle_disk(threshold=64 * 2**20, timeout_s=0.2, meminfo=_meminfo(tmp_path, 100_000, 50_000))
    assert 0.2 <= time.monotonic() - started < 15  # until the timeout, and not on (slack for a busy machine)
    assert "not settled" in note and "154 MB" in note


def test_without_meminfo_there_is_nothing_to_wait_for(tmp_path: Path) -> None:
    assert disk.settle_disk(timeout_s=30, meminfo=tmp_path / "missing") == ""


def test_write_bandwidth_leaves_nothing_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(disk, "settle_disk", lambda **_: "")
    rate = disk.write_bandwidth(tmp_path, seconds=0.05, chunk=4096)
    assert rate > 0
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("partitions", "queued", "failed", "acked"), [
    ([0], [5], {}, {0: 5}),
    ([3, 5, 7], [3, 3, 2], {}, {3: 3, 5: 3, 7: 2}),
    ([3, 5, 7], [3, 3, 2], {5: 1, 7: 2}, {3: 3, 5: 2}),
    ([0, 1], [0, 0], {}, {}),
])
def test_acks_per_partition_are_queued_less_failed(partitions: list[int], queued: list[int], failed: dict[int, int],
                                                   acked: dict[int, int]) -> None:
    assert acked_per_partition(partitions, queued, failed) == acked
    assert sum(acked.values()) == sum(queued) - sum(failed.values())


def test_write_bandwidth_over_many_files_leaves_nothing_behind(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(disk, "settle_disk", lambda **_: "")
    rate = disk.write_bandwidth(tmp_path, seconds=0.05, chunk=4096, files=16)
    assert rate > 0
    assert list(tmp_path.iterdir()) == []
