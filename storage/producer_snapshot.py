"""Producer-state snapshots in Kafka's own `.snapshot` format, so Kafka's tools can read them.

File `<20-digit offset>.snapshot` in the partition dir: the producer state after every batch below
that offset. Layout (big-endian), as Kafka's `ProducerStateManager` writes version 1:

    version   int16   1
    crc       uint32  CRC-32C of everything after this field
    count     int32   number of entries
    entries:  producer_id int64, epoch int16, last_sequence int32, last_offset int64,
              offset_delta int32 (last minus first offset of the batch), timestamp int64,
              coordinator_epoch int32, current_txn_first_offset int64 (-1: none)

Kafka writes one entry per producer (its last batch). We write one entry per *cached* batch, oldest
first, so the five-batch duplicate cache survives a restart; Kafka's reader keeps the last entry per
producer id, which is exactly the entry it would have written itself.
"""

from __future__ import annotations

from collections.abc import Iterable
from struct import Struct
from typing import NamedTuple

from pybroker.protocol.records.batch import crc32c_of
from pybroker.storage.errors import CorruptSnapshotError

SNAPSHOT_SUFFIX = ".snapshot"
VERSION = 1
PREFIX = Struct(">hI")  # version, crc
COUNT = Struct(">i")
ENTRY = Struct(">qhiqiqiq")
CRC_START = PREFIX.size


class SnapshotEntry(NamedTuple):
    producer_id: int
    epoch: int
    last_sequence: int
    last_offset: int  # -1: the producer has no data batch cached
    offset_delta: int
    timestamp: int
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1


def encode_snapshot(entries: Iterable[SnapshotEntry]) -> bytes:
    rows = list(entries)
    body = bytearray(COUNT.pack(len(rows)))
    for row in rows:
        body += ENTRY.pack(*row)
    return PREFIX.pack(VERSION, crc32c_of(bytes(body))) + bytes(body)


def decode_snapshot(data: bytes) -> list[SnapshotEntry]:
    """Every entry of a snapshot file; `CorruptSnapshotError` for anything but a whole, valid one."""
    if len(data) < PREFIX.size + COUNT.size:
        raise CorruptSnapshotError(f"snapshot of {len(data)} bytes is too short")
    version, crc = PREFIX.unpack_from(data)
    if version != VERSION:
        raise CorruptSnapshotError(f"unknown snapshot version {version}")
    if crc32c_of(data[CRC_START:]) != crc:
        raise CorruptSnapshotError("snapshot CRC mismatch")
    (count,) = COUNT.unpack_from(data, CRC_START)
    start = CRC_START + COUNT.size
    if count < 0 or len(data) - start != count * ENTRY.size:
        raise CorruptSnapshotError(f"snapshot says {count} entries but holds {len(data) - start} bytes")
    return [SnapshotEntry._make(row) for row in ENTRY.iter_unpack(data[start:])]
