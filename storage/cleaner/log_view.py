"""The worker process's read-only view of the log a job cleans: what `Cleaner` reads of a `Log` and its
`Segment`s, answered from the job instead of the live objects, which only the broker holds.

A segment's `.log` file is opened read-only by name on first use and closed when the job ends. A segment
the broker removed meanwhile (retention, a deleted topic) cannot be opened: the clean fails with
`FileNotFoundError`, and the broker, seeing that its log changed, calls it an aborted clean.
"""

from __future__ import annotations

import io
from pathlib import Path

from pybroker.storage.cleaner.job import CleanJob, SegmentInfo
from pybroker.storage.log_config import LogConfig
from pybroker.storage.segment_names import LOG_SUFFIX, segment_path
from pybroker.storage.transaction_index import AbortedTxn


class _Entries:
    """Stands for an index where only its number of entries is read (segment grouping)."""

    __slots__ = ("entries",)

    def __init__(self, entries: int) -> None:
        self.entries = entries

    def __len__(self) -> int:
        return self.entries


class SegmentView:
    """One inactive segment of the job, read through its own read-only file."""

    __slots__ = ("_file", "_start_position", "base_offset", "dir", "index", "next_offset", "size", "timeindex")

    def __init__(self, directory: Path, info: SegmentInfo) -> None:
        self.dir = directory
        self.base_offset = info.base_offset
        self.next_offset = info.next_offset
        self.size = info.size
        self.index = _Entries(info.index_entries)
        self.timeindex = _Entries(info.timeindex_entries)
        self._start_position = info.start_position
        self._file: io.FileIO | None = None

    @property
    def log_path(self) -> Path:
        return segment_path(self.dir, self.base_offset, LOG_SUFFIX)

    @property
    def file(self) -> io.FileIO:
        if self._file is None:
            self._file = io.FileIO(self.log_path, "r")
        return self._file

    def find(self, offset: int) -> tuple[int, None] | None:
        """The position of the batch holding the job's first dirty offset (the broker looked it up)."""
        return None if self._start_position is None else (self._start_position, None)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


class LogView:
    """The log of a job: its directory, config, inactive segments and aborted transactions."""

    def __init__(self, job: CleanJob) -> None:
        self.dir = job.directory
        self.topic = job.topic
        self.partition = job.partition
        self.config: LogConfig = job.config
        self.segments = [SegmentView(job.directory, info) for info in job.segments]
        self._aborted = job.aborted

    def aborted_txns(self, start_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """The aborted transactions with records in [start_offset, upper_bound), as `Log.aborted_txns`
        finds them (the job holds every entry from the first segment on, up to past the last one)."""
        return [txn for txn in self._aborted if txn.last_offset >= start_offset and txn.first_offset < upper_bound]

    def close(self) -> None:
        for segment in self.segments:
            segment.close()

    def __repr__(self) -> str:
        return f"LogView({self.topic}-{self.partition})"
