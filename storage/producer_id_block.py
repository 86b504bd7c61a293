"""Producer ids that never repeat across restarts, handed out in persisted blocks.

Kafka's controller hands brokers blocks of 1000 producer ids; we do the same against a small file in
the first log dir: the end of the current block is written (atomically, fsynced) before any id in it is
given out, so a crash can skip ids but never reuse one.
"""

from __future__ import annotations

from pathlib import Path

from pybroker.storage.files import atomic_write

BLOCK_SIZE = 1000
FILE_NAME = "producer-id-block"


class ProducerIdBlock:
    def __init__(self, log_dir: Path) -> None:
        self._path = Path(log_dir) / FILE_NAME
        self._next = self._read()
        self._block_end = self._next

    def _read(self) -> int:
        try:
            return int(self._path.read_text().strip() or 0)
        except FileNotFoundError:
            return 0
        except ValueError:
            raise OSError(f"{self._path} is corrupt") from None

    def _write(self, value: int) -> None:
        atomic_write(self._path, f"{value}\n".encode())

    def next_id(self) -> int:
        if self._next >= self._block_end:
            self._block_end = self._next + BLOCK_SIZE
            self._write(self._block_end)
        producer_id = self._next
        self._next += 1
        return producer_id
