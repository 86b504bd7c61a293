"""The share groups' settings, read once from the broker config (a leaf: imports nothing of the broker)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class ShareConfig:
    heartbeat_interval_ms: int = 5000
    session_timeout_ms: int = 45000
    max_size: int = 200
    record_lock_duration_ms: int = 30000
    delivery_count_limit: int = 5
    max_record_locks: int = 2000
    max_share_sessions: int = 2000
    #: where a share-partition starts when first read: "latest" (Kafka's default) or "earliest"
    auto_offset_reset: str = "latest"

    @classmethod
    def from_config(cls, config: Any) -> ShareConfig:
        return cls(
            heartbeat_interval_ms=int(config.get("group.share.heartbeat.interval.ms")),
            session_timeout_ms=int(config.get("group.share.session.timeout.ms")),
            max_size=int(config.get("group.share.max.size")),
            record_lock_duration_ms=int(config.get("group.share.record.lock.duration.ms")),
            delivery_count_limit=int(config.get("group.share.delivery.count.limit")),
            max_record_locks=int(config.get("group.share.partition.max.record.locks")),
            max_share_sessions=int(config.get("group.share.max.share.sessions")),
        )
