"""Property: under any sequence of transactional appends, markers, truncations, rolls and restarts
(clean or kill -9), the log's LSO is the first offset of the oldest open transaction and its
`.txnindex` files hold exactly the aborted transactions, each in the segment holding its marker."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pybroker.protocol.records.batch import parse_header
from pybroker.protocol.records.record import Record, build_batch
from pybroker.storage.log import Log
from pybroker.storage.transaction_index import AbortedTxn
from tests.unit.storage.helpers import NOW, open_log

PIDS = (1, 2, 3)
SEGMENT_BYTES = 400


@dataclass
class Batch:
    base: int
    last: int
    pid: int
    kind: str  # "data", "txn", "commit", "abort"


def fold(batches: list[Batch]) -> tuple[dict[int, int], list[AbortedTxn]]:
    """The model: open transactions and aborted ones (with Kafka's recorded LSO) from the batches."""
    ongoing: dict[int, int] = {}
    aborted: list[AbortedTxn] = []
    for b in batches:
        if b.kind == "txn":
            ongoing.setdefault(b.pid, b.base)
        elif b.kind in ("commit", "abort") and b.pid in ongoing:
            first = ongoing.pop(b.pid)
            if b.kind == "abort":
                aborted.append(AbortedTxn(b.pid, first, b.base, min(ongoing.values(), default=b.base + 1)))
    return ongoing, aborted


def next_seq(batches: list[Batch], pid: int) -> int:
    return sum(b.last - b.base + 1 for b in batches if b.pid == pid and b.kind == "txn")


OPS = st.one_of(
    st.tuples(st.just("txn"), st.sampled_from(PIDS), st.integers(1, 4)),
    st.tuples(st.just("plain"), st.integers(1, 4)),
    st.tuples(st.just("marker"), st.sampled_from(PIDS), st.booleans()),
    st.tuples(st.just("truncate"), st.floats(0, 1)),
    st.tuples(st.just("reopen"), st.booleans()),
    st.tuples(st.just("roll")),
)


def _append(log: Log, n: int, pid: int, seq: int) -> None:
    records = [Record(i, i, b"k", b"value-%d" % i) for i in range(n)]
    data = bytearray(build_batch(records, base_timestamp=NOW, producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                                 base_sequence=seq, is_transactional=pid >= 0))
    log.append(data, [(0, parse_header(data))], now_ms=NOW)


def _check(log: Log, batches: list[Batch]) -> None:
    ongoing, aborted = fold(batches)
    end = batches[-1].last + 1 if batches else 0
    assert log.log_end_offset == end
    assert log.last_stable_offset == min(ongoing.values(), default=end)
    assert log.producer_state.ongoing == ongoing
    on_disk: list[AbortedTxn] = []
    for segment in log.segments:
        for txn in segment.txn_index.entries:
            assert segment.base_offset <= txn.last_offset < segment.next_offset
            on_disk.append(txn)
    assert on_disk == aborted
    assert log.aborted_transactions(0, end) == [(t.producer_id, t.first_offset) for t in aborted]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(OPS, max_size=30))
def test_lso_and_txn_index_follow_the_model(ops: list[tuple]) -> None:  # type: ignore[type-arg]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t-0"
        log = open_log(path, segment_bytes=SEGMENT_BYTES)
        batches: list[Batch] = []
        try:
            for op in ops:
                end = log.log_end_offset
                if op[0] == "txn":
                    _, pid, n = op
                    _append(log, n, pid, next_seq(batches, pid))
                    batches.append(Batch(end, end + n - 1, pid, "txn"))
                elif op[0] == "plain":
                    _append(log, op[1], -1, -1)
                    batches.append(Batch(end, end + op[1] - 1, -1, "data"))
                elif op[0] == "marker":
                    _, pid, commit = op
                    log.append_marker(pid, 0, 0, commit, now_ms=NOW)
                    batches.append(Batch(end, end, pid, "commit" if commit else "abort"))
                elif op[0] == "truncate":
                    if batches:
                        keep = int(op[1] * len(batches))
                        if keep < len(batches):
                            log.truncate_to(batches[keep].base)
                            del batches[keep:]
                elif op[0] == "reopen":
                    if op[1]:
                        log.close()
                        log = open_log(path, segment_bytes=SEGMENT_BYTES)
                    else:
                        point = log.flush()
                        log.abandon()
                        log = open_log(path, clean=False, recovery_point=point // 2, segment_bytes=SEGMENT_BYTES)
                else:
                    log.roll(NOW)
                _check(log, batches)
        finally:
            log.close()
