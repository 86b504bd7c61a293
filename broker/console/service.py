"""The console's life in the broker: where it is served, and its sampler.

The console is on by default (`console.enable`). It is served under `/console` on the metrics port
(`--metrics-port`; answering loopback peers only there, since that port is often opened to a Prometheus
elsewhere), and on a port of its own when `console.port` (`--console-port`) is set, bound to
`console.host` (127.0.0.1 unless told otherwise). Its charts read the metrics service's collector, so
they show what `/metrics` shows.

The console's pages and API (`routes.ConsoleApp` and the twenty modules under it) are imported and built
at the first request that reaches the console, not at the broker's start: a broker that nobody browses
never pays for them, and its start-to-ready does not. Everything here runs on the event loop's thread.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pybroker.broker.console.auth import is_loopback_host
from pybroker.broker.console.sampler import Sampler
from pybroker.broker.metrics.http_server import ConsoleResponse, MetricsServer, Request

if TYPE_CHECKING:
    from pybroker.broker.console.routes import ConsoleApp
    from pybroker.broker.metrics.collector import BrokerCollector
    from pybroker.broker.state import BrokerState


class ConsoleService:
    def __init__(self, state: BrokerState, collector: BrokerCollector) -> None:
        config = state.config
        self.host = str(config.get("console.host"))
        self.port = int(config.get("console.port"))
        self.sampler = Sampler(collector.collect, traffic=state.traffic.totals)
        self.state = state
        #: the broker page's uptime counts from the broker's start, not from the first page view
        self.started_ms = state.clock_ms()
        self._app: ConsoleApp | None = None
        self.server: MetricsServer | None = None
        self.bound_port: int | None = None

    @property
    def app(self) -> ConsoleApp:
        """The console's request handler, imported and built on first use."""
        if self._app is None:
            from pybroker.broker.console.routes import ConsoleApp

            self._app = ConsoleApp(self.state, self.sampler, bound_to_loopback=is_loopback_host(self.host),
                                   started_ms=self.started_ms)
        return self._app

    async def handle(self, request: Request, shared_port: bool) -> ConsoleResponse:
        """What the metrics server (or the console's own port) mounts under `/console`."""
        return await self.app(request, shared_port)

    async def start(self, *, on_metrics_port: bool) -> int | None:
        """Serve on `console.port` when set (returns the bound port), and sample for the charts when the
        console is reachable at all (there or on the metrics port)."""
        if self.port < 0:
            if on_metrics_port:
                self.sampler.start()
            return None
        self.sampler.start()
        self.server = MetricsServer(lambda: None, console=self.handle, probes=False)
        self.bound_port = await self.server.start(self.host, self.port)
        return self.bound_port

    async def stop(self) -> None:
        if self.server is not None:
            await self.server.stop()
        await self.sampler.stop()
