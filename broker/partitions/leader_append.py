"""A client's produced batch from the request to its partition's log: Kafka's `appendRecordsToLeader`.

`append_records` (called as `ReplicaManager.append_records` by the produce handler, once per partition)
does every step between the decoded request and the segment file, in Kafka's order:
1. find the partition for a write (UNKNOWN_TOPIC_OR_PARTITION, KAFKA_STORAGE_ERROR, internal topics
   refused), and refuse empty records;
2. the header checks (`validator.check_header`): the one parse of the batch's header; then, when the
   broker serves a schema registry, the topic's schema validation (`broker/schema_registry/validation.py`);
3. a transactional batch is checked with the transaction coordinator (KIP-890: `TransactionCheck`, from
   the handler) before anything else; v12 adds the partition to the transaction first (work to await);
4. the record walk: on the loop for an uncompressed batch, in `validator.VALIDATION_POOL` for a
   compressed one, and in a worker process (`validation_processes`) when its payload inflates past what
   a thread may (the append then waits for it, and keeps its turn: `AppendOrder`);
5. the timestamps stamped (`validator.stamp`), then `Partition.append`: offsets assigned in the header,
   one write, watchers woken, and for acks=all the wait for the fsync.

The answer is a `DelayedAppend` (its `outcome` holds the offsets or the refusal, with its message and
the records to blame), or, when something runs off the loop, a coroutine that yields one. A partition
looked up before an await is looked up again after it (it may have moved between log dirs, or gone).

Threads: the event loop. Only the walk of a compressed batch runs in a worker thread (or process).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeAlias

from pybroker.broker.partitions.partition import DelayedAppend, Partition, refused
from pybroker.broker.partitions.validator import (
    VALIDATION_POOL,
    RecordWalk,
    check_header,
    stamp,
    walk,
    walker,
)
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.records.batch import BatchHeader, RecordsError
from pybroker.protocol.records.codecs import NONE
from pybroker.protocol.records.validate import ValidatedRecords

if TYPE_CHECKING:
    from pybroker.broker.partitions.manager import ReplicaManager

#: the transaction coordinator's verdict on a transactional batch (given its header): at once, or work
#: to await (v12 adds the partition to the transaction with a state write first)
TransactionCheck: TypeAlias = Callable[[BatchHeader], "ErrorCode | Awaitable[ErrorCode]"]
#: an append's outcome now, or once validation off the loop (or the transaction's state write) is done
Appending: TypeAlias = "DelayedAppend | Coroutine[Any, Any, DelayedAppend]"



#: the messages Kafka's ReplicaManager gives a transactional batch its verification refused; every other
#: refusal of the transaction check carries none, and the client shows the code's own text
TXN_MESSAGES: dict[ErrorCode, str] = {
    ErrorCode.INVALID_TXN_STATE: "Partition was not added to the transaction",
    ErrorCode.NOT_ENOUGH_REPLICAS: "Unable to verify the partition has been added to the transaction. "
                                   "Underlying error: CONCURRENT_TRANSACTIONS",
}


def append_records(manager: ReplicaManager, topic: str, partition: int, records: Any, *, acks: int, now_ms: int,
                   allow_zstd: bool, transaction: TransactionCheck | None = None) -> Appending:
    """Validate, stamp and append one partition's produced records (see the module's steps).

    `transaction` is None when the request carries no transactional id: a transactional batch is then
    refused (INVALID_RECORD)."""
    target, code = manager.resolve_for_write(topic, partition)
    if target is None:
        return refused((topic, partition), code)
    if records is None or len(records) == 0:
        return refused(target.key, ErrorCode.INVALID_RECORD, "no records")
    try:
        header = check_header(records, target.config, allow_zstd=allow_zstd)
    except RecordsError as exc:
        return _refused(target, exc)
    schemas = manager.schema_validation
    if schemas is not None:  # a broker serving a schema registry: the topic's schema validation, if on
        try:
            problem = schemas.check(topic, records, header)
        except RecordsError as exc:
            problem = exc
        if problem is not None:
            return _refused(target, problem)
    if header.is_transactional:
        if transaction is None:
            return refused(target.key, ErrorCode.INVALID_RECORD,
                           "a transactional batch in a request without a transactional id")
        verdict = transaction(header)
        if not isinstance(verdict, ErrorCode):
            return _verified_then_append(manager, verdict, target.key, records, header, acks, now_ms)
        if verdict is not ErrorCode.NONE:
            return refused(target.key, verdict, TXN_MESSAGES.get(verdict))
    return _checked_append(target, records, header, acks, now_ms)


#: the refusals of records the log validator names (Kafka's RecordValidationException): their answers carry
#: the partition's log start offset, as Kafka's; the other refusals carry -1
RECORD_VALIDATION = frozenset({ErrorCode.INVALID_RECORD, ErrorCode.INVALID_TIMESTAMP})


def _refused(target: Partition, exc: RecordsError) -> DelayedAppend:
    """A batch the validator refused: its code and message, and the records to blame (Produce v8+)."""
    code = ErrorCode(exc.error_code)
    start = target.log.log_start_offset if code in RECORD_VALIDATION else -1
    return refused(target.key, code, exc.message, exc.record_errors, log_start_offset=start)


async def _verified_then_append(manager: ReplicaManager, verdict: Awaitable[ErrorCode], key: tuple[str, int],
                                records: Any, header: BatchHeader, acks: int, now_ms: int) -> DelayedAppend:
    """Produce v12: the partition joins the transaction (a fsynced state write) before the append."""
    code = await verdict
    if code is not ErrorCode.NONE:
        return refused(key, code, TXN_MESSAGES.get(code))
    target, code = manager.resolve_for_write(*key)  # fresh: it may have moved meanwhile
    if target is None:
        return refused(key, code)
    appending = _checked_append(target, records, header, acks, now_ms)
    if isinstance(appending, DelayedAppend):
        return appending
    return await appending


def _checked_append(target: Partition, records: Any, header: BatchHeader, acks: int, now_ms: int) -> Appending:
    """The record walk (off the loop for a compressed batch), then the append in the partition's turn."""
    if header.compression != NONE:
        return _validate_then_append(target, walker(records, header, target.config, now_ms, target.key), acks,
                                     now_ms)
    try:
        validated = walk(records, header, target.config, now_ms, target.key)
    except RecordsError as exc:
        return _refused(target, exc)
    if target.manager.append_order.busy(target.key):  # an earlier append here is still being validated
        return _append_in_turn(target, validated, acks, now_ms)
    return _append(target, validated, acks, now_ms)


