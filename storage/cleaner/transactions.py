"""What the cleaner knows about transactions while it walks a run of segments (Kafka's
`CleanedTransactionMetadata`).

- The aborted transactions overlapping the segments walked (from their `.txnindex`) become "ongoing
  aborted" once the walk reaches their first offset; every transactional data batch of such a producer is
  aborted data: its records are removed, and neither the offset map nor the output keeps them.
- A transactional batch of any other producer belongs to a transaction that committed (or is still
  open: the clean never goes past the last stable offset): its producer is "ongoing committed".
- An ABORT marker whose transaction still had data in this walk stays, and its transaction goes into
  the cleaned segment's `.txnindex` (consumers still need to skip that data until it is gone); once no
  data of it is left, the marker may go. A COMMIT marker may go once no batch of its transaction was
  seen in the walk. A marker that may go is kept `delete.retention.ms` longer first (the delete
  horizon, stamped on its batch as for tombstones), so a consumer that read the data before the
  clean still sees the marker.
"""

from __future__ import annotations

import heapq

from pybroker.protocol.records.batch import BatchHeader, RecordsError
from pybroker.protocol.records.control import ABORT, COMMIT, control_type
from pybroker.protocol.records.record import decode_records
from pybroker.storage.transaction_index import AbortedTxn

#: the control type of a batch whose record cannot be read: never dropped
UNREADABLE = -1


def marker_type(raw: bytes, header: BatchHeader) -> int | None:
    """The control record type of the control batch `raw`; None when its records are already gone."""
    if header.records_count == 0:
        return None
    try:
        return control_type(decode_records(raw, 0, header)[0])
    except (RecordsError, IndexError):
        return UNREADABLE


class _Aborted:
    __slots__ = ("seen_data", "txn")

    def __init__(self, txn: AbortedTxn) -> None:
        self.txn = txn
        self.seen_data = False


class CleanedTransactions:
    """Transaction state carried across the batches of one walk (the offset-map pass, or the recopy)."""

    def __init__(self) -> None:
        self._pending: list[tuple[int, int, AbortedTxn]] = []  # heap by first offset (then last)
        self._aborted: dict[int, _Aborted] = {}
        self._committed: set[int] = set()
        #: aborted transactions whose markers the output keeps: the cleaned segment's `.txnindex`
        self.kept_aborts: list[AbortedTxn] = []

    def take_kept_aborts(self) -> list[AbortedTxn]:
        """The aborts kept since the last call (one cleaned segment's `.txnindex`)."""
        kept, self.kept_aborts = self.kept_aborts, []
        return kept

    def add_aborted(self, txns: list[AbortedTxn]) -> None:
        for txn in txns:
            heapq.heappush(self._pending, (txn.first_offset, txn.last_offset, txn))

    def _start_up_to(self, offset: int) -> None:
        pending = self._pending
        while pending and pending[0][0] <= offset:
            txn = heapq.heappop(pending)[2]
            self._aborted.setdefault(txn.producer_id, _Aborted(txn))

    def on_data_batch(self, header: BatchHeader) -> bool:
        """True when the batch is aborted data (all its records may go)."""
        self._start_up_to(header.last_offset)
        if not header.is_transactional:
            return False
        aborted = self._aborted.get(header.producer_id)
        if aborted is not None:
            aborted.seen_data = True
            return True
        self._committed.add(header.producer_id)
        return False

    def on_marker(self, header: BatchHeader, control_type: int | None) -> bool:
        """True when the marker batch may be removed (once its delete horizon passed); `control_type` is
        None for a batch whose records are already gone (an emptied marker)."""
        self._start_up_to(header.last_offset)
        if control_type is None:
            return True
        if control_type == ABORT:
            aborted = self._aborted.pop(header.producer_id, None)
            if aborted is not None and aborted.seen_data:
                self.kept_aborts.append(aborted.txn)
                return False
            return True
        if control_type == COMMIT:
            if header.producer_id in self._committed:
                self._committed.discard(header.producer_id)
                return False
            return True
        return False  # another control record (KRaft's): never ours to drop
