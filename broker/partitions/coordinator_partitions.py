"""What a coordinator (groups, transactions) may do with partitions, and nothing else of the broker.

The group coordinator needs to append to its `__consumer_offsets` partition (durably), to read its
partitions back at startup, to create its topic on first use, and to ask whether a topic's partition
exists (OffsetCommit refuses offsets of unknown partitions); the transaction coordinator needs the same
for `__transaction_state`. This is that interface: the broker's config (a coordinator's settings are
broker configs), its clock, and these partition calls over the partition layer. A coordinator built on it
can be tested with a fake of this one class instead of a whole `BrokerState`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from pybroker.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from pybroker.broker.detached_work import DetachedWork
    from pybroker.broker.partitions.manager import ReplicaManager
    from pybroker.broker.partitions.partition import Partition
    from pybroker.config.broker_config import BrokerConfig
    from pybroker.storage.log import Log
    from pybroker.storage.log_manager import TopicInfo


class CoordinatorPartitions:
    __slots__ = ("_replicas", "clock_ms", "config", "detached")

    def __init__(self, config: BrokerConfig, clock_ms: Callable[[], int], replicas: ReplicaManager, *,
                 detached: DetachedWork) -> None:
        self.config = config
        self.clock_ms = clock_ms
        self._replicas = replicas
        #: where the topic's creation runs when a request needs it (to its end, should the request go)
        self.detached = detached

    def topic(self, name: str) -> TopicInfo | None:
        """A topic's metadata (its partition count, say), or None."""
        return self._replicas.logs.topics().get(name)

    def topics(self) -> dict[str, TopicInfo]:
        """Every topic's metadata (the consumer protocol's topic table). The log manager replaces this dict
        when topics come or go, so its identity says whether they changed."""
        return self._replicas.logs.topics()

    def create_topic(self, name: str, num_partitions: int, configs: dict[str, str]) -> None:
        """Create a topic (blocking: run it in a thread). Raises `TopicExistsError`, `OSError`, `StorageError`."""
        self._replicas.logs.create_topic(name, num_partitions, configs)

    def partition_exists(self, topic: str, partition: int) -> bool:
        return self._replicas.logs.get_log(topic, partition) is not None

    def resolve(self, topic: str, partition: int) -> tuple[Partition | None, ErrorCode]:
        """A partition to append to (`Partition.append`, acks=all for a durable write), or why there is none."""
        return self._replicas.resolve(topic, partition)

    def log_for_replay(self, topic: str, partition: int) -> Log | None:
        """The partition's log, to read it back whole at startup (in a thread, for the length of that read)."""
        return self._replicas.logs.get_log(topic, partition)
