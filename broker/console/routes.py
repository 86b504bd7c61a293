"""The console's HTTP face: its static page, its JSON API, and the checks every request passes first.

Order of checks: the peer (on the metrics port, loopback peers only), the `Host` (DNS rebinding), the
credentials (when the broker has authentication), then for a POST the CSRF guard, then the parameters.
Static files come from a fixed table of names shipped in the package: a path is looked up, never joined
onto a directory, so `..` and encoded tricks find nothing. Every answer carries a strict Content
Security Policy (only our own script and style, no frames) and `nosniff`; API answers are `no-store`.

JSON API (GET unless noted; parameters in the query string, or the JSON body of a POST):

| path | answers |
| --- | --- |
| `api/session` | the user, whether login is required, the CSRF token |
| `api/overview` | broker, listeners, log dirs (online, free space, size), counts |
| `api/charts` | throughput and request-latency history (see `sampler`) |
| `api/topics?internal=` | topics with partitions, messages, sizes per log dir |
| `api/topic?name=` | one topic's partitions (offsets, size, log dir) and configs with sources |
| `api/messages?topic=&partition=&from=&offset=&timestamp=&limit=&format=` | records (see `messages`) |
| `api/search?topic=&partition=&direction=&cursor=&key=&value=&header=&header_value=&from_ts=&to_ts=&...` | a window of matching records, capped (see `search`) |
| `api/groups` | groups with state, members, lag |
| `api/group?id=` | members, assignments, lag per partition and its recent history |
| `api/broker-configs` | the broker's configs with their sources |
| POST `api/topics/create`, `api/topics/delete`, `api/topics/alter-config`, `api/broker-configs/alter`, `api/produce`, `api/groups/reset-offsets` | see `writes`, `messages` |
| the admin pages' API (ACLs, users, quotas, transactions, KIP-848 groups, the broker) | see `admin_routes` |
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import TYPE_CHECKING, Any

from pybroker.broker.console import admin_routes, messages, reads, search, writes
from pybroker.broker.console import params as p
from pybroker.broker.console.auth import REALM, ConsoleAuth, host_name, is_loopback_host
from pybroker.broker.console.decoders import FORMATS
from pybroker.broker.console.local_client import LocalClient
from pybroker.broker.console.params import ConsoleError
from pybroker.broker.console.sampler import Sampler
from pybroker.broker.loggers.structlog_setup import get_logger
from pybroker.broker.metrics.http_server import ConsoleResponse, Request

if TYPE_CHECKING:
    from pybroker.broker.state import BrokerState

log = get_logger("pybroker.console")

JSON = "application/json; charset=utf-8"
#: API requests answered at once; more wait their turn (a browse may hold MAX_FETCH_BYTES of records)
MAX_IN_FLIGHT = 4
#: API requests waiting for a turn; beyond this the answer is 503 at once
MAX_WAITING = 64
#: path under /console -> (file in the package's static folder, content type)
STATIC: dict[str, tuple[str, str]] = {
    "": ("index.html", "text/html; charset=utf-8"),
    "/": ("index.html", "text/html; charset=utf-8"),
    "/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/charts.js": ("charts.js", "text/javascript; charset=utf-8"),
    "/messages.js": ("messages.js", "text/javascript; charset=utf-8"),
    "/app.css": ("app.css", "text/css; charset=utf-8"),
    "/admin_pages.js": ("admin_pages.js", "text/javascript; charset=utf-8"),
}
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                               "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}

Handler = Callable[["Call"], Awaitable[Any]]


class Call:
    """One API request, checked: its parameters, the principal's client, the broker state."""

    def __init__(self, app: ConsoleApp, client: LocalClient, params: dict[str, Any], principal: str) -> None:
        self.app = app
        self.client = client
        self.params = params
        self.principal = principal


async def _session(call: Call) -> Any:
    return {"user": call.principal, "login_required": call.app.auth.required, "csrf_token": call.app.auth.csrf_token,
            "node_id": call.app.state.node_id, "cluster_id": call.app.state.cluster_id, "formats": list(FORMATS)}


async def _overview(call: Call) -> Any:
    return await reads.overview(call.app.state, call.client)


async def _charts(call: Call) -> Any:
    return call.app.sampler.charts()


async def _topics(call: Call) -> Any:
    return await reads.topics(call.client, p.flag(call.params, "internal"))


async def _topic(call: Call) -> Any:
    """The topic page; for an Iceberg topic, its table's status as the worker last reported it (shown only
    once the topic's own reads, authorized as the principal's Metadata and DescribeConfigs, succeeded)."""
    name = p.text(call.params, "name", max_len=p.MAX_TOPIC_NAME)
    found = await reads.topic(call.client, name)
    found["iceberg"] = call.app.state.iceberg.status()["topics"].get(name)
    return found


async def _messages(call: Call) -> Any:
    return await messages.browse(call.client, call.params)


async def _search(call: Call) -> Any:
    return await search.search(call.client, call.params)


async def _groups(call: Call) -> Any:
    return await reads.groups(call.client)


async def _group(call: Call) -> Any:
    group_id = p.text(call.params, "id", max_len=p.MAX_NAME)
    described = await reads.group(call.client, group_id)
    history = call.app.sampler.lag_history(group_id)
    for row in described["offsets"]:
        row["lag_history"] = history.get(f"{row['topic']}-{row['partition']}", [])
    return described


