"""Property: compacting a log with transactions never changes what a read_committed consumer ends up
with (the latest committed value of each key), whatever mix of plain writes, transactions committed,
aborted or left open, rolls and cleans at any time (before or after the delete horizon) it holds; and
a replay of the cleaned log from its start after a crash finds no transaction left hanging."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pybroker.protocol.records.batch import iter_batches, parse_header
from pybroker.protocol.records.control import read_marker
from pybroker.protocol.records.record import Record, build_batch, decode_records
from pybroker.storage.cleaner.selection import dirty_section
from pybroker.storage.log import Log
from tests.unit.storage.cleaner.helpers import NOW, cleaner, open_log

pytestmark = pytest.mark.usefixtures("cleaner_kind")  # each test: in-process, then worker process

RETENTION = 1000
KEYS = [b"a", b"b", b"c", b"d"]
PIDS = (1, 2)

OPS = st.one_of(
    st.tuples(st.just("plain"), st.sampled_from(KEYS)),
    st.tuples(st.just("txn"), st.sampled_from(PIDS), st.lists(st.sampled_from(KEYS), min_size=1, max_size=3)),
    st.tuples(st.just("end"), st.sampled_from(PIDS), st.booleans()),
    st.tuples(st.just("roll")),
    st.tuples(st.just("clean"), st.sampled_from([0, RETENTION, 10 * RETENTION])),
)


def consumer_view(log: Log) -> dict[bytes, bytes]:
    """The latest value per key a read_committed consumer gets, read as Kafka's consumer reads: batches
    up to the LSO, aborted transactions from each fetch's list, skipped until their ABORT marker."""
    latest: dict[bytes, bytes] = {}
    offset, lso = log.log_start_offset, log.last_stable_offset
    pending: list[tuple[int, int]] = []  # (first offset, producer id) from fetches, not yet reached
    aborting: set[int] = set()
    while offset < lso:
        result = log.read(offset, 1 << 16, max_offset=lso, want_upper_bound=True)
        if result.region is None:
            break
        pending.extend((first, pid) for pid, first in log.aborted_transactions(offset, result.upper_bound))
        pending.sort()
        data = result.region.read_bytes()
        for pos, header in iter_batches(data):
            while pending and pending[0][0] <= header.base_offset:
                aborting.add(pending.pop(0)[1])
            if header.is_control:
                if header.records_count and not read_marker(data, pos, header).commit:
                    aborting.discard(header.producer_id)
            elif not (header.is_transactional and header.producer_id in aborting):
                for record in decode_records(data, pos, header):
                    if header.base_offset + record.offset_delta >= offset and record.key is not None:
                        assert record.value is not None
                        latest[record.key] = record.value
            offset = header.next_offset
    return latest


def clean(log: Log, now: int) -> None:
    section = dirty_section(log, None, now)
    if section.first_uncleanable > 0:
        cleaner().clean(log, section.first_dirty, section.first_uncleanable, now)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(OPS, max_size=40))
def test_cleaning_keeps_the_read_committed_view(ops: list[tuple]) -> None:  # type: ignore[type-arg]
    with tempfile.TemporaryDirectory() as tmp:
        log = open_log(Path(tmp) / "t-0", segment_bytes=300, delete_retention_ms=RETENTION)
        seq = dict.fromkeys(PIDS, 0)
        value = 0
        try:
            for op in ops:
                if op[0] in ("plain", "txn"):
                    keys = [op[1]] if op[0] == "plain" else op[2]
                    pid = op[1] if op[0] == "txn" else -1
                    records = [Record(i, 0, k, b"%d" % (value + i)) for i, k in enumerate(keys)]
                    value += len(keys)
                    data = bytearray(build_batch(records, base_timestamp=NOW, producer_id=pid,
                                                 producer_epoch=0 if pid >= 0 else -1,
                                                 base_sequence=seq[pid] if pid >= 0 else -1,
                                                 is_transactional=pid >= 0))
                    log.append(data, [(0, parse_header(data))], now_ms=NOW)
                    if pid >= 0:
                        seq[pid] += len(keys)
                elif op[0] == "end":
                    log.append_marker(op[1], 0, 0, op[2], now_ms=NOW)
                elif op[0] == "roll":
                    log.roll(NOW)
                else:
                    before = consumer_view(log)
                    clean(log, NOW + op[1])
                    assert consumer_view(log) == before
            for pid in PIDS:  # end every transaction: nothing is hidden behind the LSO any more
                log.append_marker(pid, 0, 0, False, now_ms=NOW)
            log.roll(NOW)
            before = consumer_view(log)
            for now in (NOW, NOW + RETENTION, NOW + 10 * RETENTION):
                clean(log, now)
                assert consumer_view(log) == before
            # a crash, and a replay of the cleaned log from its start: no transaction left hanging
            path = log.dir
            log.abandon()
            for snapshot in path.glob("*.snapshot"):
                snapshot.unlink()
            log = open_log(path, clean=False, segment_bytes=300, delete_retention_ms=RETENTION)
            assert log.last_stable_offset == log.log_end_offset
            assert consumer_view(log) == before
        finally:
            log.close()
