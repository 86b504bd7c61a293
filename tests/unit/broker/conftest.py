"""An in-process broker on an ephemeral port, and a tiny client that speaks through our own codecs."""

from __future__ import annotations

import asyncio
import itertools
import struct
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from pybroker.broker.app import BrokerApp
from pybroker.config.broker_config import BrokerConfig
from pybroker.protocol.frame_codec import decode_response, encode_request

MAX_REQUEST = 10_000_000


@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator[BrokerApp]:
    config = BrokerConfig.load({
        "log.dirs": str(tmp_path / "data"),
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "socket.request.max.bytes": str(MAX_REQUEST),
        # groups form at once and the offsets topic stays small: handler tests need neither default
        "group.initial.rebalance.delay.ms": "0",
        "offsets.topic.num.partitions": "3",
    })
    broker = BrokerApp(config)
    await broker.start()
    try:
        yield broker
    finally:
        await broker.stop()


class RawClient:
    """Requests encoded and responses decoded by our codecs, over a plain asyncio stream."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.ids = itertools.count(1)

    async def send(self, request: Any, version: int) -> int:
        correlation_id = next(self.ids)
        self.writer.write(encode_request(request, version, correlation_id))
        await self.writer.drain()
        return correlation_id

    async def receive(self, api_key: int, version: int, timeout: float = 10) -> Any:
        (size,) = struct.unpack(">i", await asyncio.wait_for(self.reader.readexactly(4), timeout))
        frame = await asyncio.wait_for(self.reader.readexactly(size), timeout)
        return decode_response(frame, api_key, version)[1]

    async def call(self, request: Any, version: int, timeout: float = 10) -> Any:
        await self.send(request, version)
        return await self.receive(type(request).API_KEY, version, timeout)

    def close(self) -> None:
        self.writer.close()


@pytest.fixture
async def client(app: BrokerApp) -> AsyncIterator[RawClient]:
    reader, writer = await asyncio.open_connection("127.0.0.1", app.bound_ports[0])
    raw = RawClient(reader, writer)
    try:
        yield raw
    finally:
        raw.close()
