"""An in-process broker serving the schema registry on an ephemeral port, and a tiny HTTP client for it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from pybroker.broker.app import BrokerApp
from pybroker.config.broker_config import BrokerConfig


@pytest.fixture
async def registry_app(tmp_path: Path) -> AsyncIterator[BrokerApp]:
    config = BrokerConfig.load({"log.dirs": str(tmp_path / "data"), "listeners": "PLAINTEXT://127.0.0.1:0",
                                "schema.registry.port": "0", "schema.registry.validate.payload": "true",
                                "console.port": "0"})
    broker = BrokerApp(config)
    await broker.start()
    try:
        yield broker
    finally:
        await broker.stop()


async def raw_http(port: int, request: bytes) -> tuple[int, bytes]:
    """One request on its own connection: the status and the body."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
        status = int(head.split(b" ", 2)[1])
        length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), 0)
        return status, await asyncio.wait_for(reader.readexactly(length), 30)
    finally:
        writer.close()


async def call(port: int, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    data = b"" if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    request = (f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len(data)}\r\n"
               "Connection: close\r\n\r\n").encode() + data
    status, answer = await raw_http(port, request)
    return status, json.loads(answer) if answer else None
