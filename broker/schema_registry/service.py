"""The registry's life in the broker: off unless `schema.registry.port` is set (-1 by default; 0 picks a
free port), bound to `schema.registry.host` (127.0.0.1 by default: a registry lets its callers change
what producers may write, so it is reachable from elsewhere only when asked). Off by default because a
broker not asked to host a registry should open no second port and make no `_schemas` topic, and
Confluent's customary 8081 may belong to a real registry on the same machine.

At start the `_schemas` topic (`schema.registry.topic`) is read whole in a worker thread before the port
opens, so the first answer already knows every subject. With `schema.registry.ssl.listener` (say `SSL`)
the port speaks HTTPS with that listener's key store, trust store and `ssl.client.auth` (read at start).

Threads: `start`/`stop` and every request on the event loop.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import TYPE_CHECKING

from pybroker.broker.console.auth import ConsoleAuth, Unauthorized
from pybroker.broker.loggers.structlog_setup import get_logger
from pybroker.broker.partitions.coordinator_partitions import CoordinatorPartitions
from pybroker.broker.schema_registry.access import Access
from pybroker.broker.schema_registry.errors import RegistryError
from pybroker.broker.schema_registry.formats import formats
from pybroker.broker.schema_registry.http_server import (
    CONTENT_TYPE,
    RegistryServer,
    decode_body,
    error_answer,
)
from pybroker.broker.schema_registry.registry import Registry
from pybroker.broker.schema_registry.routes import Call, RawText, match, query_of
from pybroker.broker.schema_registry.store import RegistryState
from pybroker.broker.schema_registry.topic import SchemasTopic
from pybroker.broker.tls import build_context

if TYPE_CHECKING:
    from pybroker.broker.state import BrokerState

log = get_logger("pybroker.schema_registry")
REALM = 'Basic realm="pybroker schema registry", charset="UTF-8"'


class SchemaRegistryService:
    def __init__(self, state: BrokerState) -> None:
        config = state.config
        self.broker = state
        self.host = str(config.get("schema.registry.host"))
        self.port = int(config.get("schema.registry.port"))
        self.topic = SchemasTopic(CoordinatorPartitions(config, state.clock_ms, state.replicas, detached=state.detached),
                                  str(config.get("schema.registry.topic")))
        self.state = RegistryState()
        self.registry = Registry(self.state, self.topic.write)
        self.auth = ConsoleAuth(state)
        self.server = RegistryServer(self.answer)
        self.bound_port: int | None = None

    @property
    def enabled(self) -> bool:
        return self.port >= 0

    async def start(self) -> int | None:
        if not self.enabled:
            return None
        listener = str(self.broker.config.get("schema.registry.ssl.listener") or "")
        # the listener's own key store: one certificate to renew, and a mistake stops the start (ConfigError)
        ssl = build_context(self.broker.config, listener) if listener else None
        try:
            formats()
        except ImportError as exc:  # a clear stop, not a 500 on the first registration
            raise SystemExit(f"schema.registry.port is set but the registry's parsers are not installed "
                             f"({exc.name}): install pybroker with its [registry] extra") from None
        started = time.monotonic()
        await asyncio.to_thread(self.topic.replay, self.state)
        log.info("schema registry loaded", topic=self.topic.name, records=self.state.records,
                 subjects=len(self.state.subjects), schemas=len(self.state.by_id),
                 seconds=round(time.monotonic() - started, 3))
        self.bound_port = await self.server.start(self.host, self.port, ssl=ssl)
        return self.bound_port

    async def stop(self) -> None:
        await self.server.stop()

    async def answer(self, method: str, target: str, headers: dict[str, str], body: bytes,
                     host: str) -> tuple[int, str, bytes, dict[str, str]]:
        path, _, query = target.partition("?")
        try:
            try:
                principal = await self.auth.principal(headers)
            except Unauthorized:
                return 401, CONTENT_TYPE, RegistryError(401).body(), {"WWW-Authenticate": REALM}
            route, args = match(method, path)
            access = Access(principal, host, self.broker.authorizer)
            result = await route(Call(self.registry, args, query_of(query), decode_body(body), access))
        except RegistryError as exc:
            return error_answer(exc)
        except RecursionError:
            return error_answer(RegistryError(42201, "Invalid schema: nested too deeply"))
        except Exception:  # a bug: one log line and Confluent's shape, never a dropped connection
            log.exception("schema registry request failed", method=method, path=path[:200])
            return error_answer(RegistryError(50001, "Internal error (logged by the broker)"))
        if isinstance(result, RawText):
            return 200, CONTENT_TYPE, str(result).encode(), {}
        return 200, CONTENT_TYPE, json.dumps(result).encode(), {}
