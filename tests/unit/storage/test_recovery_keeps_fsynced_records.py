"""Crash recovery must not cut fsynced, acknowledged records because an older batch's records lie.

A batch whose CRC is right but whose records do not match its header was written whole (the CRC
covers it): it is not a torn write. It can only come from before produce walked records. Recovery
that cuts the log there throws away every acknowledged record after it; Kafka's `LogSegment.recover`
checks only CRC and framing. Below the recovery point nothing needs re-reading at all.
"""

from __future__ import annotations

import struct
from pathlib import Path

from pybroker.protocol.records.batch import LAST_OFFSET_DELTA_OFFSET, RECORDS_COUNT_OFFSET, rewrite_crc
from tests.unit.storage.helpers import append, batch, open_log


def _lying() -> bytearray:
    raw = batch(3)
    struct.pack_into(">i", raw, RECORDS_COUNT_OFFSET, 1)
    struct.pack_into(">i", raw, LAST_OFFSET_DELTA_OFFSET, 0)
    rewrite_crc(raw, 0)
    return raw


def test_a_lying_batch_below_the_recovery_point_in_the_active_segment_costs_nothing(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    append(log, batch(2))
    append(log, _lying())
    append(log, batch(2))
    end = log.log_end_offset
    log.flush()
    log.close()
    recovered = open_log(tmp_path / "t-0", clean=False, recovery_point=end)
    try:
        assert recovered.log_end_offset == end == 5
    finally:
        recovered.close()
