"""Kafka's offset checkpoint files: `0` (version), a count, then `topic partition offset` lines.

Written to a temp file, fsynced, renamed over the old one and the directory fsynced, so a crash leaves
either the old or the new file, never half of one. An unreadable file reads as empty: the logs then
recover from their start, which is slow but safe.
"""

from __future__ import annotations

import os
from pathlib import Path

RECOVERY_POINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET = "log-start-offset-checkpoint"
VERSION = 0


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def write_checkpoint(path: Path, offsets: dict[tuple[str, int], int]) -> None:
    lines = [str(VERSION), str(len(offsets))]
    lines += [f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(offsets.items())]
    atomic_write(path, ("\n".join(lines) + "\n").encode())


def read_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    try:
        lines = path.read_text().splitlines()
    except (FileNotFoundError, UnicodeDecodeError):
        return {}
    try:
        if int(lines[0]) != VERSION:
            return {}
        count = int(lines[1])
        offsets: dict[tuple[str, int], int] = {}
        for line in lines[2 : 2 + count]:
            topic, partition, offset = line.rsplit(" ", 2)
            offsets[(topic, int(partition))] = int(offset)
        return offsets if len(offsets) == count else {}
    except (IndexError, ValueError):
        return {}
