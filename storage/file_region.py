"""What a read of a log hands out: a byte range of a segment file (`FileRegion`) and where it ends.

The server `os.sendfile`s a region or reads it with `pread`; the file stays open while a region holds it
(see `Log.close_idle_files`), so a region stays readable after its segment was deleted or moved.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from pybroker.storage.page_cache import PageCache


class FileRegion:
    """A byte range of a segment file: the server `os.sendfile`s it, or reads it with `pread`."""

    __slots__ = ("_cache", "_drop_to", "file", "length", "position")

    def __init__(self, file: IO[bytes], position: int, length: int) -> None:
        self.file = file
        self.position = position
        self.length = length
        self._cache: PageCache | None = None
        self._drop_to = 0

    def __len__(self) -> int:
        return self.length

    def drop_after_send(self, cache: PageCache, drop_to: int) -> None:
        """Once sent, drop [position, drop_to) from the page cache again (it was read from the disk)."""
        self._cache = cache
        self._drop_to = drop_to

    def sent(self) -> None:
        """The whole region went out (the writers call this)."""
        if self._cache is not None:
            self._cache.sent(self.file, self.position, self._drop_to)

    def read_bytes(self) -> bytes:
        return os.pread(self.file.fileno(), self.length, self.position)

    def __repr__(self) -> str:
        return f"FileRegion({getattr(self.file, 'name', '?')!r}, position={self.position}, length={self.length})"


@dataclass(frozen=True, slots=True)
class ReadResult:
    region: FileRegion | None
    #: with `read(..., want_upper_bound=True)`: the offset of the first batch after the region (Kafka's
    #: `fetchUpperBoundOffset`: the next batch's base, else the next segment's base or the log end)
    upper_bound: int = -1


NOTHING_TO_READ = ReadResult(None)


#: references to a file held only by a log's list of idle files: the list's tuple, `unshared`'s
#: parameter, and `getrefcount`'s own argument
_UNSHARED_REFS = 3


def unshared(file: IO[bytes]) -> bool:
    """No `FileRegion` (or anyone else) holds this file any more (`Log.close_idle_files`)."""
    return sys.getrefcount(file) <= _UNSHARED_REFS
