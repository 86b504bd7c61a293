"""Small builders shared by the storage tests: batches, appends, logs on a fixed clock."""

from __future__ import annotations

import uuid
from pathlib import Path

from pybroker.protocol.records.batch import iter_batches, parse_header
from pybroker.protocol.records.record import Record, build_batch
from pybroker.storage.log import AppendResult, Log
from pybroker.storage.log_config import LogConfig

TOPIC_ID = uuid.UUID(int=7)
#: the tests' wall clock; batch timestamps sit around it so producer state never looks expired
NOW = 1_700_000_000_000


def batch(n: int = 3, *, ts: int = NOW, value: bytes = b"v", producer: tuple[int, int, int] = (-1, -1, -1),
          key: bytes | None = b"k", ts_step: int = 1) -> bytearray:
    """A valid v2 batch of `n` records, timestamps ts, ts+step, ...; producer = (id, epoch, base sequence)."""
    records = [Record(i, i * ts_step, key, value + b"%d" % i) for i in range(n)]
    return bytearray(build_batch(records, base_timestamp=ts, producer_id=producer[0],
                                 producer_epoch=producer[1], base_sequence=producer[2]))


def append(log: Log, data: bytearray, now: int = NOW) -> AppendResult:
    return log.append(data, [(0, parse_header(data))], now_ms=now)


def config(**overrides: int) -> LogConfig:
    return LogConfig(**overrides)  # type: ignore[arg-type]


def open_log(path: Path, clean: bool = True, recovery_point: int = 0, **overrides: int) -> Log:
    return Log(path, "t", 0, TOPIC_ID, config(**overrides), clean=clean, recovery_point=recovery_point,
               clock_ms=lambda: NOW)


def read_spans(log: Log, offset: int, max_bytes: int = 1 << 20, **kwargs: int | bool) -> list[tuple[int, int]]:
    """(base, last) offsets of the batches a read returns."""
    region = log.read(offset, max_bytes, **kwargs).region  # type: ignore[arg-type]
    if region is None:
        return []
    data = region.read_bytes()
    spans = [(h.base_offset, h.last_offset) for _, h in iter_batches(data)]
    assert sum(parse_header(data, p).size for p, _ in iter_batches(data)) == len(data), "partial batch read"
    return spans


def log_file(path: Path, base: int = 0, suffix: str = ".log") -> Path:
    return path / f"{base:020d}{suffix}"
