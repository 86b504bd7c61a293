"""A partition log's settings as plain values with Kafka's defaults.

The broker resolves topic overrides, broker synonyms and defaults from its config table and builds one
of these with every field given (`broker.topics.log_config_for`, through `config.log_config_fields`); the
storage layer never reads config keys itself. The field defaults below serve a log built outside a
broker (tests, tools); they are the topic definitions' defaults (`config/definitions.py`, the one source),
repeated because storage may not import config, and a test fails when the two differ.

Frozen: a log's settings change by swapping the whole object (`Log.update_config`), so any thread may read one.
"""

from __future__ import annotations

from dataclasses import dataclass

LONG_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = 1_073_741_824  # segment.bytes: roll when the active segment would pass this
    segment_ms: int = 604_800_000  # segment.ms: roll when the segment's first batch is this old
    segment_jitter_ms: int = 0  # segment.jitter.ms: random slack subtracted from segment_ms per segment
    index_interval_bytes: int = 4096  # index.interval.bytes: log bytes between offset-index entries
    max_index_bytes: int = 10_485_760  # segment.index.bytes: index preallocation; roll when full
    flush_interval_messages: int = LONG_MAX  # flush.messages
    flush_interval_ms: int = 1_000  # flush.ms: the acks=1 window (`storage.flush_window`)
    message_timestamp_type: str = "CreateTime"  # or "LogAppendTime"
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = 3_600_000
    max_message_bytes: int = 1_048_588
    cleanup_policy: str = "delete"
    retention_ms: int = 604_800_000
    retention_bytes: int = -1
    file_delete_delay_ms: int = 60_000
    preallocate: bool = False
    # compaction (cleanup.policy containing "compact")
    delete_retention_ms: int = 86_400_000  # delete.retention.ms: tombstones live this long once clean
    min_cleanable_dirty_ratio: float = 0.5  # min.cleanable.dirty.ratio: dirty share before a clean
    min_compaction_lag_ms: int = 0  # min.compaction.lag.ms: records younger than this stay uncleaned
    max_compaction_lag_ms: int = LONG_MAX  # max.compaction.lag.ms: dirty records older than this force a clean

    @property
    def compact(self) -> bool:
        """The cleaner compacts this log (`compact` or `compact,delete`)."""
        return "compact" in self.cleanup_policy.split(",")
