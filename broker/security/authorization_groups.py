"""Authorization rules of the classic group and offset APIs (Kafka's KafkaApis checks): JoinGroup, SyncGroup,
Heartbeat, LeaveGroup (`whole_group`), OffsetCommit, TxnOffsetCommit, OffsetDelete, OffsetFetch,
DescribeGroups, DeleteGroups, ListGroups and FindCoordinator. Each handler module picks its rule here when it
registers; `authorization.call` runs it on the event loop. A rule answers None (allowed), a response
(refused) or a merge (partly allowed), as `authorization` describes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pybroker.broker.security.acls import AclOperation
from pybroker.broker.security.authorization_check import (
    GROUP,
    GROUP_DENIED,
    TOPIC,
    TOPIC_DENIED,
    TXN,
    TXN_DENIED,
    Check,
    Op,
    Outcome,
    appending,
    per_topic,
    split_by,
)
from pybroker.protocol.messages import (
    delete_groups,
    describe_groups,
    find_coordinator,
    offset_commit,
    offset_delete,
    offset_fetch,
    txn_offset_commit,
)


def whole_group(op: AclOperation, response: Callable[[Any], Any]) -> Any:
    """A request about one group: refused whole when the group is denied."""
    def rule(check: Check, r: Any) -> Outcome:
        return None if check.ok(op, GROUP, r.group_id) else response(r)
    return rule


def offset_commit_rule(check: Check, r: offset_commit.OffsetCommitRequest) -> Outcome:
    def entry(t: Any, code: int = TOPIC_DENIED) -> Any:
        return offset_commit.OffsetCommitResponseTopic(name=t.name, partitions=[
            offset_commit.OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=code)
            for p in t.partitions])

    if not check.ok(Op.READ, GROUP, r.group_id):
        return offset_commit.OffsetCommitResponse(topics=[entry(t, GROUP_DENIED) for t in r.topics])
    return per_topic(check, r, "topics", Op.READ, entry, "topics")


def txn_offset_commit_rule(check: Check, r: txn_offset_commit.TxnOffsetCommitRequest) -> Outcome:
    """Kafka's order: the transactional id, then the group, each refusing the whole request; then topics."""
    def entry(t: Any, code: int = TOPIC_DENIED) -> Any:
        return txn_offset_commit.TxnOffsetCommitResponseTopic(name=t.name, partitions=[
            txn_offset_commit.TxnOffsetCommitResponsePartition(partition_index=p.partition_index, error_code=code)
            for p in t.partitions])

    if not check.ok(Op.WRITE, TXN, r.transactional_id):
        return txn_offset_commit.TxnOffsetCommitResponse(topics=[entry(t, TXN_DENIED) for t in r.topics])
    if not check.ok(Op.READ, GROUP, r.group_id):
        return txn_offset_commit.TxnOffsetCommitResponse(topics=[entry(t, GROUP_DENIED) for t in r.topics])
    return per_topic(check, r, "topics", Op.READ, entry, "topics")


def offset_delete_rule(check: Check, r: offset_delete.OffsetDeleteRequest) -> Outcome:
    if not check.ok(Op.DELETE, GROUP, r.group_id):
        return offset_delete.OffsetDeleteResponse(error_code=GROUP_DENIED)

    def entry(t: Any) -> Any:
        return offset_delete.OffsetDeleteResponseTopic(name=t.name, partitions=[
            offset_delete.OffsetDeleteResponsePartition(partition_index=p.partition_index, error_code=TOPIC_DENIED)
            for p in t.partitions])
    return per_topic(check, r, "topics", Op.READ, entry, "topics")


FIRST_TOP_LEVEL_ERROR_VERSION = 2


