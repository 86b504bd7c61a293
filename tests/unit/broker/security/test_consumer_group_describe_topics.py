"""ConsumerGroupDescribe hides a group from a client that may not DESCRIBE a topic its members are assigned
(Kafka's handleConsumerGroupDescribe: TOPIC_AUTHORIZATION_FAILED for that group, no members shown)."""

from __future__ import annotations

import uuid
from typing import Any

from pybroker.broker.security.authorization_check import Op
from pybroker.broker.security.authorization_consumer_groups import consumer_group_describe_rule
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.consumer_group_describe import (
    ConsumerDescribedGroup,
    ConsumerDescribedMember,
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    DescribedTopicPartitions,
    MemberAssignment,
)


class FakeCheck:
    def __init__(self, hidden_topics: set[str]) -> None:
        self.hidden = hidden_topics
        self.asked: list[tuple[Any, Any, str]] = []

    def ok(self, op: Any, resource_type: Any, name: str) -> bool:
        self.asked.append((op, resource_type, name))
        return name not in self.hidden

    def operations(self, resource_type: Any, name: str) -> int:
        return 1 << 8


def assigned(*names: str) -> MemberAssignment:
    return MemberAssignment(topic_partitions=[DescribedTopicPartitions(topic_id=uuid.uuid4(), topic_name=n,
                                                                       partitions=[0]) for n in names])


def group(group_id: str, current: list[str], target: list[str], subscribed: list[str]) -> ConsumerDescribedGroup:
    return ConsumerDescribedGroup(error_code=0, group_id=group_id, group_state="Stable", members=[
        ConsumerDescribedMember(member_id="m", client_id="c", client_host="/h", subscribed_topic_names=subscribed,
                                assignment=assigned(*current), target_assignment=assigned(*target))])


def test_a_group_assigned_a_hidden_topic_is_refused_and_others_shown() -> None:
    check = FakeCheck({"secret"})
    request = ConsumerGroupDescribeRequest(group_ids=["a", "b", "c"], include_authorized_operations=True)
    merge = consumer_group_describe_rule(check, request)  # type: ignore[arg-type]
    assert callable(merge)
    response = ConsumerGroupDescribeResponse(throttle_time_ms=0, groups=[
        group("a", ["public"], ["public"], ["public"]),
        group("b", ["public"], ["secret"], ["public", "secret"]),
        # a subscription alone is not checked (Kafka looks at the assignments)
        group("c", [], [], ["secret"]),
    ])
    out = merge(response)
    by_id = {g.group_id: g for g in out.groups}
    assert by_id["a"].error_code == 0 and by_id["a"].members and by_id["a"].authorized_operations == 1 << 8
    assert by_id["b"].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED and by_id["b"].members == []
    assert "not authorized to describe" in (by_id["b"].error_message or "")
    assert by_id["b"].authorized_operations == -(2**31)
    assert by_id["c"].error_code == 0
    assert all(op is Op.DESCRIBE for op, _, _ in check.asked[1:])
