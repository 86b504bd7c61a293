"""The connection layer against raw sockets: ordering, pipelining, limits and bad input.

An in-process broker on an ephemeral port; requests are written by hand so these tests do not depend
on any client's behaviour.
"""

from __future__ import annotations

import asyncio
import struct

import pytest

from pybroker.broker.app import BrokerApp
from tests.unit.broker.conftest import MAX_REQUEST
from tests.unit.broker.waiting import until


def _api_versions_request(correlation_id: int, version: int = 0, client_id: bytes = b"raw") -> bytes:
    body = struct.pack(">hhih", 18, version, correlation_id, len(client_id)) + client_id
    if version >= 3:  # header v2: tagged fields, then the body's compact strings and tagged fields
        body += b"\x00" + b"\x01" + b"\x01" + b"\x00"
    return struct.pack(">i", len(body)) + body


async def _read_frame(reader: asyncio.StreamReader) -> bytes:
    (size,) = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 5))
    return await asyncio.wait_for(reader.readexactly(size), 5)


def _parse_api_versions_v0(frame: bytes) -> tuple[int, int, dict[int, tuple[int, int]]]:
    correlation_id, error_code, count = struct.unpack_from(">ihi", frame, 0)
    apis = {}
    for i in range(count):
        key, lo, hi = struct.unpack_from(">hhh", frame, 10 + 6 * i)
        apis[key] = (lo, hi)
    return correlation_id, error_code, apis


async def _connect(app: BrokerApp) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", app.bound_ports[0])


async def _assert_closed(reader: asyncio.StreamReader) -> None:
    assert await asyncio.wait_for(reader.read(), 5) == b""


async def test_api_versions_lists_what_the_registry_serves(app: BrokerApp) -> None:
    reader, writer = await _connect(app)
    writer.write(_api_versions_request(7))
    correlation_id, error_code, apis = _parse_api_versions_v0(await _read_frame(reader))
    assert (correlation_id, error_code) == (7, 0)
    assert apis[0] == (0, 12)
    assert apis[1] == (4, 17)
    assert apis[18] == (0, 4)
    writer.close()


async def test_unsupported_api_versions_version_gets_v0_fallback(app: BrokerApp) -> None:
    reader, writer = await _connect(app)
    writer.write(_api_versions_request(9, version=99))
    correlation_id, error_code, apis = _parse_api_versions_v0(await _read_frame(reader))
    assert (correlation_id, error_code) == (9, 35)
    assert 18 in apis
    writer.close()


async def test_flexible_api_versions_response_header_is_v0(app: BrokerApp) -> None:
    reader, writer = await _connect(app)
    writer.write(_api_versions_request(11, version=3))
    frame = await _read_frame(reader)
    correlation_id, error_code = struct.unpack_from(">ih", frame, 0)
    assert (correlation_id, error_code) == (11, 0)  # no tagged-field byte between them
    writer.close()


async def test_pipelined_requests_are_answered_in_order(app: BrokerApp) -> None:
    reader, writer = await _connect(app)
    writer.write(b"".join(_api_versions_request(i) for i in range(1, 51)))
    ids = [_parse_api_versions_v0(await _read_frame(reader))[0] for _ in range(50)]
    assert ids == list(range(1, 51))
    writer.close()


@pytest.mark.parametrize("prefix", [MAX_REQUEST + 1, -1, 2**31 - 1])
async def test_bad_size_prefix_closes_the_connection(app: BrokerApp, prefix: int) -> None:
    reader, writer = await _connect(app)
    writer.write(struct.pack(">i", prefix))
    await _assert_closed(reader)
    writer.close()


async def test_unknown_api_key_closes_the_connection(app: BrokerApp) -> None:
    reader, writer = await _connect(app)
    body = struct.pack(">hhih", 9999, 0, 1, 0)
    writer.write(struct.pack(">i", len(body)) + body)
    await _assert_closed(reader)
    writer.close()


async def test_undecodable_body_closes_the_connection_and_broker_keeps_serving(app: BrokerApp) -> None:
    reader, writer = await _connect(app)
    body = struct.pack(">hhih", 3, 1, 1, 0) + b"\xff\xff\xff\x7f"  # Metadata v1 with a huge topic count
    writer.write(struct.pack(">i", len(body)) + body)
    await _assert_closed(reader)
    writer.close()
    reader, writer = await _connect(app)
    writer.write(_api_versions_request(5))
    assert _parse_api_versions_v0(await _read_frame(reader))[0] == 5
    writer.close()


async def test_many_idle_connections(app: BrokerApp) -> None:
    conns = [await _connect(app) for _ in range(200)]
    assert len(app.state.connections) >= 200
    reader, writer = conns[-1]
    writer.write(_api_versions_request(3))
    assert _parse_api_versions_v0(await _read_frame(reader))[0] == 3
    for _, w in conns:
        w.close()


async def test_reading_pauses_while_the_client_does_not_read_and_resumes(app: BrokerApp) -> None:
    """Backpressure: responses the client does not read fill the write buffer; the broker stops reading
    requests instead of buffering without bound, and serves everything once the client reads again."""
    import socket

    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", app.bound_ports[0]))
    reader, writer = await asyncio.open_connection(sock=sock)
    count = 10_000
    writer.write(b"".join(_api_versions_request(i) for i in range(count)))
    (conn,) = list(app.state.connections)
    await until(lambda: conn._paused_for_writes, "the broker kept reading while its responses piled up")
    ids = [_parse_api_versions_v0(await _read_frame(reader))[0] for _ in range(count)]
    assert ids == list(range(count))
    assert not conn._paused_for_writes and not conn._paused_for_pending
    writer.close()