def offset_fetch_rule(check: Check, r: offset_fetch.OffsetFetchRequest) -> Outcome:
    if check.version >= 8:
        return _offset_fetch_groups(check, r)
    if not check.ok(Op.DESCRIBE, GROUP, r.group_id):
        # v2+ carry the denial at the top and no topics; v0-1 have no top-level error: every partition's
        # (as Kafka's OffsetFetchRequest.getErrorResponse)
        asked = (r.topics or []) if check.version < FIRST_TOP_LEVEL_ERROR_VERSION else []
        return offset_fetch.OffsetFetchResponse(error_code=GROUP_DENIED, topics=[
            offset_fetch.OffsetFetchResponseTopic(name=t.name, partitions=[
                offset_fetch.OffsetFetchResponsePartition(partition_index=i, committed_offset=-1, metadata="",
                                                          error_code=GROUP_DENIED)
                for i in t.partition_indexes]) for t in asked])
    if r.topics is None:  # every committed topic: list only those it may describe
        def visible(response: Any) -> Any:
            response.topics = [t for t in response.topics if check.ok(Op.DESCRIBE, TOPIC, t.name, quiet=True)]
            return response
        return visible

    def entry(t: Any) -> Any:
        return offset_fetch.OffsetFetchResponseTopic(name=t.name, partitions=[
            offset_fetch.OffsetFetchResponsePartition(partition_index=i, committed_offset=-1, metadata="",
                                                      error_code=TOPIC_DENIED) for i in t.partition_indexes])
    return per_topic(check, r, "topics", Op.DESCRIBE, entry, "topics")


def _offset_fetch_groups(check: Check, r: offset_fetch.OffsetFetchRequest) -> Outcome:
    kept, denied = split_by(r.groups, lambda g: check.ok(Op.DESCRIBE, GROUP, g.group_id))
    r.groups = kept
    extra: dict[str, list[Any]] = {}
    for group in kept:
        if group.topics is None:
            continue
        group.topics, gone = split_by(group.topics, lambda t: check.ok(Op.DESCRIBE, TOPIC, t.name))
        extra[group.group_id] = [offset_fetch.OffsetFetchResponseTopics(name=t.name, partitions=[
            offset_fetch.OffsetFetchResponsePartitions(partition_index=i, committed_offset=-1, metadata="",
                                                       error_code=TOPIC_DENIED) for i in t.partition_indexes])
            for t in gone]

    def merge(response: Any) -> Any:
        for group in response.groups:
            if group.group_id in extra:
                group.topics.extend(extra[group.group_id])
            else:  # all topics: only those it may describe
                group.topics = [t for t in group.topics if check.ok(Op.DESCRIBE, TOPIC, t.name, quiet=True)]
        response.groups.extend(offset_fetch.OffsetFetchResponseGroup(group_id=g.group_id, error_code=GROUP_DENIED)
                               for g in denied)
        return response
    return merge


def describe_groups_rule(check: Check, r: describe_groups.DescribeGroupsRequest) -> Outcome:
    kept, denied = split_by(r.groups, lambda g: check.ok(Op.DESCRIBE, GROUP, g))
    r.groups = kept
    include_ops = bool(r.include_authorized_operations)

    def merge(response: Any) -> Any:
        if include_ops:
            for group in response.groups:
                group.authorized_operations = check.operations(GROUP, group.group_id)
        response.groups.extend(describe_groups.DescribedGroup(error_code=GROUP_DENIED, group_id=g)
                               for g in denied)
        return response
    return merge


def delete_groups_rule(check: Check, r: delete_groups.DeleteGroupsRequest) -> Outcome:
    kept, denied = split_by(r.groups_names, lambda g: check.ok(Op.DELETE, GROUP, g))
    if not denied:
        return None
    r.groups_names = kept
    return appending("results", [delete_groups.DeletableGroupResult(group_id=g, error_code=GROUP_DENIED)
                                  for g in denied])


def list_groups_rule(check: Check, r: Any) -> Outcome:
    if check.cluster(Op.DESCRIBE, quiet=True):
        return None

    def visible(response: Any) -> Any:
        response.groups = [g for g in response.groups if check.ok(Op.DESCRIBE, GROUP, g.group_id, quiet=True)]
        return response
    return visible


def find_coordinator_rule(check: Check, r: find_coordinator.FindCoordinatorRequest) -> Outcome:
    resource, code = (TXN, TXN_DENIED) if r.key_type == 1 else (GROUP, GROUP_DENIED)
    if check.version < 4:
        if check.ok(Op.DESCRIBE, resource, r.key):
            return None
        return find_coordinator.FindCoordinatorResponse(error_code=code, error_message="not authorized",
                                                        node_id=-1, host="", port=-1)
    kept, denied = split_by(r.coordinator_keys, lambda k: check.ok(Op.DESCRIBE, resource, k))
    if not denied:
        return None
    r.coordinator_keys = kept
    return appending("coordinators", [find_coordinator.Coordinator(
        key=k, node_id=-1, host="", port=-1, error_code=code, error_message="not authorized") for k in denied])


