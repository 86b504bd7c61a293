"""One share-partition's delivery state (KIP-932), as a pure state machine: no I/O, no clock of its own.

A share group reads a topic partition cooperatively: any member may be handed any record, and each record
is acknowledged on its own. The share-partition keeps:

- the start offset (Kafka's SPSO): every record below it is done (acknowledged or archived);
- the end offset (SPEO): the first offset never handed out; records from it on are new;
- for each in-flight offset between them, its state and delivery count, and while acquired, the member
  holding it and the deadline of its acquisition lock.

States are Kafka's ids: AVAILABLE 0, ACQUIRED 1, ACKNOWLEDGED 2, ARCHIVED 4. An acquisition adds one to
the delivery count; a release, a lock that times out or the holder leaving make the record available
again, unless its delivery count reached `delivery_count_limit`, which archives it. Accept acknowledges,
reject archives, renew restarts the lock; a gap (an offset that holds no record, such as a transaction
marker) archives. Acknowledging a record this member does not hold is INVALID_RECORD_STATE, and nothing
of that acknowledgement batch changes (a batch is checked whole before it is applied).

The records in flight are capped at `max_in_flight` (Kafka's `group.share.partition.max.record.locks`):
no new record is acquired while that many are between the start and end offsets.

The durable form is the start offset and the state batches (`state_batches`), what `__share_group_state`
holds: an acquired record is written as available with its delivery count, so after a restart it is
delivered again and counted (or archived, when that delivery was its last allowed).
`SharePartition.restore` rebuilds from them.

Threads: the event loop only (the share-group handlers and their timer); every method takes `now_ms`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from pybroker.protocol.errors import ErrorCode


class RecordState(IntEnum):
    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AckType(IntEnum):
    """The acknowledge types of ShareFetch and ShareAcknowledge."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


#: what each acknowledge type does to an acquired record (RELEASE and RENEW are decided by the record)
_ACK_TARGET = {AckType.GAP: RecordState.ARCHIVED, AckType.ACCEPT: RecordState.ACKNOWLEDGED,
               AckType.REJECT: RecordState.ARCHIVED}
_DONE = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


@dataclass(slots=True)
class InFlight:
    state: RecordState
    delivery_count: int
    member: str | None = None
    deadline_ms: int = 0


