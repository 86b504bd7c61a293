"""The group coordinator's settings (`GroupConfig`), a leaf: it imports nothing of the coordinator.

Built from broker configs by `service.group_config`; every part of the coordinator reads it through the
`GroupStore` they share, so replacing it (the offsets topic turned out to have another partition count)
reaches them all at once.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class GroupConfig:
    num_partitions: int = 50
    initial_rebalance_delay_ms: int = 3000
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    max_size: int = 2**31 - 1
    metadata_max_bytes: int = 4096
    offsets_retention_ms: int = 7 * 24 * 3_600_000
    #: the consumer protocol (KIP-848): group.coordinator.rebalance.protocols lists "consumer"
    consumer_protocol_enabled: bool = True
    consumer_heartbeat_interval_ms: int = 5000
    consumer_session_timeout_ms: int = 45_000
    consumer_max_size: int = 2**31 - 1
    #: server-side assignors by name, the first the default (group.consumer.assignors)
    consumer_assignors: tuple[str, ...] = ("uniform", "range")
    #: group.consumer.migration.policy: which online conversions are allowed
    consumer_migration_policy: str = "bidirectional"
    #: the streams protocol (KIP-1071): group.coordinator.rebalance.protocols lists "streams"
    streams_protocol_enabled: bool = True
    streams_heartbeat_interval_ms: int = 5000
    streams_session_timeout_ms: int = 45_000
    streams_max_size: int = 2**31 - 1
    #: standby replicas of each task (group.streams.num.standby.replicas): a group's, not a client's, setting
    streams_num_standby_replicas: int = 0
    #: the bounds of a streams group's own overrides (group.streams.min/max.*, group.streams.max.standby.replicas)
    streams_min_session_timeout_ms: int = 45_000
    streams_max_session_timeout_ms: int = 60_000
    streams_min_heartbeat_interval_ms: int = 5000
    streams_max_heartbeat_interval_ms: int = 15_000
    streams_max_standby_replicas: int = 2
    #: how long a new streams group waits for more members before its first assignment
    streams_initial_rebalance_delay_ms: int = 3000
    #: client tag keys every streams member must carry (group.streams.rack.aware.assignment.tags)
    streams_rack_aware_assignment_tags: tuple[str, ...] = ()
