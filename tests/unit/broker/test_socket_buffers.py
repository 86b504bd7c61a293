"""The kernel buffers of accepted sockets: Kafka's `socket.{send,receive}.buffer.bytes`.

The receive buffer is left to the OS by default (-1), which grows it with the connection's rate; a fixed
SO_RCVBUF turns that off and caps the TCP window, which made a 1 MiB produce request arrive in ~100 KB
pieces (the figures are in the key's description). The send buffer keeps Kafka's 102400 (1 MiB made fetch
slower). An explicit size is what the broker's side of a connection gets (Linux reports twice the size it
was given, for its own bookkeeping).
"""
from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest

from pybroker.broker.app import BrokerApp
from pybroker.config.broker_config import BrokerConfig
from pybroker.config.definitions import BROKER


async def _server_buffers(tmp_path: Path, overrides: dict[str, str]) -> tuple[int, int]:
    """SO_RCVBUF and SO_SNDBUF of the broker's side of one fresh connection."""
    config = BrokerConfig.load({"log.dirs": str(tmp_path / "data"), "listeners": "PLAINTEXT://127.0.0.1:0",
                                **overrides})
    app = BrokerApp(config)
    await app.start()
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", app.bound_ports[0])
        for _ in range(100):
            if app.state.connections:
                break
            await asyncio.sleep(0.01)
        (conn,) = app.state.connections
        sock = conn.transport.get_extra_info("socket")
        buffers = (sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF),
                   sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF))
        writer.close()
        return buffers
    finally:
        await app.stop()


def _os_default_receive_buffer() -> int:
    """What a TCP socket nobody sized reports (Linux: `net.ipv4.tcp_rmem`'s middle value)."""
    with socket.socket() as fresh:
        return fresh.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)


async def test_the_receive_buffer_is_the_oss_and_the_send_buffer_kafkas_by_default(tmp_path: Path) -> None:
    assert BROKER["socket.receive.buffer.bytes"].default == -1
    assert BROKER["socket.send.buffer.bytes"].default == 102_400
    assert await _server_buffers(tmp_path, {}) == (_os_default_receive_buffer(), 2 * 102_400)


@pytest.mark.parametrize(("key", "index"), [("socket.receive.buffer.bytes", 0), ("socket.send.buffer.bytes", 1)])
async def test_an_explicit_size_is_applied(tmp_path: Path, key: str, index: int) -> None:
    buffers = await _server_buffers(tmp_path, {key: "65536"})
    assert buffers[index] == 2 * 65_536


async def test_minus_one_leaves_the_receive_buffer_to_the_os(tmp_path: Path) -> None:
    receive, _ = await _server_buffers(tmp_path, {"socket.receive.buffer.bytes": "-1"})
    assert receive == _os_default_receive_buffer()
