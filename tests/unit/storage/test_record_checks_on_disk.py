"""A batch whose records do not match its header, already on disk: check-log names it, recovery cuts it.

Such batches got in before the produce path walked records (or were written by something else);
recovery treats one above the recovery point like a torn write, and leaves fsynced segments alone.
"""

from __future__ import annotations

import struct
from pathlib import Path

from pybroker.protocol.records import batch as layout
from pybroker.protocol.records.batch import rewrite_crc
from pybroker.storage.verify import check_log_dir
from tests.unit.storage.helpers import append, batch, log_file, open_log

SMALL = {"segment_bytes": 600, "index_interval_bytes": 100}


def _lying(records: int = 3, claimed: int = 1) -> bytearray:
    """A batch of `records` records whose header claims `claimed`, with a CRC that matches the lie."""
    raw = batch(records)
    struct.pack_into(">i", raw, layout.RECORDS_COUNT_OFFSET, claimed)
    struct.pack_into(">i", raw, layout.LAST_OFFSET_DELTA_OFFSET, claimed - 1)
    rewrite_crc(raw, 0)
    return raw


def test_check_log_reports_a_lying_batch(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    append(log, batch(2))
    append(log, _lying())
    append(log, batch(2))
    log.flush()
    log.close()
    report = check_log_dir(tmp_path)
    assert [p.message for p in report.problems] == [
        "batch at offset 2: malformed records: records_count 1 but the batch holds 3 records"]
    assert report.problems[0].position == len(batch(2))


def test_check_log_reports_nothing_on_good_logs(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    for n in (1, 2, 3):
        append(log, batch(n))
    log.close()
    assert check_log_dir(tmp_path).problems == []


def test_recovery_finds_a_lying_batch_and_keeps_what_follows(tmp_path: Path) -> None:
    """Found, not cut: the CRC shows the batch was written whole, and the records after it were
    acknowledged; cutting there would lose them (Kafka's recovery checks CRC and framing only)."""
    log = open_log(tmp_path / "t-0")
    append(log, batch(2))
    append(log, _lying(claimed=5))
    append(log, batch(2))
    end = log.log_end_offset
    size = log_file(tmp_path / "t-0").stat().st_size
    log.flush()
    log.close()
    recovered = open_log(tmp_path / "t-0", clean=False)
    assert recovered.log_end_offset == end
    assert recovered.load_stats.malformed_batches == 1 and recovered.load_stats.bytes_truncated == 0
    assert log_file(tmp_path / "t-0").stat().st_size == size
    recovered.close()


def test_recovery_trusts_segments_below_the_recovery_point(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", **SMALL)
    append(log, _lying())  # offset 0, in the first segment
    while len(log.segments) < 3:
        append(log, batch(2))
    end = log.log_end_offset
    log.flush()
    log.close()
    recovered = open_log(tmp_path / "t-0", clean=False, recovery_point=end - 1, **SMALL)
    assert recovered.log_end_offset == end  # the lie below the recovery point was not re-read
    recovered.close()
