"""Typed storage failures; the broker maps each to a Kafka error code (I/O errors stay OSError)."""

from __future__ import annotations


class StorageError(Exception):
    """Base of everything the storage layer refuses on purpose."""


class TopicExistsError(StorageError):
    pass


class InvalidTopicError(StorageError):
    pass


class UnknownTopicError(StorageError):
    pass


class OffsetOutOfRange(StorageError):
    def __init__(self, offset: int, log_start: int, log_end: int) -> None:
        super().__init__(f"offset {offset} is outside [{log_start}, {log_end}]")
        self.offset = offset


class ProducerStateError(StorageError):
    """An idempotent producer's batch refused: `error_code` is Kafka's (45, 47, ...)."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


class LogDirLockedError(StorageError):
    pass


class MetaPropertiesError(StorageError):
    pass
