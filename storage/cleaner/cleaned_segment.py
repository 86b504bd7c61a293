"""Writing one replacement segment: `<base>.log.cleaned` and its two indexes, durable before the swap.

The cleaner's output never lives under a name the loader trusts until the swap renames it, so a crash
while writing leaves only `.cleaned` files, which startup deletes. Batches are buffered and written in
large chunks; the indexes follow the same rule as appends to a live segment (an entry once more than
`index.interval.bytes` of log were written since the last one), so the swapped-in segment looks like
any other inactive segment: trimmed indexes whose time index ends with the largest timestamp. Its
`.txnindex` (written even when empty, so the swap replaces the old one whatever it held) lists the
aborted transactions whose markers it keeps.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from pybroker.protocol.records.batch import BatchHeader
from pybroker.storage.files import write_fully
from pybroker.storage.offset_index import OffsetIndex
from pybroker.storage.segment_names import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, segment_path
from pybroker.storage.time_index import NO_TIMESTAMP, TimeIndex
from pybroker.storage.transaction_index import TXN_INDEX_SUFFIX, AbortedTxn

CLEANED_SUFFIX = ".cleaned"
SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
#: output is written once this much is buffered
WRITE_CHUNK = 1 << 20


def suffixed_path(directory: Path, base_offset: int, suffix: str, extra: str) -> Path:
    """`<base>.log.cleaned`, `<base>.index.swap`, ...: a segment file under a temporary suffix."""
    return segment_path(directory, base_offset, suffix + extra)


class CleanedSegment:
    """An inactive segment being written under `.cleaned` names (one thread writes it)."""

    def __init__(self, directory: Path, base_offset: int, *, max_index_bytes: int,
                 index_interval_bytes: int) -> None:
        self.dir = directory
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        for suffix in SEGMENT_SUFFIXES:  # a stale output of an earlier, interrupted clean
            suffixed_path(directory, base_offset, suffix, CLEANED_SUFFIX).unlink(missing_ok=True)
        self._fd = os.open(self.path(LOG_SUFFIX), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
        self.index = OffsetIndex.create(self.path(INDEX_SUFFIX), base_offset, max_index_bytes)
        self.timeindex = TimeIndex.create(self.path(TIME_INDEX_SUFFIX), base_offset, max_index_bytes)
        self.size = 0
        self.batches = 0
        self.next_offset = base_offset
        self._pending = bytearray()
        self._since_index = 0
        self._max_timestamp = NO_TIMESTAMP
        self._offset_of_max_timestamp = base_offset
        #: the aborted transactions whose markers this segment keeps, in marker order
        self.txn_entries: list[AbortedTxn] = []

    def path(self, suffix: str) -> Path:
        return suffixed_path(self.dir, self.base_offset, suffix, CLEANED_SUFFIX)

    def append(self, data: bytes, header: BatchHeader) -> None:
        """Add one whole batch (its header parsed from `data`)."""
        last = header.last_offset
        if header.max_timestamp > self._max_timestamp:
            self._max_timestamp, self._offset_of_max_timestamp = header.max_timestamp, last
        if self._since_index > self.index_interval_bytes:
            self.index.append(last, self.size)
            self.timeindex.maybe_append(self._max_timestamp, self._offset_of_max_timestamp)
            self._since_index = 0
        self._since_index += len(data)
        self._pending += data
        self.size += len(data)
        self.batches += 1
        self.next_offset = last + 1
        if len(self._pending) >= WRITE_CHUNK:
            self._write_pending()

    def _write_pending(self) -> None:
        if self._pending:
            write_fully(self._fd, self._pending)
            self._pending = bytearray()

    def finish(self) -> None:
        """Write what is buffered, close the indexes as a roll would, and fsync all three files."""
        self._write_pending()
        self.timeindex.maybe_append(self._max_timestamp, self._offset_of_max_timestamp, skip_full_check=True)
        self.index.trim()
        self.timeindex.trim()
        os.fsync(self._fd)
        self.index.sync()
        self.timeindex.sync()
        txn_fd = os.open(self.path(TXN_INDEX_SUFFIX), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            write_fully(txn_fd, b"".join(txn.encode() for txn in self.txn_entries))
            os.fsync(txn_fd)
        finally:
            os.close(txn_fd)
        self._close()

    def _close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def abandon(self) -> None:
        """Close and delete the output (an aborted or failed clean); never raises."""
        with contextlib.suppress(OSError):
            self._close()
        for suffix in SEGMENT_SUFFIXES:
            with contextlib.suppress(OSError):
                self.path(suffix).unlink(missing_ok=True)
