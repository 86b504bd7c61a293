"""One partition as the broker's requests see it: append, append a marker, read, wait for a position.

Kafka's `Partition` in our terms. Handlers validate; the partition layer writes: `append` puts validated
batches in the log, wakes the operations watching the partition (fetch long-polls) and, for acks=all,
returns an operation that completes only once the flusher has fsynced the bytes. Appending, waking and the
durable wait are one call, so produce, the offsets topic, the transaction state topic and the transaction
markers cannot each get the sequence slightly different.

A `Partition` lives for one call: it holds the `Log` that storage's `LogManager` has for the partition now
(a partition moving between log dirs gets a new `Log`), so get a fresh one from the `ReplicaManager` for
every request; operations that outlive the call look the log up again when they need it. An append that
finds its log closed by such a move follows it to the new log once, so no caller retries by hand.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pybroker.broker.loggers.structlog_setup import get_logger
from pybroker.broker.partitions.delayed import DelayedOperation
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.records.batch import BatchHeader, RecordsError
from pybroker.storage.errors import LogClosedError, ProducerStateError
from pybroker.storage.log import ReadResult

if TYPE_CHECKING:
    from pybroker.broker.partitions.manager import ReplicaManager
    from pybroker.storage.log import AppendResult, Log

log = get_logger("pybroker.partitions")

ACKS_ALL = -1


@dataclass(slots=True)
class AppendOutcome:
    """One partition's append as its request is answered: the offsets, or why there are none."""

    error: ErrorCode
    message: str | None = None
    base_offset: int = -1
    last_offset: int = -1
    log_start_offset: int = -1
    #: an idempotent producer's retry: the original offsets, nothing written
    duplicate: bool = False
    #: a produced batch refused record by record: (index in the batch, why), for Produce v8+ answers
    record_errors: tuple[tuple[int, str], ...] = ()
    #: the time stamped on a produced batch of a LogAppendTime topic, else -1
    log_append_time: int = -1


def _appended(result: AppendResult) -> AppendOutcome:
    return AppendOutcome(ErrorCode.NONE, None, result.base_offset, result.last_offset, result.log_start_offset,
                         result.duplicate)


class DelayedAppend(DelayedOperation[AppendOutcome]):
    """An append as its caller sees it: `outcome` holds the offsets (or the refusal) at once, and the
    operation completes when the answer may go out: at once, or for acks=all once the log is fsynced up
    to the append's last offset (`outcome` then says whether that worked)."""

    __slots__ = ("_flushed", "key", "manager", "outcome")

    def __init__(self, manager: ReplicaManager | None, key: tuple[str, int], outcome: AppendOutcome, *,
                 wait_for_flush: bool) -> None:
        super().__init__()
        self.manager = manager
        self.key = key
        self.outcome = outcome
        self._flushed = not wait_for_flush
        if not wait_for_flush:
            self.force_complete()

    def flushed(self, result: int | BaseException) -> None:
        """The flusher's answer, on the loop: the new recovery point, or why there is none."""
        if isinstance(result, BaseException):
            self._failed(result)
        self._flushed = True
        self.try_complete()

    def _failed(self, exc: BaseException) -> None:
        outcome = self.outcome
        outcome.base_offset = -1
        if isinstance(exc, LogClosedError):
            # the topic was deleted while its batch waited for fsync: as Kafka's delayed produce answers
            # once the partition is gone, not a disk failure
            outcome.error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            outcome.message = "the partition was deleted before the records were flushed"
            return
        topic, partition = self.key
        log.error("flush failed", topic=topic, partition=partition, error=repr(exc))
        if isinstance(exc, OSError) and self.manager is not None:
            self.manager.report_io_error(topic, partition, exc)
        outcome.error = ErrorCode.KAFKA_STORAGE_ERROR
        outcome.message = "the log could not be flushed to disk"

    def ready(self) -> bool:
        return self._flushed

    def answer(self) -> AppendOutcome:
        return self.outcome


class PositionWait(DelayedOperation[bool]):
    """`Partition.wait_for`: complete once the partition's high watermark reaches a position (True), or at
    the deadline, or when the partition goes away (False)."""

    __slots__ = ("key", "manager", "position")

    def __init__(self, manager: ReplicaManager, key: tuple[str, int], position: int) -> None:
        super().__init__()
        self.manager = manager
        self.key = key
        self.position = position

    def _reached(self) -> bool | None:
        current = self.manager.logs.get_log(*self.key)
        if current is None or not self.manager.logs.is_online(current):
            return None
        return current.high_watermark >= self.position

    def ready(self) -> bool:
        return self._reached() is not False

    def answer(self) -> bool:
        return bool(self._reached())


def refused(key: tuple[str, int], code: ErrorCode, message: str | None = None,
            record_errors: tuple[tuple[int, str], ...] = (), log_start_offset: int = -1) -> DelayedAppend:
    """An append that never happened, and why (and which records to blame): complete from the start."""
    return DelayedAppend(None, key, AppendOutcome(code, message, log_start_offset=log_start_offset,
                                                  record_errors=record_errors), wait_for_flush=False)


