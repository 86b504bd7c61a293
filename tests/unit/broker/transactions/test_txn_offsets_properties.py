"""A property: live transactional offsets, their replay from the log, and a plain model all agree.

Random histories of plain commits, transactional commits of a few producers, commit and abort markers
and OffsetDelete tombstones run through the coordinator (fake log). The same history, as the records and
markers it puts in `__consumer_offsets`, is replayed as a restart would. The model states Kafka's rule
without any bookkeeping: after the last tombstone of a key, the visible offset is the one written last
among plain commits and transactional commits whose producer's next marker is a commit; a transactional
commit with no marker after it is pending.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from pybroker.broker.groups.offsets_topic import ReplayedPartition
from pybroker.broker.groups.outcomes import OffsetToCommit, TxnCommitRequest
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.offsets_topic_records import decode_record
from tests.unit.broker.groups.test_group_coordinator import Box, commit, make

KEYS = [("t", 0), ("t", 1), ("u", 0)]
PRODUCERS = [11, 12, 13]

Op = tuple[str, int, int, int]  # kind, key index, offset, producer id

ops = st.lists(st.one_of(
    st.tuples(st.just("plain"), st.integers(0, 2), st.integers(0, 1000), st.just(-1)),
    st.tuples(st.just("txn"), st.integers(0, 2), st.integers(0, 1000), st.sampled_from(PRODUCERS)),
    st.tuples(st.just("commit"), st.just(0), st.just(0), st.sampled_from(PRODUCERS)),
    st.tuples(st.just("abort"), st.just(0), st.just(0), st.sampled_from(PRODUCERS)),
    st.tuples(st.just("delete"), st.integers(0, 2), st.just(0), st.just(-1)),
), max_size=40)


@dataclass
class Entry:
    """One thing in the offsets partition, in log order."""

    kind: str  # plain, txn, tombstone, marker
    key: tuple[str, int] | None
    offset: int
    producer: int
    commit: bool = False


def model(log: list[Entry]) -> tuple[dict[tuple[str, int], int], set[tuple[str, int]]]:
    visible: dict[tuple[str, int], int] = {}
    pending: set[tuple[str, int]] = set()
    for key in KEYS:
        last_tombstone = max((i for i, e in enumerate(log) if e.kind == "tombstone" and e.key == key), default=-1)
        best = None
        for i, e in enumerate(log):
            if i <= last_tombstone or e.key != key or e.kind not in ("plain", "txn"):
                continue
            if e.kind == "txn":
                marker = next((m for m in log[i + 1:] if m.kind == "marker" and m.producer == e.producer), None)
                if marker is None:
                    pending.add(key)
                    continue
                if not marker.commit:
                    continue
            best = e.offset
        if best is not None:
            visible[key] = best
    return visible, pending


@settings(max_examples=300, deadline=None)
@given(ops)
def test_live_replayed_and_model_agree(history: list[Op]) -> None:
    co, fake = make()
    partition = co.partition_for("g")
    log: list[Entry] = []
    for kind, index, offset, producer in history:
        key = KEYS[index]
        if kind == "plain":
            assert commit(co, 0, (key[0], key[1], offset)) == {key: ErrorCode.NONE}
            log.append(Entry("plain", key, offset, -1))
        elif kind == "txn":
            box = Box()
            co.commit_txn_offsets(TxnCommitRequest("g", producer, 0, -1, "", None,
                                                   [OffsetToCommit(key[0], key[1], offset, -1, None)]), 0, box)
            assert box.one == {key: ErrorCode.NONE}
            log.append(Entry("txn", key, offset, producer))
        elif kind in ("commit", "abort"):
            co.complete_transaction(partition, producer, commit=kind == "commit")
            log.append(Entry("marker", None, 0, producer, commit=kind == "commit"))
        else:  # OffsetDelete writes a tombstone when the key has a committed or pending offset
            before = len(fake.written)
            co.delete_offsets("g", [key], 0, lambda error, codes: None)
            if len(fake.written) > before:
                log.append(Entry("tombstone", key, 0, -1))

    visible, pending = model(log)
    group = co.groups.get("g")
    live = {k: c.offset for k, c in group.offsets.items()} if group is not None else {}
    assert live == visible
    assert co.unstable_offsets("g") == pending

    replayed = ReplayedPartition()
    position = 0
    for entry in log:
        if entry.kind == "marker":
            replayed.complete(entry.producer, entry.commit)
            continue
        record = decode_record(*_record_of(fake.written, position))
        assert record is not None
        replayed.apply(record, position, entry.producer if entry.kind == "txn" else None)
        position += 1
    assert {k: c.offset for k, c in replayed.offsets.get("g", {}).items()} == visible
    assert {k for offsets in replayed.pending.get("g", {}).values() for k in offsets} == pending


def _record_of(written: list[tuple[int, list[tuple[bytes, bytes | None]]]], position: int
               ) -> tuple[bytes, bytes | None]:
    """The record at `position` among everything the fake log was given (one record per write here)."""
    flat = [record for _, records in written for record in records]
    return flat[position]
