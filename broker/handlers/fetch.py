"""Fetch (key 1), versions 4-17.

Fetch sessions (KIP-227, `broker/fetch_sessions.py`): the session cache resolves which partitions a
fetch reads (the request's, or a session's) and trims the answer (an incremental fetch answers only the
partitions that changed); this handler only reads.
Records are never copied here: each partition's answer is a file region of a segment that the writer
sends with `os.sendfile`. Limits: `max_bytes` for the response and `partition_max_bytes` per partition,
but the first batch found is always returned whole, so a client can always make progress (KIP-74).
Long poll: below `min_bytes`, the fetch is a delayed operation (`DelayedFetch`) watching its partitions in
the partition layer's purgatory until enough data arrived or `max_wait_ms` passed, whichever comes first.

Isolation (KIP-98): every answer carries the last stable offset (the first offset of the oldest open
transaction, else the high watermark). read_committed reads stop at it and list, for the range
returned, the aborted transactions whose records it holds (`aborted_transactions`, Kafka's upper bound:
the offset of the first batch after the returned bytes); read_uncommitted reads up to the high
watermark and gets no list (null). A long-poll is woken by marker appends too (their writer notifies
the purgatory), so a read_committed fetch sees the LSO move.

A long-poll's wake compares positions before it reads anything: the woken partition's positions against
those its answer was read at; if they did not move, nothing is read. Then only partitions that moved are
read again: each partition's answer is remembered with the
positions it was read at (the log, its high watermark, last stable offset and log start) and the byte
limit it was read with. A read returns the longest run of whole batches that fits its limit, so at the
same positions any limit between the answer's size and the remembered limit gives the same answer (an
earlier partition that grew only lowers the limits of those after it); then the remembered answer is used.
Markers move the high watermark, so a read_committed partition whose LSO or aborted list changed is
always read again.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler, waiting
from pybroker.broker.fetch_sessions import FetchPlan, read_check
from pybroker.broker.partitions.delayed import DelayedOperation
from pybroker.broker.security.authorization_topics import fetch_rule
from pybroker.broker.security.quota_throttle import fetch_throttle
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.fetch import (
    AbortedTransaction,
    EpochEndOffset,
    FetchableTopicResponse,
    FetchRequest,
    FetchResponse,
    LeaderIdAndEpoch,
    PartitionData,
    SnapshotId,
)
from pybroker.storage.errors import LogClosedError, OffsetOutOfRange

READ_COMMITTED = 1
FIRST_TOPIC_ID_VERSION = 13
NO_SESSION = 0

#: (topic name, partition), as the purgatory knows partitions
Key = tuple[str, int]


@handler(ApiKey.FETCH, versions=(4, 17), authorize=fetch_rule)
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
    # Watch before returning: an append between now and the connection's next turn must still wake it.
    fetch = DelayedFetch(ctx, request, plan, memo, response)
    ctx.state.purgatory.watch(fetch, fetch.keys)
    fetch.expire_after(request.max_wait_ms / 1000)
    return waiting(fetch.future())


class DelayedFetch(DelayedOperation[FetchResponse]):
    """A long-poll: watches its partitions, and on a wake compares the woken partition's positions with
    those its answer was read at; only a partition that moved is read again (with the memo, which
    re-reads nothing else), and the fetch completes once it has `min_bytes`. At the deadline (or at
    shutdown) it answers with what there is."""

    __slots__ = ("_moved", "_response", "_slots", "ctx", "keys", "memo", "plan", "request")

    def __init__(self, ctx: RequestContext, request: FetchRequest, plan: FetchPlan,
                 memo: dict[tuple[int, int], _Read], response: FetchResponse) -> None:
        super().__init__()
        self.ctx = ctx
        self.request = request
        self.plan = plan
        self.memo = memo
        self._response: FetchResponse | None = None
        self._moved = False
        #: each watched partition's key and its place in the answer (the memo's key)
        self._slots: dict[Key, list[tuple[int, int]]] = {}
        for t, topic in enumerate(response.responses):
            for p, part in enumerate(topic.partitions):
                self._slots.setdefault((topic.topic, part.partition_index), []).append((t, p))
        self.keys = tuple(self._slots)

    def wake(self, key: Key) -> None:
        """The purgatory's call: `key` changed (an append, a marker, a deletion, its dir offline). If its
        positions moved, the read happens on the loop's next turn, once: the appends of this turn (a
        produce over many partitions, several requests) are answered by one read, and the appending
        request does not pay for the fetch's read."""
        if not self._moved and not self.done and self._moved_since_read(key):
            self._moved = True
            asyncio.get_running_loop().call_soon(self.try_complete)

    def _moved_since_read(self, key: Key) -> bool:
        replicas = self.ctx.state.replicas
        target, _ = replicas.resolve(*key)
        if target is None:
            return True  # gone, or its dir offline: the answer now carries an error
        positions = target.positions()
        for slot in self._slots.get(key, ()):
            known = self.memo.get(slot)
            if known is None or known.positions != positions:
                return True
        return False

    def ready(self) -> bool:
        if not self._moved:
            return False
        self._moved = False
        response, size, errors = _read_all(self.ctx, self.request, self.memo)
        if size >= self.request.min_bytes or errors:
            self._response = response
            return True
        return False

    def answer(self) -> FetchResponse:
        response = self._response
        if response is None:  # the deadline, or shutdown: what there is now
            response = _read_all(self.ctx, self.request, self.memo)[0]
        return _answer(self.ctx, self.plan, response)


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