class Partition:
    """A partition and its current log, for the length of one call."""

    __slots__ = ("key", "log", "manager")

    def __init__(self, manager: ReplicaManager, key: tuple[str, int], partition_log: Log) -> None:
        self.manager = manager
        self.key = key
        self.log = partition_log

    @property
    def topic(self) -> str:
        return self.key[0]

    @property
    def index(self) -> int:
        return self.key[1]

    @property
    def config(self) -> Any:
        return self.log.config

    # -- writing -------------------------------------------------------------------------------------
    def append(self, records: bytearray | memoryview, batches: list[tuple[int, BatchHeader]], *, acks: int,
               now_ms: int, record_count: int | None = None) -> DelayedAppend:
        """Append validated batches, wake the partition's watchers, and return the outcome: complete at
        once for acks 0 and 1 (the flush window fsyncs them within flush.ms, `storage.flush_window`) and
        for a refusal, complete after the fsync for acks=all (`ACKS_ALL`). With `record_count` (clients' produce), the
        topic's traffic metrics count what was written."""
        try:
            try:
                result = self.log.append(records, batches, now_ms=now_ms)
            except LogClosedError:
                if not self._follow_move():
                    raise
                result = self.log.append(records, batches, now_ms=now_ms)
        except Exception as exc:
            return refused(self.key, *self._append_error(exc))
        if not result.duplicate:
            self.manager.purgatory.notify(self.key)
            if record_count is not None:
                self.manager.traffic.appended(self.key[0], len(records), record_count)
        if acks == ACKS_ALL:
            return self._durable(result)
        target = self.log
        if target.unflushed_messages >= target.config.flush_interval_messages:
            self.manager.logs.flusher_for(target).request(target, result.last_offset + 1)
        else:  # nobody fsyncs these now: the flush window does within flush.ms; the page-cache budget
            target.recycle_unflushed()  # recycles them meanwhile
            self.manager.logs.dirtied(target)
        return DelayedAppend(self.manager, self.key, _appended(result), wait_for_flush=False)

    def append_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool, *,
                      now_ms: int) -> DelayedAppend:
        """A transaction's COMMIT or ABORT control batch (it ends the producer's open transaction here and
        moves the last stable offset), its watchers woken, complete once it is fsynced."""
        try:
            try:
                result = self.log.append_marker(producer_id, producer_epoch, coordinator_epoch, commit,
                                                now_ms=now_ms)
            except LogClosedError:
                if not self._follow_move():
                    raise
                result = self.log.append_marker(producer_id, producer_epoch, coordinator_epoch, commit,
                                                now_ms=now_ms)
        except Exception as exc:
            return refused(self.key, *self._append_error(exc))
        self.manager.purgatory.notify(self.key)
        return self._durable(result)

    def _follow_move(self) -> bool:
        """The log was closed under the append (nothing written): if that was a move to another log dir
        (`LogManager.replace_log` swapped in a new `Log` while the append waited for the swap), hold the
        new log and say so, so the append is tried once more there; a deletion leaves nothing to follow."""
        moved = self.manager.logs.get_log(*self.key)
        if moved is None or moved is self.log:
            return False
        self.log = moved
        return True

    def _durable(self, result: AppendResult) -> DelayedAppend:
        operation = DelayedAppend(self.manager, self.key, _appended(result), wait_for_flush=True)
        target = self.log
        self.manager.logs.flusher_for(target).notify(target, result.last_offset + 1, operation.flushed,
                                                      asyncio.get_running_loop())
        return operation

    def _append_error(self, exc: Exception) -> tuple[ErrorCode, str]:
        """What a failed append tells its request (anything not listed here is a bug: raised)."""
        if isinstance(exc, ProducerStateError):  # fenced or out of sequence: the producer's own problem
            return ErrorCode(exc.error_code), str(exc)
        if isinstance(exc, LogClosedError):  # deleted (or its dir gone offline) meanwhile
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "the partition went away during the append"
        if isinstance(exc, OSError):
            log.error("append failed", topic=self.topic, partition=self.index, error=str(exc))
            self.manager.logs.report_io_error(self.log, exc)
            return ErrorCode.KAFKA_STORAGE_ERROR, "the log could not be written"
        if isinstance(exc, RecordsError):
            log.error("append refused a batch", topic=self.topic, partition=self.index, error=str(exc))
            return ErrorCode(exc.error_code), exc.message
        raise exc

    # -- reading -------------------------------------------------------------------------------------
    def positions(self) -> tuple[Any, ...]:
        """What a read's answer depends on: the log (a new one after a move or a re-creation), the high
        watermark, the last stable offset and the log start. Equal positions, equal answers."""
        target = self.log
        return (target, *target.positions())

    def read(self, offset: int, max_bytes: int, *, read_committed: bool, min_one_batch: bool,
             bound: int | None = None) -> tuple[ReadResult, list[tuple[int, int]] | None]:
        """Whole batches from `offset` up to the high watermark (read_committed: the last stable offset;
        `bound` is that offset when the caller just took it from `positions`), and for read_committed the
        aborted transactions whose records the region holds, as (producer id, first offset). Raises
        `OffsetOutOfRange`, or `OSError` (after taking the log's dir offline)."""
        target = self.log
        if bound is None:
            bound = target.last_stable_offset if read_committed else target.high_watermark
        try:
            result = target.read(offset, max_bytes, max_offset=bound, min_one_batch=min_one_batch,
                                 want_upper_bound=read_committed)
            aborted = None
            if read_committed:
                aborted = (target.aborted_transactions(offset, result.upper_bound)
                           if result.region is not None else [])
        except OSError as exc:
            self.manager.logs.report_io_error(target, exc)
            raise
        return result, aborted

    def wait_for(self, position: int, timeout_s: float) -> DelayedOperation[bool]:
        """Complete (True) once the high watermark reaches `position`; False at the deadline or if the
        partition goes away. Compares positions on each append; reads nothing."""
        operation = PositionWait(self.manager, self.key, position)
        if not operation.try_complete():
            self.manager.purgatory.watch(operation, (self.key,))
            operation.expire_after(timeout_s)
        return operation
