"""One Kafka client connection: frames in, handlers run, responses out in request order.

A connection's requests take effect in the order the client sent them, as in Kafka. A handler that
returns a bare awaitable is still doing work (off the loop, say): the connection starts none of its later
requests until that completes; frames already received wait in order, and reading pauses so no more
pile up. A handler that returns `waiting(...)` has done its work and only its answer waits (a produce
waiting for fsync, a fetch long-poll, a group join), so the next request starts at once. Work may end
in a pure wait too (a compressed acks=all produce: validated off the loop, appended, then waiting for
fsync) or in no answer at all (acks=0). Either way responses are written strictly in request order.

Answers leave through the connection's writer: on plain TCP a `SendQueue` that writes the socket itself
(bytes with writev, segment file regions with sendfile, resumed on writability), on TLS the transport.

Bytes come in through asyncio's BufferedProtocol pair (`get_buffer`/`buffer_updated`): the rest of a
frame that is arriving is received straight into that frame's buffer (one copy, by the kernel), and
everything else into a scratch buffer shared by the thread's connections (see `FrameDecoder`).
`data_received` does the same for callers that hand bytes over themselves.

Backpressure: reading pauses when too many responses are pending, when the writer holds too much (the
client is not reading), while a request is still working, and while the next frame waits for
the broker's request memory pool (`queued.max.request.bytes`); it resumes when the cause is gone.

Bad input never reaches a traceback: an oversized or negative size prefix, an unknown API key, an
unsupported version (but ApiVersions, which gets Kafka's v0 fallback answer) or undecodable bytes close
the connection with one log line (rate-limited per kind, so a fuzzer cannot fill the disk). So does a
connection over `max.connections` / `max.connections.per.ip`, one opened faster than
`max.connection.creation.rate` or its IP's `connection_creation_rate` quota, or one silent past its
timeouts. With a `request_percentage` quota set, each handler's time on the loop is charged to its client.

On a SASL listener a gate stands before dispatch (`_sasl_gate`, the session in
`pybroker.broker.security.sasl_session`): until the client authenticates only ApiVersions, SaslHandshake
and SaslAuthenticate are served, and anything else closes the connection (Kafka's ILLEGAL_SASL_STATE). A
failed authentication is answered after `connection.failed.authentication.delay.ms` and the connection
then closed; a session past `connections.max.reauth.ms` is closed on its next request.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import inspect
import struct
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from pybroker.broker import socket_buffers
from pybroker.broker.context import RequestContext
from pybroker.broker.descriptor_budget import OUT_OF_DESCRIPTORS, REASON
from pybroker.broker.dispatch import REGISTRY, Waiting, supported_versions
from pybroker.broker.loggers.structlog_setup import get_logger
from pybroker.broker.memory_pool import SMALL_FRAME_BYTES
from pybroker.broker.metrics.authentication import AUTHENTICATIONS, SASL_CONNECTIONS_CLOSED
from pybroker.broker.metrics.connections import CONNECTIONS_EXPIRED, CONNECTIONS_REFUSED
from pybroker.broker.metrics.names import api_name
from pybroker.broker.metrics.requests import REQUEST_METRICS
from pybroker.broker.pending_answer import PendingAnswer, answer_after
from pybroker.broker.security import authorization, quota_throttle, request_time
from pybroker.broker.security.errors import SaslFailure
from pybroker.broker.security.sasl_session import SaslSession, log_context
from pybroker.broker.send_queue import CopyingWriter, SendQueue, sendfile_possible
from pybroker.broker.ssl_principal import NoMatchingRule
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.frame_codec import (
    DecodeError,
    UnknownApiKey,
    UnsupportedVersion,
    api_versions_fallback_response,
    decode_request,
    encode_response,
    peek_header,
)
from pybroker.protocol.frame_splitter import FrameDecoder, FrameError

if TYPE_CHECKING:
    from pybroker.broker.connection_guard import ConnectionGuard
    from pybroker.broker.state import BrokerState
    from pybroker.protocol.messages.headers import RequestHeader

log = get_logger("pybroker.connection")

#: the principal of a connection that did not authenticate (Kafka's KafkaPrincipal.ANONYMOUS)
ANONYMOUS = "User:ANONYMOUS"
#: pause reading when this many responses are waiting to be written
MAX_PENDING = 128
#: bytes of a frame's start shown in the warning about an undecodable request
HEAD_BYTES_LOGGED = 32
#: seconds a closing connection may take to deliver its last answer before it is aborted
CLOSE_FLUSH_S = 5.0


#: bytes a read into the shared scratch buffer may take at most (uvloop reads 256 KiB at a time as well)
SCRATCH_BYTES = 256 * 1024


class _Scratch(threading.local):
    """One receive buffer per thread: `buffer_updated` copies out what it needs before the next read."""

    def __init__(self) -> None:
        self.view = memoryview(bytearray(SCRATCH_BYTES))


_SCRATCH = _Scratch()


class KafkaConnection(asyncio.BufferedProtocol):
    def __init__(self, state: BrokerState, listener: str = "PLAINTEXT", security_protocol: str = "PLAINTEXT",
                 principal_of: Callable[[asyncio.BaseTransport], str] | None = None) -> None:
        self.state = state
        self.guard: ConnectionGuard = state.guard
        self.decoder = FrameDecoder(int(state.config.get("socket.request.max.bytes")), self._admit)
        self.pending: deque[PendingAnswer] = deque()
        self.transport: asyncio.Transport | None = None
        self.writer: SendQueue | CopyingWriter | None = None
        self.peer = "?"
        #: who this connection authenticated as (Kafka's `Type:name`), and the listener it came in on
        self.principal = ANONYMOUS
        self.listener = listener
        #: the listener's protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL): SASL ones must authenticate
        self.security_protocol = security_protocol
        #: an SSL listener's principal from the client certificate (`NoMatchingRule`: refuse)
        self._principal_of = principal_of
        #: the SASL authentication of this connection, on a SASL listener (else None: no gate)
        settings = getattr(state, "sasl_listeners", {}).get(listener.upper())
        self.sasl = None if settings is None else SaslSession(
            settings, lambda user, mechanism: self.state.scram.get(user, mechanism), state.clock_ms)
        if settings is not None:  # Kafka's sasl.server.max.receive.size until the client has authenticated
            self.decoder.set_max_frame(settings.max_receive_size)
        self.closed = False
        self._ip: str | None = None  # set once the connection holds a slot of the connection limits
        self._paused_for_pending = False
        self._paused_for_writes = False
        self._paused_for_memory = False  # the next frame waits for the request memory pool
        self._muted = 0  # throttles in force (client quotas): reading stops until they end
        self._reading = True
        #: a request's work in progress (a bare awaitable): nothing later starts until it completes
        self._busy: asyncio.Future[Any] | None = None
        self._backlog: deque[bytearray] = deque()  # frames received while busy, in order
        # bytes charged to the memory pool for frames not yet handled (small and large frames apart)
        self._held_small = 0
        self._held_large = 0
        self._last_read = self._last_active = time.monotonic()
        self._flush_timer: asyncio.TimerHandle | None = None  # bounds a close that waits for its last write

    # -- transport callbacks -------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports are not subclasses
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        ip = str(peer[0]) if isinstance(peer, tuple) else str(peer)
        if not self.guard.descriptor_room(self.state.connections, time.monotonic()):
            self._refuse(REASON)
            return
        try:
            self._set_up(transport, ip)
        except OSError as exc:
            if exc.errno not in OUT_OF_DESCRIPTORS:
                raise
            # out of descriptors: this connection goes, and new ones are refused a while (the acceptor's
            # back-off); the warning, not a traceback, says so
            if self.guard.descriptors is not None:
                self.guard.descriptors.out_of_descriptors(time.monotonic())
            self.writer = None
            self.state.connections.discard(self)
            self._refuse(REASON, error=errno.errorcode.get(exc.errno or 0, str(exc.errno)))

    def _refuse(self, reason: str, **context: Any) -> None:
        """Close a connection as soon as it was accepted, counted and warned about by `reason`."""
        assert self.transport is not None
        CONNECTIONS_REFUSED.labels(reason).inc()
        self.guard.warnings.warning("connection refused", "connection refused", peer=self.peer, limit=reason,
                                    **context)
        self.closed = True
        self.transport.abort()

    def _set_up(self, transport: asyncio.BaseTransport, ip: str) -> None:
        assert self.transport is not None
        refused = self.guard.creation.admit(getattr(self.state, "quotas", None), ip, self.state.clock_ms())
        if refused is None:
            refused = self.guard.limits.acquire(ip)
        if refused is not None:
            self._refuse(refused)
            return
        self._ip = ip
        if self._principal_of is not None:
            try:
                self.principal = self._principal_of(transport)
            except NoMatchingRule as exc:
                self._abort("no principal for the client certificate", listener=self.listener, reason=str(exc))
                return
            log.debug("tls client", peer=self.peer, listener=self.listener, principal=self.principal)
        sock = transport.get_extra_info("socket")
        if sock is not None:  # Kafka's socket.{send,receive}.buffer.bytes (see the keys' descriptions)
            socket_buffers.apply(sock, socket_buffers.resolved_sizes(self.state.config))
        if sock is not None and sendfile_possible(transport):
            # plain TCP: answers go out through our own queue (writev + sendfile), not the transport
            tcp = self.transport
            self.writer = SendQueue(sock.fileno(), asyncio.get_running_loop(), pause=self.pause_writing,
                                    resume=self.resume_writing, on_error=self._send_failed,
                                    is_open=lambda: not tcp.is_closing())
        else:
            self.writer = CopyingWriter(self.transport)
        self.state.connections.add(self)

    def silent_for(self, now: float) -> float | None:
        """Seconds since this connection last did anything; None while it has something in progress
        (the descriptor budget closes only an idle connection for a new one)."""
        if (self.closed or self.pending or self._busy is not None or self._backlog
                or self.decoder.partial_size):
            return None
        return now - self._last_active

    def evict(self) -> None:
        """Closed for a new connection at the descriptor budget: it stops counting as open at once."""
        log.debug("closing idle connection for a new one", peer=self.peer)
        self._close()
        self.state.connections.discard(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._flush_timer is not None:
            self._flush_timer.cancel()
            self._flush_timer = None
        if self.writer is not None:
            self.writer.close()  # drops queued answers and the regions' files with them
        self.state.connections.discard(self)
        if self._ip is not None:
            self.guard.limits.release(self._ip)
            self._ip = None
        for entry in self.pending:
            if isinstance(entry.result, asyncio.Future) and not entry.result.done():
                entry.result.cancel()
        self.pending.clear()
        if self._busy is not None and not self._busy.done():
            self._busy.cancel()
        self._backlog.clear()
        self.decoder.clear()  # the transport may keep us alive a while: the bytes must not stay with us
        # whatever this connection still held (a frame half received, frames never handled) goes back
        pool = self.guard.pool
        pool.forget(self)
        pool.release_held(self._held_small, self._held_large)
        self._held_small = self._held_large = 0

    def pause_writing(self) -> None:
        self._paused_for_writes = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._paused_for_writes = False
        self._update_reading()
        self._flush()

    def data_received(self, data: bytes) -> None:
        self._last_read = self._last_active = time.monotonic()
        self._feed(data)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.decoder.get_buffer(_SCRATCH.view)

    def buffer_updated(self, nbytes: int) -> None:
        self._last_read = self._last_active = time.monotonic()
        if self.closed:
            return
        try:
            frames = self.decoder.buffer_updated(_SCRATCH.view, nbytes)
        except FrameError as exc:
            self._abort("bad frame", reason=str(exc))
            return
        self._frames_arrived(frames)

    def eof_received(self) -> bool | None:
        return None

    # -- frames and the memory pool ------------------------------------------------------------
    def _feed(self, data: bytes) -> None:
        if self.closed:
            return
        try:
            frames = self.decoder.feed(data)
        except FrameError as exc:
            self._abort("bad frame", reason=str(exc))
            return
        self._frames_arrived(frames)

    def _frames_arrived(self, frames: list[bytearray]) -> None:
        self._paused_for_memory = self.decoder.blocked
        for frame in frames:
            if self.closed:
                return  # what these frames hold is given back in connection_lost
            if self._busy is not None or self._backlog:
                self._backlog.append(frame)
            else:
                self._run(frame)
        self._flush()
        self._update_reading()

    def _admit(self, size: int) -> bool:
        """The decoder's question, once a frame's size is known: may `size` bytes be held now?"""
        if not self.guard.pool.try_allocate(size, self, self._memory_available):
            return False
        if size <= SMALL_FRAME_BYTES:
            self._held_small += size
        else:
            self._held_large += size
        return True

    def _memory_available(self) -> None:
        """The pool has room for the frame we are holding back: take it, and read on."""
        if not self.closed and self.decoder.blocked:
            self._feed(b"")

    def _release(self, size: int) -> None:
        if size <= SMALL_FRAME_BYTES:
            self._held_small -= size
        else:
            self._held_large -= size
        self.guard.pool.release(size)

    def _run(self, frame: bytearray) -> None:
        """Handle one frame; its memory goes back to the pool once the handler has it."""
        try:
            self._handle(frame)
        finally:
            if not self.closed:
                self._release(len(frame))
            # a closed connection gives back everything at once in connection_lost

    # -- requests ------------------------------------------------------------------------------
    def _handle(self, frame: bytearray) -> None:
        if self.sasl is not None and self.sasl.raw_tokens:
            self._raw_sasl_token(frame)  # after a v0 SaslHandshake: a bare token, not a Kafka request
            return
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
            self._abort("undecodable request", reason=str(exc), header=peeked,
                        head=bytes(frame[:HEAD_BYTES_LOGGED]).hex())
            return
        if self.sasl is not None and self._sasl_gate(header, request):
            return
        spec = REGISTRY.get(header.api_key)
        if spec is None or not spec.serves(header.api_version):
            self._unsupported(header.api_key, header.api_version, header.correlation_id)
            return
        started = REQUEST_METRICS.received(header.api_key, header.api_version)
        ctx = RequestContext(self.state, header.api_key, header.api_version, header.correlation_id,
                             header.client_id, self.peer, self.principal, self.listener)
        quotas = getattr(self.state, "quotas", None)
        timing = request_time.timed(quotas, header.api_key)
        handler_started = time.perf_counter() if timing else 0.0
        try:
            result = authorization.call(spec, ctx, request)  # the handler, as far as the ACLs allow
        except Exception:
            REQUEST_METRICS.error(header.api_key, "HANDLER_FAILED")
            log.exception("handler failed", api=api_name(header.api_key), api_key=header.api_key,
                          api_version=header.api_version, client_id=header.client_id, peer=self.peer)
            self._close()
            return
        request_throttle_ms = 0
        if timing:
            assert quotas is not None
            request_throttle_ms = request_time.charge(quotas, self.principal, header.client_id,
                                                      time.perf_counter() - handler_started, self.state.clock_ms())
        if result is None:
            REQUEST_METRICS.answered(header.api_key, started, None)
            if request_throttle_ms:
                self._mute(request_throttle_ms)  # no answer to carry it: the connection still waits it out
            return  # acks=0: Kafka sends nothing back
        work = not isinstance(result, Waiting)
        if not work:
            result = result.awaitable
        entry = PendingAnswer(header.api_key, header.api_version, header.correlation_id, result, started,
                         header.client_id, len(frame))
        entry.request_throttle_ms = request_throttle_ms
        if inspect.isawaitable(result):
            future = asyncio.ensure_future(result)
            entry.result = future
            if work:
                # work in progress: later requests of this connection wait for it
                self._busy = future
                future.add_done_callback(functools.partial(self._work_done, entry))
                self._update_reading()
            else:
                future.add_done_callback(self._on_done)
        self._enqueue(entry)

    # -- SASL ----------------------------------------------------------------------------------
    def _sasl_gate(self, header: RequestHeader, request: Any) -> bool:
        """The SASL layer before dispatch: True when it took the request (answered it, or closed)."""
        session = self.sasl
        assert session is not None
        api_key = header.api_key
        if session.state == "failed":
            return True  # the failure's answer is on its way and the connection closes after it
        if session.authenticated and api_key != ApiKey.SASL_HANDSHAKE and not (
                session.reauthenticating and api_key == ApiKey.SASL_AUTHENTICATE):
            if session.expired(self.state.clock_ms()):
                SASL_CONNECTIONS_CLOSED.labels("session_expired").inc()
                self.guard.warnings.warning("sasl session expired", "closing connection: SASL session expired",
                                            peer=self.peer, principal=self.principal, listener=self.listener)
                self._close()
                return True
            return False  # authenticated: on to the handlers
        if not session.authenticated and session.admits_before_authentication(api_key):
            return False
        if api_key == ApiKey.SASL_HANDSHAKE:
            response, close = session.handshake(request.mechanism, header.api_version)
            if close:
                SASL_CONNECTIONS_CLOSED.labels("unsupported_mechanism" if response.error_code
                                               == ErrorCode.UNSUPPORTED_SASL_MECHANISM else "illegal_state").inc()
            self._sasl_answer(header, response, close)
            return True
        if api_key == ApiKey.SASL_AUTHENTICATE and session.state == "authenticate" and not session.raw_tokens:
            reauthenticating = session.reauthenticating
            auth_response, failure = session.authenticate(bytes(request.auth_bytes), self.state.clock_ms())
            self._sasl_outcome(session, failure, reauthenticating)
            self._sasl_answer(header, auth_response, failure is not None)
            return True
        REQUEST_METRICS.error(api_key, "ILLEGAL_SASL_STATE")
        SASL_CONNECTIONS_CLOSED.labels("illegal_state").inc()
        self._abort("request before SASL authentication", api=api_name(api_key), api_key=api_key,
                    listener=self.listener)
        return True

    def _sasl_outcome(self, session: SaslSession, failure: SaslFailure | None, reauthenticating: bool) -> None:
        """Count (and, for a failure, log) the end of an exchange; a success sets the principal."""
        mechanism = session.mechanism.mechanism if session.mechanism is not None else "?"
        if failure is not None:
            AUTHENTICATIONS.labels(self.listener, mechanism, "failure").inc()
            self.guard.warnings.warning("sasl authentication failed", "authentication failed", peer=self.peer,
                                        listener=self.listener, **log_context(session, failure))
        elif session.state == "complete":
            AUTHENTICATIONS.labels(self.listener, mechanism,
                                   "reauthentication" if reauthenticating else "success").inc()
            self.principal = session.principal or self.principal
            self.decoder.set_max_frame(int(self.state.config.get("socket.request.max.bytes")))

    def _sasl_answer(self, header: RequestHeader, response: Any, close_after: bool) -> None:
        """Queue a SASL answer; one that ends the connection waits the failed-authentication delay first."""
        entry = PendingAnswer(header.api_key, header.api_version, header.correlation_id, response,
                         REQUEST_METRICS.received(header.api_key, header.api_version), header.client_id)
        self._queue_sasl(entry, close_after)

    def _raw_sasl_token(self, frame: bytearray) -> None:
        """A token of the v0 flow: framed by its size alone, answered the same way; a failure just closes."""
        session = self.sasl
        assert session is not None
        if session.state == "failed":
            return
        try:
            answer = session.step(bytes(frame), self.state.clock_ms())
            failure = None
        except SaslFailure as exc:
            answer, failure = b"", exc
        self._sasl_outcome(session, failure, False)
        result = b"" if failure is not None else struct.pack(">i", len(answer)) + answer
        entry = PendingAnswer(ApiKey.SASL_AUTHENTICATE, 0, -1, result,
                         REQUEST_METRICS.received(ApiKey.SASL_AUTHENTICATE, 0))
        self._queue_sasl(entry, failure is not None)

    def _queue_sasl(self, entry: PendingAnswer, close_after: bool) -> None:
        entry.close_after = close_after
        delay_s = self.sasl.settings.failure_delay_ms / 1000 if close_after and self.sasl is not None else 0
        if delay_s > 0:
            # the answer waits (without blocking the loop) and nothing else of this connection starts
            future = asyncio.ensure_future(answer_after(delay_s, entry.result))
            entry.result = future
            self._busy = future
            future.add_done_callback(functools.partial(self._work_done, entry))
            self._update_reading()
        self._enqueue(entry)

    def _work_done(self, entry: PendingAnswer, future: asyncio.Future[Any]) -> None:
        """The request that held this connection completed: start the frames that waited behind it."""
        self._busy = None
        if self.closed:
            return
        if future.cancelled() or future.exception() is not None:
            # later requests must not take effect after a failed one: close now, before they start
            self._failed(entry, None if future.cancelled() else future.exception())
            return
        self._settle(entry)
        while self._backlog and self._busy is None and not self.closed:
            self._run(self._backlog.popleft())
        self._flush()
        self._update_reading()

    def _unsupported(self, api_key: int, version: int, correlation_id: int) -> None:
        """Kafka's answer to a version we do not serve: ApiVersions gets the v0 fallback, the rest a close."""
        REQUEST_METRICS.error(api_key, "UNSUPPORTED_VERSION")
        if api_key == ApiKey.API_VERSIONS:
            self._enqueue(PendingAnswer(api_key, 0, correlation_id,
                                   api_versions_fallback_response(correlation_id, supported_versions()),
                                   REQUEST_METRICS.received(api_key, version)))
        else:
            self._abort("unsupported version", api_key=api_key, api_version=version)

    def _enqueue(self, entry: PendingAnswer) -> None:
        self.pending.append(entry)
        if len(self.pending) >= MAX_PENDING and not self._paused_for_pending:
            self._paused_for_pending = True
            self._update_reading()

    def _settle(self, entry: PendingAnswer) -> None:
        """Work that ended in a pure wait now waits like any `waiting(...)` answer."""
        future = entry.result
        if isinstance(future, asyncio.Future) and future.done() and not future.cancelled() \
                and future.exception() is None and isinstance(future.result(), Waiting):
            waiter = asyncio.ensure_future(future.result().awaitable)
            waiter.add_done_callback(self._on_done)
            entry.result = waiter

    def _on_done(self, future: asyncio.Future[Any]) -> None:
        if not self.closed:
            self._flush()

    def _failed(self, entry: PendingAnswer, exc: BaseException | None) -> None:
        REQUEST_METRICS.error(entry.api_key, "HANDLER_FAILED")
        log.error("handler failed", api=api_name(entry.api_key), api_key=entry.api_key,
                  api_version=entry.version, client_id=entry.client_id, peer=self.peer,
                  error=repr(exc), exc_info=exc)
        self._close()

    def _flush(self) -> None:
        """Write every response at the head of the queue that is ready, in request order: all of them in
        one write to the socket (answers a group commit released together go out in one `writev`, not one
        each: on loopback every send also runs the receiver's side of TCP, 13% of the loop's produce time
        at one send per answer)."""
        writer = self.writer
        if writer is None or self.closed:
            return
        ready: list[Any] = []  # the parts of the answers taken so far, written together
        while self.pending and self.pending[0].ready():
            entry = self.pending[0]
            result = entry.result
            if isinstance(result, asyncio.Future):
                if result.cancelled() or result.exception() is not None:
                    self.pending.popleft()
                    self._write_ready(writer, ready)
                    self._failed(entry, None if result.cancelled() else result.exception())
                    return
                result = result.result()
                if isinstance(result, Waiting):  # the work is done; its answer now merely waits
                    self._settle(entry)
                    continue
            if result is not None and not entry.charged and self._throttled(entry, result):
                break  # a client too old to throttle itself: its answer waits out the throttle
            self.pending.popleft()
            REQUEST_METRICS.answered(entry.api_key, entry.started, result)
            if result is None:  # acks=0 work: it took effect, and Kafka sends nothing back
                continue
            if isinstance(result, bytes | bytearray):
                ready.append(result)
            else:
                try:
                    ready.extend(encode_response(entry.correlation_id, entry.api_key, entry.version, result))
                except Exception:
                    log.exception("response encoding failed", api=api_name(entry.api_key), api_key=entry.api_key,
                                  api_version=entry.version, client_id=entry.client_id, peer=self.peer)
                    self._write_ready(writer, ready)
                    self._close()
                    return
            if entry.close_after:
                self._write_ready(writer, ready)
                self._close_after_writes()
                return
        self._write_ready(writer, ready)
        if self._paused_for_pending and len(self.pending) < MAX_PENDING // 2:
            self._paused_for_pending = False
            self._update_reading()

    def _write_ready(self, writer: SendQueue | CopyingWriter, ready: list[Any]) -> None:
        """Hand the answers taken by `_flush` to the writer in one call (nothing, if there are none)."""
        if ready:
            writer.write(ready)
            self._last_active = time.monotonic()

    def _throttled(self, entry: PendingAnswer, result: Any) -> bool:
        """Client quotas (the one hook): charge this answer to its client; over its quota, the answer
        carries the throttle and reading stops for that long (Kafka mutes the channel); True when the
        answer itself must wait that long (clients older than KIP-219), now a delayed future at the head."""
        entry.charged = True
        delay_ms, hold = quota_throttle.charge(getattr(self.state, "quotas", None), entry.api_key, entry.version,
                                               self.principal, entry.client_id, entry.size, result,
                                               self.state.clock_ms(), entry.request_throttle_ms)
        if not delay_ms:
            return False
        self._mute(delay_ms)
        if hold:
            entry.result = asyncio.ensure_future(answer_after(delay_ms / 1000, result))
            entry.result.add_done_callback(self._on_done)
        return hold

    def _mute(self, delay_ms: int) -> None:
        """Stop reading for `delay_ms` (Kafka mutes a throttled channel)."""
        self._muted += 1
        self._update_reading()
        asyncio.get_running_loop().call_later(delay_ms / 1000, self._unmute)

    def _unmute(self) -> None:
        self._muted -= 1
        self._update_reading()

    def _update_reading(self) -> None:
        if self.transport is None or self.closed:
            return
        reading = not (self._paused_for_pending or self._paused_for_writes or self._paused_for_memory
                       or self._busy is not None or self._muted)
        if reading == self._reading:
            return
        self._reading = reading
        if reading:
            self._last_read = time.monotonic()  # time paused by us is not the client's silence
            self.transport.resume_reading()
        else:
            self.transport.pause_reading()

    # -- timeouts (called by the guard's sweeper) ----------------------------------------------
    def expire_if_silent(self, now: float, idle_s: float, stalled_s: float) -> None:
        """Close when a frame stopped arriving half way, or when idle with nothing in progress."""
        if self.closed:
            return
        if self.decoder.partial_size and self._reading and now - self._last_read > stalled_s:
            CONNECTIONS_EXPIRED.labels("stalled_frame").inc()
            self._abort("stalled frame", seconds=round(now - self._last_read, 1),
                        frame_size=self.decoder.partial_size)
        elif not self.pending and self._busy is None and not self._backlog and now - self._last_active > idle_s:
            CONNECTIONS_EXPIRED.labels("idle").inc()
            log.debug("closing idle connection", peer=self.peer, idle_s=round(now - self._last_active, 1))
            self._close()

    def _abort(self, event: str, **context: Any) -> None:
        self.guard.warnings.warning(event, f"closing connection: {event}", peer=self.peer, **context)
        self._close()

    def close_when_written(self) -> None:
        """Close once the answers already written have left (the broker's graceful shutdown)."""
        self._close_after_writes()

    def _close_after_writes(self) -> None:
        """Close once what is written has left (a failed authentication's answer must reach the client),
        but within CLOSE_FLUSH_S even from a client that does not read."""
        if not self.closed and self.transport is not None:
            self.closed = True
            transport = self.transport
            if self.writer is not None:
                self.writer.when_drained(transport.close)  # our send queue first, then the transport's buffer
            else:
                transport.close()
            self._flush_timer = asyncio.get_running_loop().call_later(CLOSE_FLUSH_S, transport.abort)

    def _send_failed(self, exc: BaseException) -> None:
        """The send queue could not finish an answer (the peer is gone, a segment file closed under it):
        the client cannot be given the rest, so the connection ends now, even one already closing."""
        log.debug("send failed", peer=self.peer, error=repr(exc))
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    def _close(self) -> None:
        if not self.closed and self.transport is not None:
            self.closed = True
            if self.writer is not None:
                self.writer.close()
            self.transport.abort()


def _peek(frame: bytearray) -> tuple[int, int, int] | None:
    try:
        return peek_header(frame)
    except Exception:
        return None
