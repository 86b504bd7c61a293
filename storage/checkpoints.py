"""Kafka's offset checkpoint files at a log dir's root.

Format (text): a version line `0`, a count line, then one `topic partition offset` line per partition.
`recovery-point-offset-checkpoint` says how far each log is fsynced (recovery after a crash starts
there), `log-start-offset-checkpoint` where each log starts (DeleteRecords moves it). Written atomically
(temp, fsync, rename, fsync dir).

A damaged line costs that line only: the reader keeps every line it can parse and logs one warning
per file for the rest, because dropping the whole file would undo every partition's DeleteRecords and
send every log to full recovery. The writer never writes a line the reader would not give back as it
was (a topic named by an older version with whitespace in it is left out, and logged once), so one
odd name cannot damage the others' lines. A partition without a line starts at offset 0 and recovers
from its start: slow, but safe. A missing file, or one of another version, reads as empty.
"""

from __future__ import annotations

import threading
from pathlib import Path

import structlog

from pybroker.storage.files import atomic_write

RECOVERY_POINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET = "log-start-offset-checkpoint"
VERSION = 0
#: how much of a bad line a warning quotes
QUOTE_CHARS = 80

PartitionOffsets = dict[tuple[str, int], int]

log = structlog.get_logger("pybroker.storage.checkpoints")

#: topics already reported as unwritable (each is logged once per process, not once per checkpoint)
_unwritable: set[str] = set()
_unwritable_lock = threading.Lock()


def _parse_line(raw: bytes) -> tuple[str, int, int] | None:
    """`topic partition offset` from one line, or None if it is not exactly that."""
    try:
        fields = raw.decode().split()
    except UnicodeDecodeError:
        return None
    if len(fields) != 3:
        return None
    topic, partition, offset = fields
    if not (_is_number(partition) and _is_number(offset)):
        return None
    return topic, int(partition), int(offset)


def _is_number(text: str) -> bool:
    """Plain ASCII digits only (`int` would also take '+5', '1_0' and other scripts' digits)."""
    return text.isascii() and text.isdigit()


def _encode_line(topic: str, partition: int, offset: int) -> bytes | None:
    """The line for one partition, or None when the reader could not give it back unchanged."""
    try:
        raw = f"{topic} {partition} {offset}".encode()
    except UnicodeEncodeError:
        return None
    return raw if b"\n" not in raw and _parse_line(raw) == (topic, partition, offset) else None


def _report_unwritable(path: Path, topic: str) -> None:
    with _unwritable_lock:
        if topic in _unwritable:
            return
        _unwritable.add(topic)
    log.warning("checkpoint_topic_skipped", file=path.name, topic=repr(topic)[:QUOTE_CHARS],
                reason="the name cannot be written as one checkpoint line; its partitions recover "
                       "from their start after a crash and start at offset 0 after a restart")


def write_checkpoint(path: Path, offsets: PartitionOffsets) -> None:
    lines = []
    for (topic, partition), offset in sorted(offsets.items()):
        line = _encode_line(topic, partition, offset)
        if line is None:
            _report_unwritable(path, topic)
        else:
            lines.append(line)
    atomic_write(path, b"\n".join([str(VERSION).encode(), str(len(lines)).encode(), *lines]) + b"\n")


def read_checkpoint(path: Path) -> PartitionOffsets:
    try:
        lines = path.read_bytes().split(b"\n")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        log.warning("checkpoint_unreadable", file=str(path), error=str(exc))
        return {}
    if lines and lines[-1] == b"":
        lines.pop()  # the final newline
    if not lines or lines[0].strip() != str(VERSION).encode():
        if lines:
            log.warning("checkpoint_unknown_version", file=str(path), version=repr(lines[0])[:QUOTE_CHARS])
        return {}
    count = lines[1].strip() if len(lines) > 1 else b""
    offsets: PartitionOffsets = {}
    bad: list[int] = []
    for number, raw in enumerate(lines[2:], start=3):
        entry = _parse_line(raw)
        if entry is None:
            bad.append(number)
            continue
        topic, partition, offset = entry
        offsets[(topic, partition)] = offset
    if bad or count != str(len(offsets)).encode():
        first = repr(lines[bad[0] - 1])[:QUOTE_CHARS] if bad else ""
        log.warning("checkpoint_damaged", file=str(path), lines_skipped=len(bad), first_bad_line=bad[:1],
                    first_bad_text=first, count_line=repr(count)[:QUOTE_CHARS], entries_kept=len(offsets))
    return offsets
