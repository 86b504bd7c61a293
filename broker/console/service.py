"""The console's life in the broker: where it is served, and its sampler.

The console is on by default (`console.enable`). It is served under `/console` on the metrics port
(`--metrics-port`; answering loopback peers only there, since that port is often opened to a Prometheus
elsewhere), and on a port of its own when `console.port` (`--console-port`) is set, bound to
`console.host` (127.0.0.1 unless told otherwise). Its charts read the metrics service's collector, so
they show what `/metrics` shows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pybroker.broker.console.auth import is_loopback_host
from pybroker.broker.console.routes import ConsoleApp
from pybroker.broker.console.sampler import Sampler
from pybroker.broker.metrics.http_server import MetricsServer

if TYPE_CHECKING:
    from pybroker.broker.metrics.collector import BrokerCollector
    from pybroker.broker.state import BrokerState


class ConsoleService:
    def __init__(self, state: BrokerState, collector: BrokerCollector) -> None:
        config = state.config
        self.host = str(config.get("console.host"))
        self.port = int(config.get("console.port"))
        self.sampler = Sampler(collector.collect, traffic=state.traffic.totals)
        self.app = ConsoleApp(state, self.sampler, bound_to_loopback=is_loopback_host(self.host))
        self.server: MetricsServer | None = None
        self.bound_port: int | None = None

    async def start(self, *, on_metrics_port: bool) -> int | None:
        """Serve on `console.port` when set (returns the bound port), and sample for the charts when the
        console is reachable at all (there or on the metrics port)."""
        if self.port < 0:
            if on_metrics_port:
                self.sampler.start()
            return None
        self.sampler.start()
        self.server = MetricsServer(lambda: None, console=self.app, probes=False)
        self.bound_port = await self.server.start(self.host, self.port)
        return self.bound_port

    async def stop(self) -> None:
        if self.server is not None:
            await self.server.stop()
        await self.sampler.stop()
