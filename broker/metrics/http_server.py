"""A small HTTP server on the event loop: `/metrics` for Prometheus, `/healthz` and `/readyz` for probes,
and the web console under `/console` when one is mounted (`pybroker.broker.console`).

It runs on the broker's own loop on purpose: an answer from `/healthz` proves the loop is turning (a
stuck loop cannot answer, which is what a liveness probe must notice), and a scrape reads broker state
on the thread that changes it. `/readyz` answers 200 only while the broker serves: after startup, before
shutdown, with no log dir offline; otherwise 503 with the reason. Anything but GET/HEAD of a known path
gets a plain 4xx; a slow request is dropped, never waited on forever, and a request or header line longer
than `MAX_LINE_BYTES` is answered 414 or 431 before the connection closes. Headers are kept (at
most `MAX_HEADER_LINES`, each at most `MAX_LINE_BYTES`) and a body is read only for the console's POSTs,
up to `MAX_BODY_BYTES` (a larger `Content-Length` is refused before anything is read).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest
from prometheus_client.registry import CollectorRegistry

from pybroker.broker.loggers.structlog_setup import get_logger

log = get_logger("pybroker.metrics")

READ_TIMEOUT_S = 5.0
#: the longest a console answer may take (a produce waits for its fsync)
ANSWER_TIMEOUT_S = 30.0
MAX_HEADER_LINES = 100
MAX_LINE_BYTES = 8192
MAX_BODY_BYTES = 1024 * 1024
CONSOLE_PREFIX = "/console"

#: () -> None when ready, else the reason it is not
Readiness = Callable[[], str | None]

Response = tuple[int, str, bytes]


@dataclass(slots=True)
class Request:
    method: str
    target: str
    headers: dict[str, str] = field(default_factory=dict)  # lower-case names; the first of repeated ones
    body: bytes = b""
    peer: str = ""

    @property
    def path(self) -> str:
        return self.target.split("?", 1)[0]

    @property
    def query(self) -> str:
        return self.target.partition("?")[2]


#: the console's answer: status, content type, body and extra headers
ConsoleResponse = tuple[int, str, bytes, dict[str, str]]
ConsoleHandler = Callable[[Request, bool], Awaitable[ConsoleResponse]]


class MetricsServer:
    def __init__(self, readiness: Readiness, registry: CollectorRegistry = REGISTRY, *,
                 console: ConsoleHandler | None = None, probes: bool = True) -> None:
        """`console` mounts the web console under `/console`; `probes=False` serves only the console (the
        console's own port)."""
        self.readiness = readiness
        self.registry = registry
        self.server: asyncio.Server | None = None
        self.console = console
        #: the console shares this port with the metrics (it then answers loopback peers only)
        self.console_shared = probes
        self.routes: dict[str, Callable[[], Response]] = {
            "/metrics": self._metrics,
            "/healthz": lambda: (200, "text/plain; charset=utf-8", b"ok\n"),
            "/readyz": self._ready,
        } if probes else {}

    async def start(self, host: str, port: int) -> int:
        """Listen; returns the bound port (useful with port 0)."""
        self.server = await asyncio.start_server(self._serve, host, port, reuse_address=True,
                                                 limit=MAX_LINE_BYTES)
        bound: int = self.server.sockets[0].getsockname()[1]
        return bound

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.server.wait_closed(), 2)

    def _metrics(self) -> Response:
        return 200, CONTENT_TYPE_LATEST, generate_latest(self.registry)

    def _ready(self) -> Response:
        reason = self.readiness()
        if reason is None:
            return 200, "text/plain; charset=utf-8", b"ready\n"
        return 503, "text/plain; charset=utf-8", f"not ready: {reason}\n".encode()

    def answer(self, method: str, target: str) -> Response:
        """The response to one request line (separate from the socket, so it is testable alone)."""
        route = self.routes.get(target.split("?", 1)[0])
        if route is None:
            return 404, "text/plain; charset=utf-8", b"not found; try /metrics, /healthz, /readyz or /console\n"
        if method not in ("GET", "HEAD"):
            return 405, "text/plain; charset=utf-8", b"method not allowed\n"
        return route()

    def _is_console(self, path: str) -> bool:
        return self.console is not None and (path == CONSOLE_PREFIX or path.startswith(CONSOLE_PREFIX + "/"))

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await asyncio.wait_for(self._read(reader), READ_TIMEOUT_S)
            extra: dict[str, str] = {}
            if isinstance(request, tuple):
                is_head, (status, content_type, body) = False, request
            elif self.console is not None and self._is_console(request.path):
                peer = writer.get_extra_info("peername")
                request.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else ""
                is_head = request.method == "HEAD"
                try:
                    status, content_type, body, extra = await asyncio.wait_for(
                        self.console(request, self.console_shared), ANSWER_TIMEOUT_S)
                except TimeoutError:
                    status, content_type, body = 504, "application/json", b'{"error": "the broker took too long"}'
            else:
                is_head, (status, content_type, body) = request.method == "HEAD", self.answer(request.method,
                                                                                              request.target)
            lines = "".join(f"{name}: {value}\r\n" for name, value in extra.items())
            head = (f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\n"
                    f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n{lines}"
                    "Connection: close\r\n\r\n").encode()
            writer.write(head if is_head else head + body)
            await writer.drain()
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            pass  # a client that is slow, gone or talking nonsense gets closed; nothing to log per scrape
        except Exception:
            log.exception("metrics request failed")
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _read(self, reader: asyncio.StreamReader) -> Request | Response:
        """The request, or the error response when it is not one we read further."""
        try:
            request_line = (await reader.readline()).decode("latin-1").strip()
        except ValueError:  # longer than MAX_LINE_BYTES: a clear answer, then the connection closes
            return 414, "text/plain; charset=utf-8", b"request line too long\n"
        headers: dict[str, str] = {}
        for _ in range(MAX_HEADER_LINES):
            try:
                line = await reader.readline()
            except ValueError:
                return 431, "text/plain; charset=utf-8", b"header line too long\n"
            if line in (b"\r\n", b"\n", b""):
                break
            name, sep, value = line.decode("latin-1").partition(":")
            if sep:
                headers.setdefault(name.strip().lower(), value.strip())
        else:
            return 431, "text/plain; charset=utf-8", b"too many headers\n"
        parts = request_line.split()
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            return 400, "text/plain; charset=utf-8", b"bad request\n"
        request = Request(parts[0], parts[1], headers)
        length_text = headers.get("content-length", "0")
        if "transfer-encoding" in headers or not length_text.isdigit() or len(length_text) > 12:
            return 400, "text/plain; charset=utf-8", b"a body needs a Content-Length (no chunked encoding)\n"
        length = int(length_text)
        if length and request.method == "POST" and self._is_console(request.path):
            if length > MAX_BODY_BYTES:
                return 413, "text/plain; charset=utf-8", b"body too large\n"
            request.body = await reader.readexactly(length)
        return request


_REASONS = {200: "OK", 302: "Found", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
            405: "Method Not Allowed", 409: "Conflict", 413: "Content Too Large", 414: "URI Too Long",
            415: "Unsupported Media Type", 421: "Misdirected Request", 431: "Request Header Fields Too Large",
            500: "Internal Server Error", 503: "Service Unavailable", 504: "Gateway Timeout"}
