"""What a ConsumerGroupHeartbeat asks the coordinator and what it answers, independent of the wire version."""

from __future__ import annotations

from dataclasses import dataclass

from pybroker.broker.groups.consumer_group import Assignment
from pybroker.broker.groups.topic_regex import TopicFilter
from pybroker.protocol.errors import ErrorCode


@dataclass(frozen=True, slots=True)
class ConsumerHeartbeat:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    #: -1: unchanged since the last heartbeat
    rebalance_timeout_ms: int
    #: None: unchanged since the last heartbeat
    subscribed_topic_names: list[str] | None
    subscribed_topic_regex: str | None
    server_assignor: str | None
    #: the partitions the member owns; None: unchanged since the last heartbeat
    owned: Assignment | None
    client_id: str = ""
    client_host: str = ""
    #: the topics its regex may match (None: no authorizer, every topic)
    topic_filter: TopicFilter | None = None


@dataclass(frozen=True, slots=True)
class ConsumerHeartbeatOutcome:
    error: ErrorCode
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    #: None: unchanged, the member keeps what it has
    assignment: Assignment | None = None