def _validate_then_append(target: Partition, check: RecordWalk, acks: int,
                          now_ms: int) -> Coroutine[Any, Any, DelayedAppend]:
    """Validation in a worker thread (or process), then the append in this partition's turn (taken now,
    on the loop)."""
    order = target.manager.append_order
    previous, mine = order.enter(target.key)

    async def run() -> DelayedAppend:
        try:
            try:
                validated = await asyncio.get_running_loop().run_in_executor(VALIDATION_POOL, check.in_thread)
                if validated is None:  # it inflates past what a thread may: a worker process walks it
                    validated = await check.in_process()
            except RecordsError as exc:
                return _refused(target, exc)
            if previous is not None:
                await previous
            return _append_again(target, validated, acks, now_ms)
        finally:
            order.leave(target.key, mine)

    return run()


def _append_in_turn(target: Partition, validated: ValidatedRecords, acks: int,
                    now_ms: int) -> Coroutine[Any, Any, DelayedAppend]:
    """An append validated on the loop that must wait for an earlier one still in a worker thread."""
    order = target.manager.append_order
    previous, mine = order.enter(target.key)

    async def run() -> DelayedAppend:
        try:
            if previous is not None:
                await previous
            return _append_again(target, validated, acks, now_ms)
        finally:
            order.leave(target.key, mine)

    return run()


def _append_again(stale: Partition, validated: ValidatedRecords, acks: int, now_ms: int) -> DelayedAppend:
    """An append after a wait: the partition is looked up again (its log may have moved, or gone)."""
    target, code = stale.manager.resolve_for_write(*stale.key)
    if target is None:
        return refused(stale.key, code, "the partition went away during the append")
    return _append(target, validated, acks, now_ms)


def _append(target: Partition, validated: ValidatedRecords, acks: int, now_ms: int) -> DelayedAppend:
    """The timestamps stamped, then the one append; the outcome carries the log append time."""
    records = stamp(validated, target.config, now_ms)
    appending = target.append(records, validated.batches, acks=acks, now_ms=now_ms,
                              record_count=validated.record_count)
    appending.outcome.log_append_time = validated.log_append_time
    return appending
