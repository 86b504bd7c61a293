"""Crash-safe replacement of a run of segments by one cleaned segment, and its completion at startup.

The order of renames (Kafka's `replaceSegments`, one cleaned segment per call):

1. the cleaned files are complete and fsynced under `.cleaned` names;
2. `.index.cleaned` and `.timeindex.cleaned` become `.swap`, then `.log.cleaned` becomes `.log.swap`:
   the `.log.swap` rename is the commit point;
3. the replaced segments' files whose base offset differs from the new one are unlinked;
4. the `.swap` index files, then `.log.swap`, are renamed to their live names (a rename over the old
   segment of the same base offset replaces it atomically);
5. the directory is fsynced.

A crash at any point leaves a state `complete_interrupted_swaps` (called by the loader before anything
else) turns into the old log or the new one, never a mix that loses or repeats a record:
- before the commit point: `.cleaned` files (and perhaps `.swap` index files without a `.log.swap`)
  are deleted; the old segments are intact;
- after it: every live segment whose base offset lies in [swap base, swap's next offset) is one the
  swap replaces; it is deleted and the `.swap` files take their live names. (A replaced segment whose
  base lies beyond the last batch the cleaner kept is left in place: it still holds valid, merely
  not yet compacted, records at their own offsets, and the next clean removes them.)

Readers of the old segments are not disturbed: their files stay open (unlinking or renaming over a
file does not close it), and the log keeps them until `file.delete.delay.ms` has passed.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path

from pybroker.protocol.records.batch import HEADER, HEADER_SIZE, LOG_OVERHEAD, MIN_BATCH_LENGTH
from pybroker.storage.cleaner.cleaned_segment import CLEANED_SUFFIX, SEGMENT_SUFFIXES, suffixed_path
from pybroker.storage.files import fsync_dir
from pybroker.storage.segment_names import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    base_offsets,
    segment_path,
)
from pybroker.storage.transaction_index import TXN_INDEX_SUFFIX

SWAP_SUFFIX = ".swap"
#: the commit point is the last file renamed to `.swap`, and the last one renamed live
_INDEX_FIRST = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, LOG_SUFFIX)

#: called with the name of each step before it is taken; tests raise there to simulate a crash
StepHook = Callable[[str], None]


def no_hook(step: str) -> None:
    """The hook of a cleaner nobody watches: every step is taken."""
    return None


def swap_in(directory: Path, new_base: int, old_bases: Iterable[int], *, hook: StepHook = no_hook) -> None:
    """Steps 2-4 above: make the fsynced `.cleaned` segment at `new_base` live in place of `old_bases`.

    The caller fsyncs the directory afterwards (step 5) and must hold the log's segment lock, so no
    reader is handed a segment whose files are half renamed.
    """
    for suffix in _INDEX_FIRST:
        hook(f"cleaned-to-swap{suffix}")
        cleaned = suffixed_path(directory, new_base, suffix, CLEANED_SUFFIX)
        if suffix == TXN_INDEX_SUFFIX and not cleaned.exists():
            continue  # a cleaned segment written before segments had a `.txnindex`
        os.rename(cleaned, suffixed_path(directory, new_base, suffix, SWAP_SUFFIX))
    for base in old_bases:
        if base == new_base:
            continue  # renamed over below
        hook(f"delete-old-{base}")
        for suffix in SEGMENT_SUFFIXES:
            segment_path(directory, base, suffix).unlink(missing_ok=True)
    for suffix in _INDEX_FIRST:
        hook(f"swap-to-live{suffix}")
        swap = suffixed_path(directory, new_base, suffix, SWAP_SUFFIX)
        if suffix == TXN_INDEX_SUFFIX and not swap.exists():
            continue
        os.rename(swap, segment_path(directory, new_base, suffix))
    hook("done")


def _next_offset(path: Path, base_offset: int) -> int:
    """One past the last offset of the whole batches in a segment file (headers only)."""
    next_offset = base_offset
    size = path.stat().st_size
    with path.open("rb") as file:
        position = 0
        while size - position >= HEADER_SIZE:
            header = HEADER.unpack(file.read(HEADER_SIZE))
            batch_length, last_delta = header[1], header[6]
            if batch_length < MIN_BATCH_LENGTH or position + batch_length + LOG_OVERHEAD > size:
                break
            next_offset = max(next_offset, header[0] + last_delta + 1)
            position += batch_length + LOG_OVERHEAD
            file.seek(position)
    return next_offset


def complete_interrupted_swaps(directory: Path, names: list[str]) -> bool:
    """Finish every committed swap in a partition dir and drop uncommitted ones; whether any file changed.

    `names` is the dir's listing; a dir no swap touched (every dir but one a crash hit mid-swap) costs
    one pass over it.
    """
    if not any(name.endswith((SWAP_SUFFIX, CLEANED_SUFFIX)) for name in names):
        return False
    for base in base_offsets(names, LOG_SUFFIX + SWAP_SUFFIX):
        swap_log = suffixed_path(directory, base, LOG_SUFFIX, SWAP_SUFFIX)
        end = _next_offset(swap_log, base)
        for old in base_offsets(os.listdir(directory), LOG_SUFFIX):  # as the swaps before this one left it
            if base < old < end:
                for suffix in SEGMENT_SUFFIXES:
                    segment_path(directory, old, suffix).unlink(missing_ok=True)
        for suffix in _INDEX_FIRST:
            swap = suffixed_path(directory, base, suffix, SWAP_SUFFIX)
            if swap.exists():  # an index already renamed before the crash is the new one
                os.rename(swap, segment_path(directory, base, suffix))
    for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):  # index files of a swap that never committed
        for base in base_offsets(names, suffix + SWAP_SUFFIX):
            suffixed_path(directory, base, suffix, SWAP_SUFFIX).unlink(missing_ok=True)
    for suffix in SEGMENT_SUFFIXES:
        for base in base_offsets(names, suffix + CLEANED_SUFFIX):
            suffixed_path(directory, base, suffix, CLEANED_SUFFIX).unlink(missing_ok=True)
    fsync_dir(directory)
    return True
