"""The cleaner and transactions: aborted data goes, markers go after their data and the delete
horizon, the cleaned segment's `.txnindex` keeps the aborts whose markers remain, producers' last
batches stay, and nothing past the last stable offset is touched."""

from __future__ import annotations

from pathlib import Path

import pytest

from pybroker.protocol.records.batch import iter_batches, parse_header
from pybroker.protocol.records.control import read_marker
from pybroker.protocol.records.record import Record, build_batch, decode_records
from pybroker.storage.cleaner.selection import dirty_section
from pybroker.storage.log import Log
from pybroker.storage.transaction_index import AbortedTxn
from tests.unit.storage.cleaner.helpers import NOW, clean_fully, cleaner, open_log

pytestmark = pytest.mark.usefixtures("cleaner_kind")  # each test: in-process, then worker process

RETENTION = 1000


def txn(log: Log, pid: int, seq: int, records: list[tuple[bytes, bytes]], epoch: int = 0) -> int:
    data = bytearray(build_batch([Record(i, i, k, v) for i, (k, v) in enumerate(records)], base_timestamp=NOW,
                                 producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=True))
    return log.append(data, [(0, parse_header(data))], now_ms=NOW).base_offset


def plain(log: Log, key: bytes, value: bytes) -> int:
    data = bytearray(build_batch([Record(0, 0, key, value)], base_timestamp=NOW))
    return log.append(data, [(0, parse_header(data))], now_ms=NOW).base_offset


