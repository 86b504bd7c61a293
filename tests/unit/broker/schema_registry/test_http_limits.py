"""The registry's HTTP server caps what a request may spend and answers every refusal clearly."""

from __future__ import annotations

import asyncio

from pybroker.broker.app import BrokerApp
from pybroker.broker.schema_registry.http_server import MAX_BODY_BYTES, MAX_HEADER_LINES, MAX_LINE_BYTES
from tests.unit.broker.schema_registry.conftest import call, raw_http


async def test_limits_are_answered_not_dropped(registry_app: BrokerApp) -> None:
    port = registry_app.schema_registry.bound_port
    assert port is not None
    too_big = f"POST /subjects/s/versions HTTP/1.1\r\nContent-Length: {MAX_BODY_BYTES + 1}\r\n\r\n".encode()
    status, body = await raw_http(port, too_big)
    assert status == 413 and b'"error_code": 413' in body
    assert (await raw_http(port, b"GET /" + b"a" * MAX_LINE_BYTES + b" HTTP/1.1\r\n\r\n"))[0] == 414
    headers = b"".join(b"X-%d: 1\r\n" % i for i in range(MAX_HEADER_LINES + 1))
    assert (await raw_http(port, b"GET /subjects HTTP/1.1\r\n" + headers + b"\r\n"))[0] == 431
    assert (await raw_http(port, b"nonsense\r\n\r\n"))[0] == 400
    chunked = b"POST /subjects/s/versions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
    assert (await raw_http(port, chunked))[0] == 400
    assert await call(port, "GET", "/nowhere") == (404, {"error_code": 404, "message": "HTTP 404 Not Found"})
    assert (await call(port, "PATCH", "/subjects"))[1]["error_code"] == 405
    assert (await call(port, "POST", "/subjects/s/versions", b"{not json"))[1]["error_code"] == 422


async def test_keep_alive_serves_several_requests_on_one_connection(registry_app: BrokerApp) -> None:
    port = registry_app.schema_registry.bound_port
    assert port is not None
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        for _ in range(3):
            writer.write(b"GET /subjects HTTP/1.1\r\nHost: x\r\n\r\n")
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
            assert head.startswith(b"HTTP/1.1 200") and b"Connection: keep-alive" in head
            assert await reader.readexactly(2) == b"[]"
    finally:
        writer.close()