@dataclass(frozen=True, slots=True)
class Acquired:
    """A run of consecutive offsets acquired with one delivery count (ShareFetch's AcquiredRecords)."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class StateBatch:
    """A run of offsets in one durable state with one delivery count (`__share_group_state`'s StateBatch)."""

    first_offset: int
    last_offset: int
    state: int
    delivery_count: int


class SharePartition:
    """The delivery state of one (group, topic, partition)."""

    def __init__(self, start_offset: int, *, lock_duration_ms: int, delivery_count_limit: int,
                 max_in_flight: int) -> None:
        self.start_offset = start_offset
        self.end_offset = start_offset
        self.lock_duration_ms = lock_duration_ms
        self.delivery_count_limit = delivery_count_limit
        self.max_in_flight = max_in_flight
        self.records: dict[int, InFlight] = {}

    # -- acquiring ------------------------------------------------------------------------------------

    def acquirable(self, log_end: int) -> int | None:
        """The first offset an acquisition would hand out with the log ending at `log_end`, or None."""
        for offset in range(self.start_offset, self.end_offset):
            record = self.records.get(offset)
            if record is not None and record.state is RecordState.AVAILABLE:
                return offset
        if self.end_offset < log_end and self.end_offset - self.start_offset < self.max_in_flight:
            return self.end_offset
        return None

    def acquire(self, member: str, log_end: int, max_records: int, now_ms: int,
                up_to: int | None = None) -> list[Acquired]:
        """Acquire at most `max_records` available records for `member`, below `log_end` (the high watermark,
        or the last stable offset for read_committed) and at or below `up_to` (the last offset the caller
        read records for): first those made available again, in offset order, then new ones."""
        limit = log_end - 1 if up_to is None else min(up_to, log_end - 1)
        taken: list[tuple[int, int]] = []
        for offset in range(self.start_offset, min(self.end_offset, limit + 1)):
            if len(taken) >= max_records:
                break
            record = self.records.get(offset)
            if record is not None and record.state is RecordState.AVAILABLE:
                self._take(record, member, now_ms)
                taken.append((offset, record.delivery_count))
        while (len(taken) < max_records and self.end_offset <= limit
               and self.end_offset - self.start_offset < self.max_in_flight):
            record = InFlight(RecordState.AVAILABLE, 0)
            self.records[self.end_offset] = record
            self._take(record, member, now_ms)
            taken.append((self.end_offset, record.delivery_count))
            self.end_offset += 1
        return _runs(taken)

    def _take(self, record: InFlight, member: str, now_ms: int) -> None:
        record.state = RecordState.ACQUIRED
        record.delivery_count += 1
        record.member = member
        record.deadline_ms = now_ms + self.lock_duration_ms

    # -- acknowledging --------------------------------------------------------------------------------

    def acknowledge(self, member: str, first: int, last: int, types: list[int], now_ms: int) -> ErrorCode:
        """Apply one acknowledgement batch: one type for the whole range, or one per offset."""
        if last < first or not types or (len(types) != 1 and len(types) != last - first + 1):
            return ErrorCode.INVALID_REQUEST
        try:
            kinds = [AckType(t) for t in types]
        except ValueError:
            return ErrorCode.INVALID_REQUEST
        if last - first + 1 > self.max_in_flight:
            return ErrorCode.INVALID_RECORD_STATE
        for offset in range(first, last + 1):
            record = self.records.get(offset)
            if record is None or record.state is not RecordState.ACQUIRED or record.member != member:
                return ErrorCode.INVALID_RECORD_STATE
        for i, offset in enumerate(range(first, last + 1)):
            kind = kinds[0] if len(kinds) == 1 else kinds[i]
            record = self.records[offset]
            if kind is AckType.RENEW:
                record.deadline_ms = now_ms + self.lock_duration_ms
            elif kind is AckType.RELEASE:
                self._release(record)
            else:
                record.state = _ACK_TARGET[kind]
                record.member = None
        self._advance()
        return ErrorCode.NONE

    def _release(self, record: InFlight) -> None:
        record.member = None
        record.state = (RecordState.ARCHIVED if record.delivery_count >= self.delivery_count_limit
                        else RecordState.AVAILABLE)

    # -- locks, members and the log -------------------------------------------------------------------

    def expire_locks(self, now_ms: int) -> int:
        """Release every record whose acquisition lock ran out; returns how many."""
        expired = 0
        for record in self.records.values():
            if record.state is RecordState.ACQUIRED and record.deadline_ms <= now_ms:
                self._release(record)
                expired += 1
        if expired:
            self._advance()
        return expired

    def next_deadline(self) -> int | None:
        deadlines = [r.deadline_ms for r in self.records.values() if r.state is RecordState.ACQUIRED]
        return min(deadlines) if deadlines else None

    def release_member(self, member: str) -> int:
        """The member left or closed its share session: what it held is available again."""
        released = 0
        for record in self.records.values():
            if record.state is RecordState.ACQUIRED and record.member == member:
                self._release(record)
                released += 1
        if released:
            self._advance()
        return released

    def log_start_moved(self, log_start: int) -> None:
        """Records below the log's start are gone (retention, DeleteRecords): the share-partition starts there."""
        if log_start <= self.start_offset:
            return
        for offset in range(self.start_offset, min(log_start, self.end_offset)):
            self.records.pop(offset, None)
        self.start_offset = log_start
        self.end_offset = max(self.end_offset, log_start)

    def reset(self, offset: int) -> None:
        """Start again at `offset` with nothing in flight (AlterShareGroupOffsets on an empty group)."""
        self.records.clear()
        self.start_offset = self.end_offset = offset

    def _advance(self) -> None:
        while self.start_offset < self.end_offset:
            record = self.records.get(self.start_offset)
            if record is None or record.state not in _DONE:
                break
            del self.records[self.start_offset]
            self.start_offset += 1

    # -- the durable form -----------------------------------------------------------------------------

    def state_batches(self) -> list[StateBatch]:
        """The in-flight records as runs of (state, delivery count), acquired written as available."""
        rows: list[tuple[int, int, int]] = []
        for offset in range(self.start_offset, self.end_offset):
            record = self.records.get(offset)
            if record is None:
                continue
            durable = RecordState.AVAILABLE if record.state is RecordState.ACQUIRED else record.state
            rows.append((offset, int(durable), record.delivery_count))
        batches: list[StateBatch] = []
        for offset, state, count in rows:
            last = batches[-1] if batches else None
            if last is not None and last.last_offset + 1 == offset and (last.state, last.delivery_count) == (state, count):
                batches[-1] = StateBatch(last.first_offset, offset, state, count)
            else:
                batches.append(StateBatch(offset, offset, state, count))
        return batches

    def delivery_complete_count(self) -> int:
        return sum(1 for r in self.records.values() if r.state in _DONE)

    @classmethod
    def restore(cls, start_offset: int, batches: list[StateBatch], *, lock_duration_ms: int,
                delivery_count_limit: int, max_in_flight: int) -> SharePartition:
        """Rebuild from the durable form: the end offset follows the last batch (records past it are new)."""
        partition = cls(start_offset, lock_duration_ms=lock_duration_ms, delivery_count_limit=delivery_count_limit,
                        max_in_flight=max_in_flight)
        for batch in batches:
            first = max(batch.first_offset, start_offset)
            if batch.last_offset - first + 1 > max_in_flight:
                continue
            try:
                state = RecordState(batch.state)
            except ValueError:
                continue
            count = max(0, batch.delivery_count)
            if state in (RecordState.ACQUIRED, RecordState.AVAILABLE):  # delivered as often as allowed: done
                state = RecordState.ARCHIVED if count >= delivery_count_limit else RecordState.AVAILABLE
            for offset in range(first, batch.last_offset + 1):
                partition.records[offset] = InFlight(state, count)
            partition.end_offset = max(partition.end_offset, batch.last_offset + 1)
        for offset in range(start_offset, partition.end_offset):  # an offset no batch names is available
            partition.records.setdefault(offset, InFlight(RecordState.AVAILABLE, 0))
        partition._advance()
        return partition


def _runs(taken: list[tuple[int, int]]) -> list[Acquired]:
    runs: list[Acquired] = []
    for offset, count in taken:
        last = runs[-1] if runs else None
        if last is not None and last.last_offset + 1 == offset and last.delivery_count == count:
            runs[-1] = Acquired(last.first_offset, offset, count)
        else:
            runs.append(Acquired(offset, offset, count))
    return runs
