"""Topics as the handlers see them: creation rules, auto-creation, and configs turned into `LogConfig`.

Storage persists a topic's overrides as text; this module is where Kafka's config resolution (topic
override, then broker synonym, then default) meets the storage layer's plain `LogConfig`, through the
key-to-field table of `config.log_config_fields`.

Creating, growing and deleting topics touches the disk once per partition, so the handlers run these
calls on a worker thread; `excessive` is the check they make first, on the loop, so a request asking for
billions of partitions is answered at once and costs nothing.
"""

from __future__ import annotations

from collections.abc import Mapping

from pybroker.config.broker_config import BrokerConfig, validate_topic_overrides
from pybroker.config.log_config_fields import log_config_fields
from pybroker.config.types import ConfigError
from pybroker.protocol.errors import ErrorCode
from pybroker.storage.errors import (
    InvalidPartitionsError,
    InvalidTopicError,
    LogClosedError,
    LogDirsOfflineError,
    PartitionLimitError,
    StorageError,
    TopicBusyError,
    TopicExistsError,
    UnknownTopicError,
)
from pybroker.storage.log_config import LogConfig
from pybroker.storage.log_dir_failure import is_resource_exhaustion
from pybroker.storage.log_manager import LogManager, TopicInfo, validate_topic_name

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
#: Kafka's controller's words for a request that would make too many records
EXCESSIVE_BATCH_MESSAGE = "Unable to perform excessively large batch operation."


class TopicError(Exception):
    """A topic operation refused with a Kafka error code and a message for the client."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def log_config_for(config: BrokerConfig, overrides: Mapping[str, str]) -> LogConfig:
    """A topic's log settings: each key's override, else its broker synonym, else its default."""
    return LogConfig(**log_config_fields(config.topic_values(overrides)))


class Topics:
    """Creation and lookup of topics on top of the log manager."""

    def __init__(self, config: BrokerConfig, logs: LogManager) -> None:
        self.config = config
        self.logs = logs

    def get(self, name: str) -> TopicInfo | None:
        return self.logs.topics().get(name)

    def prepare(self, name: str, num_partitions: int, replication_factor: int,
                configs: Mapping[str, str | None]) -> tuple[int, dict[str, str]]:
        """Kafka's CreateTopics rules for one topic, before anything is made: (partitions, overrides).
        `TopicError` carries the code for the response."""
        if num_partitions == -1:
            num_partitions = int(self.config.get("num.partitions"))
        if replication_factor == -1:
            replication_factor = int(self.config.get("default.replication.factor"))
        if num_partitions <= 0:
            raise TopicError(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
        if replication_factor != 1:
            raise TopicError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             f"Replication factor: {replication_factor} larger than available brokers: 1.")
        try:
            overrides = validate_topic_overrides(configs)
        except ConfigError as exc:
            raise TopicError(ErrorCode.INVALID_CONFIG, str(exc)) from None
        if name in self.logs.topics():
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        check_topic_name(name)
        return num_partitions, overrides

    def create(self, name: str, num_partitions: int, replication_factor: int,
               configs: Mapping[str, str | None], *, validate_only: bool = False) -> TopicInfo | None:
        """One topic: `prepare`, then `create_all`; `TopicError` carries the code for the response."""
        partitions, overrides = self.prepare(name, num_partitions, replication_factor, configs)
        if validate_only:
            return None
        outcome = self.create_all([(name, partitions, overrides)])[name]
        if isinstance(outcome, TopicError):
            raise outcome
        return outcome

    def create_all(self, wanted: list[tuple[str, int, dict[str, str]]]) -> dict[str, TopicInfo | TopicError]:
        """Create prepared topics together (one save of the topic table; on a worker thread)."""
        return {name: outcome if isinstance(outcome, TopicInfo) else TopicError(*change_refused(outcome))
                for name, outcome in self.logs.create_topics(wanted).items()}

    def excessive(self, partitions: int) -> bool:
        """A request making this many partitions passes `max.partitions.per.request`."""
        return partitions > int(self.config.get("max.partitions.per.request"))

    def new_partitions(self, num_partitions: int) -> int:
        """Partitions a creation asking for `num_partitions` makes (-1: the broker default)."""
        return int(self.config.get("num.partitions")) if num_partitions == -1 else max(num_partitions, 0)

    def to_auto_create(self, names: list[str | None]) -> list[str]:
        """The names among `names` that auto-creation would create (unknown, legal, not internal),
        without repeats, no more than `max.partitions.per.request` allows: the rest stay unknown."""
        topics = self.logs.topics()
        unknown = [name for name in names if name is not None and name not in topics]
        if not unknown or not self.config.get("auto.create.topics.enable"):
            return []  # the common case costs one dict lookup per name
        each = int(self.config.get("num.partitions"))
        room = int(self.config.get("max.partitions.per.request")) // each
        wanted: list[str] = []
        for name in dict.fromkeys(unknown):
            if len(wanted) >= room:
                break
            if name in INTERNAL_TOPICS:
                continue
            try:
                validate_topic_name(name)
            except InvalidTopicError:
                continue
            wanted.append(name)
        return wanted

    def auto_create_all(self, names: list[str]) -> None:
        """Create `names` (from `to_auto_create`) with the broker defaults, together, on a worker thread;
        a name refused (the partition cap reached, say) stays unknown."""
        if names and self.config.get("auto.create.topics.enable"):
            each = int(self.config.get("num.partitions"))
            self.create_all([(name, each, {}) for name in names if name not in INTERNAL_TOPICS])

    def auto_create(self, name: str) -> TopicInfo | None:
        """Create `name` with the broker defaults if auto-creation is on and the name is legal."""
        if not self.config.get("auto.create.topics.enable") or name in INTERNAL_TOPICS:
            return None
        try:
            return self.create(name, -1, -1, {})
        except TopicError as exc:
            if exc.code == ErrorCode.TOPIC_ALREADY_EXISTS:
                return self.get(name)
            return None


#: storage refusals and the code each is answered with (the message is the exception's)
_REFUSALS: tuple[tuple[type[Exception], ErrorCode], ...] = (
    (TopicExistsError, ErrorCode.TOPIC_ALREADY_EXISTS),
    (InvalidTopicError, ErrorCode.INVALID_TOPIC_EXCEPTION),
    (InvalidPartitionsError, ErrorCode.INVALID_PARTITIONS),
    (UnknownTopicError, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    (PartitionLimitError, ErrorCode.POLICY_VIOLATION),
    (TopicBusyError, ErrorCode.INVALID_REQUEST),
    (LogDirsOfflineError, ErrorCode.KAFKA_STORAGE_ERROR),
    (LogClosedError, ErrorCode.NOT_CONTROLLER),  # shutting down; retriable: the client asks again later
    (StorageError, ErrorCode.UNKNOWN_SERVER_ERROR),
)


def change_refused(exc: BaseException) -> tuple[ErrorCode, str]:
    """The code and message for a topic change the storage layer refused or could not make."""
    if is_resource_exhaustion(exc):
        return ErrorCode.UNKNOWN_SERVER_ERROR, (f"The broker is out of file descriptors or memory ({exc}); "
                                                f"nothing was changed, retry later.")
    for kind, code in _REFUSALS:
        if isinstance(exc, kind):
            return code, str(exc)
    return ErrorCode.KAFKA_STORAGE_ERROR, f"No log dir could take the change: {exc}"


def check_topic_name(name: str) -> None:
    """Kafka's topic-name rules (the storage layer's table), as a `TopicError` for the response."""
    try:
        validate_topic_name(name)
    except InvalidTopicError as exc:
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, str(exc)) from None
