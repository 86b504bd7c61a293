"""A recording TCP proxy: stock clients talk to a real broker through it, and it keeps their requests.

Why a proxy and not a packet capture: it needs no privileges and no tools, it sees whole frames (it
splits the client->broker stream on the size prefix itself), and the broker's `advertised.listeners`
can point at it, so clients that reconnect to the address Metadata gives them stay behind it.

Every request frame relayed is offered to a `Recorder` under the label of the client being driven
(`proxy.label`). The recorder keeps distinct frames (the correlation id zeroed, so retries of the same
request count once), at most `per_key` of them per (api key, version, client), and writes them to
`tests/fixtures/golden/` as `k<key>v<version>-<client>-<n>.bin` (the frame without its size prefix).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import struct
import threading
from collections import defaultdict
from pathlib import Path

_SIZE = struct.Struct(">i")


class Recorder:
    """Distinct request frames per (api key, version, client label)."""

    def __init__(self, per_key: int = 4, per_key_produce: int = 8) -> None:
        self.per_key = per_key
        self.per_key_produce = per_key_produce  # one produce per codec at least
        self.frames: dict[tuple[int, int, str], list[bytes]] = defaultdict(list)
        self._seen: set[bytes] = set()
        self._lock = threading.Lock()

    def offer(self, label: str, frame: bytes) -> None:
        if len(frame) < 8:
            return
        api_key, version = struct.unpack_from(">hh", frame)
        normal = frame[:4] + b"\0\0\0\0" + frame[8:]  # the correlation id says nothing about the request
        digest = hashlib.sha256(label.encode() + b"\0" + normal).digest()
        cap = self.per_key_produce if api_key == 0 else self.per_key
        with self._lock:
            kept = self.frames[(api_key, version, label)]
            if digest in self._seen or len(kept) >= cap:
                return
            self._seen.add(digest)
            kept.append(bytes(frame))

    def save(self, directory: Path) -> int:
        directory.mkdir(parents=True, exist_ok=True)
        count = 0
        for (api_key, version, label), frames in sorted(self.frames.items()):
            for n, frame in enumerate(frames):
                (directory / f"k{api_key:02d}v{version:02d}-{label}-{n}.bin").write_bytes(frame)
                count += 1
        return count


class RecordingProxy:
    """Relays 127.0.0.1:<port> to the broker on its own event loop thread, recording client requests."""

    def __init__(self, upstream: tuple[str, int], recorder: Recorder) -> None:
        self.upstream = upstream
        self.recorder = recorder
        self.label = "unknown"
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.Server | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, name="recording-proxy", daemon=True)

    def start(self) -> RecordingProxy:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._listen(), self._loop).result(10)
        return self

    def stop(self) -> None:
        async def close() -> None:
            if self._server is not None:
                self._server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _serve(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            broker_reader, broker_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            client_writer.close()
            return
        label = self.label  # a connection belongs to the client that opened it
        relays = [asyncio.ensure_future(self._requests(client_reader, broker_writer, label)),
                  asyncio.ensure_future(self._pipe(broker_reader, client_writer))]
        try:
            await asyncio.wait(relays, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in relays:
                task.cancel()
            for writer in (client_writer, broker_writer):
                with contextlib.suppress(Exception):
                    writer.close()

    async def _requests(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, label: str) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                head = await reader.readexactly(4)
                (size,) = _SIZE.unpack(head)
                frame = await reader.readexactly(size)
                self.recorder.offer(label, frame)
                writer.write(head + frame)
                await writer.drain()

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            while data := await reader.read(1 << 16):
                writer.write(data)
                await writer.drain()
