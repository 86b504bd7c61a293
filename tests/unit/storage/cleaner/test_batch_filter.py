"""Which records of one batch survive a clean, and what the rewritten batch looks like."""

from __future__ import annotations

from pybroker.protocol.records.batch import crc_ok, parse_header
from pybroker.protocol.records.codecs import GZIP
from pybroker.protocol.records.record import Record, build_batch, decode_records
from pybroker.storage.cleaner.batch_filter import FilterStats, filter_batch
from pybroker.storage.cleaner.offset_map import OffsetMap

NOW = 1_700_000_000_000
RETENTION = 1000


def _batch(records: list[tuple[bytes | None, bytes | None]], base_offset: int = 10, **kwargs: object) -> bytes:
    return build_batch([Record(i, 5 * i, k, v) for i, (k, v) in enumerate(records)], base_offset=base_offset,
                       base_timestamp=NOW, **kwargs)  # type: ignore[arg-type]


def _filter(raw: bytes, table: OffsetMap, *, latest: int = 100, now: int = NOW, retain_empty: bool = False,
            stats: FilterStats | None = None) -> bytes | None:
    return filter_batch(raw, parse_header(raw), table, latest_offset=latest, now_ms=now,
                        delete_retention_ms=RETENTION, retain_empty=retain_empty, stats=stats or FilterStats())


def _map(**latest: int) -> OffsetMap:
    table = OffsetMap(1024)
    for key, offset in latest.items():
        table.put(key.encode(), offset)
    return table


def test_an_untouched_batch_is_copied_byte_for_byte() -> None:
    raw = _batch([(b"a", b"1"), (b"b", b"2")])
    assert _filter(raw, _map(a=10, b=11)) is raw


def test_superseded_records_go_and_the_batch_keeps_its_offsets_producer_and_codec() -> None:
    raw = _batch([(b"a", b"1"), (b"b", b"2"), (b"a", b"3"), (b"b", b"4")], compression=GZIP,
                 producer_id=7, producer_epoch=1, base_sequence=20)
    out = _filter(raw, _map(a=12, b=50))
    assert out is not None
    header = parse_header(out)
    assert crc_ok(out, 0, header)
    assert (header.base_offset, header.last_offset, header.records_count) == (10, 13, 1)
    assert (header.producer_id, header.producer_epoch, header.base_sequence, header.compression) == (7, 1, 20, GZIP)
    [record] = decode_records(out, 0, header)
    assert (10 + record.offset_delta, record.key, record.value) == (12, b"a", b"3")
    assert header.base_timestamp + record.timestamp_delta == NOW + 10  # its own timestamp, unchanged
    assert header.max_timestamp == NOW + 10


def test_records_past_the_mapped_part_are_kept_whatever_the_map_says() -> None:
    raw = _batch([(b"a", b"1"), (b"a", b"2"), (b"a", b"3")])
    out = _filter(raw, _map(a=50), latest=10)
    header = parse_header(out)  # type: ignore[arg-type]
    assert [10 + r.offset_delta for r in decode_records(out, 0, header)] == [11, 12]  # type: ignore[arg-type]


def test_a_batch_losing_everything_disappears_unless_it_is_a_producers_last() -> None:
    raw = _batch([(b"a", b"1")], producer_id=7, producer_epoch=0, base_sequence=3)
    assert _filter(raw, _map(a=99)) is None
    kept = _filter(raw, _map(a=99), retain_empty=True)
    assert kept is not None
    header = parse_header(kept)
    assert (header.records_count, header.base_offset, header.last_offset, header.base_sequence) == (0, 10, 10, 3)
    assert crc_ok(kept, 0, header)


def test_tombstones_get_a_horizon_then_go_once_it_passes() -> None:
    stats = FilterStats()
    raw = _batch([(b"a", None), (b"b", b"2")])
    stamped = _filter(raw, _map(a=10, b=11), stats=stats)
    assert stamped is not None and stamped is not raw
    header = parse_header(stamped)
    assert header.has_delete_horizon and header.base_timestamp == NOW + RETENTION
    assert stats.earliest_horizon_ms == NOW + RETENTION
    records = decode_records(stamped, 0, header)
    assert [header.base_timestamp + r.timestamp_delta for r in records] == [NOW, NOW + 5]  # unchanged
    assert _filter(stamped, _map(a=10, b=11), now=NOW + RETENTION - 1) is stamped  # still inside its window
    later = _filter(stamped, _map(a=10, b=11), now=NOW + RETENTION)
    header = parse_header(later)  # type: ignore[arg-type]
    assert [(r.key, r.value) for r in decode_records(later, 0, header)] == [(b"b", b"2")]  # type: ignore[arg-type]


def test_a_tombstone_not_yet_wholly_mapped_gets_no_horizon() -> None:
    raw = _batch([(b"a", None), (b"b", b"2")])
    assert _filter(raw, _map(a=10), latest=10) is raw


def test_keyless_records_in_the_mapped_part_are_dropped_and_counted() -> None:
    stats = FilterStats()
    out = _filter(_batch([(None, b"x"), (b"a", b"1")]), _map(a=11), stats=stats)
    assert stats.keyless_dropped == 1
    header = parse_header(out)  # type: ignore[arg-type]
    assert header.records_count == 1
