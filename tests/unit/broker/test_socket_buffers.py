"""The kernel buffers of accepted sockets: Kafka's `socket.{send,receive}.buffer.bytes`.

Both are left to the OS by default (-1), which grows them with the connection's rate; a fixed size turns
that off: a fixed SO_RCVBUF caps the TCP window, which made a 1 MiB produce request arrive in ~100 KB
pieces, and Kafka's fixed 102400 SO_SNDBUF sent a 1 MB fetch answer in ~250 KB pieces, each after a wait
for the socket to drain (the figures are in the keys' descriptions). An explicit size is what the broker's
side of a connection gets (Linux reports twice the size it was given, for its own bookkeeping).
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


def _os_default_send_buffer() -> int:
    """What a TCP socket nobody sized starts with (Linux: `net.ipv4.tcp_wmem`'s middle value); a connected
    one the OS sizes may have grown it already (Linux sizes it from the first congestion window)."""
    with socket.socket() as fresh:
        return fresh.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)


async def test_both_buffers_are_the_oss_by_default(tmp_path: Path) -> None:
    assert BROKER["socket.receive.buffer.bytes"].default == -1
    assert BROKER["socket.send.buffer.bytes"].default == -1
    receive, send = await _server_buffers(tmp_path, {})
    assert receive == _os_default_receive_buffer()
    assert send >= _os_default_send_buffer() and send != 2 * 102_400  # not Kafka's fixed size


async def test_kafkas_fixed_send_buffer_can_still_be_chosen(tmp_path: Path) -> None:
    _, send = await _server_buffers(tmp_path, {"socket.send.buffer.bytes": "102400"})
    assert send == 2 * 102_400


@pytest.mark.parametrize(("key", "index"), [("socket.receive.buffer.bytes", 0), ("socket.send.buffer.bytes", 1)])
async def test_an_explicit_size_is_applied(tmp_path: Path, key: str, index: int) -> None:
    buffers = await _server_buffers(tmp_path, {key: "65536"})
    assert buffers[index] == 2 * 65_536


async def test_minus_one_leaves_the_receive_buffer_to_the_os(tmp_path: Path) -> None:
    receive, _ = await _server_buffers(tmp_path, {"socket.receive.buffer.bytes": "-1"})
    assert receive == _os_default_receive_buffer()
