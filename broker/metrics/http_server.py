"""A small HTTP server on the event loop: `/metrics` for Prometheus, `/healthz` and `/readyz` for probes.

It runs on the broker's own loop on purpose: an answer from `/healthz` proves the loop is turning (a
stuck loop cannot answer, which is what a liveness probe must notice), and a scrape reads broker state
on the thread that changes it. `/readyz` answers 200 only while the broker serves: after startup, before
shutdown, with no log dir offline; otherwise 503 with the reason. Anything but GET/HEAD of a known path
gets a plain 4xx; a slow or oversized request is dropped, never waited on forever.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest
from prometheus_client.registry import CollectorRegistry

from pybroker.broker.logs import get_logger

log = get_logger("pybroker.metrics")

READ_TIMEOUT_S = 5.0
MAX_HEADER_LINES = 100
MAX_LINE_BYTES = 8192

#: () -> None when ready, else the reason it is not
Readiness = Callable[[], str | None]

Response = tuple[int, str, bytes]


class MetricsServer:
    def __init__(self, readiness: Readiness, registry: CollectorRegistry = REGISTRY) -> None:
        self.readiness = readiness
        self.registry = registry
        self.server: asyncio.Server | None = None
        self.routes: dict[str, Callable[[], Response]] = {
            "/metrics": self._metrics,
            "/healthz": lambda: (200, "text/plain; charset=utf-8", b"ok\n"),
            "/readyz": self._ready,
        }

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
            return 404, "text/plain; charset=utf-8", b"not found; try /metrics, /healthz or /readyz\n"
        if method not in ("GET", "HEAD"):
            return 405, "text/plain; charset=utf-8", b"method not allowed\n"
        return route()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            is_head, (status, content_type, body) = await asyncio.wait_for(self._read_and_answer(reader),
                                                                           READ_TIMEOUT_S)
            head = (f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\n"
                    f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
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

    async def _read_and_answer(self, reader: asyncio.StreamReader) -> tuple[bool, Response]:
        """(whether the method was HEAD, the response)."""
        request_line = (await reader.readline()).decode("latin-1").strip()
        for _ in range(MAX_HEADER_LINES):  # headers are read and ignored
            if (await reader.readline()) in (b"\r\n", b"\n", b""):
                break
        else:
            return False, (431, "text/plain; charset=utf-8", b"too many headers\n")
        parts = request_line.split()
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            return False, (400, "text/plain; charset=utf-8", b"bad request\n")
        return parts[0] == "HEAD", self.answer(parts[0], parts[1])


_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            431: "Request Header Fields Too Large", 503: "Service Unavailable"}
