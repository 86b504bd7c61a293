"""Any byte mutation of a valid batch is either refused or stored exactly as produced.

Mutations are tried twice: with the CRC left as it is (nearly always refused by the CRC) and with the
CRC recomputed after the change, so they reach the header rules and the record walk. A batch that is
accepted is appended to a real `Log` and read back: the same bytes (offsets aside), exactly
`records_count` records by our decoder, and by kafka-python's (an independent reader).
"""

from __future__ import annotations

import contextlib
import tempfile
import uuid
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch

from pybroker.protocol.records import batch as layout
from pybroker.protocol.records.batch import RecordsError, parse_header, rewrite_crc
from pybroker.protocol.records.codecs import GZIP, LZ4, NONE, SNAPPY, ZSTD
from pybroker.protocol.records.record import Record, build_batch, decode_records
from pybroker.protocol.records.validate import validate_produce_records
from pybroker.storage.log import Log
from pybroker.storage.log_config import LogConfig

NOW = 1_700_000_000_000
ORIGINALS = {
    codec: build_batch([Record(i, i, b"key-%d" % i if i % 2 else None, b"value" * i, [("h", b"x")] if i else [])
                        for i in range(4)], base_timestamp=NOW, compression=codec)
    for codec in (NONE, GZIP, SNAPPY, LZ4, ZSTD)
}


def _store_and_read_back(raw: bytearray) -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        log = Log(Path(tmp) / "t-0", "t", 0, uuid.UUID(int=1), LogConfig(), clock_ms=lambda: NOW)
        try:
            log.append(raw, [(0, parse_header(raw))], now_ms=NOW)
            log.flush()
            region = log.read(0, 1 << 20, max_offset=log.log_end_offset).region
            assert region is not None
            return region.read_bytes()
        finally:
            log.close()


mutation = st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=3)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(ORIGINALS)), mutation, st.booleans())
def test_any_mutation_is_refused_or_stored_exactly(codec: int, edits: list[tuple[int, int]], fix_crc: bool) -> None:
    raw = bytearray(ORIGINALS[codec])
    for position, byte in edits:
        raw[position % len(raw)] = byte
    if fix_crc:  # unless the mutated length no longer fits: then the batch stays as mutated
        with contextlib.suppress(RecordsError):
            rewrite_crc(raw, 0)
    produced = bytes(raw)
    try:
        validated = validate_produce_records(raw, max_batch_bytes=1 << 20, allow_zstd=True)
    except RecordsError:
        return
    header = validated.batches[0][1]
    stored = _store_and_read_back(raw)
    assert len(stored) == len(produced)
    # the broker patches only base_offset (still 0 here) and partition_leader_epoch, outside the CRC
    assert stored[layout.MAGIC_OFFSET :] == produced[layout.MAGIC_OFFSET :]
    assert stored[: layout.PARTITION_LEADER_EPOCH_OFFSET] == produced[: layout.PARTITION_LEADER_EPOCH_OFFSET]
    ours = decode_records(stored, 0, parse_header(stored))
    assert len(ours) == header.records_count == validated.record_count
    theirs = DefaultRecordBatch(bytearray(stored))
    assert theirs.validate_crc()
    assert sum(1 for _ in theirs) == header.records_count
