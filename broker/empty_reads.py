"""Fetch reads that fitted nothing, remembered from one fetch to the next (the event loop's only: handlers).

Why: librdkafka has no fetch sessions, so each of its fetches names every partition it consumes. Over 1,024
partitions, about 50 of them fill a 50 MB answer. Each of the others is read with the few bytes left over,
its next batch does not fit, and its answer is its offsets and no records. The next fetch asks those
partitions at the same offsets with about as few bytes left, and each read finds the same batch not fitting.

Such a read gives the same answer again while nothing it depends on moved:
- the same log object (a move or a re-creation makes a new one);
- the same list of segments (a roll, a cleaner's swap, a retention deletion and a truncation each publish a
  new list; a segment's bytes below the log end never change in place);
- the same high watermark, last stable offset and log start;
- the same offset and isolation;
- a byte limit no larger than one that already fitted nothing (a read answers the longest run of whole
  batches that fits its limit, so a smaller limit fits nothing too).
Then the remembered answer is the answer, and nothing is read.

Only reads made after the answer's first bytes are remembered: the first partition with data always gets
one batch whole (KIP-74), so its read may not be skipped. The table keeps one entry per partition, and is emptied
whenever the broker's table of logs changes (a partition created, deleted or moved: `LogManager.table` is
then a new object), so it never holds more entries than the broker has partitions, and never keeps a
deleted partition's log alive.
"""

from __future__ import annotations

from typing import Any


class EmptyRead:
    """A read that fitted nothing: the log it was read from, what it was read at, and the partition's answer."""

    __slots__ = ("data", "limit", "log", "offset", "positions", "read_committed", "segments")

    def __init__(self, positions: tuple[Any, ...], offset: int, limit: int, read_committed: bool, data: Any) -> None:
        log = positions[0]
        self.log = log
        #: (high watermark, last stable offset, log start), as `Log.positions` gives them
        self.positions = positions[1:]
        self.segments = log.segments
        self.offset = offset
        self.limit = limit
        self.read_committed = read_committed
        self.data = data

    def answers(self, offset: int, limit: int, read_committed: bool) -> bool:
        """Would a read of this entry's log now, at `offset` and this limit, fit nothing again? Asks the log
        for its positions itself: a fetch names hundreds of such partitions, and the caller then needs
        neither a `Partition` nor the positions of any of them."""
        log = self.log
        return (offset == self.offset and limit <= self.limit and read_committed is self.read_committed
                and log.segments is self.segments and log.positions() == self.positions)


class EmptyReads:
    """The empty reads of the fetches so far, one per partition (`get` takes its (topic, partition) key).

    An entry's log is the table's log for its key: the table of logs is replaced whole by every creation,
    deletion and move, and `follow` empties this one whenever it was."""

    __slots__ = ("_reads", "_table", "get")

    def __init__(self) -> None:
        self._reads: dict[tuple[str, int], EmptyRead] = {}
        self._table: object = None
        #: the partition's entry or None: the dict's own `get`, asked once for each partition a fetch reads
        self.get = self._reads.get

    def __len__(self) -> int:
        return len(self._reads)

    def follow(self, table: object) -> None:
        """Before a fetch's reads: forget everything if the broker's table of logs is not the one the entries
        were read under (`LogManager.table`)."""
        if table is not self._table:
            self._reads.clear()
            self._table = table

    def remember(self, positions: tuple[Any, ...], offset: int, limit: int, read_committed: bool, data: Any) -> None:
        """A read at `positions` (the log first) that fitted nothing, past the answer's first bytes."""
        log = positions[0]
        self._reads[log.topic, log.partition] = EmptyRead(positions, offset, limit, read_committed, data)
