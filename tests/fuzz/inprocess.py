"""A real in-process broker over a tmp dir, called one request at a time: what the findings' reproducers use.

Requests go through `KafkaConnection` with the fuzz target's fake transport (no sockets), so a
reproducer runs exactly the path the fuzzer found the bug on, and can restart the broker on its dir.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import struct
import time
from pathlib import Path
from typing import Any

from pybroker.broker.app import BrokerApp
from pybroker.broker.connection import KafkaConnection
from pybroker.config.broker_config import BrokerConfig
from pybroker.protocol.frame_codec import decode_response, encode_request
from tests.fuzz.target import BROKER_SETTINGS, FakeTransport


class InProcessBroker:
    def __init__(self, log_dir: Path) -> None:
        self.config = BrokerConfig.load({"log.dirs": str(log_dir), "listeners": "PLAINTEXT://127.0.0.1:0",
                                         **BROKER_SETTINGS})
        self.app: BrokerApp | None = None
        self._ids = itertools.count(1)

    async def start(self) -> InProcessBroker:
        app = BrokerApp(self.config)
        try:
            await app.start()
        except BaseException:
            with contextlib.suppress(Exception):  # close what a half-done start opened
                app.state.logs.shutdown()
            raise
        self.app = app
        return self

    async def stop(self) -> None:
        if self.app is not None:
            app, self.app = self.app, None
            await app.stop()

    async def restart(self) -> None:
        await self.stop()
        await self.start()

    async def pipeline(self, *calls: tuple[Any, int], timeout: float = 10.0) -> list[Any]:
        """Send requests back to back on one connection; their decoded answers, in order."""
        assert self.app is not None
        transport = FakeTransport("reproducer")
        conn = KafkaConnection(self.app.state)
        conn.connection_made(transport)
        expected = []
        data = bytearray()
        for request, version in calls:
            correlation_id = next(self._ids)
            data += encode_request(request, version, correlation_id)
            expected.append((correlation_id, type(request).API_KEY, version))
        conn.data_received(bytes(data))
        deadline = time.monotonic() + timeout
        answers: list[Any] = []
        try:
            while len(answers) < len(expected):
                frames = _frames(transport.out)
                while len(answers) < len(frames):
                    correlation_id, api_key, version = expected[len(answers)]
                    got_id, response = decode_response(frames[len(answers)], api_key, version)
                    assert got_id == correlation_id, (got_id, correlation_id)
                    answers.append(response)
                if len(answers) == len(expected):
                    break
                if conn.closed or time.monotonic() > deadline:
                    raise AssertionError(f"{len(answers)} of {len(expected)} answers, connection "
                                         f"{'closed' if conn.closed else 'open'}")
                await asyncio.sleep(0.005)
        finally:
            conn.connection_lost(None)
        return answers

    async def call(self, request: Any, version: int, timeout: float = 10.0) -> Any:
        return (await self.pipeline((request, version), timeout=timeout))[0]


def _frames(out: bytearray) -> list[bytes]:
    frames, pos = [], 0
    while len(out) - pos >= 4:
        (size,) = struct.unpack_from(">i", out, pos)
        if len(out) - pos - 4 < size:
            break
        frames.append(bytes(out[pos + 4 : pos + 4 + size]))
        pos += 4 + size
    return frames
