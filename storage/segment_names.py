"""A segment's file names: Kafka's, the base offset as 20 zero-padded digits then the file's suffix.

Shared by the segment itself, the loader that finds segments in a partition dir, the cleaner that writes
replacements beside them, and the producer snapshots (named the same way). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
DELETED_SUFFIX = ".deleted"
BASE_OFFSET_DIGITS = 20


def segment_path(directory: Path, base_offset: int, suffix: str) -> Path:
    """Kafka's file name: the base offset as 20 zero-padded digits, then the suffix."""
    return directory / f"{base_offset:020d}{suffix}"


def base_offsets(names: Iterable[str], suffix: str) -> list[int]:
    """The base offsets, sorted, of the names among `names` that are Kafka's file names with `suffix`.

    `names` is one listing of a partition dir (`os.listdir`), shared by every suffix a caller looks for:
    a new partition's log is opened with a dozen such questions, and a glob per question cost more than
    the rest of its creation together.
    """
    cut = -len(suffix)
    return sorted(int(name[:cut]) for name in names
                  if len(name) == BASE_OFFSET_DIGITS - cut and name.endswith(suffix) and name[:cut].isascii()
                  and name[:cut].isdigit())
