"""Idempotent producers: duplicates, sequence gaps, fencing, and state that survives reopening."""

from __future__ import annotations

import struct
from pathlib import Path

import crc32c
import pytest

from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.records.batch import parse_header
from pybroker.storage.errors import ProducerStateError
from pybroker.storage.producer_snapshot import decode_snapshot
from tests.unit.storage.helpers import NOW, append, batch, open_log


def test_duplicate_gets_the_original_offsets_and_writes_nothing(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    first = append(log, batch(3, producer=(9, 0, 0)))
    append(log, batch(2, producer=(9, 0, 3)))
    size = log.size_bytes
    again = append(log, batch(3, producer=(9, 0, 0)))
    assert again.duplicate and (again.base_offset, again.last_offset) == (first.base_offset, first.last_offset)
    assert log.size_bytes == size and log.log_end_offset == 5
    log.close()


def test_only_the_last_five_batches_are_remembered(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    for seq in range(6):
        append(log, batch(1, producer=(9, 0, seq)))
    assert append(log, batch(1, producer=(9, 0, 1))).duplicate  # the second-oldest is still cached
    with pytest.raises(ProducerStateError) as info:
        append(log, batch(1, producer=(9, 0, 0)))  # evicted: now merely out of order
    assert info.value.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    log.close()


@pytest.mark.parametrize(("producer", "code"), [
    ((9, 0, 7), ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER),  # gap
    ((9, 0, 2), ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER),  # overlaps, not a cached batch
    ((9, 1, 5), ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER),  # new epoch not starting at 0
])
def test_sequence_rules(tmp_path: Path, producer: tuple[int, int, int], code: int) -> None:
    log = open_log(tmp_path / "t-0")
    append(log, batch(3, producer=(9, 0, 0)))
    size = log.size_bytes
    with pytest.raises(ProducerStateError) as info:
        append(log, batch(1, producer=producer))
    assert info.value.error_code == code and log.size_bytes == size
    log.close()


def test_older_epoch_is_fenced_and_new_epoch_restarts_at_zero(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    append(log, batch(1, producer=(9, 2, 0)))
    with pytest.raises(ProducerStateError) as info:
        append(log, batch(1, producer=(9, 1, 1)))
    assert info.value.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert append(log, batch(1, producer=(9, 3, 0))).base_offset == 1
    assert append(log, batch(1, producer=(9, 3, 1))).base_offset == 2
    log.close()


def test_unknown_producer_may_start_anywhere_and_sequences_wrap(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    append(log, batch(2, producer=(9, 0, 2**31 - 2)))  # unknown producer: any sequence (Kafka 4)
    assert append(log, batch(1, producer=(9, 0, 0))).base_offset == 2  # wrapped
    assert append(log, batch(1, producer=(4, 0, 0))).base_offset == 3  # producers are independent
    log.close()


def test_several_batches_in_one_append_are_checked_against_each_other(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    append(log, batch(1, producer=(9, 0, 0)))
    good = batch(2, producer=(9, 0, 1)) + batch(2, producer=(9, 0, 3))
    result = log.append(good, [(0, parse_header(good)), (len(good) // 2, parse_header(good, len(good) // 2))],
                        now_ms=NOW)
    assert (result.base_offset, result.last_offset) == (1, 4)
    bad = batch(2, producer=(9, 0, 5)) + batch(2, producer=(9, 0, 8))
    with pytest.raises(ProducerStateError):
        log.append(bad, [(0, parse_header(bad)), (len(bad) // 2, parse_header(bad, len(bad) // 2))], now_ms=NOW)
    assert log.log_end_offset == 5
    log.close()


@pytest.mark.parametrize("clean", [True, False])
def test_state_survives_reopen(tmp_path: Path, clean: bool) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=400)
    for seq in range(0, 30, 3):
        append(log, batch(3, producer=(9, 1, seq)))
    if clean:
        log.flush()
        log.close()
    else:  # a crash: nothing of the close runs (release the handles without snapshot or trim)
        for segment in log.segments:
            segment.release()
    log = open_log(tmp_path / "t-0", clean=clean, segment_bytes=400)
    for seq in (27, 24, 18):  # the last five batches are duplicates, wherever the snapshot was taken
        assert append(log, batch(3, producer=(9, 1, seq))).duplicate
    with pytest.raises(ProducerStateError):
        append(log, batch(1, producer=(9, 1, 31)))
    with pytest.raises(ProducerStateError):
        append(log, batch(1, producer=(9, 0, 30)))  # an older epoch is still fenced
    assert append(log, batch(1, producer=(9, 1, 30))).base_offset == 30
    log.close()


def test_snapshots_use_kafkas_layout(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    append(log, batch(3, producer=(9, 2, 0)))
    append(log, batch(2, producer=(9, 2, 3)))
    log.close()
    data = (tmp_path / "t-0" / "00000000000000000005.snapshot").read_bytes()
    version, crc, count = struct.unpack_from(">hIi", data)
    assert version == 1 and crc == crc32c.crc32c(data[6:]) and count == 2
    rows = list(struct.iter_unpack(">qhiqiqiq", data[10:]))
    # oldest cached batch first; the last row is the one Kafka itself would write
    assert rows[-1] == (9, 2, 4, 4, 1, NOW + 1, -1, -1)
    assert rows[0][:5] == (9, 2, 2, 2, 2)
    assert [e.producer_id for e in decode_snapshot(data)] == [9, 9]


def test_a_corrupt_snapshot_is_ignored_and_the_log_replayed(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    append(log, batch(3, producer=(9, 0, 0)))
    log.close()
    snapshot = tmp_path / "t-0" / "00000000000000000003.snapshot"
    snapshot.write_bytes(snapshot.read_bytes()[:-1] + b"\x01")
    log = open_log(tmp_path / "t-0")
    assert not snapshot.exists()
    assert append(log, batch(3, producer=(9, 0, 0))).duplicate
    log.close()


def test_idle_producers_expire(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    append(log, batch(1, producer=(9, 0, 0), ts=NOW - 2 * 86_400_000))
    append(log, batch(1, producer=(4, 0, 0)))
    log.close()
    log = open_log(tmp_path / "t-0")
    assert sorted(log.producer_state.producers) == [4]
    log.close()


def _snapshots(directory: Path) -> list[int]:
    return sorted(int(p.name.split(".")[0]) for p in directory.glob("*.snapshot"))


def test_pruning_keeps_the_newest_durable_snapshot_until_a_flush_makes_a_newer_one_durable(tmp_path: Path) -> None:
    """Rolls write their snapshots without fsync (the produce path); until a flush fsyncs them, a power cut
    could leave them empty, so the older snapshot known durable must stay to start from."""
    log = open_log(tmp_path / "t-0")
    append(log, batch(1, producer=(9, 0, 0)))
    log.close()  # a clean stop: a durable snapshot at 1
    log = open_log(tmp_path / "t-0")
    for seq in range(1, 6):
        append(log, batch(1, producer=(9, 0, seq)))
        log.roll(NOW)  # snapshots at 2..6, none fsynced
    assert _snapshots(tmp_path / "t-0") == [1, 4, 5, 6]  # the newest three, and the durable one
    log.flush()  # fsyncs the rolls' snapshots before its recovery point passes them
    append(log, batch(1, producer=(9, 0, 6)))
    log.roll(NOW)
    assert _snapshots(tmp_path / "t-0") == [5, 6, 7]
    log.close()
    log = open_log(tmp_path / "t-0")
    assert append(log, batch(1, producer=(9, 0, 6))).duplicate
    log.close()
