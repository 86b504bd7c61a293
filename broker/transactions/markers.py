"""Transaction markers: the commit or abort control batch written into every partition of a transaction.

`write_markers` is the one path by which a marker reaches a log: EndTxn's completion, the completion of a
transaction found prepared after a restart, and the WriteTxnMarkers API all use it. Per partition it
appends Kafka's control batch (`Log.append_marker`, which ends the producer's open transaction there,
records an abort in `.txnindex` and moves the last stable offset), wakes fetches waiting on the
partition, and waits for the fsync; for a `__consumer_offsets` partition it then tells the group
coordinator, which makes the transaction's offsets visible (commit) or drops them (abort).

Each partition gets its own code: NONE, UNKNOWN_TOPIC_OR_PARTITION (no such partition: deleted),
KAFKA_STORAGE_ERROR (offline or failed write: worth retrying), or the producer-state refusal
(INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from pybroker.broker.flush_wait import flushed
from pybroker.broker.groups.offsets_topic import OFFSETS_TOPIC
from pybroker.broker.logs import get_logger
from pybroker.protocol.errors import ErrorCode
from pybroker.storage.errors import LogClosedError, ProducerStateError

if TYPE_CHECKING:
    from pybroker.broker.state import BrokerState

log = get_logger("pybroker.transactions")

#: markers appended before the loop gets a turn for other work
MARKERS_PER_TURN = 100


async def write_markers(state: BrokerState, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                        commit: bool, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], ErrorCode]:
    results: dict[tuple[str, int], ErrorCode] = {}
    waits: list[tuple[tuple[str, int], Any]] = []
    now = state.clock_ms()
    for index, (topic, partition) in enumerate(partitions):
        if index and index % MARKERS_PER_TURN == 0:
            await asyncio.sleep(0)  # a transaction over thousands of partitions does not hold the loop
        key = (topic, partition)
        target = state.logs.get_log(topic, partition)
        if target is None:
            results[key] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            continue
        if not state.logs.is_online(target):
            results[key] = ErrorCode.KAFKA_STORAGE_ERROR
            continue
        try:
            try:
                result = target.append_marker(producer_id, producer_epoch, coordinator_epoch, commit, now_ms=now)
            except LogClosedError:  # moved to another log dir as it waited for the swap: nothing was written
                moved = state.logs.get_log(topic, partition)
                if moved is None or moved is target:
                    raise
                target = moved
                result = target.append_marker(producer_id, producer_epoch, coordinator_epoch, commit, now_ms=now)
        except ProducerStateError as exc:  # the caller reports it (its answer carries the code)
            results[key] = ErrorCode(exc.error_code)
            continue
        except LogClosedError:
            results[key] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            continue
        except OSError as exc:
            log.error("transaction marker append failed", topic=topic, partition=partition, error=str(exc))
            state.logs.report_io_error(target, exc)
            results[key] = ErrorCode.KAFKA_STORAGE_ERROR
            continue
        state.purgatory.notify(key)
        waits.append((key, flushed(state.logs.flusher_for(target), target, result.last_offset + 1)))
    outcomes = await asyncio.gather(*(w for _, w in waits), return_exceptions=True)
    for (key, _), outcome in zip(waits, outcomes, strict=True):
        if isinstance(outcome, LogClosedError):
            results[key] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        elif isinstance(outcome, BaseException):
            log.error("transaction marker flush failed", topic=key[0], partition=key[1], error=repr(outcome))
            results[key] = ErrorCode.KAFKA_STORAGE_ERROR
        else:
            results[key] = ErrorCode.NONE
            if key[0] == OFFSETS_TOPIC:
                _complete_offsets(state, key[1], producer_id, commit)
    return results


def _complete_offsets(state: BrokerState, partition: int, producer_id: int, commit: bool) -> None:
    try:
        state.groups.complete_transaction(partition, producer_id, commit)
    except Exception:
        log.exception("group coordinator failed to complete a transaction's offsets", partition=partition,
                      producer_id=producer_id)