#: the tagged structs of a partition's answer, at their defaults, shared by every answer the handler makes: a
#: fetch answers up to 1,024 partitions, and the encoder only compares them with their defaults (nothing
#: changes them; `tests/unit/broker/handlers/test_fetch_answers.py` checks)
_NO_DIVERGENCE = EpochEndOffset()
_NO_LEADER = LeaderIdAndEpoch()
_NO_SNAPSHOT = SnapshotId()
#: what a read that raised answers (Kafka's codes): deleted or moved as it was read (the client asks again),
#: the partition layer took its dir offline
_READ_ERRORS = ((OffsetOutOfRange, ErrorCode.OFFSET_OUT_OF_RANGE),
                (LogClosedError, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                (OSError, ErrorCode.KAFKA_STORAGE_ERROR))


def _read_error(exc: Exception) -> ErrorCode:
    return next(code for kind, code in _READ_ERRORS if isinstance(exc, kind))


def _answer_of(index: int, code: ErrorCode, aborted: list[AbortedTransaction] | None, records: Any) -> PartitionData:
    """A partition answered with an error: no log offsets (-1), as Kafka's. Built with positional arguments,
    as every answer of `_read_all` is: a compiled message's constructor parses keywords at four times the
    cost of the construction itself (868 against 187 ns)."""
    return PartitionData(index, code, -1, -1, -1, _NO_DIVERGENCE, _NO_LEADER, _NO_SNAPSHOT, aborted, -1, records)


def _read_all(ctx: RequestContext, request: FetchRequest,
              memo: dict[tuple[int, int], _Read] | None = None) -> tuple[FetchResponse, int, bool]:
    """One pass over every requested partition: (response, bytes of records, whether any partition erred).

    With `memo` (a long poll), a partition whose read inputs are those remembered there reuses its
    remembered answer, and every partition read is remembered while the pass is below `min_bytes`: only a
    pass that ends below it waits (and then it remembered every partition); one that reaches it answers.
    Past the answer's first bytes, a partition whose read fitted nothing in an earlier fetch at the same
    inputs answers that again without a read (`broker/empty_reads.py`), and without a lookup: over 1,024
    partitions, a consumer's fetch fills its 50 MB with about 60 of them, and each of the others costs what
    it takes to find out that nothing changed (`_read_all`'s first test, before `resolve`).
    """
    state = ctx.state
    resolve = state.replicas.resolve
    empty_reads = state.empty_reads
    empty_reads.follow(state.logs.table)
    empty_get = empty_reads.get
    by_id = ctx.api_version >= FIRST_TOPIC_ID_VERSION
    read_committed = request.isolation_level == READ_COMMITTED
    remaining = request.max_bytes if request.max_bytes > 0 else 0x7FFFFFFF
    # a pass that reaches `min_bytes` answers now and drops its memo: only the reads before that are
    # remembered (a consumer's fetch with data past its first partition builds no memo entries)
    min_bytes = request.min_bytes
    # with a log dir offline, a remembered read answers only if its log's dir is online (else the lookup's error)
    all_online = state.logs.failures.all_online()
    is_online = state.logs.is_online
    total = 0
    errors = False
    topics: list[FetchableTopicResponse] = []
    for t, fetch_topic in enumerate(request.topics):
        name = fetch_topic.topic
        topic_error = ErrorCode.NONE
        if by_id:
            info = state.logs.topic_by_id(fetch_topic.topic_id)
            name = info.name if info is not None else ""
            topic_error = ErrorCode.NONE if info is not None else ErrorCode.UNKNOWN_TOPIC_ID
        partitions: list[PartitionData] = []
        topics.append(FetchableTopicResponse(topic=name, topic_id=fetch_topic.topic_id, partitions=partitions))
        for p, fp in enumerate(fetch_topic.partitions):
            limit = min(fp.partition_max_bytes, remaining)
            # past the answer's first bytes, a read that fitted nothing here before may do so again
            empty = empty_get((name, fp.partition)) if total else None
            if (empty is not None and empty.answers(fp.fetch_offset, limit, read_committed)
                    and (all_online or is_online(empty.log))):
                partitions.append(empty.data)
                if memo is not None and total < min_bytes:
                    memo[(t, p)] = _Read((empty.log, *empty.positions), limit, False, empty.data, 0)
                continue
            target, code = (None, topic_error) if topic_error else resolve(name, fp.partition)
            if target is None:  # refused before any read: Kafka's answer then has an empty aborted list
                partitions.append(_answer_of(fp.partition, code, [], b""))
                errors = True
                continue
            positions = target.positions()
            _, hw, lso, log_start = positions
            if memo:
                known = memo.get((t, p))
                if known is not None and known.still_valid(positions, limit, total == 0):
                    partitions.append(known.data)
                    total += known.size
                    remaining -= known.size
                    continue
            try:
                result, aborted = target.read(fp.fetch_offset, max(limit, 0), read_committed=read_committed,
                                              min_one_batch=total == 0, bound=lso if read_committed else hw)
            except (OffsetOutOfRange, LogClosedError, OSError) as exc:
                partitions.append(_answer_of(fp.partition, _read_error(exc), [] if read_committed else None,
                                             b""))
                errors = True
                continue
            region = result.region
            size = len(region) if region is not None else 0
            if aborted:
                listed: list[AbortedTransaction] | None = [
                    AbortedTransaction(producer_id=pid, first_offset=first) for pid, first in aborted]
            else:
                listed = [] if read_committed else None
            data = PartitionData(fp.partition, ErrorCode.NONE, hw, lso, log_start, _NO_DIVERGENCE, _NO_LEADER,
                                 _NO_SNAPSHOT, listed, -1, region if size else b"")
            if not size and total:
                empty_reads.remember(positions, fp.fetch_offset, limit, read_committed, data)
            partitions.append(data)
            total += size
            remaining -= size
            if memo is not None and total < min_bytes:
                memo[(t, p)] = _Read(positions, limit, total == size, data, size)
    return FetchResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, session_id=NO_SESSION,
                         responses=topics), total, errors
