"""A partition log's settings, as plain values (the broker resolves them from its config table)."""

from __future__ import annotations

from dataclasses import dataclass

LONG_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = 1_073_741_824
    segment_ms: int = 604_800_000
    segment_jitter_ms: int = 0
    index_interval_bytes: int = 4096
    max_index_bytes: int = 10_485_760
    flush_interval_messages: int = LONG_MAX
    flush_interval_ms: int = LONG_MAX
    message_timestamp_type: str = "CreateTime"
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = 3_600_000
    max_message_bytes: int = 1_048_588
    cleanup_policy: str = "delete"
    retention_ms: int = 604_800_000
    retention_bytes: int = -1
    file_delete_delay_ms: int = 60_000
    preallocate: bool = False
