"""Writing encoded responses, with segment file ranges spliced in by `os.sendfile`.

uvloop has no `loop.sendfile`, so zero-copy works like this: bytes chunks go through the transport;
when a file range comes and the transport's write buffer is empty (everything before it is already on
the socket), `os.sendfile` puts as much of the range on the socket as it takes right now. Whatever it
does not take, or any range met while the transport still buffers, is read with `pread` and written
through the transport like any other bytes, so the order on the wire is always the encoding's order.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Sequence
from typing import Any


class ChunkWriter:
    __slots__ = ("_fd", "_sendfile_ok", "_transport", "sendfile_bytes")

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        sock = transport.get_extra_info("socket")
        self._fd = sock.fileno() if sock is not None else -1
        # TLS transports have no "socket" that may be written directly; only plain TCP may use sendfile
        self._sendfile_ok = (
            self._fd >= 0 and transport.get_extra_info("sslcontext") is None
            and transport.get_extra_info("ssl_object") is None
            and getattr(sock, "type", None) == socket.SOCK_STREAM
        )
        self.sendfile_bytes = 0

    def write(self, chunks: Sequence[Any]) -> None:
        transport = self._transport
        buffered: list[bytes | bytearray | memoryview] = []
        for chunk in chunks:
            if isinstance(chunk, bytes | bytearray | memoryview):
                buffered.append(chunk)
                continue
            # a file region: first push out everything before it
            if buffered:
                transport.writelines(buffered)
                buffered = []
            sent = self._sendfile(chunk) if self._sendfile_ok and transport.get_write_buffer_size() == 0 else 0
            if sent < len(chunk):
                buffered.append(_pread(chunk, sent))
        if buffered:
            transport.writelines(buffered)

    def _sendfile(self, region: Any) -> int:
        sent = 0
        length = len(region)
        fileno = region.file.fileno()
        try:
            while sent < length:
                n = os.sendfile(self._fd, fileno, region.position + sent, length - sent)
                if n == 0:
                    break
                sent += n
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:
            # e.g. the socket died: the transport will notice; fall back for what is left
            self._sendfile_ok = False
        self.sendfile_bytes += sent
        return sent


def _pread(region: Any, skip: int) -> bytes:
    if skip == 0:
        data: bytes = region.read_bytes()
        return data
    return os.pread(region.file.fileno(), len(region) - skip, region.position + skip)
