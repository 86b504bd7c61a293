"""A flush that meets a file made since the last dir fsync fsyncs the partition dir; other flushes do not.

Why: a file's fsync makes its bytes durable, never its name. A `.txnindex` is made with its segment's
first abort, often long after the segment's own name was made durable, and an index rebuilt by recovery
is a new file too; a power cut before a dir fsync loses them while the recovery point already counts
what they describe as durable (`tests/integration/test_power_loss_txnindex.py` shows it on a lazy file
system). The produce path must not pay for it: a flush with no new name fsyncs no dir.

The dir fsyncs are counted by wrapping the real `fsync_dir` the log calls.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

import pybroker.storage.log as log_module
from pybroker.storage.files import fsync_dir
from pybroker.storage.log import Log
from pybroker.storage.transaction_index import TransactionIndex
from tests.unit.storage.helpers import append, batch, open_log
from tests.unit.storage.test_transactions import marker, txn_batch, txn_files


@pytest.fixture
def dir_fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The dirs the log fsyncs, in order (each one really fsynced)."""
    calls: list[Path] = []

    def counting(directory: Path) -> None:
        calls.append(Path(directory))
        fsync_dir(directory)

    monkeypatch.setattr(log_module, "fsync_dir", counting)
    return calls


def _flushed(log: Log, dir_fsyncs: list[Path], step: Callable[[], object]) -> int:
    """Run `step`, flush, and say how many dir fsyncs that flush made."""
    before = len(dir_fsyncs)
    step()
    log.flush()
    return len(dir_fsyncs) - before


def test_the_first_abort_of_an_older_segment_fsyncs_the_dir_once(tmp_path: Path, dir_fsyncs: list[Path]) -> None:
    log = open_log(tmp_path / "t-0")
    assert _flushed(log, dir_fsyncs, lambda: append(log, txn_batch(7, 0))) == 1  # the new segment's names
    assert _flushed(log, dir_fsyncs, lambda: append(log, batch())) == 0  # the produce path: no dir fsync
    assert _flushed(log, dir_fsyncs, lambda: marker(log, 7, commit=True)) == 0  # a commit makes no file
    assert not txn_files(log.dir)
    append(log, txn_batch(7, 2, epoch=0))
    recovery_point = log.recovery_point
    assert _flushed(log, dir_fsyncs, lambda: marker(log, 7, commit=False)) == 1  # the new `.txnindex`
    assert log.recovery_point > recovery_point and dir_fsyncs[-1] == log.dir
    assert [e.producer_id for e in txn_files(log.dir)[f"{0:020d}.txnindex"]] == [7]
    append(log, txn_batch(7, 0, epoch=1))
    assert _flushed(log, dir_fsyncs, lambda: marker(log, 7, commit=False, epoch=1)) == 0  # the file exists
    log.close()


def test_a_txnindex_rebuilt_at_startup_gets_its_dir_fsync(tmp_path: Path, dir_fsyncs: list[Path]) -> None:
    path = tmp_path / "t-0"
    log = open_log(path)
    append(log, txn_batch(7, 0))
    marker(log, 7, commit=False)
    log.flush()
    log.abandon()  # kill -9
    for p in path.glob("*.txnindex"):
        p.unlink()  # the cut took the file's name
    log = open_log(path, clean=False, recovery_point=log.recovery_point)  # no new segment to fsync the dir for
    assert [e.producer_id for e in txn_files(path)[f"{0:020d}.txnindex"]] == [7]  # the replay made it again
    assert _flushed(log, dir_fsyncs, lambda: append(log, batch())) == 1
    assert _flushed(log, dir_fsyncs, lambda: append(log, batch())) == 0
    log.close()


def test_a_txnindex_rebuilt_in_an_inactive_segment_is_synced_and_named(
        tmp_path: Path, dir_fsyncs: list[Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """A segment below the recovery point is not flushed by appends after it: its rebuilt `.txnindex`
    is synced and its name made durable all the same."""
    synced: list[str] = []
    real_sync = TransactionIndex.sync

    def counting_sync(index: TransactionIndex) -> None:
        synced.append(index.path.name)
        real_sync(index)

    monkeypatch.setattr(TransactionIndex, "sync", counting_sync)
    path = tmp_path / "t-0"
    log = open_log(path, segment_bytes=200)
    append(log, txn_batch(7, 0))
    marker(log, 7, commit=False)
    while len(log.segments) < 3:
        append(log, batch())
    log.flush()
    log.abandon()
    for p in path.glob("*.txnindex"):
        p.unlink()
    for p in path.glob("*.snapshot"):
        p.unlink()  # replay from the log start: every segment's `.txnindex` is written again
    log = open_log(path, clean=False, recovery_point=log.recovery_point, segment_bytes=200)
    assert list(txn_files(path)) == [f"{0:020d}.txnindex"]
    assert _flushed(log, dir_fsyncs, lambda: append(log, batch())) == 1
    assert f"{0:020d}.txnindex" in synced
    log.abandon()
    assert txn_files(path)
