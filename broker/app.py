"""The broker's life: startup (recovery, listeners), serve, graceful shutdown.

Shutdown is triggered by an injectable event (SIGTERM/SIGINT set it in production, tests set it
directly): stop accepting, let in-flight requests finish within a bounded time, wake waiting fetches,
close connections, then flush every log and write the checkpoints and the clean-shutdown marker.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from pathlib import Path
from typing import Any

from pybroker.broker import compiled_modules as compiled
from pybroker.broker import dataclass_code, startup_gc
from pybroker.broker.allocator import tune_allocator
from pybroker.broker.console.service import ConsoleService
from pybroker.broker.descriptor_budget import EVICT_IDLE_S, DescriptorBudget, headroom
from pybroker.broker.dispatch import load_handlers
from pybroker.broker.listeners import KEY_STORE_KEYS, Listeners
from pybroker.broker.loggers.structlog_setup import for_a_person, get_logger
from pybroker.broker.metrics import loop_stalls
from pybroker.broker.metrics.service import MetricsService, log_dirs_problem
from pybroker.broker.partitions import validation_processes
from pybroker.broker.resource_limits import apply_partition_limits, raise_open_file_limit
from pybroker.broker.schema_registry.service import SchemaRegistryService
from pybroker.broker.schema_registry.validation import SchemaValidation
from pybroker.broker.socket_buffers import capped_explicit_sizes
from pybroker.broker.state import BrokerState
from pybroker.config.broker_config import BrokerConfig
from pybroker.storage import crc32c_extension

log = get_logger("pybroker.app")

GRACEFUL_TIMEOUT_S = 10.0
#: the exit status when the last log dir failed (Kafka's broker also exits when no log dir is left)
EXIT_ALL_DIRS_OFFLINE = 3
BACKGROUND_TICK_S = 1.0
#: how often the key store files of TLS listeners are checked for a change (a stat each)
KEY_STORE_CHECK_S = 2.0


class BrokerApp:
    def __init__(self, config: BrokerConfig, *, metrics_port: int | None = None,
                 metrics_host: str = "127.0.0.1") -> None:
        self.config = config
        self.metrics_port = metrics_port
        self.metrics_host = metrics_host
        self.state = BrokerState(config)
        self.servers: list[asyncio.Server] = []
        self.listeners: Listeners | None = None
        self.shutdown_event = asyncio.Event()
        self.exit_code = 0
        self.bound_ports: list[int] = []
        self.serving = False
        # group figures and lag come from the group coordinator's snapshot, when the broker has one
        self.metrics = MetricsService(self.state, self.not_ready_reason, groups_snapshot=self.state.groups.snapshot)
        self.metrics_bound_port: int | None = None
        #: the web console (docs/console.md): under /console on the metrics port, and on console.port
        self.console = ConsoleService(self.state, self.metrics.collector) if config.get("console.enable") else None
        if self.console is not None:
            self.metrics.server.console = self.console.handle
        self.console_bound_port: int | None = None
        #: the schema registry (docs/schema-registry.md): on its own port when schema.registry.port is set
        self.schema_registry = SchemaRegistryService(self.state)
        if self.schema_registry.enabled:
            self.state.schema_registry = self.schema_registry.registry
            self.state.iceberg.registry = self.schema_registry.state
            self.state.replicas.schema_validation = SchemaValidation(
                self.schema_registry.registry, self.state.logs,
                payload=bool(config.get("schema.registry.validate.payload")))

    def not_ready_reason(self) -> str | None:
        """None while the broker serves; otherwise why not (for `/readyz`)."""
        if not self.serving:
            return "shutting down" if self.shutdown_event.is_set() else "starting"
        return log_dirs_problem(self.state)

    async def start(self) -> None:
        load_handlers()
        crc32c_extension.install()  # the live metadata log checks CRCs before the listeners answer
        # listeners and their TLS material first: a bad key store stops startup before any recovery
        self.listeners = listeners = Listeners(self.config)
        details = {"config": self.config.effective(), "record_walk": compiled.guard_record_walk(),
                   "compiled_modules": compiled.compiled()}
        if for_a_person():  # thousands of characters of config make a terminal's first line unreadable
            log.info("starting", node_id=self.state.node_id, explicitly_set=sorted(self.config.explicit),
                     unknown_config_keys=sorted(self.config.unknown))
            log.debug("effective config", **details)
        else:
            log.info("starting", node_id=self.state.node_id, explicitly_set=sorted(self.config.explicit),
                     unknown_config_keys=sorted(self.config.unknown), **details)
        if compiled.stale():  # an extension older than its source runs old code until a reinstall
            log.warning("compiled modules built from another source: reinstall", modules=compiled.stale())
        if self.config.unknown:  # a typo in server.properties deserves its own line, not a field in a long one
            log.warning("unknown config keys ignored", keys=sorted(self.config.unknown))
        tuning = tune_allocator()
        log.info("allocator", applied=tuning.applied, from_environment=tuning.from_environment,
                 skipped=tuning.skipped)
        limits = raise_open_file_limit()
        (log.warning if limits.error else log.info)(
            "open file limit", soft_before=limits.soft_before, soft=limits.soft, hard=limits.hard,
            error=limits.error)
        apply_partition_limits(self.state.logs, self.config, limits.soft)
        for capped in capped_explicit_sizes(self.config):  # Linux would keep its cap and say nothing
            log.warning("socket buffer capped by the kernel: raise the cap or choose -1", key=capped.key,
                        asked=capped.asked, kernel_cap=capped.cap)
        log.info("partition limit", max_partitions=self.state.logs.max_partitions,
                 source=self.state.logs.max_partitions_source)
        logs = self.state.logs
        budget = self.state.guard.descriptors = DescriptorBudget(limits.soft, logs.max_partitions,
                                                                 lambda: logs.partition_count)
        log.info("connection limit", open_file_budget=budget.connections, soft_limit=limits.soft,
                 headroom=headroom(limits.soft), max_connections=int(self.config.get("max.connections")),
                 note="at the budget a new connection replaces one idle for "
                      f"{EVICT_IDLE_S:g} s or more, or is refused")
        started = time.monotonic()
        for stats in self.state.startup():
            fields = _as_dict(stats)
            if fields.pop("new_dir", False):  # a first start: no shutdown, clean or not, to speak of
                fields.pop("clean_shutdown", None)
                log.info("new log dir", **fields)
            else:
                log.info("log dir loaded", **fields)
        log.info("logs loaded", seconds=round(time.monotonic() - started, 3), cluster_id=self.state.cluster_id,
                 partitions=len(self.state.logs.logs()))
        # the persisted dynamic configs are in force now: a key store changed at runtime before a restart
        listeners.apply_update(set(KEY_STORE_KEYS))
        self.state.groups.start()
        self.state.transactions.start()
        # the registry's state is read before any listener serves: a produce checked against it sees it whole
        registry_port = await self.schema_registry.start()
        if registry_port is not None:
            log.info("schema registry listening", host=self.schema_registry.host, port=registry_port)
        self.state.shares.start()
        self.state.guard.start(self.state.connections)
        self.state.dynamic_configs.check_with(listeners.check_update)
        self.state.dynamic_configs.on_change(listeners.apply_update)
        for spec, port in await listeners.start(self.state):
            self.bound_ports.append(port)
            log.info("listening", listener=spec.name, host=spec.host, port=port,
                     security_protocol=spec.security_protocol, advertised=self.state.address_of(spec.name))
        self.servers = listeners.servers
        if self.metrics_port is not None:
            self.metrics_bound_port = await self.metrics.start(self.metrics_host, self.metrics_port)
            log.info("metrics listening", host=self.metrics_host, port=self.metrics_bound_port,
                     paths=["/metrics", "/healthz", "/readyz", *(["/console"] if self.console else [])])
        if self.console is not None:
            self.console_bound_port = await self.console.start(on_metrics_port=self.metrics_bound_port is not None)
            if self.console_bound_port is not None:
                log.info("console listening", host=self.console.host, port=self.console_bound_port, path="/console")
            url = self.console_url()
            if url is not None:
                log.info("console", url=url)
        self.state.iceberg.start(asyncio.get_running_loop())
        self.serving = True

    def console_url(self) -> str | None:
        """Where a person on this machine opens the console: its own port if it has one, else the metrics
        port's /console/ (which answers loopback peers only); None when it is served nowhere."""
        if self.console is None:
            return None
        if self.console_bound_port is not None:
            host, port = self.console.host, self.console_bound_port
        elif self.metrics_bound_port is not None:
            host, port = self.metrics_host, self.metrics_bound_port
        else:
            return None
        if host in ("", "0.0.0.0", "::"):
            host = "127.0.0.1"
        return f"http://{'[' + host + ']' if ':' in host else host}:{port}/console/"

    async def run_background(self) -> None:
        """Periodic jobs: the flush policy for acks=0/1 data, checkpoints, retention, and the TLS key
        store files' change check."""
        checkpoint_every = int(self.config.get("log.flush.offset.checkpoint.interval.ms")) / 1000
        retention_every = int(self.config.get("log.retention.check.interval.ms")) / 1000
        last_checkpoint = last_retention = last_key_store_check = time.monotonic()
        while not self.shutdown_event.is_set():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.shutdown_event.wait(), BACKGROUND_TICK_S)
            if self.shutdown_event.is_set():
                return
            try:
                if self.listeners is not None and time.monotonic() - last_key_store_check >= KEY_STORE_CHECK_S:
                    last_key_store_check = time.monotonic()
                    self.listeners.check_key_stores()
                await asyncio.to_thread(self.state.logs.flush_dirty, self.state.clock_ms())
                if time.monotonic() - last_retention >= retention_every:
                    last_retention = time.monotonic()
                    await self._enforce_retention()
                if time.monotonic() - last_checkpoint >= checkpoint_every:
                    await asyncio.to_thread(self.state.logs.checkpoint)
                    last_checkpoint = time.monotonic()
            except Exception:
                log.exception("background job failed")

    async def _enforce_retention(self) -> None:
        removed = await asyncio.to_thread(self.state.logs.enforce_retention, self.state.clock_ms())
        for topic, partition, verdict in removed:
            log.info("retention removed segments", topic=topic, partition=partition, segments=verdict.count,
                     reason=verdict.reason)

    def _watch_log_dirs(self) -> None:
        """When the last log dir goes offline there is nothing left to serve: stop, and exit non-zero."""
        loop = asyncio.get_running_loop()
        logs = self.state.logs

        def offline(directory: Path, exc: BaseException) -> None:
            # fetches long-polling that dir's partitions answer now (KAFKA_STORAGE_ERROR), not at max wait
            keys = [(log.topic, log.partition) for log in logs.logs() if logs.dir_of(log.topic, log.partition) == directory]
            loop.call_soon_threadsafe(self._wake_watchers, keys)
            if all(d in logs.offline_dirs for d in logs.dirs):
                loop.call_soon_threadsafe(self._all_dirs_offline)

        logs.failures.on_offline(offline)

    def _wake_watchers(self, keys: list[tuple[str, int]]) -> None:
        """On the event loop: the delayed operations watching `keys` look again."""
        for key in keys:
            self.state.replicas.notify(key)

    def _all_dirs_offline(self) -> None:
        if self.exit_code == 0:
            log.error("every log dir is offline: stopping", log_dirs=[str(d) for d in self.state.logs.dirs],
                      exit_code=EXIT_ALL_DIRS_OFFLINE)
            self.exit_code = EXIT_ALL_DIRS_OFFLINE
        self.shutdown_event.set()

    async def serve(self) -> int:
        """Serve until stopped; the process's exit status (0, or non-zero when every log dir failed)."""
        await self.start()
        startup_gc.resume()
        dataclass_code.release()
        loop_stalls.time_collections()
        self._watch_log_dirs()
        background = asyncio.create_task(self.run_background())
        stalls = asyncio.create_task(loop_stalls.watch())
        await self.shutdown_event.wait()
        log.info("shutting down")
        await self.stop()
        for task in (background, stalls):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self.exit_code:
            log.error("stopped", exit_code=self.exit_code)
        else:
            log.info("stopped cleanly")
        return self.exit_code

    async def stop(self) -> None:
        self.serving = False
        for server in self.servers:
            server.close()
        # in-flight requests finish: long polls answer now with what they have, fsync waits complete,
        # members waiting in JoinGroup/SyncGroup are told to find their coordinator again
        self.state.replicas.wake_all()
        await self.state.shares.stop()
        await self.state.transactions.stop()
        await self.state.groups.stop()
        in_flight = [entry.result for conn in self.state.connections for entry in conn.pending
                     if isinstance(entry.result, asyncio.Future)]
        if in_flight:
            await asyncio.wait(in_flight, timeout=GRACEFUL_TIMEOUT_S)
        # a topic or store change on a worker thread whose client went away still ends before the logs close
        await self.state.detached.wait(GRACEFUL_TIMEOUT_S)
        await asyncio.sleep(0)  # let their done-callbacks write the responses
        for conn in list(self.state.connections):
            conn.close_when_written()
        for server in self.servers:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 2)
        await self.state.guard.stop()
        await asyncio.to_thread(self.state.iceberg.stop)  # its last round reads the logs: before they close
        await asyncio.to_thread(self.state.cleaner.shutdown)  # before the logs close under it
        await asyncio.to_thread(self.state.logs.shutdown)
        self.state.metadata.close()
        validation_processes.shutdown()
        await self.metrics.stop()
        if self.console is not None:
            await self.console.stop()
        await self.schema_registry.stop()

    def install_signal_handlers(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.shutdown_event.set)


def _as_dict(stats: Any) -> dict[str, Any]:
    if isinstance(stats, dict):
        return stats
    if hasattr(stats, "_asdict"):
        return dict(stats._asdict())
    if hasattr(stats, "__dataclass_fields__"):
        return {k: getattr(stats, k) for k in stats.__dataclass_fields__}
    return {"stats": str(stats)}


async def run_broker(config: BrokerConfig, *, metrics_port: int | None = None,
                     metrics_host: str = "127.0.0.1") -> int:
    app = BrokerApp(config, metrics_port=metrics_port, metrics_host=metrics_host)
    app.install_signal_handlers()
    return await app.serve()
