"""Builders for the cleaner tests: keyed logs on real files, a reader that decodes everything, a model.

`cleaner()` builds the in-process `Cleaner` or, for a test run with `cleaner_kind` "process" (see the
folder's conftest), a `ProcessCleaner` on one worker process shared by the whole session, so the same
tests check both paths.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path

from pybroker.protocol.records.batch import iter_batches, parse_header
from pybroker.protocol.records.record import Record, build_batch, decode_records
from pybroker.storage.cleaner.cleaner import READ_CHUNK, Cleaner, CleanResult
from pybroker.storage.cleaner.job import WorkerSettings
from pybroker.storage.cleaner.offset_map import DEFAULT_LOAD_FACTOR, SLOT_BYTES, OffsetMap
from pybroker.storage.cleaner.process_cleaner import ProcessCleaner, WorkerProcess
from pybroker.storage.cleaner.throttle import Throttler
from pybroker.storage.log import Log
from pybroker.storage.log_config import LogConfig

NOW = 1_700_000_000_000
DAY_MS = 86_400_000
TOPIC_ID = uuid.UUID(int=11)

#: (offset, key, value, timestamp) of one record as a consumer sees it
Seen = tuple[int, bytes | None, bytes | None, int]


def compact_config(**overrides: object) -> LogConfig:
    values: dict[str, object] = {"cleanup_policy": "compact", "segment_bytes": 1 << 20, "file_delete_delay_ms": 0}
    values.update(overrides)
    return LogConfig(**values)  # type: ignore[arg-type]


def open_log(path: Path, *, clean: bool = True, clock: list[int] | None = None, **overrides: object) -> Log:
    now = clock if clock is not None else [NOW]
    return Log(path, "t", 0, TOPIC_ID, compact_config(**overrides), clean=clean, clock_ms=lambda: now[0])


def append(log: Log, records: list[tuple[bytes | None, bytes | None]], *, ts: int = NOW,
           producer: tuple[int, int, int] = (-1, -1, -1)) -> int:
    """One batch of (key, value) records; returns its base offset."""
    data = bytearray(build_batch([Record(i, i, k, v) for i, (k, v) in enumerate(records)], base_timestamp=ts,
                                 producer_id=producer[0], producer_epoch=producer[1], base_sequence=producer[2]))
    return log.append(data, [(0, parse_header(data))], now_ms=ts).base_offset


def records_of(log: Log) -> list[Seen]:
    """Every record in the log's files, in file order."""
    seen: list[Seen] = []
    for segment in log.segments:
        data = segment.read_bytes(0, segment.size)
        for pos, header in iter_batches(data):
            for record in decode_records(data, pos, header):
                seen.append((header.base_offset + record.offset_delta, record.key, record.value,
                             header.base_timestamp + record.timestamp_delta))
    return seen


def consume(log: Log, max_bytes: int = 1 << 16) -> list[Seen]:
    """Every record a consumer reading from the log start gets, fetching as kafka-python does."""
    seen: list[Seen] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        region = log.read(offset, max_bytes).region
        if region is None:  # no batch at or after `offset` (the rest was compacted away)
            break
        data = region.read_bytes()
        for pos, header in iter_batches(data):
            for record in decode_records(data, pos, header):
                absolute = header.base_offset + record.offset_delta
                if absolute >= offset:
                    seen.append((absolute, record.key, record.value, header.base_timestamp + record.timestamp_delta))
            offset = header.next_offset
    return seen


@dataclass
class Logs:
    """A log source like the log manager: logs in dirs, on a shared test clock."""

    root: Path
    clock: list[int] = field(default_factory=lambda: [NOW])
    placed: dict[tuple[str, int], tuple[Path, Log]] = field(default_factory=dict)

    @property
    def dirs(self) -> list[Path]:
        return [self.root]

    def add(self, topic: str, config: LogConfig, partition: int = 0) -> Log:
        log = Log(self.root / f"{topic}-{partition}", topic, partition, TOPIC_ID, config,
                  clock_ms=lambda: self.clock[0])
        self.placed[(topic, partition)] = (self.root, log)
        return log

    def logs(self) -> list[Log]:
        return [log for _, log in self.placed.values()]

    def dir_of(self, topic: str, partition: int) -> Path | None:
        found = self.placed.get((topic, partition))
        return found[0] if found else None

    def close(self) -> None:
        for _, log in self.placed.values():
            log.close()


#: which cleaner `cleaner()` builds: "thread" (`Cleaner`) or "process" (`ProcessCleaner`)
KIND = {"value": "thread"}
_process_cleaners: list[ProcessCleaner] = []
_shared_worker: list[WorkerProcess] = []

AnyCleaner = Cleaner | ProcessCleaner


def shared_worker() -> WorkerProcess:
    """The session's worker process (started again if a test killed it)."""
    if not _shared_worker or not _shared_worker[0].alive:
        close_shared_worker()
        _shared_worker.append(WorkerProcess(nice=0))
    return _shared_worker[0]


def close_shared_worker() -> None:
    while _shared_worker:
        _shared_worker.pop().close()


def close_process_cleaners() -> None:
    """Close the process cleaners a test made (the workers they started themselves, not the shared one)."""
    while _process_cleaners:
        _process_cleaners.pop().close()


def cleaner(keys: int = 1000, hook_names: list[str] | None = None, **kwargs: object) -> AnyCleaner:
    """A cleaner whose map holds about `keys` keys (`hook_names` collects the swap steps it takes)."""
    if hook_names is not None:
        kwargs["swap_hook"] = hook_names.append
    buffer = int(keys / 0.9 + 2) * SLOT_BYTES
    if KIND["value"] == "process":
        settings = WorkerSettings(buffer, DEFAULT_LOAD_FACTOR, 1e308, READ_CHUNK)
        made = ProcessCleaner(lambda: settings, nice=0, worker=shared_worker(), **kwargs)  # type: ignore[arg-type]
        _process_cleaners.append(made)
        return made
    return Cleaner(OffsetMap(buffer), Throttler(1e308), **kwargs)  # type: ignore[arg-type]


def clean_fully(log: Log, worker: AnyCleaner, now_ms: int = NOW, first_dirty: int = 0,
                max_passes: int = 10_000) -> tuple[int, list[CleanResult]]:
    """Clean pass after pass until the whole section below the active segment is clean."""
    bound = log.active_segment.base_offset
    results = []
    first_dirty = min(first_dirty, bound)
    while True:
        result = worker.clean(log, first_dirty, bound, now_ms)
        results.append(result)
        assert result.end_offset > first_dirty or first_dirty == bound, "a pass made no progress"
        first_dirty = result.end_offset
        if first_dirty >= bound or len(results) >= max_passes:
            return first_dirty, results


def expected_after_clean(written: list[Seen], bound: int, *, tombstones: bool = True) -> list[Seen]:
    """The model: below `bound`, the latest record of each key (tombstones only if still retained);
    from `bound` on, everything as written."""
    latest: dict[bytes | None, int] = {}
    for offset, key, _, _ in written:
        if offset < bound:
            latest[key] = offset
    keep = set(latest.values())
    return [r for r in written if r[0] >= bound or (r[0] in keep and r[1] is not None
                                                     and (tombstones or r[2] is not None))]


def abandon(log: Log) -> None:
    """What a `kill -9` leaves: nothing flushed or trimmed, every file descriptor just closed."""
    log.release_retired()
    for segment in log.segments:
        segment.release()
