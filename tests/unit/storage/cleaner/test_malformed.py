"""Malformed records must not disable compaction (issue 11, item 8).

A delete-policy topic may hold batches whose CRC is right but whose records do not decode (stored
before produce validated records); switched to compact, the cleaner must keep such a batch byte for
byte, compact everything else, say so in one warning, count it, and never give up on the partition.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest

from pybroker.protocol.records.batch import (
    ATTRIBUTES_OFFSET,
    LAST_OFFSET_DELTA_OFFSET,
    RECORDS_COUNT_OFFSET,
    RECORDS_OFFSET,
    RecordsError,
    iter_batches,
    parse_header,
    rewrite_crc,
)
from pybroker.protocol.records.codecs import GZIP
from pybroker.protocol.records.record import Record, build_batch, decode_records
from pybroker.storage.cleaner.manager import CleanerManager, CleanerSettings
from pybroker.storage.cleaner.metrics import CLEANER_RUNS, MALFORMED_BATCHES, UNCLEANABLE_PARTITIONS
from pybroker.storage.log import Log
from tests.unit.storage.cleaner.helpers import (
    NOW,
    TOPIC_ID,
    Logs,
    append,
    clean_fully,
    cleaner,
    compact_config,
)

pytestmark = pytest.mark.usefixtures("cleaner_kind")  # each test: in-process, then worker process

Seen = tuple[int, bytes | None, bytes | None]


def _records(keys: list[bytes], value: bytes) -> list[Record]:
    return [Record(i, i, key, value) for i, key in enumerate(keys)]


def _lie_about_count(count: int) -> Callable[[bytearray], None]:
    def edit(batch: bytearray) -> None:
        struct.pack_into(">i", batch, RECORDS_COUNT_OFFSET, count)
        struct.pack_into(">i", batch, LAST_OFFSET_DELTA_OFFSET, count - 1)
    return edit


def _overrun_the_key(batch: bytearray) -> None:
    # the first record: length varint, attributes, timestamp delta, offset delta, then the key length
    batch[RECORDS_OFFSET + 4] = 0x7E  # zigzag 63: far longer than the record


def _flag_gzip(batch: bytearray) -> None:
    (attributes,) = struct.unpack_from(">h", batch, ATTRIBUTES_OFFSET)
    struct.pack_into(">h", batch, ATTRIBUTES_OFFSET, attributes | GZIP)


def _gzip_bomb(batch: bytearray) -> None:
    """Gzip of 80 MiB of zeros (over the 64 MiB cap) as the payload of a gzip-flagged batch."""
    deflater = zlib.compressobj(9, zlib.DEFLATED, 31)  # wbits 31: a gzip member
    zeros = bytes(1 << 20)
    payload = b"".join(deflater.compress(zeros) for _ in range(80)) + deflater.flush()
    del batch[RECORDS_OFFSET:]
    batch += payload
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    _flag_gzip(batch)


#: (name, how the batch's contents lie): every one keeps a valid CRC
LIES: list[tuple[str, Callable[[bytearray], None]]] = [
    ("count 1, three records", _lie_about_count(1)),
    ("count 5, three records", _lie_about_count(5)),
    ("count 2^31-1", _lie_about_count(2**31 - 1)),
    ("key overruns its record", _overrun_the_key),
    ("flagged gzip, not gzip", _flag_gzip),
    ("gzip bomb", _gzip_bomb),
]


def _lying_batch(edit: Callable[[bytearray], None]) -> bytearray:
    batch = bytearray(build_batch(_records([b"a", b"b", b"c"], b"bad"), base_timestamp=NOW))
    edit(batch)
    rewrite_crc(batch, 0)
    with pytest.raises(RecordsError):
        decode_records(batch, 0, parse_header(batch))
    return batch


def _append_raw(log: Log, batch: bytearray) -> int:
    return log.append(batch, [(0, parse_header(batch))], now_ms=NOW).base_offset


def _batches(log: Log) -> dict[int, bytes]:
    """Every batch in the log's files by base offset, as stored."""
    found: dict[int, bytes] = {}
    for segment in log.segments:
        data = segment.read_bytes(0, segment.size)
        for pos, header in iter_batches(data):
            found[header.base_offset] = data[pos : pos + header.size]
    return found


def _good_records(log: Log) -> list[Seen]:
    """The records of every batch that decodes, in file order."""
    seen: list[Seen] = []
    for raw in _batches(log).values():
        header = parse_header(raw)
        try:
            records = decode_records(raw, 0, header)
        except RecordsError:
            continue
        seen += [(header.base_offset + r.offset_delta, r.key, r.value) for r in records]
    return seen


def _fill_around(log: Log, edit: Callable[[bytearray], None]) -> int:
    """Old versions of a, b; the lying batch; new versions; all made inactive. The bad batch's offset."""
    append(log, [(b"a", b"1"), (b"b", b"1"), (b"k", b"1")])
    log.roll()
    bad = _append_raw(log, _lying_batch(edit))
    append(log, [(b"x", b"1")])
    log.roll()
    append(log, [(b"a", b"2"), (b"b", b"2")])
    log.roll()
    return bad


