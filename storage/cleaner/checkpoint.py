"""`cleaner-offset-checkpoint`: each compacted log's first dirty offset, one file per log dir.

Kafka's offset checkpoint format (`storage.checkpoints`), written atomically after every clean, so a
restart resumes where the cleaner stopped instead of recleaning everything (and a crash mid-clean
resumes from the previous checkpoint, which is always safe: a clean can be repeated).
"""

from __future__ import annotations

import threading
from pathlib import Path

from pybroker.storage.checkpoints import PartitionOffsets, read_checkpoint, write_checkpoint

CLEANER_OFFSET = "cleaner-offset-checkpoint"

Partition = tuple[str, int]


class CleanerCheckpoints:
    """The first dirty offsets of every dir, read once at startup and rewritten per dir as cleans end."""

    def __init__(self, dirs: list[Path]) -> None:
        self._lock = threading.Lock()
        self._offsets: dict[Path, PartitionOffsets] = {d: read_checkpoint(d / CLEANER_OFFSET) for d in dirs}

    def get(self, log_dir: Path, partition: Partition) -> int | None:
        with self._lock:
            return self._offsets.get(log_dir, {}).get(partition)

    def update(self, log_dir: Path, partition: Partition, offset: int, keep: set[Partition]) -> None:
        """Record `offset` and rewrite the dir's file with the partitions in `keep` (those still there)."""
        with self._lock:
            offsets = self._offsets.setdefault(log_dir, {})
            offsets[partition] = offset
            for gone in [p for p in offsets if p not in keep]:
                del offsets[gone]
            write_checkpoint(log_dir / CLEANER_OFFSET, dict(offsets))
