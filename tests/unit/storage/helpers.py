"""Small builders shared by the storage tests."""

from __future__ import annotations

import uuid
from pathlib import Path

from pybroker.protocol.records.batch import BatchHeader, parse_header
from pybroker.protocol.records.record import Record, build_batch
from pybroker.storage.log import AppendResult, Log
from pybroker.storage.log_config import LogConfig

TOPIC_ID = uuid.UUID(int=7)


def batch(n: int = 3, *, ts: int = 1000, value: bytes = b"v", producer: tuple[int, int, int] = (-1, -1, -1),
          key: bytes | None = b"k") -> bytearray:
    records = [Record(i, i, key, value + b"%d" % i) for i in range(n)]
    return bytearray(build_batch(records, base_timestamp=ts, producer_id=producer[0], producer_epoch=producer[1],
                                 base_sequence=producer[2]))


def append(log: Log, data: bytearray, now: int = 0) -> AppendResult:
    header: BatchHeader = parse_header(data)
    return log.append(data, [(0, header)], now_ms=now)


def open_log(path: Path, clean: bool = True, **config: int) -> Log:
    return Log(path, "t", 0, TOPIC_ID, LogConfig(**config), clean=clean)  # type: ignore[arg-type]
