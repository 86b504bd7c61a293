"""Typed storage failures; the broker maps each to a Kafka error code (I/O errors stay `OSError`).

Everything the storage layer refuses on purpose derives from `StorageError`, so a caller can tell a
refusal (bad offset, fenced producer, illegal topic) from a failing disk (`OSError`, which the broker
answers with KAFKA_STORAGE_ERROR).
"""

from __future__ import annotations


class StorageError(Exception):
    """Base of everything the storage layer refuses on purpose."""


class TopicExistsError(StorageError):
    """CreateTopics for a name that is taken (TOPIC_ALREADY_EXISTS)."""


class InvalidTopicError(StorageError):
    """A topic name Kafka would refuse (INVALID_TOPIC_EXCEPTION)."""


class UnknownTopicError(StorageError):
    """An operation on a topic this broker does not have (UNKNOWN_TOPIC_OR_PARTITION)."""


class InvalidPartitionsError(StorageError):
    """A partition count that is not positive, or does not grow (INVALID_PARTITIONS)."""


class OffsetOutOfRange(StorageError):
    """A read outside [log_start_offset, log_end_offset] (OFFSET_OUT_OF_RANGE)."""

    def __init__(self, offset: int, log_start: int, log_end: int) -> None:
        super().__init__(f"offset {offset} is outside [{log_start}, {log_end}]")
        self.offset = offset
        self.log_start = log_start
        self.log_end = log_end


class ProducerStateError(StorageError):
    """An idempotent producer's batch refused: `error_code` is Kafka's (45, 47)."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


class LogClosedError(StorageError):
    """The log was closed or deleted (its topic went away) while the caller still held it."""


class FlushError(StorageError):
    """A durability request that can never be met: the flusher is closed, or the offset was truncated."""


class LogDirLockedError(StorageError):
    """Another process holds the log dir's `.lock`."""


class MetaPropertiesError(StorageError):
    """`meta.properties` belongs to another node or cluster, or cannot be read."""


class TopicStoreError(StorageError):
    """Every copy of the topic table is unreadable: starting would set all partitions aside."""


class CorruptIndexError(StorageError):
    """An index file failed its sanity checks; the segment rebuilds it from the log."""


class CorruptSnapshotError(StorageError):
    """A producer-state snapshot failed its checks; it is deleted and an older one (or the log) used."""


class LogDirsOfflineError(StorageError, OSError):
    """Every log dir is offline: nothing can be created or saved (an OSError, as the failures behind it)."""


class PartitionLimitError(StorageError):
    """Creating the partitions would pass the broker's cap (`max.broker.partitions` or the descriptor budget)."""


class TopicBusyError(StorageError):
    """Another request is creating, growing or deleting this topic right now."""


class LogDirNotFoundError(StorageError):
    """A path that is not one of the broker's configured log dirs (LOG_DIR_NOT_FOUND)."""


class LogDirOfflineError(StorageError):
    """The log dir asked for, or the partition's, is offline after an I/O error (KAFKA_STORAGE_ERROR)."""
