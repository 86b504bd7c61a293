"""Fetch (key 1), versions 4-17.

Fetch sessions (KIP-227, `broker/fetch_sessions.py`): the session cache resolves which partitions a
fetch reads (the request's, or a session's) and trims the answer (an incremental fetch answers only the
partitions that changed); this handler only reads.
Records are never copied here: each partition's answer is a file region of a segment that the writer
sends with `os.sendfile`. Limits: `max_bytes` for the response and `partition_max_bytes` per partition,
but the first batch found is always returned whole, so a client can always make progress (KIP-74).
Long poll: below `min_bytes`, the fetch waits in the purgatory until an append to one of its partitions
or `max_wait_ms`, whichever comes first.

Isolation (KIP-98): every answer carries the last stable offset (the first offset of the oldest open
transaction, else the high watermark). read_committed reads stop at it and list, for the range
returned, the aborted transactions whose records it holds (`aborted_transactions`, Kafka's upper bound:
the offset of the first batch after the returned bytes); read_uncommitted reads up to the high
watermark and gets no list (null). A long-poll is woken by marker appends too (their writer notifies
the purgatory), so a read_committed fetch sees the LSO move.

A long-poll's wake re-reads only partitions that moved: each partition's answer is remembered with the
positions it was read at (the log, its high watermark, last stable offset and log start) and the byte
limit it was read with. A read returns the longest run of whole batches that fits its limit, so at the
same positions any limit between the answer's size and the remembered limit gives the same answer (an
earlier partition that grew only lowers the limits of those after it); then the remembered answer is used.
Markers move the high watermark, so a read_committed partition whose LSO or aborted list changed is
always read again.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable
from typing import Any

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler, waiting
from pybroker.broker.fetch_sessions import FetchPlan, read_check
from pybroker.broker.lookup import resolve_partition, topic_by_id
from pybroker.broker.security.quota_throttle import fetch_throttle
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.fetch import (
    AbortedTransaction,
    FetchableTopicResponse,
    FetchRequest,
    FetchResponse,
    PartitionData,
)
from pybroker.storage.errors import LogClosedError, OffsetOutOfRange

READ_COMMITTED = 1
FIRST_TOPIC_ID_VERSION = 13
NO_SESSION = 0


@handler(ApiKey.FETCH, versions=(4, 17))
def handle_fetch(ctx: RequestContext, request: FetchRequest) -> Any:
    plan = ctx.state.fetch_sessions.plan(request, ctx.api_version, ctx.state.clock_ms(), ctx.principal,
                                         read_check(ctx.state, ctx.principal, ctx.peer, ctx.api_version, request))
    if plan.error:
        return plan.error_response()
    request.topics = plan.topics  # a session's partitions at their remembered positions
    can_wait = request.max_wait_ms > 0 and request.min_bytes > 0
    memo: dict[tuple[int, int], _Read] | None = {} if can_wait else None
    response, size, errors = _read_all(ctx, request, memo)
    if size >= request.min_bytes or errors or memo is None or not request.topics:
        return _answer(ctx, plan, response)
    # Watch before returning: the coroutine only starts on a later loop turn, and an append in between
    # must still wake this fetch rather than leave it waiting for max_wait_ms.
    keys = [(t.topic, p.partition_index) for t in response.responses for p in t.partitions]
    return waiting(_finished(ctx, plan, _long_poll(ctx, request, memo, keys, ctx.state.purgatory.watch(keys))))


async def _finished(ctx: RequestContext, plan: FetchPlan, answer: Awaitable[FetchResponse]) -> FetchResponse:
    """The long poll's answer, trimmed by the session (an incremental fetch answers what changed)."""
    return _answer(ctx, plan, await answer)


def _answer(ctx: RequestContext, plan: FetchPlan, response: FetchResponse) -> FetchResponse:
    """The client's quota first, then the session (Kafka's order, KAFKA-6946): a fetch over its
    `consumer_byte_rate` is answered empty with its throttle and its session untouched (its bytes are not
    charged); any other answer is trimmed by the session, which then remembers what it told the client."""
    state = ctx.state
    throttle_ms = fetch_throttle(getattr(state, "quotas", None), ctx.principal, ctx.client_id, response,
                                 state.clock_ms())
    if throttle_ms:
        return plan.throttled_response(throttle_ms)
    response = plan.finish(response)
    state.traffic.fetched(response)
    return response


