"""Finding a partition's log for a request, with the error code Kafka gives when there is none."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from pybroker.broker.topics import INTERNAL_TOPICS
from pybroker.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from pybroker.broker.state import BrokerState
    from pybroker.storage.log import Log
    from pybroker.storage.log_manager import TopicInfo


def resolve_partition(state: BrokerState, topic: str, partition: int) -> tuple[Log | None, ErrorCode]:
    log = state.logs.get_log(topic, partition)
    if log is None:
        return None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if not state.logs.is_online(log):
        return None, ErrorCode.KAFKA_STORAGE_ERROR
    return log, ErrorCode.NONE


def resolve_partition_for_write(state: BrokerState, topic: str, partition: int) -> tuple[Log | None, ErrorCode]:
    """As `resolve_partition`, refusing internal topics (auto-creation happened before, off the loop)."""
    if topic in INTERNAL_TOPICS:
        return None, ErrorCode.INVALID_TOPIC_EXCEPTION
    log = state.logs.get_log(topic, partition)
    if log is not None:
        return (log, ErrorCode.NONE) if state.logs.is_online(log) else (None, ErrorCode.KAFKA_STORAGE_ERROR)
    return None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def topic_by_id(state: BrokerState, topic_id: uuid.UUID) -> TopicInfo | None:
    return state.logs.topic_by_id(topic_id)
