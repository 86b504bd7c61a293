"""Transactions in a partition: open transactions, markers, the LSO, `.txnindex`, snapshots, recovery."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.records.batch import iter_batches
from pybroker.protocol.records.record import Record, build_batch
from pybroker.storage.errors import ProducerStateError
from pybroker.storage.log import Log
from pybroker.storage.producer_snapshot import decode_snapshot
from pybroker.storage.transaction_index import ENTRY_SIZE, AbortedTxn, decode_entries
from tests.unit.storage.helpers import NOW, append, open_log


def txn_batch(pid: int, seq: int, n: int = 2, epoch: int = 0, *, transactional: bool = True) -> bytearray:
    records = [Record(i, i, b"k", b"v%d" % i) for i in range(n)]
    return bytearray(build_batch(records, base_timestamp=NOW, producer_id=pid, producer_epoch=epoch,
                                 base_sequence=seq, is_transactional=transactional))


def marker(log: Log, pid: int, commit: bool, epoch: int = 0, coordinator_epoch: int = 0) -> int:
    return log.append_marker(pid, epoch, coordinator_epoch, commit, now_ms=NOW).base_offset


def txn_files(path: Path) -> dict[str, list[AbortedTxn]]:
    return {p.name: decode_entries(p.read_bytes()) for p in sorted(path.glob("*.txnindex"))}


def test_open_transaction_holds_the_lso_until_its_marker(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    append(log, bytearray(build_batch([Record(0, 0, b"k", b"v")], base_timestamp=NOW)))
    assert log.last_stable_offset == 1
    append(log, txn_batch(7, 0))          # offsets 1-2, transaction of producer 7 opens at 1
    append(log, txn_batch(8, 0))          # 3-4, producer 8 at 3
    assert log.high_watermark == 5 and log.last_stable_offset == 1
    assert marker(log, 7, commit=True) == 5
    assert log.last_stable_offset == 3
    assert marker(log, 8, commit=False) == 6
    assert log.last_stable_offset == 7 == log.high_watermark
    assert log.aborted_transactions(0, 7) == [(8, 3)]
    assert txn_files(tmp_path / "t-0") == {f"{0:020d}.txnindex": [AbortedTxn(8, 3, 6, 7)]}
    log.close()


def test_abort_records_the_lso_of_the_other_open_transactions(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    append(log, txn_batch(7, 0))          # 0-1
    append(log, txn_batch(8, 0))          # 2-3
    marker(log, 8, commit=False)          # 4: producer 7 still open at 0
    assert log.segments[-1].txn_index.entries == [AbortedTxn(8, 2, 4, 0)]
    assert log.last_stable_offset == 0
    log.close()


def test_marker_without_open_transaction_is_written_and_ends_nothing(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    assert marker(log, 5, commit=False) == 0
    assert log.log_end_offset == 1 and log.last_stable_offset == 1
    assert log.aborted_transactions(0, 1) == []
    assert not list((tmp_path / "t-0").glob("*.txnindex"))  # created only when needed
    log.close()


def test_marker_fencing(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    append(log, txn_batch(7, 0, epoch=3))
    marker(log, 7, commit=True, epoch=3, coordinator_epoch=5)
    end = log.log_end_offset
    with pytest.raises(ProducerStateError) as info:
        marker(log, 7, commit=True, epoch=2, coordinator_epoch=5)
    assert info.value.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    with pytest.raises(ProducerStateError) as info:
        marker(log, 7, commit=True, epoch=3, coordinator_epoch=4)
    assert info.value.error_code == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    assert log.log_end_offset == end
    marker(log, 7, commit=False, epoch=4, coordinator_epoch=5)  # a bumped epoch (transactions v2) is fine
    (info_row,) = log.producer_state.describe()
    assert (info_row.producer_id, info_row.producer_epoch, info_row.coordinator_epoch,
            info_row.current_txn_start_offset) == (7, 4, 5, -1)
    log.close()


def test_non_transactional_write_inside_a_transaction_is_refused(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    append(log, txn_batch(7, 0))
    with pytest.raises(ProducerStateError) as info:
        append(log, txn_batch(7, 2, transactional=False))
    assert info.value.error_code == ErrorCode.INVALID_TXN_STATE
    log.close()


def test_new_epoch_after_a_marker_starts_at_sequence_zero(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    append(log, txn_batch(7, 0))
    marker(log, 7, commit=True, epoch=1)   # v2: the coordinator bumped the epoch
    append(log, txn_batch(7, 0, epoch=1))  # the producer goes on at the new epoch from 0
    assert log.producer_state.describe()[0].current_txn_start_offset == 3
    log.close()


def test_describe_reports_the_open_transaction(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    append(log, txn_batch(7, 0, n=3, epoch=2))
    (row,) = log.producer_state.describe()
    assert row == (7, 2, 2, NOW + 2, -1, 0)
    log.close()


def test_snapshot_carries_open_transactions_across_a_clean_restart(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = open_log(path)
    append(log, txn_batch(7, 0))
    append(log, txn_batch(8, 0))
    marker(log, 8, commit=False)
    log.close()
    (snapshot,) = path.glob("*.snapshot")
    rows = {row.producer_id: row for row in decode_snapshot(snapshot.read_bytes())}
    assert rows[7].current_txn_first_offset == 0 and rows[8].current_txn_first_offset == -1
    log = open_log(path)
    assert log.last_stable_offset == 0
    assert log.aborted_transactions(0, 10) == [(8, 2)]
    marker(log, 7, commit=True)
    assert log.last_stable_offset == log.log_end_offset == 6
    log.close()


def test_crash_mid_transaction_keeps_the_lso_and_rebuilds_the_index(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = open_log(path, segment_bytes=200)
    append(log, txn_batch(7, 0))         # 0-1
    append(log, txn_batch(8, 0))         # 2-3 (segments roll: snapshots at each roll)
    marker(log, 8, commit=False)         # 4
    append(log, txn_batch(9, 0))         # 5-6
    marker(log, 9, commit=True)          # 7
    append(log, txn_batch(8, 0, epoch=1))  # 8-9: producer 8 opens another one
    log.flush()
    segments = len(log.segments)
    assert segments > 2
    log.abandon()  # kill -9: no snapshot, no index trim
    for p in path.glob("*.txnindex"):
        p.unlink()  # the crash also lost the aborted-transaction index
    for p in path.glob("*.snapshot"):
        os.truncate(p, 10)  # and tore every snapshot
    log = open_log(path, clean=False, recovery_point=0, segment_bytes=200)
    assert log.last_stable_offset == 0
    assert log.aborted_transactions(0, 100) == [(8, 2)]
    marker(log, 7, commit=False)
    assert log.last_stable_offset == 8
    assert log.aborted_transactions(0, 100) == [(8, 2), (7, 0)]
    log.close()


def test_torn_tail_removes_the_marker_and_reopens_the_transaction(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = open_log(path)
    append(log, txn_batch(7, 0))
    marker(log, 7, commit=False)
    log.abandon()
    data = (path / f"{0:020d}.log").read_bytes()
    os.truncate(path / f"{0:020d}.log", len(data) - 5)  # the marker was torn
    log = open_log(path, clean=False)
    assert log.log_end_offset == 2 and log.last_stable_offset == 0
    assert log.aborted_transactions(0, 10) == []
    assert txn_files(path) == {f"{0:020d}.txnindex": []}
    log.close()


def test_truncate_to_drops_index_entries_and_reopens_transactions(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = open_log(path)
    append(log, txn_batch(7, 0))   # 0-1
    marker(log, 7, commit=False)   # 2
    append(log, txn_batch(8, 0))   # 3-4
    marker(log, 8, commit=False)   # 5
    log.truncate_to(5)
    assert log.aborted_transactions(0, 10) == [(7, 0)]
    assert log.last_stable_offset == 3
    log.truncate_to(2)
    assert log.aborted_transactions(0, 10) == []
    assert log.last_stable_offset == 0
    log.close()


def test_aborted_transactions_follow_kafkas_bounds(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    append(log, txn_batch(7, 0))   # 0-1
    marker(log, 7, commit=False)   # 2
    append(log, txn_batch(8, 0))   # 3-4
    marker(log, 8, commit=False)   # 5
    assert log.aborted_transactions(0, 1) == [(7, 0)]
    assert log.aborted_transactions(3, 6) == [(8, 3)]      # 7's marker is before the fetch offset
    assert log.aborted_transactions(2, 3) == [(7, 0)]      # 8 starts at the upper bound: not included
    log.close()


def test_retention_and_deletion_take_the_index_along(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = open_log(path, segment_bytes=150, retention_ms=1, file_delete_delay_ms=0)
    append(log, txn_batch(7, 0))
    marker(log, 7, commit=False)
    append(log, txn_batch(8, 0), now=NOW)
    log.roll(NOW)
    assert txn_files(path)
    log.delete_old_segments(NOW + 10**9)
    log.release_retired()
    assert not txn_files(path)
    log.close()


def test_index_damage_is_cut_to_its_valid_prefix(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = open_log(path)
    append(log, txn_batch(7, 0))
    marker(log, 7, commit=False)
    log.close()
    index = path / f"{0:020d}.txnindex"
    with index.open("ab") as f:
        f.write(b"\x00" * 7)  # a torn append
    log = open_log(path)
    assert log.aborted_transactions(0, 10) == [(7, 0)]
    assert index.stat().st_size == ENTRY_SIZE
    log.close()


def test_a_replayed_commit_closes_the_transaction(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = open_log(path)
    append(log, txn_batch(7, 0))
    marker(log, 7, commit=True)
    log.abandon()
    log = open_log(path, clean=False)
    data = (path / f"{0:020d}.log").read_bytes()
    assert [h.is_control for _, h in iter_batches(data)] == [False, True]
    assert log.last_stable_offset == 3 and log.producer_state.describe()[0].current_txn_start_offset == -1
    log.close()


def test_delete_records_moves_the_lso_and_retention_takes_the_index(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = open_log(path, segment_bytes=150, file_delete_delay_ms=0)
    append(log, txn_batch(7, 0))   # 0-1, aborted
    marker(log, 7, commit=False)   # 2
    append(log, txn_batch(8, 0))   # 3-4, left open
    append(log, txn_batch(9, 0))   # 5-6, left open
    log.roll(NOW)
    assert txn_files(path) and log.last_stable_offset == 3
    log.delete_records_before(4)  # past the start of producer 8's open transaction
    assert log.last_stable_offset == 4
    log.delete_old_segments(NOW)
    log.release_retired()
    assert all(s.base_offset >= 3 for s in log.segments)
    assert not txn_files(path)  # the abort's marker segment went with the records before the new start
    marker(log, 8, commit=True)
    assert log.last_stable_offset == 5
    log.close()
