"""OffsetFetch (key 9), versions 0-9: a group's committed positions; v8+ asks for several groups at once.

A partition with no commit answers offset -1 and no error. A null topic list (v2+) means every
partition the group has committed. Group-level errors (loading, bad id) go at the top from v2, and
into every partition before that, as Kafka does.

v7+ `require_stable`: a partition for which an open transaction committed offsets (TxnOffsetCommit, no
marker yet) answers UNSTABLE_OFFSET_COMMIT with offset -1, per partition as Kafka does (clients retry
until the transaction ends); without it, and before v7, the committed offsets are answered as they are.

v9 names the member and its epoch (KIP-848): for a consumer-protocol group, a member the group does not have
answers UNKNOWN_MEMBER_ID and another epoch STALE_MEMBER_EPOCH, for the whole group, as Kafka does.
"""

from __future__ import annotations

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import handler
from pybroker.broker.groups.group import CommittedOffset
from pybroker.broker.security.authorization_groups import offset_fetch_rule
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
)

FIRST_TOP_LEVEL_ERROR_VERSION = 2
FIRST_MULTI_GROUP_VERSION = 8
FIRST_REQUIRE_STABLE_VERSION = 7
Fetched = dict[tuple[str, int], CommittedOffset | None]
#: a partition with pending transactional offsets, under require_stable
UNSTABLE = CommittedOffset(-1, -1, "", -1)


def _lookup(ctx: RequestContext, group_id: str, topics: list | None, require_stable: bool
            ) -> tuple[ErrorCode, Fetched]:
    wanted = None if topics is None else [(t.name, p) for t in topics for p in t.partition_indexes]
    coordinator = ctx.state.groups.coordinator
    error, found = coordinator.fetch_offsets(group_id, wanted)
    if error is not ErrorCode.NONE and wanted is not None:
        found = dict.fromkeys(wanted)
    elif error is ErrorCode.NONE and require_stable:
        for key in coordinator.unstable_offsets(group_id) & found.keys():
            found[key] = UNSTABLE
    return error, found


def _by_topic(found: Fetched) -> dict[str, list[tuple[int, CommittedOffset | None]]]:
    topics: dict[str, list[tuple[int, CommittedOffset | None]]] = {}
    for (topic, partition), committed in found.items():
        topics.setdefault(topic, []).append((partition, committed))
    return topics


def _partition_error(committed: CommittedOffset | None, otherwise: ErrorCode = ErrorCode.NONE) -> ErrorCode:
    return ErrorCode.UNSTABLE_OFFSET_COMMIT if committed is UNSTABLE else otherwise


@handler(ApiKey.OFFSET_FETCH, versions=(0, 9), authorize=offset_fetch_rule)
def handle_offset_fetch(ctx: RequestContext, request: OffsetFetchRequest) -> OffsetFetchResponse:
    require_stable = ctx.api_version >= FIRST_REQUIRE_STABLE_VERSION and bool(request.require_stable)
    if ctx.api_version >= FIRST_MULTI_GROUP_VERSION:
        groups = []
        coordinator = ctx.state.groups.coordinator
        for group in request.groups:
            error, found = _lookup(ctx, group.group_id, group.topics, require_stable)
            if error is ErrorCode.NONE:  # v9: a consumer-protocol member fetches at its epoch (KIP-848)
                error = coordinator.fetch_member_error(group.group_id, group.member_id, group.member_epoch)
            groups.append(OffsetFetchResponseGroup(group_id=group.group_id, error_code=error, topics=[
                OffsetFetchResponseTopics(name=name, partitions=[
                    OffsetFetchResponsePartitions(
                        partition_index=p, committed_offset=c.offset if c else -1,
                        committed_leader_epoch=c.leader_epoch if c else -1, metadata=c.metadata if c else "",
                        error_code=_partition_error(c))
                    for p, c in parts])
                for name, parts in _by_topic(found).items()] if error is ErrorCode.NONE else []))
        return OffsetFetchResponse(throttle_time_ms=0, groups=groups)
    error, found = _lookup(ctx, request.group_id, request.topics, require_stable)
    top_level = ctx.api_version >= FIRST_TOP_LEVEL_ERROR_VERSION
    partition_error = ErrorCode.NONE if top_level else error
    topics = [OffsetFetchResponseTopic(name=name, partitions=[
        OffsetFetchResponsePartition(
            partition_index=p, committed_offset=c.offset if c else -1,
            committed_leader_epoch=c.leader_epoch if c else -1, metadata=c.metadata if c else "",
            error_code=_partition_error(c, partition_error))
        for p, c in parts])
        for name, parts in _by_topic(found).items()]
    return OffsetFetchResponse(throttle_time_ms=0, topics=topics, error_code=error if top_level else 0)