class _Read:
    """One partition's answer, the positions it was read at and the limits it was read with."""

    __slots__ = ("data", "limit", "min_one", "positions", "size")

    def __init__(self, positions: tuple[Any, ...], limit: int, min_one: bool, data: PartitionData, size: int) -> None:
        self.positions = positions
        self.limit = limit
        self.min_one = min_one
        self.data = data
        self.size = size

    def still_valid(self, positions: tuple[Any, ...], limit: int, min_one: bool) -> bool:
        """Would a read at `positions` with these limits give the remembered answer?"""
        return (positions == self.positions and self.size <= limit <= self.limit
                and (self.size > 0 or min_one == self.min_one))


async def _long_poll(ctx: RequestContext, request: FetchRequest, memo: dict[tuple[int, int], _Read],
                     keys: list[tuple[str, int]], waiter: asyncio.Future[None]) -> FetchResponse:
    purgatory = ctx.state.purgatory
    deadline = time.monotonic() + request.max_wait_ms / 1000
    while True:
        remaining = deadline - time.monotonic()
        try:
            if remaining > 0:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(waiter, remaining)
        finally:
            purgatory.unwatch(keys, waiter)
        response, size, errors = _read_all(ctx, request, memo)
        if size >= request.min_bytes or errors or time.monotonic() >= deadline or purgatory.closed:
            ctx.state.traffic.fetched(response)
            return response
        waiter = purgatory.watch(keys)


def _read_all(ctx: RequestContext, request: FetchRequest,
              memo: dict[tuple[int, int], _Read] | None = None) -> tuple[FetchResponse, int, bool]:
    """One pass over every requested partition: (response, bytes of records, whether any partition erred).

    With `memo` (a long poll), a partition whose read inputs are those remembered there reuses its
    remembered answer, and every partition read is remembered.
    """
    state = ctx.state
    by_id = ctx.api_version >= FIRST_TOPIC_ID_VERSION
    read_committed = request.isolation_level == READ_COMMITTED
    remaining = request.max_bytes if request.max_bytes > 0 else 0x7FFFFFFF
    total = 0
    errors = False
    topics: list[FetchableTopicResponse] = []
    for t, fetch_topic in enumerate(request.topics):
        name = fetch_topic.topic
        topic_error = ErrorCode.NONE
        if by_id:
            info = topic_by_id(state, fetch_topic.topic_id)
            name = info.name if info is not None else ""
            topic_error = ErrorCode.NONE if info is not None else ErrorCode.UNKNOWN_TOPIC_ID
        partitions: list[PartitionData] = []
        topics.append(FetchableTopicResponse(topic=name, topic_id=fetch_topic.topic_id, partitions=partitions))
        for p, fp in enumerate(fetch_topic.partitions):
            log, code = (None, topic_error) if topic_error else resolve_partition(state, name, fp.partition)
            if log is not None:
                hw = log.high_watermark
                lso = log.last_stable_offset
                limit = min(fp.partition_max_bytes, remaining)
                if memo is not None:
                    positions = (log, hw, lso, log.log_start_offset)
                    known = memo.get((t, p))
                    if known is not None and known.still_valid(positions, limit, total == 0):
                        partitions.append(known.data)
                        total += known.size
                        remaining -= known.size
                        continue
            data = PartitionData(partition_index=fp.partition, high_watermark=-1, last_stable_offset=-1,
                                 log_start_offset=-1, records=b"",
                                 aborted_transactions=[] if read_committed else None)
            partitions.append(data)
            if log is None:
                data.error_code = code
                errors = True
                continue
            data.high_watermark = hw
            data.last_stable_offset = lso
            data.log_start_offset = log.log_start_offset
            try:
                result = log.read(fp.fetch_offset, max(limit, 0), max_offset=lso if read_committed else hw,
                                  min_one_batch=total == 0, want_upper_bound=read_committed)
                if read_committed and result.region is not None:
                    data.aborted_transactions = [
                        AbortedTransaction(producer_id=pid, first_offset=first)
                        for pid, first in log.aborted_transactions(fp.fetch_offset, result.upper_bound)]
            except OffsetOutOfRange:
                data.error_code = ErrorCode.OFFSET_OUT_OF_RANGE
                errors = True
                continue
            except LogClosedError:  # deleted, or moved to another log dir, as it was read: the client asks again
                data.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                errors = True
                continue
            except OSError as exc:
                state.logs.report_io_error(log, exc)
                data.error_code = ErrorCode.KAFKA_STORAGE_ERROR
                errors = True
                continue
            region = result.region
            size = len(region) if region is not None else 0
            if size:
                data.records = region
                total += size
                remaining -= size
            if memo is not None:
                memo[(t, p)] = _Read(positions, limit, total == size, data, size)
    return FetchResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, session_id=NO_SESSION,
                         responses=topics), total, errors

