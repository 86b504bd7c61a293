"""ShareFetch (key 78), versions 1-2: a share consumer's fetch, with its acknowledgements (KIP-932).

In order: the share session (`broker/share/share_sessions.py`) checks the epoch and takes the request's
partitions in and its forgotten ones out; the acknowledgements are applied (each partition's outcome in
`acknowledge_error_code`); a closing session (epoch -1) or one replaced by a new epoch 0 releases what the
member held on it; then, unless the session closes or the request only renews locks (v2 `is_renew_ack`),
each of the session's partitions, in an order rotated by the session epoch (`fetch_order`, so no partition
is starved behind others that keep records), hands the member at most what is left of `max_records` records
(`broker/share/share_reads.py`); MaxBytes 0 acquires nothing, and a share-partition the group first touches
once another partition of the answer gave records is only initialized, to be read by the next fetch (as
Kafka, which answers with the partitions whose state is loaded first). With nothing acquired the request
waits up to `max_wait_ms` for an append or a record made available again, then tries once more. The answer goes out only once every
share-partition it changed is fsynced in `__share_group_state`.

Acquire modes (v2, KIP-1206): batch-optimized (0, and every v1 request) acquires whole batches, so
`max_records` may be exceeded up to the end of the last batch; record-limit (1) never exceeds it.

Authorizes READ on the GROUP (the whole request) and READ on each TOPIC (TOPIC_AUTHORIZATION_FAILED for
its partitions).
"""

from __future__ import annotations

import uuid
from typing import Any

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler, waiting
from pybroker.broker.partitions.delayed import DelayedOperation
from pybroker.broker.security.authorization_share_groups import share_fetch_rule
from pybroker.broker.security.authorizer import host_of
from pybroker.broker.share.share_reads import ShareRead, acquire_records
from pybroker.broker.share.share_sessions import OPEN_EPOCH, fetch_order
from pybroker.broker.share.share_state_topic import ShareKey
from pybroker.protocol.acl_codes import AclOperation, ResourceType
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.share_fetch import (
    ShareAcquiredRecords,
    ShareFetchableTopicResponse,
    ShareFetchLeaderIdAndEpoch,
    ShareFetchPartitionData,
    ShareFetchRequest,
    ShareFetchResponse,
)

TopicPartition = tuple[uuid.UUID, int]
#: ShareFetch v2's acquire mode that never hands out more than `max_records` (KIP-1206)
RECORD_LIMIT = 1


class _Woken(DelayedOperation[None]):
    """A share fetch's long poll: done at the first wake of a watched partition, or at its deadline."""

    __slots__ = ()

    def wake(self, key: Any) -> None:
        self.force_complete()

    def answer(self) -> None:
        return None


def topic_allowed(ctx: RequestContext) -> Any:
    """READ on a topic id's topic, remembered per request (always allowed without an authorizer)."""
    authorizer = ctx.state.authorizer
    logs = ctx.state.logs
    seen: dict[uuid.UUID, bool] = {}

    def allowed(topic_id: uuid.UUID) -> bool:
        if authorizer is None:
            return True
        if topic_id not in seen:
            info = logs.topic_by_id(topic_id)
            seen[topic_id] = info is None or bool(authorizer.allowed(
                ctx.principal, host_of(ctx.peer), AclOperation.READ, ResourceType.TOPIC, info.name))
        return seen[topic_id]
    return allowed


