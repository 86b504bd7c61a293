"""A StreamsGroupHeartbeat as the coordinator takes it, and what it answers: version-free values, so the
coordinator never sees a codec's classes. The handler (broker/handlers/streams_group_heartbeat.py) builds
the one and turns the other into the response.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pybroker.broker.streams_groups.assignor import Target
from pybroker.broker.streams_groups.group import Endpoint
from pybroker.broker.streams_groups.topology import Status, Topology
from pybroker.protocol.errors import ErrorCode


@dataclass(slots=True)
class StreamsHeartbeat:
    group_id: str
    member_id: str
    member_epoch: int
    endpoint_information_epoch: int = 0
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    topology: Topology | None = None
    #: what the member owns (None: unchanged since its last heartbeat)
    owned: Target | None = None
    process_id: str | None = None
    user_endpoint: Endpoint | None = None
    client_tags: dict[str, str] | None = None
    task_offsets: list[tuple[str, int, int]] | None = None
    task_end_offsets: list[tuple[str, int, int]] | None = None
    shutdown_application: bool = False
    client_id: str = ""
    client_host: str = ""
    #: the request's version (v1 members are told MISSING_CLIENT_TAGS)
    version: int = 0


@dataclass(slots=True)
class StreamsHeartbeatOutcome:
    error: ErrorCode
    message: str | None = None
    member_id: str = ""
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    task_offset_interval_ms: int = 0
    statuses: tuple[Status, ...] = ()
    #: the member's tasks, when they changed (None: unchanged)
    assignment: Target | None = None
    endpoint_information_epoch: int = 0
    #: endpoint -> (active topic partitions, standby topic partitions), when the member's view is stale
    endpoints: list[tuple[Endpoint, dict[str, list[int]], dict[str, list[int]]]] | None = None
    extra: dict[str, int] = field(default_factory=dict)
