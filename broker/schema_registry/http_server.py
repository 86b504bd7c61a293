"""The registry's HTTP/1.1 server, on a port of its own (`schema.registry.port`), on the broker's event loop.

Why its own port and not the metrics port: clients are configured with a registry URL whose root is the
API (`http://host:8081/subjects/...`), the registry is reached by applications while the metrics port is
often opened to a Prometheus only, and the registry may need TLS and Basic auth where `/metrics` does not.

Connections are kept alive (httpx, which confluent-kafka's client uses, reuses them). Every resource is
capped: `MAX_CONNECTIONS` at once (the next is closed at once), a request line or header line of
`MAX_LINE_BYTES`, `MAX_HEADER_LINES` headers, a body of `MAX_BODY_BYTES` (a larger `Content-Length` is
answered 413 before anything is read; no chunked bodies), `READ_TIMEOUT_S` to send a request and
`IDLE_TIMEOUT_S` between requests. A body that is not JSON is answered 422 with Confluent's shape.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable
from typing import Any

from pybroker.broker.loggers.structlog_setup import get_logger
from pybroker.broker.schema_registry.errors import RegistryError

log = get_logger("pybroker.schema_registry")

READ_TIMEOUT_S = 10.0
IDLE_TIMEOUT_S = 30.0
ANSWER_TIMEOUT_S = 30.0
MAX_CONNECTIONS = 256
MAX_LINE_BYTES = 8192
MAX_HEADER_LINES = 100
MAX_BODY_BYTES = 2 * 1024 * 1024
CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"

#: (method, target, headers, body, peer host) -> (status, content type, body, extra headers)
Handler = Callable[[str, str, dict[str, str], bytes, str], Awaitable[tuple[int, str, bytes, dict[str, str]]]]

_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
            405: "Method Not Allowed", 409: "Conflict", 413: "Content Too Large", 414: "URI Too Long",
            422: "Unprocessable Entity", 431: "Request Header Fields Too Large", 500: "Internal Server Error",
            504: "Gateway Timeout"}


def error_answer(exc: RegistryError) -> tuple[int, str, bytes, dict[str, str]]:
    return exc.status, CONTENT_TYPE, exc.body(), {}


def decode_body(body: bytes) -> Any:
    """A request body as JSON (None when empty); RegistryError(422) when it is not JSON. Fuzzed."""
    if not body.strip():
        return None
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        raise RegistryError(422, "Unrecognized or malformed JSON in the request body") from None


class RegistryServer:
    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.server: asyncio.Server | None = None
        self.connections = 0

    async def start(self, host: str, port: int, ssl: Any = None) -> int:
        self.server = await asyncio.start_server(self._serve, host, port, reuse_address=True,
                                                 limit=MAX_LINE_BYTES, ssl=ssl)
        bound: int = self.server.sockets[0].getsockname()[1]
        return bound

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.server.wait_closed(), 2)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.connections >= MAX_CONNECTIONS:
            writer.close()
            return
        self.connections += 1
        peer = writer.get_extra_info("peername")
        host = peer[0] if isinstance(peer, tuple) else ""
        try:
            first = True
            while True:
                try:
                    line = await asyncio.wait_for(reader.readline(), READ_TIMEOUT_S if first else IDLE_TIMEOUT_S)
                except ValueError:
                    await self._send(writer, 414, "text/plain", b"request line too long\n", close=True)
                    return
                if not line:
                    return
                first = False
                keep = await asyncio.wait_for(self._one(line, reader, writer, host), READ_TIMEOUT_S + ANSWER_TIMEOUT_S)
                if not keep:
                    return
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass  # slow, gone or talking nonsense: closed
        except Exception:
            log.exception("schema registry request failed")
        finally:
            self.connections -= 1
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _one(self, line: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str) -> bool:
        """Read the rest of one request and answer it; whether the connection stays open."""
        headers: dict[str, str] = {}
        for _ in range(MAX_HEADER_LINES):
            try:
                header = await reader.readline()
            except ValueError:
                return await self._send(writer, 431, "text/plain", b"header line too long\n", close=True)
            if header in (b"\r\n", b"\n", b""):
                break
            name, sep, value = header.decode("latin-1").partition(":")
            if sep:
                headers.setdefault(name.strip().lower(), value.strip())
        else:
            return await self._send(writer, 431, "text/plain", b"too many headers\n", close=True)
        parts = line.decode("latin-1").split()
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            return await self._send(writer, 400, "text/plain", b"bad request\n", close=True)
        method, target, version = parts
        length_text = headers.get("content-length", "0")
        if "transfer-encoding" in headers or not length_text.isdigit() or len(length_text) > 12:
            return await self._send(writer, 400, "text/plain", b"a body needs a Content-Length (no chunked)\n",
                                    close=True)
        if int(length_text) > MAX_BODY_BYTES:
            status, kind, body, _ = error_answer(RegistryError(413))
            return await self._send(writer, status, kind, body, close=True)
        payload = await reader.readexactly(int(length_text)) if int(length_text) else b""
        try:
            status, kind, body, extra = await asyncio.wait_for(
                self.handler(method, target, headers, payload, host), ANSWER_TIMEOUT_S)
        except TimeoutError:
            status, kind, body, extra = error_answer(RegistryError(50002))
        close = headers.get("connection", "").lower() == "close" or version == "HTTP/1.0"
        return await self._send(writer, status, kind, b"" if method == "HEAD" else body, close=close, extra=extra)

    @staticmethod
    async def _send(writer: asyncio.StreamWriter, status: int, kind: str, body: bytes, *, close: bool,
                    extra: dict[str, str] | None = None) -> bool:
        lines = "".join(f"{name}: {value}\r\n" for name, value in (extra or {}).items())
        head = (f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\nContent-Type: {kind}\r\n"
                f"Content-Length: {len(body)}\r\n{lines}Connection: {'close' if close else 'keep-alive'}\r\n\r\n")
        writer.write(head.encode() + body)
        await writer.drain()
        return not close
