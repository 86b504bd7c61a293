"""The aborted-transaction index `.txnindex` of one segment, in Kafka's format (`TransactionIndex`).

A read_committed fetch must tell the consumer which producers' records in the returned range belong
to aborted transactions; this index answers that without reading the log. One entry per transaction
aborted by a marker in this segment, in marker order (big-endian, 34 bytes, Kafka's `AbortedTxn`):

    version              int16  0
    producer_id          int64
    first_offset         int64  the transaction's first offset (may lie in an earlier segment)
    last_offset          int64  the offset of its ABORT marker
    last_stable_offset   int64  the partition's LSO once the marker was written

The file is created with its first entry (most segments never see an abort), kept in step with the
segment (truncated with it, renamed and deleted with it) and rebuilt by recovery from the log. Entries
are read into memory on first use; an append opens, writes and closes the file (aborts are rare), and
`sync` fsyncs it when the segment is flushed. A file made here raises `new_name`: the flush that syncs
it also fsyncs the partition dir before its recovery point passes the entry (`Log.flush`).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from struct import Struct
from typing import NamedTuple

from pybroker.storage.errors import CorruptIndexError
from pybroker.storage.files import write_fully

TXN_INDEX_SUFFIX = ".txnindex"
VERSION = 0
ENTRY = Struct(">hqqqq")
ENTRY_SIZE = ENTRY.size  # 34


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return ENTRY.pack(VERSION, self.producer_id, self.first_offset, self.last_offset, self.last_stable_offset)


def decode_entries(data: bytes, *, base_offset: int | None = None, path: object = "txnindex") -> list[AbortedTxn]:
    """Every entry of a `.txnindex` image; `CorruptIndexError` for a torn tail, an unknown version,
    entries out of order, or (with `base_offset`) a marker before the segment's base offset."""
    if len(data) % ENTRY_SIZE:
        raise CorruptIndexError(f"{path} holds {len(data)} bytes, not a multiple of {ENTRY_SIZE}")
    entries: list[AbortedTxn] = []
    last = -1
    for version, producer_id, first, last_offset, lso in ENTRY.iter_unpack(data):
        if version != VERSION:
            raise CorruptIndexError(f"{path}: entry {len(entries)} has version {version}")
        if last_offset <= last or first > last_offset:
            raise CorruptIndexError(f"{path}: entry {len(entries)} (first {first}, last {last_offset}) is out of "
                                    f"order")
        if base_offset is not None and last_offset < base_offset:
            raise CorruptIndexError(f"{path}: entry {len(entries)} ends at {last_offset}, before the segment's "
                                    f"base offset {base_offset}")
        entries.append(AbortedTxn(producer_id, first, last_offset, lso))
        last = last_offset
    return entries


class TxnSearch(NamedTuple):
    aborted: list[AbortedTxn]
    #: no later segment can hold an entry the search wants
    complete: bool


class TransactionIndex:
    """One segment's `.txnindex` (the file may not exist: then the index is empty)."""

    __slots__ = ("_dirty", "_entries", "base_offset", "new_name", "path")

    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self._entries: list[AbortedTxn] | None = None
        self._dirty = False
        #: this object made the file, and no dir fsync has been asked for since (`Segment.take_new_names`)
        self.new_name = False

    @property
    def entries(self) -> list[AbortedTxn]:
        """The entries, read on first use; a damaged file loses its damaged tail (recovery rebuilds)."""
        if self._entries is None:
            try:
                data = self.path.read_bytes()
            except FileNotFoundError:
                data = b""
            try:
                self._entries = decode_entries(data, base_offset=self.base_offset, path=self.path)
            except CorruptIndexError:
                self._entries = _valid_prefix(data, self.base_offset)
                self._rewrite()
        return self._entries

    @property
    def last_offset(self) -> int:
        entries = self.entries
        return entries[-1].last_offset if entries else -1

    def append(self, txn: AbortedTxn) -> None:
        """Add the entry of a transaction just aborted by a marker in this segment."""
        entries = self.entries
        if entries and txn.last_offset <= entries[-1].last_offset:
            raise ValueError(f"aborted transaction ending at {txn.last_offset} does not follow "
                             f"{entries[-1].last_offset} in {self.path}")
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        except FileNotFoundError:  # the segment's first abort: a new name in the partition dir
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            self.new_name = True
        try:
            write_fully(fd, txn.encode())
        finally:
            os.close(fd)
        entries.append(txn)
        self._dirty = True

    def truncate_to(self, offset: int) -> None:
        """Drop the entries of transactions whose marker is at or after `offset` (Kafka's rule)."""
        entries = self.entries
        kept = [e for e in entries if e.last_offset < offset]
        if len(kept) != len(entries):
            self._entries = kept
            self._rewrite()

    def _rewrite(self) -> None:
        exists = self.path.exists()
        if not exists and not self._entries:
            return
        self.new_name = self.new_name or not exists
        with open(self.path, "r+b" if exists else "wb") as file:
            file.truncate(len(self._entries or ()) * ENTRY_SIZE)
        self._dirty = True

    def collect(self, fetch_offset: int, upper_bound: int) -> TxnSearch:
        """The aborted transactions overlapping [fetch_offset, upper_bound); complete once an entry's
        LSO reaches the upper bound (nothing aborted later can start below it)."""
        found: list[AbortedTxn] = []
        for txn in self.entries:
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound:
                return TxnSearch(found, True)
        return TxnSearch(found, False)

    def sync(self) -> None:
        if not self._dirty:
            return
        with contextlib.suppress(FileNotFoundError):
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fdatasync(fd)  # appended entries and the size: all that is read back
            finally:
                os.close(fd)
        self._dirty = False

    def forget(self) -> None:
        """Drop the cached entries (the file was replaced or removed under this object)."""
        self._entries = None
        self._dirty = False


def _valid_prefix(data: bytes, base_offset: int) -> list[AbortedTxn]:
    """The longest run of well-formed entries at the start of a damaged file."""
    whole = len(data) - len(data) % ENTRY_SIZE
    for end in range(whole, -1, -ENTRY_SIZE):
        try:
            return decode_entries(data[:end], base_offset=base_offset)
        except CorruptIndexError:
            continue
    return []
