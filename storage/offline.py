"""The log dir as tools outside the broker read it: the one module of `storage` that `pybroker.clients` may use.

The offline commands (`pybroker dump-log`, `pybroker check-log`) read segment, index, snapshot and
transaction-index files the way the broker writes them, without a running broker. They need the file
formats and the checker, never the broker's live objects (`Log`, `LogManager`): this module names what
they may rely on, so a change inside storage that keeps these names keeps the tools working. Everything
here reads files only; any thread may call it.
"""

from __future__ import annotations

from pybroker.storage.errors import CorruptSnapshotError
from pybroker.storage.log_dir import LOCK_FILE
from pybroker.storage.producer_snapshot import decode_snapshot
from pybroker.storage.transaction_index import ENTRY as TXN_INDEX_ENTRY
from pybroker.storage.transaction_index import ENTRY_SIZE as TXN_INDEX_ENTRY_SIZE
from pybroker.storage.verify import OFFSET_ENTRY, TIME_ENTRY, check_log_dir, segment_files

__all__ = [
    "LOCK_FILE",
    "OFFSET_ENTRY",
    "TIME_ENTRY",
    "TXN_INDEX_ENTRY",
    "TXN_INDEX_ENTRY_SIZE",
    "CorruptSnapshotError",
    "check_log_dir",
    "decode_snapshot",
    "segment_files",
]
