"""Kafka's offset checkpoint files at a log dir's root.

Format (text): a version line `0`, a count line, then one `topic partition offset` line per partition.
`recovery-point-offset-checkpoint` says how far each log is fsynced (recovery after a crash starts
there), `log-start-offset-checkpoint` where each log starts. Written atomically (temp, fsync, rename,
fsync dir). A missing or unreadable file reads as empty: logs then recover from their start, which is
slow but safe.
"""

from __future__ import annotations

from pathlib import Path

from pybroker.storage.files import atomic_write

RECOVERY_POINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET = "log-start-offset-checkpoint"
VERSION = 0

PartitionOffsets = dict[tuple[str, int], int]


def write_checkpoint(path: Path, offsets: PartitionOffsets) -> None:
    lines = [str(VERSION), str(len(offsets))]
    lines += [f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(offsets.items())]
    atomic_write(path, ("\n".join(lines) + "\n").encode())


def read_checkpoint(path: Path) -> PartitionOffsets:
    try:
        lines = path.read_bytes().decode().splitlines()
    except (OSError, UnicodeDecodeError):
        return {}
    try:
        if int(lines[0]) != VERSION:
            return {}
        count = int(lines[1])
        offsets: PartitionOffsets = {}
        for line in lines[2 : 2 + count]:
            topic, partition, offset = line.split()
            offsets[(topic, int(partition))] = int(offset)
    except (IndexError, ValueError):
        return {}
    return offsets if len(offsets) == count else {}