def data(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every data record in the files (markers left out)."""
    found = []
    for segment in log.segments:
        raw = segment.read_bytes(0, segment.size)
        for pos, header in iter_batches(raw):
            if not header.is_control:
                found.extend((header.base_offset + r.offset_delta, r.key, r.value)
                             for r in decode_records(raw, pos, header))
    return found


def markers(log: Log) -> list[tuple[int, int, bool, int]]:
    """(offset, producer id, commit, records) of every control batch in the files."""
    found = []
    for segment in log.segments:
        data = segment.read_bytes(0, segment.size)
        for pos, header in iter_batches(data):
            if header.is_control:
                commit = read_marker(data, pos, header).commit if header.records_count else False
                found.append((header.base_offset, header.producer_id, commit, header.records_count))
    return found


def test_aborted_data_goes_and_its_marker_after_the_horizon(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", delete_retention_ms=RETENTION)
    txn(log, 7, 0, [(b"a", b"aborted"), (b"b", b"aborted")])   # 0-1
    plain(log, b"a", b"committed-a")                            # 2
    log.append_marker(7, 0, 0, False, now_ms=NOW)               # 3: abort
    txn(log, 8, 0, [(b"c", b"kept")])                           # 4
    log.append_marker(8, 0, 0, True, now_ms=NOW)                # 5: commit
    txn(log, 7, 2, [(b"d", b"kept")])                           # 6: producer 7's next transaction
    log.append_marker(7, 0, 0, True, now_ms=NOW)                # 7: commit
    plain(log, b"z", b"tail")                                   # 8
    log.roll(NOW)
    worker = cleaner()
    clean_fully(log, worker, NOW)
    assert data(log) == [
        (2, b"a", b"committed-a"), (4, b"c", b"kept"), (6, b"d", b"kept"), (8, b"z", b"tail")]
    # the data is gone, but the abort marker stays, and the cleaned segment still lists the
    # transaction (this clean is the one that removed its data)
    assert [(o, p, c) for o, p, c, _ in markers(log)] == [(3, 7, False), (5, 8, True), (7, 7, True)]
    assert log.aborted_transactions(0, 10) == [(7, 0)]
    # the next clean finds no data of it left: the entry goes, the marker gets its delete horizon
    clean_fully(log, worker, NOW)
    assert log.aborted_transactions(0, 10) == []
    controls = [h for s in log.segments for _, h in iter_batches(s.read_bytes(0, s.size)) if h.is_control]
    assert controls[0].has_delete_horizon and controls[0].base_timestamp == NOW + RETENTION
    assert not controls[1].has_delete_horizon  # its transaction's data is still there
    clean_fully(log, worker, NOW + RETENTION - 1)
    assert [o for o, _, _, _ in markers(log)] == [3, 5, 7]
    clean_fully(log, worker, NOW + RETENTION)  # the horizon passed: the abort marker goes
    assert [(o, p, c) for o, p, c, _ in markers(log)] == [(5, 8, True), (7, 7, True)]
    log.close()
    # producer state rebuilds the same way from the cleaned log
    reopened = open_log(tmp_path / "t-0", clean=False, delete_retention_ms=RETENTION)
    assert {p.producer_id for p in reopened.producer_state.describe()} == {7, 8}
    assert reopened.last_stable_offset == reopened.log_end_offset
    reopened.close()


def test_a_producers_last_batch_keeps_its_aborted_transaction_listed(tmp_path: Path) -> None:
    """As Kafka: the producer's last batch stays (emptied) for its sequence number, and while it is
    there the abort marker and the index entry stay too."""
    log = open_log(tmp_path / "t-0", delete_retention_ms=RETENTION)
    txn(log, 7, 0, [(b"a", b"aborted")])           # 0: producer 7's last data batch
    log.append_marker(7, 0, 0, False, now_ms=NOW)  # 1
    plain(log, b"z", b"tail")                      # 2
    log.roll(NOW)
    for _ in range(3):
        clean_fully(log, cleaner(), NOW + 10 * RETENTION)
    first = next(h for _, h in iter_batches(log.segments[0].read_bytes(0, log.segments[0].size)))
    assert (first.base_offset, first.records_count, first.producer_id) == (0, 0, 7)
    assert [o for o, _, _, _ in markers(log)] == [1]
    assert log.aborted_transactions(0, 3) == [(7, 0)]
    log.close()


def test_aborted_keys_never_shadow_committed_ones(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    plain(log, b"k", b"committed")                 # 0
    txn(log, 7, 0, [(b"k", b"aborted")])           # 1: later offset, same key
    log.append_marker(7, 0, 0, False, now_ms=NOW)  # 2
    log.roll(NOW)
    clean_fully(log, cleaner(), NOW)
    assert data(log) == [(0, b"k", b"committed")]
    log.close()


def test_the_cleaned_segment_keeps_the_index_of_aborts_whose_data_it_still_holds(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = open_log(path, segment_bytes=150)
    txn(log, 7, 0, [(b"a", b"x" * 40)])            # aborted, in the first segment
    plain(log, b"p", b"y" * 40)
    log.append_marker(7, 0, 0, False, now_ms=NOW)  # its marker, a later segment
    plain(log, b"q", b"z" * 40)
    log.roll(NOW)
    assert len(log.segments) > 2
    before = [t for s in log.segments for t in s.txn_index.entries]
    assert before == [AbortedTxn(7, 0, 2, 3)]
    clean_fully(log, cleaner(), NOW)
    assert all(not p.name.endswith((".cleaned", ".swap")) for p in path.iterdir())
    assert (0, b"a", b"x" * 40) not in data(log)
    # one clean walks all its groups with one transaction state: the group holding the marker knows the
    # transaction's data was removed by this clean, so its cleaned index still lists it
    listed = [t for s in log.segments for t in s.txn_index.entries]
    assert listed == before
    for segment in log.segments:
        assert all(segment.base_offset <= t.last_offset < segment.next_offset for t in segment.txn_index.entries)
    log.close()
    reopened = open_log(path, segment_bytes=150)
    assert [t for s in reopened.segments for t in s.txn_index.entries] == listed
    reopened.close()


def test_nothing_from_the_last_stable_offset_on_is_cleanable(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=150)
    plain(log, b"k", b"v" * 40)
    txn(log, 7, 0, [(b"k", b"w" * 40)])  # open: may yet abort
    plain(log, b"k", b"u" * 40)
    log.roll(NOW)
    section = dirty_section(log, None, NOW)
    assert section.first_uncleanable <= log.last_stable_offset == 1
    cleaner().clean(log, section.first_dirty, section.first_uncleanable, NOW)
    assert [o for o, _, _ in data(log)] == [0, 1, 2]  # the open transaction's key shadows nothing yet
    log.close()


def test_a_commit_marker_stays_while_its_data_does_even_in_another_group(tmp_path: Path) -> None:
    """Its data in one group of segments, its marker in the next: the marker must stay, or a replay of the
    data (after a crash, from an older snapshot) would find the transaction never ended."""
    path = tmp_path / "t-0"
    log = open_log(path, segment_bytes=150, delete_retention_ms=RETENTION)
    txn(log, 7, 0, [(b"a", b"x" * 40)])          # 0: committed data, its own segment
    plain(log, b"p", b"y" * 40)                   # 1
    log.append_marker(7, 0, 0, True, now_ms=NOW)  # 2: the commit, a later segment
    plain(log, b"q", b"z" * 40)                   # 3
    txn(log, 7, 1, [(b"b", b"w" * 40)])           # 4: producer 7's last data batch is elsewhere
    log.append_marker(7, 0, 0, True, now_ms=NOW)  # 5
    plain(log, b"r", b"v" * 40)                   # 6
    log.roll(NOW)
    for now in (NOW, NOW + 2 * RETENTION, NOW + 4 * RETENTION):
        clean_fully(log, cleaner(), now)
    assert [o for o, _, _, _ in markers(log)] == [2, 5]
    log.close()
    for snapshot in path.glob("*.snapshot"):
        snapshot.unlink()  # a replay from the log start
    reopened = open_log(path, clean=False, segment_bytes=150, delete_retention_ms=RETENTION)
    assert reopened.last_stable_offset == reopened.log_end_offset
    reopened.close()
