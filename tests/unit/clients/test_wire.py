"""The sink's connection: a peer that misbehaves gets a WireError naming it, never a hang or a huge allocation."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Callable, Iterator

import pytest

from pybroker.clients.wire import Connection, WireError
from pybroker.protocol.frame_codec import encode_response
from pybroker.protocol.messages.api_versions import ApiVersion, ApiVersionsResponse
from pybroker.protocol.messages.metadata import MetadataRequest
from pybroker.protocol.primitives import materialize

Behaviour = Callable[[socket.socket, int], None]


def _read_request(conn: socket.socket) -> int:
    """Read one request frame; its correlation id."""
    size = struct.unpack(">i", conn.recv(4, socket.MSG_WAITALL))[0]
    body = conn.recv(size, socket.MSG_WAITALL)
    return int(struct.unpack(">i", body[4:8])[0])


def _api_versions(conn: socket.socket, correlation: int) -> None:
    answer = ApiVersionsResponse(api_keys=[ApiVersion(api_key=3, min_version=0, max_version=12)])
    conn.sendall(materialize(encode_response(correlation, 18, 3, answer)))


@pytest.fixture
def peer() -> Iterator[Callable[[Behaviour], tuple[str, int]]]:
    servers: list[socket.socket] = []
    threads: list[threading.Thread] = []

    def start(after_handshake: Behaviour) -> tuple[str, int]:
        server = socket.create_server(("127.0.0.1", 0))
        servers.append(server)

        def serve() -> None:
            conn, _ = server.accept()
            with conn:
                _api_versions(conn, _read_request(conn))
                with contextlib.suppress(OSError):
                    after_handshake(conn, _read_request(conn))

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        threads.append(thread)
        host, port = server.getsockname()[:2]
        return host, port

    yield start
    for server in servers:
        server.close()
    for thread in threads:
        thread.join(timeout=5)


def _metadata(host: str, port: int, timeout_s: float = 10.0) -> None:
    """A Metadata request to a peer thread; its timeout leaves room for a busy machine to schedule the thread
    (only the test of a peer that never answers waits for it to pass)."""
    conn = Connection(host, port, timeout_s=timeout_s)
    try:
        assert conn.version(MetadataRequest) == 12
        conn.request(MetadataRequest(topics=[]), 12)
    finally:
        conn.close()


def test_a_huge_size_prefix_is_refused_before_allocating(peer: Callable[[Behaviour], tuple[str, int]]) -> None:
    address = peer(lambda conn, correlation: conn.sendall(struct.pack(">ii", 2**31 - 1, correlation)))
    with pytest.raises(WireError, match="response size of 2147483647 bytes"):
        _metadata(*address)


def test_a_peer_that_closes_is_named(peer: Callable[[Behaviour], tuple[str, int]]) -> None:
    address = peer(lambda conn, correlation: conn.close())
    with pytest.raises(WireError, match=f"{address[1]}"):
        _metadata(*address)


def test_a_peer_that_never_answers_times_out(peer: Callable[[Behaviour], tuple[str, int]]) -> None:
    stop = threading.Event()
    address = peer(lambda conn, correlation: stop.wait(30))
    try:
        with pytest.raises(WireError, match="timed out"):
            _metadata(*address, timeout_s=0.5)
    finally:
        stop.set()


def test_a_wrong_correlation_id_is_refused(peer: Callable[[Behaviour], tuple[str, int]]) -> None:
    address = peer(lambda conn, correlation: conn.sendall(struct.pack(">ii", 4, correlation + 7)))
    with pytest.raises(WireError, match="correlation id"):
        _metadata(*address)


def test_garbage_is_an_undecodable_answer(peer: Callable[[Behaviour], tuple[str, int]]) -> None:
    address = peer(lambda conn, correlation: conn.sendall(struct.pack(">ii", 6, correlation) + b"\xff\xff"))
    with pytest.raises(WireError, match="undecodable"):
        _metadata(*address)


def test_nobody_listening_is_a_wire_error() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
    with pytest.raises(WireError, match="cannot connect"):
        Connection("127.0.0.1", port, timeout_s=1)
