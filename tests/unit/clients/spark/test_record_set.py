"""A Fetch answer's record set walked into rows: transactions, control batches, CRCs and cut-off tails."""

from __future__ import annotations

from typing import Any

import pytest

from pybroker.clients.spark.record_set import CorruptRecords, walk
from pybroker.protocol.records.batch import CRC_OFFSET, MAGIC_OFFSET
from pybroker.protocol.records.control import build_marker_batch
from pybroker.protocol.records.record import Record, build_batch
from tests.unit.clients.spark.arrow_kit import BUILDERS, decode

BASE_TS = 1_700_000_000_000
COMMITTER, ABORTER, PLAIN = 1000, 2000, -1


@pytest.fixture(params=sorted(BUILDERS))
def builder_cls(request: pytest.FixtureRequest) -> Any:
    return BUILDERS[request.param]


def _batch(base: int, count: int, producer: int = PLAIN, tag: bytes = b"v") -> bytes:
    return build_batch([Record(i, 0, None, tag) for i in range(count)], base_offset=base, base_timestamp=BASE_TS,
                       producer_id=producer, producer_epoch=0 if producer >= 0 else -1,
                       base_sequence=0 if producer >= 0 else -1, is_transactional=producer >= 0)


def _marker(base: int, producer: int, commit: bool) -> bytes:
    marker = build_marker_batch(producer_id=producer, producer_epoch=0, coordinator_epoch=0, commit=commit,
                                timestamp_ms=BASE_TS)
    marker[0:8] = base.to_bytes(8, "big")  # outside the CRC, as the log patches it
    return bytes(marker)


def _interleaved() -> bytes:
    """0-2 committed (A), 3-4 aborted (B), 5 plain, 6 A's commit, 7-8 aborted (B), 9 B's abort, 10-11 plain."""
    return b"".join([_batch(0, 3, COMMITTER, b"A"), _batch(3, 2, ABORTER, b"B"), _batch(5, 1),
                     _marker(6, COMMITTER, True), _batch(7, 2, ABORTER, b"B"), _marker(9, ABORTER, False),
                     _batch(10, 2)])


def test_read_committed_drops_aborted_transactions_and_markers(builder_cls: Any) -> None:
    rows, walked = decode(builder_cls, _interleaved(), read_committed=True, aborted=[(ABORTER, 3)])
    assert [(r[1], r[2]) for r in rows] == [(b"A", 0), (b"A", 1), (b"A", 2), (b"v", 5), (b"v", 10), (b"v", 11)]
    assert walked.position == 12


def test_after_its_abort_marker_a_producer_is_read_again(builder_cls: Any) -> None:
    record_set = _interleaved() + _batch(12, 2, ABORTER, b"B2")  # B's next transaction, not aborted
    rows, _ = decode(builder_cls, record_set, read_committed=True, aborted=[(ABORTER, 3)])
    assert [r[2] for r in rows if r[1] == b"B2"] == [12, 13]


def test_read_uncommitted_keeps_every_record_but_no_marker(builder_cls: Any) -> None:
    rows, walked = decode(builder_cls, _interleaved(), read_committed=False, aborted=[(ABORTER, 3)])
    assert [r[2] for r in rows] == [0, 1, 2, 3, 4, 5, 7, 8, 10, 11]
    assert walked.position == 12


def test_batches_before_the_position_are_skipped(builder_cls: Any) -> None:
    rows, walked = decode(builder_cls, _batch(0, 5) + _batch(5, 5), position=7)
    assert [r[2] for r in rows] == [7, 8, 9] and walked.position == 10


def test_a_cut_off_last_batch_waits_for_the_next_fetch(builder_cls: Any) -> None:
    whole = _batch(0, 4) + _batch(4, 4)
    rows, walked = decode(builder_cls, whole[:-5])
    assert [r[2] for r in rows] == [0, 1, 2, 3] and walked.position == 4 and walked.batches == 1


def test_an_empty_batch_moves_the_position(builder_cls: Any) -> None:
    empty = build_batch([], base_offset=0, last_offset_delta=4, base_timestamp=BASE_TS)
    rows, walked = decode(builder_cls, empty + _batch(5, 1))
    assert [r[2] for r in rows] == [5] and walked.position == 6


def test_a_reading_stops_at_the_end_of_the_range(builder_cls: Any) -> None:
    rows, walked = decode(builder_cls, _batch(0, 5) + _batch(5, 5) + _batch(10, 5), end=7)
    assert [r[2] for r in rows] == [0, 1, 2, 3, 4, 5, 6] and walked.position == 10


def test_a_bad_crc_names_partition_and_offset(builder_cls: Any) -> None:
    bad = bytearray(_batch(0, 2) + _batch(2, 3))
    bad[len(_batch(0, 2)) + CRC_OFFSET] ^= 0xFF
    with pytest.raises(CorruptRecords, match=r"events-3 batch at offset 2: CRC-32C mismatch"):
        decode(builder_cls, bytes(bad))
    rows, _ = decode(builder_cls, bytes(bad), check_crcs=False)  # kafka.check.crcs=false reads it anyway
    assert len(rows) == 5


def test_an_old_message_format_is_refused_with_a_reason(builder_cls: Any) -> None:
    old = bytearray(_batch(0, 2))
    old[MAGIC_OFFSET] = 1
    with pytest.raises(CorruptRecords, match="record format v1"):
        decode(builder_cls, bytes(old), check_crcs=False)


def test_records_that_do_not_fill_the_batch_are_refused_and_nothing_is_added(builder_cls: Any) -> None:
    good = _batch(0, 3)
    bad = bytearray(build_batch([Record(0, 0, b"k", b"v"), Record(1, 0, b"k", b"v")], base_offset=3,
                                base_timestamp=BASE_TS))
    bad[57:61] = (3).to_bytes(4, "big")  # records_count 3, but two records are there
    builder = builder_cls(False)
    with pytest.raises(CorruptRecords, match=r"events-3 batch at offset 3: "):
        walk(good + bytes(bad), builder, name="events-3", position=0, end=100, read_committed=False,
             check_crcs=False)
    assert builder.rows == 3  # the good batch is in, nothing of the bad one
