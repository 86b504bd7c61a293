"""Kafka's `.timeindex`: sparse map from the largest timestamp seen so far to the offset holding it.

Entries are 12 bytes: timestamp (int64) and relative offset (int32). An entry (T, O) means no record
before offset O has a timestamp above T, so a search for the first record at or after T may start at
O's batch. An entry is added beside each offset-index entry, only when the largest timestamp grew; one
more is added when the segment rolls or closes so the last entry is the segment's largest timestamp
(that is how a reopened segment knows it without scanning). The last slot is kept for that entry.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from struct import Struct

from pybroker.storage.errors import CorruptIndexError
from pybroker.storage.index_file import IndexFile

NO_TIMESTAMP = -1


class TimeIndex(IndexFile):
    """keys: timestamps (strictly increasing); values: relative offsets (increasing)."""

    ENTRY = Struct(">qi")
    KEY_TYPE = "q"
    VALUE_TYPE = "i"
    __slots__ = ()

    def check(self) -> None:
        keys, values = self.keys, self.values
        if not keys:
            return
        if values[0] < 0 or not self._increasing(keys, strictly=True) \
                or not self._increasing(values, strictly=False):
            raise CorruptIndexError(f"{self.path}: entries are not increasing")

    @property
    def is_full(self) -> bool:
        # the last slot stays free for the entry added when the segment rolls
        return len(self.keys) >= self.max_entries - 1

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> None:
        """Add (timestamp, offset) if the timestamp grew (and, unless told otherwise, there is room)."""
        if self.keys and timestamp <= self.keys[-1]:
            return
        if timestamp <= NO_TIMESTAMP or (not skip_full_check and self.is_full):
            return
        self._add(timestamp, offset - self.base_offset)

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """(timestamp, offset) of the last entry at or below `timestamp`; (-1, base offset) if none."""
        slot = bisect_right(self.keys, timestamp) - 1
        if slot < 0:
            return NO_TIMESTAMP, self.base_offset
        return self.keys[slot], self.base_offset + self.values[slot]

    def last_entry(self) -> tuple[int, int]:
        """(timestamp, offset) of the last entry; (-1, base offset) when empty."""
        if not self.keys:
            return NO_TIMESTAMP, self.base_offset
        return self.keys[-1], self.base_offset + self.values[-1]

    def truncate_to(self, offset: int) -> None:
        """Drop entries for offsets at or after `offset`."""
        self.truncate_to_entries(bisect_left(self.values, offset - self.base_offset))
