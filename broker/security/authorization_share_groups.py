"""Authorization rules of the share group APIs (KIP-932), Kafka's checks:

| API | needs | denial |
| --- | --- | --- |
| ShareGroupHeartbeat | READ group; DESCRIBE on every subscribed topic name | GROUP_ / TOPIC_AUTHORIZATION_FAILED (whole request) |
| ShareGroupDescribe | DESCRIBE group | GROUP_AUTHORIZATION_FAILED per group |
| ShareFetch, ShareAcknowledge | READ group (then READ on each topic, checked by the handler, which knows the topic ids' names) | GROUP_AUTHORIZATION_FAILED (whole request); TOPIC_AUTHORIZATION_FAILED per partition |
| DescribeShareGroupOffsets | DESCRIBE group; DESCRIBE on each topic named | GROUP_AUTHORIZATION_FAILED per group; TOPIC_AUTHORIZATION_FAILED per partition (by the handler) |
| AlterShareGroupOffsets | READ group; READ on each topic | GROUP_AUTHORIZATION_FAILED (whole request); TOPIC_AUTHORIZATION_FAILED per partition (by the handler) |
| DeleteShareGroupOffsets | DELETE group; READ on each topic | GROUP_AUTHORIZATION_FAILED (whole request); TOPIC_AUTHORIZATION_FAILED per topic (by the handler) |

Each rule answers as the others in `authorization` do: None (allowed), a response (refused), or a merge; the
heartbeat's and the describe's checks are the consumer groups' (`authorization_member_groups`).
"""

from __future__ import annotations

from typing import Any

from pybroker.broker.security.authorization_check import GROUP, GROUP_DENIED, Check, Op, Outcome, split_by
from pybroker.broker.security.authorization_member_groups import describe_groups, heartbeat_denial
from pybroker.protocol.messages import (
    alter_share_group_offsets,
    delete_share_group_offsets,
    describe_share_group_offsets,
    share_acknowledge,
    share_fetch,
    share_group_describe,
    share_group_heartbeat,
)


def share_group_heartbeat_rule(check: Check, r: share_group_heartbeat.ShareGroupHeartbeatRequest) -> Outcome:
    denial = heartbeat_denial(check, r.group_id, r.subscribed_topic_names)
    if denial is None:
        return None
    return share_group_heartbeat.ShareGroupHeartbeatResponse(
        error_code=denial[0], error_message=denial[1], member_id=r.member_id or None, member_epoch=r.member_epoch)


def share_group_describe_rule(check: Check, r: share_group_describe.ShareGroupDescribeRequest) -> Outcome:
    r.group_ids, merge = describe_groups(check, r.group_ids, bool(r.include_authorized_operations), lambda g:
                                         share_group_describe.ShareDescribedGroup(
                                             error_code=GROUP_DENIED, error_message="not authorized to describe the group",
                                             group_id=g))
    return merge


def share_fetch_rule(check: Check, r: share_fetch.ShareFetchRequest) -> Outcome:
    if not check.ok(Op.READ, GROUP, r.group_id or ""):
        return share_fetch.ShareFetchResponse(error_code=GROUP_DENIED,
                                              error_message="not authorized to read the group")
    return None


def share_acknowledge_rule(check: Check, r: share_acknowledge.ShareAcknowledgeRequest) -> Outcome:
    if not check.ok(Op.READ, GROUP, r.group_id or ""):
        return share_acknowledge.ShareAcknowledgeResponse(error_code=GROUP_DENIED,
                                                          error_message="not authorized to read the group")
    return None


def describe_share_group_offsets_rule(check: Check,
                                      r: describe_share_group_offsets.DescribeShareGroupOffsetsRequest) -> Outcome:
    kept, denied = split_by(r.groups, lambda g: check.ok(Op.DESCRIBE, GROUP, g.group_id))
    r.groups = kept
    if not denied:
        return None

    def merge(response: Any) -> Any:
        response.groups.extend(describe_share_group_offsets.DescribeShareGroupOffsetsResponseGroup(
            group_id=g.group_id, error_code=GROUP_DENIED, error_message="not authorized to describe the group")
            for g in denied)
        return response
    return merge


def alter_share_group_offsets_rule(check: Check, r: alter_share_group_offsets.AlterShareGroupOffsetsRequest) -> Outcome:
    if not check.ok(Op.READ, GROUP, r.group_id):
        return alter_share_group_offsets.AlterShareGroupOffsetsResponse(
            error_code=GROUP_DENIED, error_message="not authorized to read the group")
    return None


def delete_share_group_offsets_rule(check: Check,
                                    r: delete_share_group_offsets.DeleteShareGroupOffsetsRequest) -> Outcome:
    if not check.ok(Op.DELETE, GROUP, r.group_id):
        return delete_share_group_offsets.DeleteShareGroupOffsetsResponse(
            error_code=GROUP_DENIED, error_message="not authorized to delete the group")
    return None
