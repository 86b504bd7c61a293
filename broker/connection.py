"""One Kafka client connection: frames in, handlers run, responses out in request order.

Requests are decoded and started in arrival order, so anything a handler does before its first await
(an append, a log read) happens in the order the client sent it; responses are written strictly in that
order too, while slow ones (a produce waiting for fsync, a fetch long-poll) let later requests start.
Backpressure both ways: reading pauses when too many responses are pending or when the transport's
write buffer is full (the client is not reading), and resumes when they drain.

Bad input never reaches a traceback: an oversized or negative size prefix, an unknown API key, an
unsupported version (but ApiVersions, which gets Kafka's v0 fallback answer) or undecodable bytes close
the connection with one log line.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import socket
from collections import deque
from typing import TYPE_CHECKING, Any, cast

from pybroker.broker.context import RequestContext
from pybroker.broker.dispatch import REGISTRY, Waiting, supported_versions
from pybroker.broker.logs import get_logger
from pybroker.broker.metrics.names import api_name
from pybroker.broker.metrics.requests import REQUEST_METRICS
from pybroker.broker.writer import ChunkWriter
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.frames import (
    DecodeError,
    UnknownApiKey,
    UnsupportedVersion,
    api_versions_fallback_response,
    decode_request,
    encode_response,
    peek_header,
)
from pybroker.protocol.framing import FrameDecoder, FrameError

if TYPE_CHECKING:
    from pybroker.broker.state import BrokerState

log = get_logger("pybroker.connection")

#: pause reading when this many responses are waiting to be written
MAX_PENDING = 128


class _Pending:
    """A request whose response has not been written yet."""

    __slots__ = ("api_key", "client_id", "correlation_id", "result", "started", "version")

    def __init__(self, api_key: int, version: int, correlation_id: int, result: Any, started: float,
                 client_id: str | None = None) -> None:
        self.api_key = api_key
        self.version = version
        self.correlation_id = correlation_id
        self.result = result  # a response object, an asyncio.Future of one, or raw bytes
        self.started = started  # perf_counter at decoding, for the latency histogram
        self.client_id = client_id  # for the context of an error logged when the answer fails

    def ready(self) -> bool:
        return not isinstance(self.result, asyncio.Future) or self.result.done()


class KafkaConnection(asyncio.Protocol):
    def __init__(self, state: BrokerState) -> None:
        self.state = state
        self.decoder = FrameDecoder(int(state.config.get("socket.request.max.bytes")))
        self.pending: deque[_Pending] = deque()
        self.transport: asyncio.Transport | None = None
        self.writer: ChunkWriter | None = None
        self.peer = "?"
        self.closed = False
        self._paused_for_pending = False
        self._paused_for_writes = False

    # -- transport callbacks -------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports are not subclasses
        sock = transport.get_extra_info("socket")
        if sock is not None:
            # Kafka's socket.{send,receive}.buffer.bytes: bounded kernel buffers make backpressure real
            for option, key in ((socket.SO_SNDBUF, "socket.send.buffer.bytes"),
                                (socket.SO_RCVBUF, "socket.receive.buffer.bytes")):
                size = int(self.state.config.get(key))
                if size > 0:
                    with contextlib.suppress(OSError):
                        sock.setsockopt(socket.SOL_SOCKET, option, size)
        self.writer = ChunkWriter(self.transport)
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.state.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.state.connections.discard(self)
        for entry in self.pending:
            if isinstance(entry.result, asyncio.Future) and not entry.result.done():
                entry.result.cancel()
        self.pending.clear()

    def pause_writing(self) -> None:
        self._paused_for_writes = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._paused_for_writes = False
        self._update_reading()
        self._flush()

    def data_received(self, data: bytes) -> None:
        try:
            frames = self.decoder.feed(data)
        except FrameError as exc:
            self._abort("bad frame", reason=str(exc))
            return
        for frame in frames:
            if self.closed:
                return
            self._handle(frame)
        self._flush()

    def eof_received(self) -> bool | None:
        return None

    # -- requests ------------------------------------------------------------------------------
    def _handle(self, frame: bytearray) -> None:
        try:
            header, request = decode_request(frame)
        except UnsupportedVersion as exc:
            self._unsupported(exc.api_key, exc.version, exc.correlation_id)
            return
        except UnknownApiKey as exc:
            REQUEST_METRICS.error(exc.api_key, "UNKNOWN_API_KEY")
            self._abort("unknown api key", api_key=exc.api_key)
            return
        except DecodeError as exc:
            peeked = _peek(frame)
            REQUEST_METRICS.error(peeked[0] if peeked else -1, "UNDECODABLE_REQUEST")
            self._abort("undecodable request", reason=str(exc), header=peeked, head=bytes(frame[:64]).hex())
            return
        spec = REGISTRY.get(header.api_key)
        if spec is None or not spec.serves(header.api_version):
            self._unsupported(header.api_key, header.api_version, header.correlation_id)
            return
        started = REQUEST_METRICS.received(header.api_key, header.api_version)
        ctx = RequestContext(self.state, header.api_key, header.api_version, header.correlation_id,
                             header.client_id, self.peer)
        try:
            result = spec.fn(ctx, request)
        except Exception:
            REQUEST_METRICS.error(header.api_key, "HANDLER_FAILED")
            log.exception("handler failed", api=api_name(header.api_key), api_key=header.api_key,
                          api_version=header.api_version, client_id=header.client_id, peer=self.peer)
            self._close()
            return
        if result is None:
            REQUEST_METRICS.answered(header.api_key, started, None)
            return  # acks=0: Kafka sends nothing back
        if isinstance(result, Waiting):
            result = result.awaitable
        if inspect.isawaitable(result):
            future = asyncio.ensure_future(result)
            future.add_done_callback(self._on_done)
            result = future
        self._enqueue(_Pending(header.api_key, header.api_version, header.correlation_id, result, started,
                               header.client_id))

    def _unsupported(self, api_key: int, version: int, correlation_id: int) -> None:
        """Kafka's answer to a version we do not serve: ApiVersions gets the v0 fallback, the rest a close."""
        REQUEST_METRICS.error(api_key, "UNSUPPORTED_VERSION")
        if api_key == ApiKey.API_VERSIONS:
            self._enqueue(_Pending(api_key, 0, correlation_id,
                                   api_versions_fallback_response(correlation_id, supported_versions()),
                                   REQUEST_METRICS.received(api_key, version)))
        else:
            self._abort("unsupported version", api_key=api_key, api_version=version)

    def _enqueue(self, entry: _Pending) -> None:
        self.pending.append(entry)
        if len(self.pending) >= MAX_PENDING and not self._paused_for_pending:
            self._paused_for_pending = True
            self._update_reading()

    def _on_done(self, future: asyncio.Future[Any]) -> None:
        if not self.closed:
            self._flush()

    def _flush(self) -> None:
        """Write every response at the head of the queue that is ready, in request order."""
        writer = self.writer
        if writer is None or self.closed:
            return
        while self.pending and self.pending[0].ready():
            entry = self.pending.popleft()
            result = entry.result
            if isinstance(result, asyncio.Future):
                if result.cancelled() or result.exception() is not None:
                    exc = None if result.cancelled() else result.exception()
                    REQUEST_METRICS.error(entry.api_key, "HANDLER_FAILED")
                    log.error("handler failed", api=api_name(entry.api_key), api_key=entry.api_key,
                              api_version=entry.version, client_id=entry.client_id, peer=self.peer,
                              error=repr(exc), exc_info=exc)
                    self._close()
                    return
                result = result.result()
            REQUEST_METRICS.answered(entry.api_key, entry.started, result)
            if isinstance(result, bytes | bytearray):
                writer.write([result])
                continue
            try:
                chunks = encode_response(entry.correlation_id, entry.api_key, entry.version, result)
            except Exception:
                log.exception("response encoding failed", api=api_name(entry.api_key), api_key=entry.api_key,
                              api_version=entry.version, client_id=entry.client_id, peer=self.peer)
                self._close()
                return
            writer.write(chunks)
        if self._paused_for_pending and len(self.pending) < MAX_PENDING // 2:
            self._paused_for_pending = False
            self._update_reading()

    def _update_reading(self) -> None:
        if self.transport is None or self.closed:
            return
        if self._paused_for_pending or self._paused_for_writes:
            self.transport.pause_reading()
        else:
            self.transport.resume_reading()

    def _abort(self, event: str, **context: Any) -> None:
        log.warning(f"closing connection: {event}", peer=self.peer, **context)
        self._close()

    def _close(self) -> None:
        if not self.closed and self.transport is not None:
            self.closed = True
            self.transport.abort()


def _peek(frame: bytearray) -> tuple[int, int, int] | None:
    try:
        return peek_header(frame)
    except Exception:
        return None
