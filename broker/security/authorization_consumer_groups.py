"""Authorization rules of the consumer group protocol's APIs (KIP-848), Kafka's checks:

| API | needs | denial |
| --- | --- | --- |
| ConsumerGroupHeartbeat | READ group; DESCRIBE on every subscribed topic name | GROUP_ / TOPIC_AUTHORIZATION_FAILED (whole request) |
| ConsumerGroupDescribe | DESCRIBE group; DESCRIBE on every topic in its members' assignments and targets | GROUP_ / TOPIC_AUTHORIZATION_FAILED per group |

Each rule answers as the others in `authorization` do: None (allowed), a response (refused), or a merge; the
checks they share with the share group APIs are `authorization_member_groups`.
"""

from __future__ import annotations

from typing import Any

from pybroker.broker.security.authorization_check import GROUP_DENIED, TOPIC, TOPIC_DENIED, Check, Op, Outcome
from pybroker.broker.security.authorization_member_groups import describe_groups, heartbeat_denial
from pybroker.protocol.messages import consumer_group_describe, consumer_group_heartbeat


def consumer_group_heartbeat_rule(check: Check, r: consumer_group_heartbeat.ConsumerGroupHeartbeatRequest
                                  ) -> Outcome:
    denial = heartbeat_denial(check, r.group_id, r.subscribed_topic_names)
    if denial is None:
        return None
    return consumer_group_heartbeat.ConsumerGroupHeartbeatResponse(
        error_code=denial[0], error_message=denial[1], member_id=r.member_id or None, member_epoch=r.member_epoch)


def consumer_group_describe_rule(check: Check, r: consumer_group_describe.ConsumerGroupDescribeRequest
                                 ) -> Outcome:
    topic_ok: dict[str, bool] = {}

    def may_describe(name: str) -> bool:
        if name not in topic_ok:
            topic_ok[name] = check.ok(Op.DESCRIBE, TOPIC, name)
        return topic_ok[name]

    def screen(group: Any) -> None:
        if group.error_code == 0 and not all(map(may_describe, _described_topics(group))):
            # Kafka's answer: the group is not shown to a client that may not see all its topics
            group.error_code = TOPIC_DENIED
            group.error_message = "The group has described topic(s) that the client is not authorized to describe."
            group.members = []
            group.authorized_operations = -(2**31)

    r.group_ids, merge = describe_groups(check, r.group_ids, bool(r.include_authorized_operations), lambda g:
                                         consumer_group_describe.ConsumerDescribedGroup(
                                             error_code=GROUP_DENIED, error_message="not authorized to describe the group",
                                             group_id=g), screen)
    return merge


def _described_topics(group: Any) -> set[str]:
    """The topic names a described group's assignments show (Kafka checks its members' current and target
    assignments: a client that may not describe one of them does not see the group)."""
    names: set[str] = set()
    for member in group.members:
        for assignment in (member.assignment, member.target_assignment):
            names.update(t.topic_name for t in assignment.topic_partitions if t.topic_name)
    return names
