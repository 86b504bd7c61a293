"""Idempotent producers: duplicates, sequence gaps, fencing, and state that survives reopening."""

from __future__ import annotations

from pathlib import Path

import pytest

from pybroker.protocol.errors import ErrorCode
from pybroker.storage.errors import ProducerStateError
from tests.unit.storage.helpers import append, batch, open_log


def test_duplicate_gets_the_original_offsets_and_writes_nothing(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    first = append(log, batch(3, producer=(9, 0, 0)))
    append(log, batch(2, producer=(9, 0, 3)))
    size = log.size_bytes
    again = append(log, batch(3, producer=(9, 0, 0)))
    assert again.duplicate and (again.base_offset, again.last_offset) == (first.base_offset, first.last_offset)
    assert log.size_bytes == size and log.log_end_offset == 5
    log.close()


@pytest.mark.parametrize(("producer", "code"), [
    ((9, 0, 7), ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER),   # gap
    ((9, 1, 5), ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER),   # new epoch not starting at 0
])
def test_sequence_rules(tmp_path: Path, producer: tuple[int, int, int], code: int) -> None:
    log = open_log(tmp_path / "t-0")
    append(log, batch(3, producer=(9, 0, 0)))
    with pytest.raises(ProducerStateError) as info:
        append(log, batch(1, producer=producer))
    assert info.value.error_code == code
    log.close()


def test_older_epoch_is_fenced_and_new_epoch_restarts_at_zero(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    append(log, batch(1, producer=(9, 2, 0)))
    with pytest.raises(ProducerStateError) as info:
        append(log, batch(1, producer=(9, 1, 1)))
    assert info.value.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert append(log, batch(1, producer=(9, 3, 0))).base_offset == 1
    log.close()


def test_sequence_wraps_at_int32(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    append(log, batch(2, producer=(9, 0, 2**31 - 2)))
    assert append(log, batch(1, producer=(9, 0, 0))).base_offset == 2
    log.close()


@pytest.mark.parametrize("clean", [True, False])
def test_state_survives_reopen(tmp_path: Path, clean: bool) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=400)
    for seq in range(0, 30, 3):
        append(log, batch(3, producer=(9, 0, seq)))
    if clean:
        log.flush()
        log.write_producer_snapshot()
    log.close()
    log = open_log(tmp_path / "t-0", clean=clean, segment_bytes=400)
    assert append(log, batch(3, producer=(9, 0, 27))).duplicate
    with pytest.raises(ProducerStateError):
        append(log, batch(1, producer=(9, 0, 31)))
    assert append(log, batch(1, producer=(9, 0, 30))).base_offset == 30
    log.close()
