"""The metrics side of a running broker: the state collector, the fsync timer and the HTTP endpoints.

One object so the app has one line to start and one to stop it. The state collector is registered in
prometheus-client's default registry only while the broker runs (tests start several brokers in one
process); the group figures come from `groups_snapshot` when the broker has a group coordinator.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from prometheus_client import REGISTRY
from prometheus_client.registry import CollectorRegistry

from pybroker.broker.metrics.collector import BrokerCollector
from pybroker.broker.metrics.groups import GroupsSnapshot
from pybroker.broker.metrics.http_server import MetricsServer, Readiness
from pybroker.broker.metrics.requests import FLUSH_DURATION
from pybroker.storage.flush_timing import set_flush_observer

if TYPE_CHECKING:
    from pybroker.broker.state import BrokerState


class MetricsService:
    def __init__(self, state: BrokerState, readiness: Readiness, *, groups_snapshot: GroupsSnapshot | None = None,
                 registry: CollectorRegistry = REGISTRY) -> None:
        self.state = state
        self.registry = registry
        self.collector = BrokerCollector(state, groups_snapshot)
        self.server = MetricsServer(readiness, registry)
        self._registered = False

    async def start(self, host: str, port: int) -> int:
        """Register the collector, time fsyncs, and serve; returns the bound port."""
        set_flush_observer(FLUSH_DURATION.observe)
        if not self._registered:
            self.registry.register(self.collector)
            self._registered = True
        return await self.server.start(host, port)

    async def stop(self) -> None:
        await self.server.stop()
        set_flush_observer(None)
        if self._registered:
            with contextlib.suppress(KeyError):
                self.registry.unregister(self.collector)
            self._registered = False


def log_dirs_problem(state: BrokerState) -> str | None:
    """Why the broker's storage is not fit to serve, for `/readyz`; None when it is."""
    offline = len(state.logs.offline_dirs)
    return f"{offline} log dir(s) offline" if offline else None
