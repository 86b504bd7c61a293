"""Authorization rules of the consumer group protocol's APIs (KIP-848), Kafka's checks:

| API | needs | denial |
| --- | --- | --- |
| ConsumerGroupHeartbeat | READ group; DESCRIBE on every subscribed topic name | GROUP_ / TOPIC_AUTHORIZATION_FAILED (whole request) |
| ConsumerGroupDescribe | DESCRIBE group; DESCRIBE on every topic in its members' assignments and targets | GROUP_ / TOPIC_AUTHORIZATION_FAILED per group |

Each rule answers as the others in `authorization` do: None (allowed), a response (refused), or a merge.
"""

from __future__ import annotations

from typing import Any

from pybroker.broker.security.authorization_check import (
    GROUP,
    GROUP_DENIED,
    TOPIC,
    TOPIC_DENIED,
    Check,
    Op,
    Outcome,
    split_by,
)
from pybroker.protocol.messages import consumer_group_describe, consumer_group_heartbeat


def consumer_group_heartbeat_rule(check: Check, r: consumer_group_heartbeat.ConsumerGroupHeartbeatRequest
                                  ) -> Outcome:
    def refuse(code: int, message: str) -> Any:
        return consumer_group_heartbeat.ConsumerGroupHeartbeatResponse(
            error_code=code, error_message=message, member_id=r.member_id or None, member_epoch=r.member_epoch)

    if not check.ok(Op.READ, GROUP, r.group_id):
        return refuse(GROUP_DENIED, "not authorized to read the group")
    denied = [t for t in dict.fromkeys(r.subscribed_topic_names or []) if not check.ok(Op.DESCRIBE, TOPIC, t)]
    if denied:
        return refuse(TOPIC_DENIED, f"Topics not authorized: {', '.join(sorted(denied)[:20])}")
    return None


def consumer_group_describe_rule(check: Check, r: consumer_group_describe.ConsumerGroupDescribeRequest
                                 ) -> Outcome:
    kept, denied = split_by(r.group_ids, lambda g: check.ok(Op.DESCRIBE, GROUP, g))
    r.group_ids = kept
    include_ops = bool(r.include_authorized_operations)

    def merge(response: Any) -> Any:
        topic_ok: dict[str, bool] = {}

        def may_describe(name: str) -> bool:
            if name not in topic_ok:
                topic_ok[name] = check.ok(Op.DESCRIBE, TOPIC, name)
            return topic_ok[name]

        for group in response.groups:
            if group.error_code == 0 and not all(map(may_describe, _described_topics(group))):
                # Kafka's answer: the group is not shown to a client that may not see all its topics
                group.error_code = TOPIC_DENIED
                group.error_message = "The group has described topic(s) that the client is not authorized to describe."
                group.members = []
                group.authorized_operations = -(2**31)
        if include_ops:
            for group in response.groups:
                if group.error_code != TOPIC_DENIED:
                    group.authorized_operations = check.operations(GROUP, group.group_id)
        response.groups.extend(consumer_group_describe.ConsumerDescribedGroup(
            error_code=GROUP_DENIED, error_message="not authorized to describe the group", group_id=g)
            for g in denied)
        return response
    return merge


def _described_topics(group: Any) -> set[str]:
    """The topic names a described group's assignments show (Kafka checks its members' current and target
    assignments: a client that may not describe one of them does not see the group)."""
    names: set[str] = set()
    for member in group.members:
        for assignment in (member.assignment, member.target_assignment):
            names.update(t.topic_name for t in assignment.topic_partitions if t.topic_name)
    return names