@handler(ApiKey.SHARE_FETCH, versions=(1, 2), authorize=share_fetch_rule)
def handle_share_fetch(ctx: RequestContext, request: ShareFetchRequest) -> Any:
    shares = ctx.state.shares
    group_id, member_id = request.group_id or "", request.member_id or ""
    if not group_id or not member_id:
        return ShareFetchResponse(error_code=ErrorCode.INVALID_REQUEST)  # no message, as Kafka
    if shares.loading:
        return ShareFetchResponse(error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    epoch = request.share_session_epoch
    acks = {(t.topic_id, p.partition_index): [(b.first_offset, b.last_offset, list(b.acknowledge_types))
                                              for b in p.acknowledgement_batches]
            for t in request.topics for p in t.partitions if p.acknowledgement_batches}
    if epoch == OPEN_EPOCH and acks:
        return ShareFetchResponse(error_code=ErrorCode.INVALID_REQUEST,
                                  error_message="Acknowledge data present on initial ShareFetchRequest.")
    added = [(t.topic_id, p.partition_index) for t in request.topics for p in t.partitions]
    forgotten = [(t.topic_id, p) for t in request.forgotten_topics_data for p in t.partitions]
    plan = shares.sessions.plan((group_id, member_id), epoch, added, forgotten)
    if plan.error or plan.session is None:
        return ShareFetchResponse(error_code=plan.error)
    now = ctx.state.clock_ms()
    allowed = topic_allowed(ctx)
    changed: set[ShareKey] = set()
    ack_codes: dict[TopicPartition, ErrorCode] = {}
    for tp, batches in acks.items():
        if not allowed(tp[0]):
            ack_codes[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            continue
        key = (group_id, tp[0], tp[1])
        ack_codes[tp] = shares.acknowledge(key, member_id, batches, now)
        changed.add(key)
    if plan.replaced is not None:
        changed.update(shares.release_member(group_id, member_id, [(group_id, *tp) for tp in plan.replaced.partitions]))
    if plan.closing:
        changed.update(shares.release_member(group_id, member_id, [(group_id, *tp) for tp in plan.session.partitions]))
    fetching = [] if plan.closing or request.is_renew_ack else fetch_order(plan.session, epoch)
    reads = _read_all(ctx, request, fetching, allowed, now)
    shares.scheduled()
    acquired_any = any(r.acquired for r in reads.values())
    if not acquired_any and fetching and request.max_wait_ms > 0 and not acks:
        woken = _Woken()
        ctx.state.purgatory.watch(woken, _purgatory_keys(ctx, fetching))
        woken.expire_after(request.max_wait_ms / 1000)
        return waiting(_after_wait(ctx, request, woken, fetching, allowed, changed, ack_codes))
    return waiting(_answer(ctx, group_id, reads, ack_codes, changed))


def _purgatory_keys(ctx: RequestContext, fetching: list[TopicPartition]) -> list[tuple[str, int]]:
    keys = []
    for topic_id, partition in fetching:
        info = ctx.state.logs.topic_by_id(topic_id)
        if info is not None:
            keys.append((info.name, partition))
    return keys


def _read_all(ctx: RequestContext, request: ShareFetchRequest, fetching: list[TopicPartition], allowed: Any,
              now: int) -> dict[TopicPartition, ShareRead]:
    shares = ctx.state.shares
    group_id, member_id = request.group_id or "", request.member_id or ""
    records_left = request.max_records if request.max_records > 0 else 500
    # MaxBytes 0 (or less) acquires nothing, as Kafka answers it: no record fits in no bytes (librdkafka's
    # fetch.max.bytes=0 test pins that a share consumer so configured gets no records)
    bytes_left = max(request.max_bytes, 0)
    if bytes_left == 0:
        records_left = 0
    reads: dict[TopicPartition, ShareRead] = {}
    for topic_id, partition in fetching:
        if not allowed(topic_id):
            reads[(topic_id, partition)] = ShareRead(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            continue
        # Kafka initializes a share-partition (reads its state from the share coordinator) before it reads
        # it, and a fetch answers with the partitions ready first; so one the group first touches here, once
        # another partition already gave records, is initialized now and read by the next fetch (librdkafka's
        # 0179 expects a session's first answers one partition at a time, as Kafka gives them)
        fresh = (group_id, topic_id, partition) not in shares.partitions and any(r.acquired for r in reads.values())
        read = acquire_records(shares, group_id, member_id, topic_id, partition, 0 if fresh else records_left,
                               bytes_left, now,
                               record_limit=request.share_acquire_mode == RECORD_LIMIT)
        reads[(topic_id, partition)] = read
        records_left -= read.count
        bytes_left -= len(read.records)
        if records_left <= 0 or bytes_left <= 0:
            records_left = bytes_left = 0
    return reads


async def _after_wait(ctx: RequestContext, request: ShareFetchRequest, woken: _Woken,
                      fetching: list[TopicPartition], allowed: Any, changed: set[ShareKey],
                      ack_codes: dict[TopicPartition, ErrorCode]) -> ShareFetchResponse:
    await woken.future()
    reads = _read_all(ctx, request, fetching, allowed, ctx.state.clock_ms())
    ctx.state.shares.scheduled()
    return await _answer(ctx, request.group_id or "", reads, ack_codes, changed)


async def _answer(ctx: RequestContext, group_id: str, reads: dict[TopicPartition, ShareRead],
                  ack_codes: dict[TopicPartition, ErrorCode], changed: set[ShareKey]) -> ShareFetchResponse:
    """Persist every share-partition the request changed (acquisitions count deliveries), then answer."""
    shares = ctx.state.shares
    changed.update((group_id, topic_id, partition) for (topic_id, partition), read in reads.items() if read.acquired)
    code = await shares.persist(changed)
    if code is not ErrorCode.NONE:
        ack_codes = {tp: code if c is ErrorCode.NONE else c for tp, c in ack_codes.items()}
    return build_response(ctx, reads, ack_codes, shares.lock_duration_ms(group_id))


def build_response(ctx: RequestContext, reads: dict[TopicPartition, ShareRead],
                   ack_codes: dict[TopicPartition, ErrorCode], lock_ms: int) -> ShareFetchResponse:
    by_topic: dict[uuid.UUID, list[ShareFetchPartitionData]] = {}
    node = ctx.state.node_id
    for tp in dict.fromkeys([*reads, *ack_codes]):
        read = reads.get(tp, ShareRead())
        by_topic.setdefault(tp[0], []).append(ShareFetchPartitionData(
            partition_index=tp[1], error_code=read.error, acknowledge_error_code=ack_codes.get(tp, ErrorCode.NONE),
            current_leader=ShareFetchLeaderIdAndEpoch(leader_id=node, leader_epoch=0), records=read.records,
            acquired_records=[ShareAcquiredRecords(first_offset=a.first_offset, last_offset=a.last_offset,
                                                   delivery_count=a.delivery_count) for a in read.acquired]))
    return ShareFetchResponse(
        error_code=ErrorCode.NONE, acquisition_lock_timeout_ms=lock_ms,
        responses=[ShareFetchableTopicResponse(topic_id=topic, partitions=parts) for topic, parts in by_topic.items()])
