"""What every part of the group coordinator shares: the settings, the groups, the log, which partitions load.

The coordinator (`coordinator.GroupCoordinator`) is a small object composing parts (classic groups,
consumer groups, mixed groups, offsets, loading); each part is handed this store and the other parts it
calls, explicitly, instead of inheriting them. Event loop's thread only, like the whole coordinator.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping

from pybroker.broker.groups.config import GroupConfig
from pybroker.broker.groups.group import Group
from pybroker.broker.groups.group_log import Done, GroupLog, Producer, Records
from pybroker.broker.groups.placement import partition_for_group
from pybroker.protocol.errors import ErrorCode

#: topic name -> (topic id, partition count), for the consumer protocol's assignments
TopicMetadata = Mapping[str, tuple[uuid.UUID, int]]


def random_member_id(client_id: str) -> str:
    return f"{client_id}-{uuid.uuid4()}"


class GroupStore:
    def __init__(self, config: GroupConfig, log: GroupLog, *, partition_exists: Callable[[str, int], bool],
                 new_member_id: Callable[[str], str], topic_metadata: Callable[[], TopicMetadata]) -> None:
        self.config = config
        self.log = log
        self.partition_exists = partition_exists
        self.new_member_id = new_member_id
        #: topic name -> (topic id, partition count), for the consumer protocol's assignments
        self.topic_metadata = topic_metadata
        self.groups: dict[str, Group] = {}
        #: offsets-topic partitions whose groups are still being read from the log
        self.loading: set[int] = set()

    def partition_for(self, group_id: str) -> int:
        return partition_for_group(group_id, self.config.num_partitions)

    def availability(self, group_id: str) -> ErrorCode:
        """INVALID_GROUP_ID for an empty id; COORDINATOR_LOAD_IN_PROGRESS while its partition loads."""
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        if self.partition_for(group_id) in self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NONE

    def append(self, group_id: str, records: Records, now: int, done: Done, *,
               producer: Producer | None = None) -> int:
        """Write `records` to the group's partition (`GroupLog.append`)."""
        return self.log.append(self.partition_for(group_id), records, now, done, producer=producer)
