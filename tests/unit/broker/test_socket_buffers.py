"""The kernel buffers of accepted sockets: Kafka's `socket.{send,receive}.buffer.bytes`.

The receive buffer is left to the OS by default (-1), which grows it with the connection's rate: a fixed
SO_RCVBUF caps the TCP window, which made a 1 MiB produce request arrive in ~100 KB pieces. The send
buffer is 512 KiB by default, about one partition's fetch answer, where the kernel grants it
(`net.core.wmem_max`); a kernel that caps it lower gets the OS's sizing instead, and an explicit size
above the cap is capped with a warning at start (the figures are in the keys' descriptions). An explicit
size is what the broker's side of a connection gets (Linux reports twice the size it was given, for its
own bookkeeping).
"""
from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest

from pybroker.broker import app as app_module
from pybroker.broker import socket_buffers
from pybroker.broker.app import BrokerApp
from pybroker.config.broker_config import BrokerConfig
from pybroker.config.definitions import BROKER

WMEM_MAX = "/proc/sys/net/core/wmem_max"
RMEM_MAX = "/proc/sys/net/core/rmem_max"


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


@pytest.fixture
def kernel_caps(monkeypatch: pytest.MonkeyPatch) -> dict[str, int | None]:
    """The kernel's caps as the broker reads them, settable by the test (the real ones by default)."""
    caps = {cap_file: socket_buffers.kernel_cap(cap_file) for _, _, cap_file in socket_buffers.BUFFERS}
    monkeypatch.setattr(socket_buffers, "kernel_cap", caps.get)
    return caps


async def test_the_receive_buffer_is_the_oss_and_the_send_buffer_holds_an_answer_by_default(
        tmp_path: Path, kernel_caps: dict[str, int | None]) -> None:
    assert BROKER["socket.receive.buffer.bytes"].default == -1
    assert BROKER["socket.send.buffer.bytes"].default == 524_288
    kernel_caps[WMEM_MAX] = 4 << 20
    receive, send = await _server_buffers(tmp_path, {})
    assert receive == _os_default_receive_buffer()
    assert send == 2 * 524_288


async def test_a_kernel_that_caps_the_default_send_buffer_leaves_it_to_the_os(
        tmp_path: Path, kernel_caps: dict[str, int | None]) -> None:
    kernel_caps[WMEM_MAX] = 212_992  # a stock kernel's
    _, send = await _server_buffers(tmp_path, {})
    assert send >= _os_default_send_buffer() and send not in (2 * 212_992, 2 * 524_288)


async def test_an_explicit_size_above_the_cap_is_capped_and_warned_about(
        tmp_path: Path, kernel_caps: dict[str, int | None], monkeypatch: pytest.MonkeyPatch) -> None:
    real_cap = kernel_caps[WMEM_MAX]
    assert real_cap is not None  # Linux
    kernel_caps[WMEM_MAX] = real_cap  # what the kernel really does with a size above it
    config = BrokerConfig.load({"log.dirs": str(tmp_path / "d"), "socket.send.buffer.bytes": str(real_cap + 1)})
    assert socket_buffers.capped_explicit_sizes(config) == [
        socket_buffers.CappedBuffer("socket.send.buffer.bytes", real_cap + 1, real_cap)]
    assert socket_buffers.resolved_sizes(config) == ((socket.SO_SNDBUF, real_cap + 1),)  # applied, as Kafka
    warnings = _record_app_warnings(monkeypatch)
    _, send = await _server_buffers(tmp_path, {"socket.send.buffer.bytes": str(real_cap + 1)})
    assert send == 2 * real_cap
    (fields,) = [fields for event, fields in warnings if event.startswith("socket buffer capped")]
    assert fields == {"key": "socket.send.buffer.bytes", "asked": real_cap + 1, "kernel_cap": real_cap}


def _record_app_warnings(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict[str, object]]]:
    """The warnings `BrokerApp` logs from now on (its other lines go to its logger as before)."""
    warnings: list[tuple[str, dict[str, object]]] = []

    class Recorder:
        def __init__(self, real: object) -> None:
            self.real = real

        def warning(self, event: str, **fields: object) -> None:
            warnings.append((event, fields))

        def __getattr__(self, name: str) -> object:
            return getattr(self.real, name)

    monkeypatch.setattr(app_module, "log", Recorder(app_module.log))
    return warnings


def test_sizes_within_the_caps_or_unreadable_caps_are_applied_without_a_warning(
        tmp_path: Path, kernel_caps: dict[str, int | None]) -> None:
    kernel_caps[WMEM_MAX] = kernel_caps[RMEM_MAX] = None  # not Linux
    config = BrokerConfig.load({"log.dirs": str(tmp_path / "d"), "socket.receive.buffer.bytes": "65536"})
    assert socket_buffers.resolved_sizes(config) == ((socket.SO_SNDBUF, 524_288), (socket.SO_RCVBUF, 65_536))
    assert socket_buffers.capped_explicit_sizes(config) == []
    kernel_caps[WMEM_MAX] = kernel_caps[RMEM_MAX] = 65_536
    assert socket_buffers.resolved_sizes(config) == ((socket.SO_RCVBUF, 65_536),)
    assert socket_buffers.capped_explicit_sizes(config) == []


async def test_kafkas_fixed_send_buffer_can_still_be_chosen(tmp_path: Path) -> None:
    _, send = await _server_buffers(tmp_path, {"socket.send.buffer.bytes": "102400"})
    assert send == 2 * 102_400


@pytest.mark.parametrize(("key", "index"), [("socket.receive.buffer.bytes", 0), ("socket.send.buffer.bytes", 1)])
async def test_an_explicit_size_is_applied(tmp_path: Path, key: str, index: int) -> None:
    buffers = await _server_buffers(tmp_path, {key: "65536"})
    assert buffers[index] == 2 * 65_536


@pytest.mark.parametrize("key", ["socket.receive.buffer.bytes", "socket.send.buffer.bytes"])
def test_minus_one_leaves_a_buffer_to_the_os(tmp_path: Path, key: str) -> None:
    config = BrokerConfig.load({"log.dirs": str(tmp_path / "d"), key: "-1"})
    assert all(option != _option(key) for option, _ in socket_buffers.resolved_sizes(config))


async def test_minus_one_leaves_the_receive_buffer_to_the_os(tmp_path: Path) -> None:
    receive, _ = await _server_buffers(tmp_path, {"socket.receive.buffer.bytes": "-1"})
    assert receive == _os_default_receive_buffer()


def _option(key: str) -> int:
    return next(option for option, k, _ in socket_buffers.BUFFERS if k == key)
