"""Compacting `__consumer_offsets` must not lose transactional offsets, nor what they would replace.

The offsets topic is compacted like any topic; transactional offset commits share keys with plain
ones. Kafka's cleaner keeps this correct with two rules: it never cleans past the last stable offset
(an open transaction's records may still be aborted), and records of aborted transactions never enter
its offset map (they must not make an older committed record look stale). These tests run the cleaner
where the cleaner manager would (its dirty section) and replay the partition as a restart does.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from pybroker.broker.groups.offsets_topic import OFFSETS_TOPIC, ReplayedPartition, replay
from pybroker.protocol.messages.coordinator_records import OffsetCommitValue
from pybroker.protocol.offsets_topic_records import offset_commit_key, offset_commit_value
from pybroker.protocol.records.batch import parse_header
from pybroker.protocol.records.record import Record, build_batch
from pybroker.storage.cleaner.selection import dirty_section
from pybroker.storage.log import Log
from pybroker.storage.log_config import LogConfig
from tests.unit.storage.cleaner.helpers import cleaner

NOW = 1_700_000_000_000
GROUP, KEY = "g", ("t", 0)
PID = 42


@pytest.fixture
def log(tmp_path: Path) -> Iterator[Log]:
    config = LogConfig(cleanup_policy="compact", segment_bytes=1 << 20, file_delete_delay_ms=0)  # type: ignore[call-arg]
    opened = Log(tmp_path / f"{OFFSETS_TOPIC}-0", OFFSETS_TOPIC, 0, uuid.UUID(int=5), config, clock_ms=lambda: NOW)
    try:
        yield opened
    finally:
        opened.close()


def commit(log: Log, offset: int, *, producer: int | None = None, sequence: int = 0) -> None:
    value = offset_commit_value(OffsetCommitValue(offset=offset, leader_epoch=-1, metadata="", commit_timestamp=NOW,
                                                  expire_timestamp=-1))
    fields = {} if producer is None else {"producer_id": producer, "producer_epoch": 0, "base_sequence": sequence,
                                          "is_transactional": True}
    data = bytearray(build_batch([Record(0, 0, offset_commit_key(GROUP, *KEY), value)], base_timestamp=NOW,
                                 **fields))  # type: ignore[arg-type]
    log.append(data, [(0, parse_header(data))], now_ms=NOW)


def compact(log: Log) -> None:
    """Roll, then clean what the cleaner manager would clean."""
    log.roll(NOW)
    section = dirty_section(log, None, NOW)
    cleaner().clean(log, section.first_dirty, section.first_uncleanable, NOW)


def committed(replayed: ReplayedPartition) -> int | None:
    found = replayed.offsets.get(GROUP, {}).get(KEY)
    return None if found is None else found.offset


def pending(replayed: ReplayedPartition) -> int | None:
    found = replayed.pending.get(GROUP, {}).get(PID, {}).get(KEY)
    return None if found is None else found.offset


def test_a_committed_transaction_survives_compaction(log: Log) -> None:
    commit(log, 5)
    commit(log, 10, producer=PID)
    log.append_marker(PID, 0, 0, True, now_ms=NOW)
    compact(log)
    replayed = replay(log)
    assert (committed(replayed), pending(replayed)) == (10, None)


def test_a_plain_commit_after_a_committed_transaction_survives_compaction(log: Log) -> None:
    commit(log, 10, producer=PID)
    commit(log, 99)
    log.append_marker(PID, 0, 0, True, now_ms=NOW)
    compact(log)
    assert committed(replay(log)) == 99


def test_an_open_transaction_keeps_the_offset_it_would_replace(log: Log) -> None:
    commit(log, 5)
    commit(log, 10, producer=PID)
    compact(log)
    replayed = replay(log)
    assert (committed(replayed), pending(replayed)) == (5, 10)
    log.append_marker(PID, 0, 0, False, now_ms=NOW)  # aborted after the clean: the old offset must be there
    assert committed(replay(log)) == 5


def test_an_aborted_transaction_does_not_erase_the_committed_offset(log: Log) -> None:
    commit(log, 5)
    commit(log, 10, producer=PID)
    log.append_marker(PID, 0, 0, False, now_ms=NOW)
    compact(log)
    assert committed(replay(log)) == 5
