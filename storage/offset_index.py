"""Kafka's `.index`: sparse map from offset to the file position of a batch.

Entries are 8 bytes: the batch's last offset relative to the segment's base offset (int32), and the
batch's position in the `.log` file (int32). An entry is added for a batch when more than
`index.interval.bytes` of log were written since the last indexed batch, so a lookup lands on a batch
at or before the one holding any offset, and a short forward scan of batch headers finds it.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from struct import Struct

from pybroker.storage.errors import CorruptIndexError
from pybroker.storage.index_file import IndexFile

INT32_MAX = 2**31 - 1


class OffsetIndex(IndexFile):
    """keys: relative offsets (strictly increasing); values: file positions (increasing)."""

    ENTRY = Struct(">ii")
    KEY_TYPE = "i"
    VALUE_TYPE = "i"
    __slots__ = ()

    def check(self) -> None:
        keys, values = self.keys, self.values
        if not keys:
            return
        if keys[0] < 0 or values[0] < 0 or not self._increasing(keys, strictly=True) \
                or not self._increasing(values, strictly=True):
            raise CorruptIndexError(f"{self.path}: entries are not increasing")

    def append(self, offset: int, position: int) -> None:
        """Index the batch at `position` whose last offset is `offset` (ignored unless it grows)."""
        relative = offset - self.base_offset
        if self.keys and relative <= self.keys[-1]:
            return
        self._add(relative, position)

    def lookup(self, offset: int) -> int:
        """Position of the last indexed batch whose last offset is at or before `offset` (else 0)."""
        slot = bisect_right(self.keys, offset - self.base_offset) - 1
        return self.values[slot] if slot >= 0 else 0

    def entry_at_or_before(self, offset: int) -> tuple[int, int] | None:
        """(last offset, position) of the last indexed batch whose last offset is at or before `offset`."""
        slot = bisect_right(self.keys, offset - self.base_offset) - 1
        return (self.base_offset + self.keys[slot], self.values[slot]) if slot >= 0 else None

    def entry_at_or_before_position(self, position: int) -> tuple[int, int] | None:
        """(last offset, position) of the last indexed batch starting at or before `position`."""
        slot = bisect_right(self.values, position) - 1
        return (self.base_offset + self.keys[slot], self.values[slot]) if slot >= 0 else None

    def last_entry(self) -> tuple[int, int]:
        """(offset, position) of the last entry; (base offset, 0) when empty."""
        if not self.keys:
            return self.base_offset, 0
        return self.base_offset + self.keys[-1], self.values[-1]

    def truncate_to(self, offset: int) -> None:
        """Drop entries for offsets at or after `offset`."""
        self.truncate_to_entries(bisect_left(self.keys, offset - self.base_offset))

    def can_append_offset(self, offset: int) -> bool:
        """Whether `offset` fits the int32 relative form of this segment."""
        return 0 <= offset - self.base_offset <= INT32_MAX
