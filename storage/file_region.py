"""What a read of a log hands out: a byte range of a segment file (`FileRegion`) and where it ends.

The server `os.sendfile`s a region or reads it with `pread`; the file stays open while a region holds it
(see `Log.close_idle_files`), so a region stays readable after its segment was deleted or moved.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import IO


class FileRegion:
    """A byte range of a segment file: the server `os.sendfile`s it, or reads it with `pread`."""

    __slots__ = ("file", "length", "position")

    def __init__(self, file: IO[bytes], position: int, length: int) -> None:
        self.file = file
        self.position = position
        self.length = length

    def __len__(self) -> int:
        return self.length

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