async def _broker_configs(call: Call) -> Any:
    return await reads.configs(call.client, reads.BROKER_RESOURCE, str(call.app.state.node_id))


async def _create(call: Call) -> Any:
    return await writes.create_topic(call.client, call.params)


async def _delete(call: Call) -> Any:
    return await writes.delete_topic(call.client, call.params)


async def _alter(call: Call) -> Any:
    return await writes.alter_config(call.client, call.params)


async def _produce(call: Call) -> Any:
    return await messages.produce(call.client, call.params, call.app.state.clock_ms())


async def _alter_broker(call: Call) -> Any:
    return await writes.alter_broker_config(call.client, call.app.state.node_id, call.params)


async def _reset(call: Call) -> Any:
    return await writes.reset_offsets(call.client, call.params)


GET_ROUTES: dict[str, Handler] = {
    "/api/session": _session, "/api/overview": _overview, "/api/charts": _charts, "/api/topics": _topics,
    "/api/topic": _topic, "/api/messages": _messages, "/api/search": _search, "/api/groups": _groups,
    "/api/group": _group,
    "/api/broker-configs": _broker_configs, **admin_routes.GET_ROUTES,
}
POST_ROUTES: dict[str, Handler] = {
    "/api/topics/create": _create, "/api/topics/delete": _delete, "/api/topics/alter-config": _alter,
    "/api/produce": _produce, "/api/groups/reset-offsets": _reset, "/api/broker-configs/alter": _alter_broker,
    **admin_routes.POST_ROUTES,
}


def _is_loopback_peer(peer: str) -> bool:
    host = peer.rpartition(":")[0].strip("[]")
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class ConsoleApp:
    def __init__(self, state: BrokerState, sampler: Sampler, *, bound_to_loopback: bool = True,
                 started_ms: int | None = None) -> None:
        self.state = state
        self.sampler = sampler
        self.auth = ConsoleAuth(state)
        # the broker page's uptime: the console starts with the broker (the service, built at the start,
        # says when; the app itself is built at the first request)
        self.started_ms = state.clock_ms() if started_ms is None else started_ms
        self.bound_to_loopback = bound_to_loopback
        self._static: dict[str, bytes] = {}
        self._turns = asyncio.Semaphore(MAX_IN_FLIGHT)
        self._waiting = 0

    async def __call__(self, request: Request, shared_port: bool) -> ConsoleResponse:
        try:
            return await self.handle(request, shared_port)
        except ConsoleError as exc:
            return self._error(exc)
        except Exception:
            log.exception("console request failed", path=request.path)
            return self._error(ConsoleError(500, "internal error (see the broker's log)"))

    def _error(self, exc: ConsoleError) -> ConsoleResponse:
        headers = dict(SECURITY_HEADERS, **{"Cache-Control": "no-store"})
        if exc.status == 401:
            headers["WWW-Authenticate"] = REALM
        return exc.status, JSON, json.dumps({"error": exc.message}).encode(), headers

    async def handle(self, request: Request, shared_port: bool) -> ConsoleResponse:
        if shared_port and not _is_loopback_peer(request.peer):
            raise ConsoleError(403, "on the metrics port the console answers this machine only; "
                                    "serve it on its own port (--console-port, console.host) to reach it from elsewhere")
        if (shared_port or self.bound_to_loopback) and not is_loopback_host(host_name(request.headers.get("host", ""))):
            raise ConsoleError(421, "this console answers only to a loopback host name (localhost, 127.0.0.1, [::1])")
        path = request.path[len("/console"):]
        if path in STATIC:
            if request.method not in ("GET", "HEAD"):
                raise ConsoleError(405, "method not allowed")
            await self.auth.principal(request.headers)  # the page itself is behind the login too
            name, content_type = STATIC[path]
            return 200, content_type, self._file(name), dict(SECURITY_HEADERS, **{"Cache-Control": "no-cache"})
        routes = GET_ROUTES if request.method in ("GET", "HEAD") else POST_ROUTES if request.method == "POST" else {}
        handler = routes.get(path)
        if handler is None:
            if path in GET_ROUTES or path in POST_ROUTES:
                raise ConsoleError(405, f"{request.method} is not allowed here")
            raise ConsoleError(404, "no such console page or API")
        principal = await self.auth.principal(request.headers)
        if request.method == "POST":
            self.auth.check_change(request.headers)
            params = p.json_body(request.body)
        else:
            params = p.query(request.query)
        self.sampler.touch()
        client = LocalClient(self.state, principal, request.peer or "127.0.0.1:0")
        if self._waiting >= MAX_WAITING:
            raise ConsoleError(503, "the console is busy; try again")
        self._waiting += 1
        try:
            await self._turns.acquire()
        finally:
            self._waiting -= 1
        try:
            data = await handler(Call(self, client, params, principal))
        finally:
            self._turns.release()
        body = json.dumps(data, default=str).encode()
        return 200, JSON, body, dict(SECURITY_HEADERS, **{"Cache-Control": "no-store"})

    def _file(self, name: str) -> bytes:
        data = self._static.get(name)
        if data is None:
            data = self._static[name] = resources.files("pybroker.broker.console").joinpath(
                "static", name).read_bytes()
        return data