@pytest.mark.parametrize(("name", "edit"), LIES, ids=[name for name, _ in LIES])
def test_a_malformed_batch_survives_byte_for_byte_and_the_good_keys_are_compacted(
        tmp_path: Path, name: str, edit: Callable[[bytearray], None]) -> None:
    log = Log(tmp_path / "t-0", "t", 0, TOPIC_ID, compact_config(), clock_ms=lambda: NOW)
    try:
        bad = _fill_around(log, edit)
        stored = _batches(log)[bad]
        worker = cleaner()
        end, results = clean_fully(log, worker)
        worker.close()
        assert end == log.active_segment.base_offset
        assert _batches(log)[bad] == stored, "the malformed batch was rewritten"
        good = _good_records(log)
        assert [(k, v) for _, k, v in good] == [(b"k", b"1"), (b"x", b"1"), (b"a", b"2"), (b"b", b"2")]
        assert [m.base_offset for r in results for m in r.malformed] == [bad]
        assert sum(r.filter.malformed_kept for r in results) == 1
        # a clean of the whole log again (a lost checkpoint) recopies it again, still untouched
        again = cleaner()
        again.clean(log, 0, log.active_segment.base_offset, NOW)
        again.close()
        assert _batches(log)[bad] == stored
    finally:
        log.close()


def test_an_undecodable_batch_is_mapped_by_no_clean_yet_reported_once_even_over_several_passes(
        tmp_path: Path) -> None:
    """The map fills before the bad batch: the pass that reaches it is the one that reports it."""
    log = Log(tmp_path / "t-0", "t", 0, TOPIC_ID, compact_config(), clock_ms=lambda: NOW)
    try:
        for i in range(6):
            append(log, [(b"k%d" % i, b"old")])
        bad = _append_raw(log, _lying_batch(_lie_about_count(1)))
        for i in range(6):
            append(log, [(b"k%d" % i, b"new")])
        log.roll()
        worker = cleaner(keys=4)
        _, results = clean_fully(log, worker)
        worker.close()
        assert len(results) > 1
        assert [m.base_offset for r in results for m in r.malformed] == [bad]
        assert sorted(v for _, _, v in _good_records(log)) == [b"new"] * 6
    finally:
        log.close()


def _manager(logs: Logs) -> CleanerManager:
    settings = CleanerSettings(threads=1, dedupe_buffer_size=1 << 16, backoff_ms=10)
    manager = CleanerManager(logs, settings, clock_ms=lambda: logs.clock[0])
    manager.checkpoints.__init__(logs.dirs)  # type: ignore[misc]
    return manager


def test_the_manager_warns_once_counts_and_keeps_the_partition_cleanable(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    logs = Logs(tmp_path)
    try:
        log = logs.add("was-delete", compact_config(cleanup_policy="delete"))
        bad = _fill_around(log, _lie_about_count(1))
        stored = _batches(log)[bad]
        log.update_config(compact_config(min_cleanable_dirty_ratio=0.01))  # the AlterConfigs that switches it to compact
        manager = _manager(logs)
        counted = MALFORMED_BATCHES._value.get()
        failed = CLEANER_RUNS.labels("failed")._value.get()
        assert manager.clean_now()
        out = capsys.readouterr().out
        assert manager.uncleanable() == {}
        assert CLEANER_RUNS.labels("failed")._value.get() == failed
        assert UNCLEANABLE_PARTITIONS.labels(str(tmp_path))._value.get() == 0
        assert MALFORMED_BATCHES._value.get() == counted + 1
        warnings = [line for line in out.splitlines() if "cannot be decoded" in line]
        assert len(warnings) == 1, out
        assert "was-delete" in warnings[0] and f"offset={bad}" in warnings[0] and "reason=" in warnings[0]
        assert "Traceback" not in out
        assert _batches(log)[bad] == stored
        assert [(k, v) for _, k, v in _good_records(log)] == [(b"k", b"1"), (b"x", b"1"), (b"a", b"2"),
                                                               (b"b", b"2")]
        # still cleanable: newer versions make it dirty again and the next clean takes it
        append(log, [(b"a", b"3"), (b"b", b"3"), (b"k", b"3"), (b"x", b"3")])
        log.roll()
        append(log, [(b"a", b"4")])
        log.roll()
        assert manager.clean_now()
        assert manager.uncleanable() == {}
        assert "cannot be decoded" not in capsys.readouterr().out  # reported once, not at every clean
        assert MALFORMED_BATCHES._value.get() == counted + 1
        assert _batches(log)[bad] == stored
        assert [(k, v) for _, k, v in _good_records(log)] == [(b"b", b"3"), (b"k", b"3"), (b"x", b"3"),
                                                               (b"a", b"4")]
    finally:
        logs.close()
