"""Shared pieces of the consumer-protocol (KIP-848) coordinator tests: a coordinator over fake topics and a
fake log, and a heartbeat helper that returns the one answer."""

from __future__ import annotations

import uuid
from typing import Any

from pybroker.broker.groups.config import GroupConfig
from pybroker.broker.groups.consumer_group import Assignment
from pybroker.broker.groups.consumer_outcomes import ConsumerHeartbeat, ConsumerHeartbeatOutcome
from pybroker.broker.groups.coordinator import GroupCoordinator
from tests.unit.broker.groups.test_group_coordinator import Box, FakeLog

SESSION = 45_000
INTERVAL = 5000
REBALANCE = 30_000
T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)


def make(topics: dict[str, tuple[uuid.UUID, int]] | None = None, **config: Any
         ) -> tuple[GroupCoordinator, FakeLog, dict[str, tuple[uuid.UUID, int]]]:
    table = dict(topics if topics is not None else {"t1": (T1, 4), "t2": (T2, 2)})
    log = FakeLog()
    co = GroupCoordinator(GroupConfig(num_partitions=1, **config), log, topic_metadata=lambda: dict(table))
    return co, log, table


def heartbeat(co: GroupCoordinator, now: int, member_id: str = "", epoch: int = 0, *, group: str = "g",
              topics: list[str] | None = None, regex: str | None = None, owned: Assignment | None = None,
              instance: str | None = None, assignor: str | None = None, rebalance: int = -1
              ) -> ConsumerHeartbeatOutcome:
    if epoch == 0:
        rebalance = REBALANCE if rebalance == -1 else rebalance
        owned = {} if owned is None else owned
    box = Box()
    co.consumer_heartbeat(ConsumerHeartbeat(group, member_id, epoch, instance, None, rebalance, topics, regex,
                                            assignor, owned, "client", "/127.0.0.1"), now, box)
    assert len(box.answers) == 1
    answer: ConsumerHeartbeatOutcome = box.answers[0]
    return answer
