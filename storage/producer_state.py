"""Idempotent producers' state per partition: epochs and the last five batches of each producer id.

Kafka's rules (`ProducerStateManager` / `ProducerAppendInfo`), checked before anything is written:
a batch identical (epoch, first and last sequence) to one of the producer's last five is a duplicate and
gets the original offsets back; an older epoch is fenced (INVALID_PRODUCER_EPOCH); a new epoch must
start at sequence 0; within an epoch the first sequence must follow the last one (wrapping at int32),
else OUT_OF_ORDER_SEQUENCE_NUMBER. A producer we know nothing about may start at any sequence (its
state may have been removed with old data).

State survives restarts through snapshots (`<20-digit offset>.pbsnapshot`, JSON: our own format, named
so Kafka's tools do not mistake it for theirs) taken on segment roll and clean shutdown; loading replays
batch headers from the newest snapshot to the log end.
"""

from __future__ import annotations

import json
import os
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.records.batch import BatchHeader
from pybroker.storage.errors import ProducerStateError

CACHED_BATCHES = 5
SNAPSHOT_SUFFIX = ".pbsnapshot"
INT32_WRAP = 2**31


@dataclass(slots=True)
class BatchMeta:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(slots=True)
class ProducerEntry:
    epoch: int
    batches: deque[BatchMeta] = field(default_factory=lambda: deque(maxlen=CACHED_BATCHES))
    last_timestamp: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1


def _in_sequence(last_seq: int, first_seq: int) -> bool:
    return first_seq == (last_seq + 1) % INT32_WRAP


class ProducerState:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.producers: dict[int, ProducerEntry] = {}

    def check(self, header: BatchHeader) -> BatchMeta | None:
        """Validate an idempotent batch; return the cached original if it is a duplicate."""
        entry = self.producers.get(header.producer_id)
        if entry is None:
            return None
        if header.producer_epoch < entry.epoch:
            raise ProducerStateError(ErrorCode.INVALID_PRODUCER_EPOCH,
                                     f"producer {header.producer_id} epoch {header.producer_epoch} is older "
                                     f"than the current {entry.epoch}")
        if header.producer_epoch == entry.epoch:
            for meta in entry.batches:
                if meta.first_seq == header.base_sequence and meta.last_seq == header.last_sequence:
                    return meta
            if entry.batches and not _in_sequence(entry.last_seq, header.base_sequence):
                raise ProducerStateError(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                         f"producer {header.producer_id}: sequence {header.base_sequence} does "
                                         f"not follow {entry.last_seq}")
        elif header.base_sequence != 0:
            raise ProducerStateError(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                     f"producer {header.producer_id}: new epoch {header.producer_epoch} must "
                                     f"start at sequence 0, not {header.base_sequence}")
        return None

    def update(self, header: BatchHeader, first_offset: int, last_offset: int) -> None:
        entry = self.producers.get(header.producer_id)
        if entry is None or header.producer_epoch > entry.epoch:
            entry = self.producers[header.producer_id] = ProducerEntry(header.producer_epoch)
        entry.batches.append(BatchMeta(header.base_sequence, header.last_sequence, first_offset, last_offset,
                                       header.max_timestamp))
        entry.last_timestamp = header.max_timestamp

    # -- snapshots ---------------------------------------------------------------------------
    def snapshot_path(self, offset: int) -> Path:
        return self.directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"

    def write_snapshot(self, offset: int) -> None:
        data = {str(pid): {"epoch": e.epoch, "batches": [[b.first_seq, b.last_seq, b.first_offset, b.last_offset,
                                                          b.timestamp] for b in e.batches]}
                for pid, e in self.producers.items()}
        path = self.snapshot_path(offset)
        tmp = path.with_suffix(".tmp")
        with open(tmp, "w") as handle:
            json.dump(data, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
        for old in self.snapshots()[:-2]:
            old.unlink(missing_ok=True)

    def snapshots(self) -> list[Path]:
        return sorted(self.directory.glob(f"*{SNAPSHOT_SUFFIX}"))

    def load_latest(self, log_end: int) -> int:
        """Load the newest usable snapshot at or below `log_end`; return its offset (0 if none)."""
        for path in reversed(self.snapshots()):
            offset = int(path.name[:20])
            if offset > log_end:
                path.unlink(missing_ok=True)
                continue
            try:
                raw = json.loads(path.read_text())
                self.producers = {
                    int(pid): ProducerEntry(v["epoch"], deque((BatchMeta(*b) for b in v["batches"]),
                                                              maxlen=CACHED_BATCHES))
                    for pid, v in raw.items()
                }
                return offset
            except (ValueError, KeyError, TypeError):
                path.unlink(missing_ok=True)
        self.producers = {}
        return 0
