"""Offline verification of log dirs (`pybroker check-log`): every batch's framing and CRC, its records
walked as the produce path walks them (count, lengths, offset deltas, decompression), offsets that only
grow, index entries that point where they claim, and `.txnindex` files: a whole number of 34-byte
entries of version 0, in marker order, each naming a transaction that ends at an ABORT marker (a control
batch) of its segment, starts at or before it, and records an LSO no later than just past it.

Runs on a stopped broker's files (or a copy) and changes nothing. Each problem names the file and the
byte position, so an operator can look with `pybroker dump-log`. The walk reports bytes as it goes,
for a progress bar over large dirs.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from struct import Struct

from pybroker.protocol.records.batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_V2,
    MIN_BATCH_LENGTH,
    compute_crc,
    parse_header,
)
from pybroker.protocol.records.records_check import batch_problem
from pybroker.storage.log import DELETE_SUFFIX
from pybroker.storage.transaction_index import ENTRY, ENTRY_SIZE, VERSION

SEGMENT = re.compile(r"^(\d{20})\.log$")
OFFSET_ENTRY = Struct(">ii")  # relative offset, position
TIME_ENTRY = Struct(">qi")  # timestamp, relative offset


@dataclass(frozen=True, slots=True)
class Problem:
    file: str
    position: int
    message: str


@dataclass(slots=True)
class Report:
    partitions: int = 0
    segments: int = 0
    batches: int = 0
    bytes: int = 0
    problems: list[Problem] = field(default_factory=list)


def segment_files(log_dir: Path) -> list[Path]:
    """Every segment `.log` under a log dir (or a single partition dir), in path order."""
    log_dir = Path(log_dir)
    # only a dir being deleted (`<topic>-<p>.<uuid>-delete`) is skipped, not a topic named `x-delete-...`
    return sorted(p for p in log_dir.rglob("*.log") if SEGMENT.match(p.name) and not p.parent.name.endswith(DELETE_SUFFIX))


def check_segment(path: Path, expected_base: int | None = None) -> tuple[int, int, list[Problem]]:
    """(next offset, batches, problems) of one `.log` file and its indexes."""
    data = path.read_bytes()
    base = int(path.stem)
    problems: list[Problem] = []
    starts: dict[int, tuple[int, int]] = {}  # position -> (base offset, last offset)
    controls: set[int] = set()  # offsets of control batches
    next_offset = base if expected_base is None else max(base, expected_base)
    pos = 0
    while pos < len(data):
        if len(data) - pos < HEADER_SIZE:
            problems.append(Problem(str(path), pos, f"{len(data) - pos} trailing bytes, shorter than a batch header"))
            break
        header = parse_header(data, pos)
        size = header.batch_length + LOG_OVERHEAD
        if header.batch_length < MIN_BATCH_LENGTH or pos + size > len(data):
            problems.append(Problem(str(path), pos, f"batch length {header.batch_length} runs past the end of the "
                                                    f"file ({len(data)} bytes) or is too small"))
            break
        if header.magic != MAGIC_V2:
            problems.append(Problem(str(path), pos, f"magic {header.magic}, expected {MAGIC_V2}"))
        computed = compute_crc(data, pos, header)
        if computed != header.crc:
            problems.append(Problem(str(path), pos, f"CRC mismatch at offset {header.base_offset}: "
                                                    f"stored {header.crc}, computed {computed}"))
        elif header.magic == MAGIC_V2:
            bad_records = batch_problem(data, pos, header)
            if bad_records is not None:
                problems.append(Problem(str(path), pos, f"batch at offset {header.base_offset}: {bad_records}"))
        if header.base_offset < next_offset:
            problems.append(Problem(str(path), pos, f"offset {header.base_offset} is below the expected "
                                                    f"{next_offset} (offsets must grow)"))
        starts[pos] = (header.base_offset, header.last_offset)
        if header.is_control:
            controls.add(header.base_offset)
        next_offset = max(next_offset, header.last_offset + 1)
        pos += size
    problems += _check_offset_index(path.with_suffix(".index"), base, starts)
    problems += _check_time_index(path.with_suffix(".timeindex"), base, next_offset)
    problems += check_txn_index(path.with_suffix(".txnindex"), base, next_offset, controls)
    return next_offset, len(starts), problems


def _entries(path: Path, entry: Struct) -> Iterator[tuple[int, tuple[int, int]]]:
    """(position, entry) of each used entry; preallocated zero entries at the end are not entries."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return
    for index in range(len(data) // entry.size):
        values = entry.unpack_from(data, index * entry.size)
        if index > 0 and values == (0, 0):
            return
        yield index * entry.size, values


def _check_offset_index(path: Path, base: int, starts: dict[int, tuple[int, int]]) -> list[Problem]:
    problems: list[Problem] = []
    previous = -1
    for position, (relative, file_position) in _entries(path, OFFSET_ENTRY):
        if position == 0 and (relative, file_position) == (0, 0) and 0 not in starts:
            break  # a preallocated, still empty index
        offset = base + relative
        if offset <= previous:
            problems.append(Problem(str(path), position, f"entry offset {offset} does not grow (after {previous})"))
        previous = offset
        batch = starts.get(file_position)
        if batch is None:
            problems.append(Problem(str(path), position, f"entry for offset {offset} points at log position "
                                                         f"{file_position}, where no batch starts"))
        elif not batch[0] <= offset <= batch[1]:
            problems.append(Problem(str(path), position, f"entry for offset {offset} points at the batch of "
                                                         f"offsets {batch[0]}-{batch[1]}"))
    return problems


def _check_time_index(path: Path, base: int, next_offset: int) -> list[Problem]:
    problems: list[Problem] = []
    previous = (-1, -1)
    for position, (timestamp, relative) in _entries(path, TIME_ENTRY):
        offset = base + relative
        if timestamp == 0 and relative == 0 and position == 0:
            continue  # an empty, preallocated index
        if (timestamp, offset) < previous or timestamp < previous[0] or offset < previous[1]:
            problems.append(Problem(str(path), position, f"entry ({timestamp}, {offset}) goes backwards"))
        if not base <= offset < max(next_offset, base + 1):
            problems.append(Problem(str(path), position, f"entry offset {offset} is outside the segment "
                                                         f"({base}-{next_offset - 1})"))
        previous = (timestamp, offset)
    return problems


def check_txn_index(path: Path, base: int, next_offset: int, controls: set[int] | None = None) -> list[Problem]:
    """Problems of one segment's `.txnindex` (none when it does not exist); `controls`: the offsets of the
    segment's control batches, when known."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    problems: list[Problem] = []
    if len(data) % ENTRY_SIZE:
        problems.append(Problem(str(path), len(data) - len(data) % ENTRY_SIZE,
                                f"size {len(data)} is not a multiple of the {ENTRY_SIZE}-byte entry"))
    previous = -1
    for position in range(0, len(data) - len(data) % ENTRY_SIZE, ENTRY_SIZE):
        version, producer_id, first, last, lso = ENTRY.unpack_from(data, position)
        where = f"aborted transaction of producer {producer_id} ({first}-{last})"
        if version != VERSION:
            problems.append(Problem(str(path), position, f"{where}: version {version}, expected {VERSION}"))
        if last <= previous:
            problems.append(Problem(str(path), position, f"{where}: out of order (after last offset {previous})"))
        if not base <= last < next_offset:
            problems.append(Problem(str(path), position, f"{where}: its marker offset is outside the segment "
                                                         f"({base}-{next_offset - 1})"))
        elif controls is not None and last not in controls:
            problems.append(Problem(str(path), position, f"{where}: no control batch at offset {last}"))
        if not 0 <= first <= last:
            problems.append(Problem(str(path), position, f"{where}: first offset {first} is not at or before "
                                                         f"its last"))
        if not 0 <= lso <= last + 1:
            problems.append(Problem(str(path), position, f"{where}: last stable offset {lso} is past its marker"))
        previous = max(previous, last)
    return problems


def check_log_dir(log_dir: Path, progress: Callable[[int], None] | None = None) -> Report:
    """Check every partition under `log_dir`; `progress(bytes)` is called after each segment."""
    report = Report()
    by_partition: dict[Path, list[Path]] = {}
    for path in segment_files(log_dir):
        by_partition.setdefault(path.parent, []).append(path)
    for segments in by_partition.values():
        report.partitions += 1
        expected: int | None = None
        for path in segments:
            size = path.stat().st_size
            expected, batches, problems = check_segment(path, expected)
            report.segments += 1
            report.batches += batches
            report.bytes += size
            report.problems += problems
            if progress is not None:
                progress(size)
    return report
