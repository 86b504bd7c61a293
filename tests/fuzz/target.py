"""The fuzz target: a real in-process broker, fed mutated frames through `KafkaConnection`.

A `BrokerApp` over a temporary log dir runs the real handlers; each input is the byte stream of one
fresh connection whose transport is a fake that keeps what the broker writes. The input is fed in one
to three chunks (the framing layer sees splits too), then the target waits for the requests' work to
finish, wakes the long-polls, and closes the connection.

The oracles, checked after every input (`Finding.kind` names the one that failed):

- `error-logged`: nothing is logged at error level (every `log` of the broker's modules and the root
  stdlib logger are recorded while the target runs), no handler raises, nothing reaches the event
  loop's exception handler, and no object is collected with an exception in its finaliser (a file
  left open: ResourceWarning is an error while the target runs; the garbage is collected at each
  reset, so such a finding points at the inputs since the last reset rather than the last input).
  A `HANDLER_FAILED` in the request metrics is one of these.
- `noisy-log`: one connection made the broker write more than `WARNINGS_PER_CONNECTION` warnings (bad
  input is answered with an error code, or closed with one log line: a client must not be able to
  make the log grow faster than it sends).
- `lost-answer`: the answers come with the correlation ids of the requests, in request order; and
  when the connection is still open, every request a handler answered has its answer on the wire.
- `bad-answer`: every answer is a well-formed frame that our response decoder reads back.
- `hang`: a request's work (not a pure wait: a long-poll or a group join may wait) finishes within
  `WORK_BOUND_S`, and so does a change on a worker thread its closed connection left behind; the
  synchronous part of feeding the bytes within `SYNC_BOUND_S` (an alarm interrupts a handler stuck on
  the event loop).
- `restart`: every `RESET_EVERY` inputs the broker is stopped and started again on the same dir before
  it is thrown away; its topics and every partition's log start and end offsets must be the same.
- `corrupt-log`: while it is stopped there, `pybroker check-log`'s verifier must find nothing wrong in
  what it stored (whatever produce let through is on disk exactly as a consumer will read it).
- `memory`: resident memory, sampled every `MEMORY_EVERY` inputs, stays under `MEMORY_LIMIT_MB` more
  than the figure after the first broker started (the broker is rebuilt on a fresh dir every
  `RESET_EVERY` inputs, so what it legitimately stores does not count).

Inputs that reach a bug another part of the project already owns and has not fixed yet are not fed
(`known.py`): each such rule has a strict-xfail reproducer, so the fix that lands makes that test
fail until the rule is removed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import inspect
import logging
import os
import shutil
import signal
import struct
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pybroker.broker.app import BrokerApp
from pybroker.broker.connection import KafkaConnection
from pybroker.broker.dispatch import REGISTRY, Waiting, load_handlers
from pybroker.broker.loggers.levels import LEVELS as LOGGER_LEVELS
from pybroker.config.broker_config import BrokerConfig
from pybroker.protocol.frame_codec import decode_response
from pybroker.storage.verify import check_log_dir
from tests.fuzz.mutate import FuzzInput

WORK_BOUND_S = 5.0
SYNC_BOUND_S = 10.0
WAIT_GRACE_S = 0.05
WARNINGS_PER_CONNECTION = 2
RESET_EVERY = 3000
MEMORY_EVERY = 250
MEMORY_LIMIT_MB = 400.0
MAX_REQUEST = 2_000_000
ERROR_LEVELS = {"error", "exception", "critical", "fatal", "err"}

BROKER_SETTINGS = {
    "socket.request.max.bytes": str(MAX_REQUEST),
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "3",
    "num.partitions": "1",
    # The fuzz looks for work no cap bounds. At the default cap (10,000) the largest legal request is
    # seconds of honest work on a slow host (5,000 new partitions: 2.7 s on a 2-core VM, 5 s on a loaded
    # CI machine), which would be reported as a hang; at 1,000 every capped request fits the work bound
    # with room, and a mutated count past it exercises the refusal. The default cap's refusal and a
    # large legal creation are tested against a real broker (tests/integration/test_hostile_limits.py).
    "max.partitions.per.request": "1000",
    # bad frames are expected here by the thousand: the log would be all of them
}


class InputHang(BaseException):
    """Raised by the alarm inside whatever the event loop was running when an input took too long.

    A BaseException so that the broker's `except Exception` around a handler cannot swallow it.
    """


@dataclass(slots=True)
class Finding:
    kind: str
    detail: str
    input: FuzzInput


@dataclass(slots=True)
class Stats:
    inputs: int = 0
    frames: int = 0
    answered: int = 0
    closed: int = 0
    skipped_known: int = 0
    warnings: int = 0
    most_warnings_in_one_input: int = 0
    resets: int = 0
    rss_first_mb: float = 0.0
    rss_peak_mb: float = 0.0
    rss_last_mb: float = 0.0
    by_rule: dict[str, int] = field(default_factory=dict)


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


class FakeTransport(asyncio.Transport):
    """Keeps what the broker writes; `abort()` and `close()` only mark it closed."""

    def __init__(self, peer: str) -> None:
        super().__init__()
        self.out = bytearray()
        self.closed = False
        self._peer = peer

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return (self._peer, 0) if name == "peername" else default

    def write(self, data: Any) -> None:
        self.out += data

    def writelines(self, chunks: Any) -> None:
        for chunk in chunks:
            self.out += chunk

    def abort(self) -> None:
        self.closed = True

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0


class RecordingLogger:
    """Stands in for a module's structlog logger while the target runs: records, prints nothing."""

    def __init__(self, sink: list[tuple[str, str, dict[str, Any]]], name: str) -> None:
        self._sink = sink
        self._name = name

    def bind(self, **_: Any) -> RecordingLogger:
        return self

    new = bind

    def _record(self, level: str) -> Callable[..., None]:
        def emit(event: str = "", *args: Any, **kw: Any) -> None:
            self._sink.append((level, f"{self._name}: {event}", kw))
        return emit

    def __getattr__(self, level: str) -> Callable[..., None]:
        return self._record(level.removeprefix("a"))  # aerror, ainfo: the async variants


class _ErrorRecords(logging.Handler):
    def __init__(self, sink: list[tuple[str, str, dict[str, Any]]]) -> None:
        super().__init__(logging.ERROR)
        self._sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        self._sink.append(("error", f"{record.name}: {record.getMessage()}", {"exc_info": record.exc_info}))


@dataclass(slots=True)
class _Handled:
    correlation_id: int
    api_key: int
    version: int
    kind: str  # response | none | waiting | work | raised
    future: asyncio.Future[Any] | None = None


class FuzzTarget:
    """Use as `async with FuzzTarget() as target: finding = await target.run(input)`."""

    def __init__(self, workdir: Path | None = None, *, known: Any = None, alarm: bool = True) -> None:
        self._own_workdir = workdir is None
        # on tmpfs when there is one: fsync and file creation are most of the cost of an input otherwise
        scratch = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
        self.workdir = Path(tempfile.mkdtemp(prefix="pybroker-fuzz-", dir=scratch)) if workdir is None else workdir
        self.app: BrokerApp | None = None
        self.stats = Stats()
        self.events: list[tuple[str, str, dict[str, Any]]] = []
        self.handled: dict[str, list[_Handled]] = {}  # by peer, in request order
        self.known = known
        self.alarm = alarm  # False when another engine owns SIGALRM (atheris bounds each input itself)
        self._since_reset = 0
        self._generation = 0
        self._restore: list[Callable[[], None]] = []

    # -- life ----------------------------------------------------------------------------------------
    async def __aenter__(self) -> FuzzTarget:
        load_handlers()
        self._patch()
        await self._start_broker()
        self.stats.rss_first_mb = self.stats.rss_peak_mb = rss_mb()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stop_broker()
        for undo in reversed(self._restore):
            undo()
        self._restore.clear()
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    async def _start_broker(self, config: BrokerConfig | None = None) -> None:
        if config is None:
            self._generation += 1
            data = self.workdir / f"broker-{self._generation}"
            config = BrokerConfig.load({"log.dirs": str(data), "listeners": "PLAINTEXT://127.0.0.1:0",
                                        **BROKER_SETTINGS})
        LOGGER_LEVELS.reset()  # a fresh broker process starts with no logger levels set (a fuzzed SET may have)
        self.app = BrokerApp(config)
        await self.app.start()
        self._since_reset = 0

    def _snapshot(self) -> dict[str, Any]:
        assert self.app is not None
        logs = self.app.state.logs
        return {"topics": sorted(logs.topics()),
                "offsets": {f"{log.topic}-{log.partition}": (log.log_start_offset, log.log_end_offset)
                            for log in logs.logs()}}

    async def _restart_check(self, item: FuzzInput) -> Finding | None:
        """Stop and start the broker on the same dir: what it had must all be there again."""
        assert self.app is not None
        config = self.app.config
        before = self._snapshot()
        await self.app.stop()
        # what the broker held once stopped: a stop finishes work in flight (a group's or a transaction's
        # write may still append), so this, not `before`, is what a restart must give back exactly
        stopped = self._snapshot()
        self.app = None
        report = await asyncio.to_thread(check_log_dir, Path(config.log_dirs[0]))
        if report.problems:
            shown = "; ".join(f"{Path(p.file).parent.name}/{Path(p.file).name}@{p.position}: {p.message}"
                              for p in report.problems[:3])
            return Finding("corrupt-log", f"{len(report.problems)} problems in the stored logs: {shown}", item)
        try:
            await self._start_broker(config)
        except Exception as exc:
            self.app = None
            return Finding("restart", f"the broker did not start again on its dir: {exc!r}", item)
        after = self._snapshot()
        if stopped == after and before["topics"] == after["topics"] and _only_grew(before, after):
            return None
        lost = sorted(set(before["topics"]) ^ set(after["topics"]))
        moved = {k: (v, after["offsets"].get(k)) for k, v in before["offsets"].items() if after["offsets"].get(k) != v}
        moved |= {k: (v, after["offsets"].get(k)) for k, v in stopped["offsets"].items()
                  if after["offsets"].get(k) != v}
        odd = sum(1 for name in before["topics"] if "\n" in name)  # what issue 11 item 1 breaks
        return Finding("restart", f"state changed across a restart: topics {lost!r}, offsets "
                       f"(before, after) {dict(list(moved.items())[:5])!r}; {odd} topic names with a newline",
                       item)

    async def _stop_broker(self) -> None:
        app, self.app = self.app, None
        if app is None:
            return
        try:
            await asyncio.wait_for(app.stop(), 30)
        except (TimeoutError, Exception) as exc:  # a broker the fuzzer broke: start a new one anyway
            self.events.append(("warning", f"fuzz: broker stop failed: {exc!r}", {}))
        shutil.rmtree(Path(app.config.log_dirs[0]), ignore_errors=True)

    async def reset(self, item: FuzzInput | None = None, *, check: bool = False) -> Finding | None:
        finding = None
        if check and item is not None:
            self.events.clear()
            gc.collect()  # what leaked since the last reset is reported now, by this broker's last input
            finding = self._check_logs(item, [])
        if check and item is not None and self.app is not None and finding is None:
            finding = await self._restart_check(item)
        await self._stop_broker()
        await self._start_broker()
        self.stats.resets += 1
        return finding

    def _patch(self) -> None:
        """Record every broker log call and every handler's result kind while the target runs."""
        for name, module in list(sys.modules.items()):
            if not name.startswith("pybroker.") or module is None:
                continue
            for attr in ("log", "LOG"):
                original = getattr(module, attr, None)
                if original is not None and not isinstance(original, type | RecordingLogger) and \
                        hasattr(original, "error"):
                    setattr(module, attr, RecordingLogger(self.events, name))
                    self._restore.append(lambda m=module, a=attr, o=original: setattr(m, a, o))
        previous_hook = sys.unraisablehook

        def unraisable(info: Any) -> None:
            self.events.append(("error", f"unraisable: {info.exc_value!r} in {info.object!r}", {}))

        sys.unraisablehook = unraisable
        self._restore.append(lambda: setattr(sys, "unraisablehook", previous_hook))
        caught = warnings.catch_warnings()
        caught.__enter__()
        warnings.simplefilter("error", ResourceWarning)
        self._restore.append(lambda: caught.__exit__(None, None, None))
        records = _ErrorRecords(self.events)
        root = logging.getLogger()
        root.addHandler(records)
        self._restore.append(lambda: root.removeHandler(records))
        for key, spec in list(REGISTRY.items()):
            REGISTRY[key] = dataclasses.replace(spec, fn=self._wrap(spec.fn))
            self._restore.append(lambda k=key, s=spec: REGISTRY.__setitem__(k, s))

    def _wrap(self, fn: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
        handled = self.handled

        def recorded(ctx: Any, request: Any) -> Any:
            entry = _Handled(ctx.correlation_id, ctx.api_key, ctx.api_version, "raised")
            handled.setdefault(ctx.peer, []).append(entry)
            result = fn(ctx, request)
            if result is None:
                entry.kind = "none"
            elif isinstance(result, Waiting):  # the connection would wrap it in a task at once, as we do
                entry.kind = "waiting"
                entry.future = asyncio.ensure_future(result.awaitable)
                result = Waiting(entry.future)
            elif inspect.isawaitable(result):
                entry.kind = "work"
                entry.future = result = asyncio.ensure_future(result)
            else:
                entry.kind = "response"
            return result

        return recorded

    # -- one input -----------------------------------------------------------------------------------
    async def run(self, item: FuzzInput) -> Finding | None:
        assert self.app is not None
        if self.known is not None:
            rule = self.known(item)
            if rule is not None:
                self.stats.skipped_known += 1
                self.stats.by_rule[rule] = self.stats.by_rule.get(rule, 0) + 1
                return None
        self.stats.inputs += 1
        self.stats.frames += len(item.correlation_ids)
        self.events.clear()
        self.handled.clear()
        loop = asyncio.get_running_loop()
        errors_in_loop: list[dict[str, Any]] = []
        loop.set_exception_handler(lambda _loop, context: errors_in_loop.append(context))
        streams = _deal(item.data, item.connections)
        peers = [f"fuzz-{item.seed}-{item.index}-{n}" for n in range(len(streams))]
        links = [(KafkaConnection(self.app.state), FakeTransport(peer)) for peer in peers]
        finding: Finding | None = None
        abandoned = [True] * len(links)
        try:
            finding = await self._drive(links, streams, item)
            abandoned = [bool(conn.pending) for conn, _ in links]  # pure waits, and the answers behind them
        except InputHang as exc:
            finding = Finding("hang", f"synchronous part took over {SYNC_BOUND_S}s: {exc}", item)
        finally:
            await asyncio.sleep(0)  # a real transport reports the loss from the loop, a step later
            for conn, _ in links:
                if not conn.closed or conn.pending:
                    conn.connection_lost(None)
            await asyncio.sleep(0)  # cancellations of abandoned waits run now, inside this input
            await asyncio.sleep(0)
        # a topic change whose connection closed goes on (broker/detached_work.py): it belongs to this input
        if self.app is not None and not await self.app.state.detached.wait(WORK_BOUND_S):
            finding = finding or Finding("hang", f"a change its client left unfinished after {WORK_BOUND_S}s",
                                         item)
        finding = finding or self._check_logs(item, errors_in_loop)
        for (conn, transport), stream, gave_up in zip(links, streams, abandoned, strict=True):
            finding = finding or self._check_answers(item, transport, conn, _frame_ids(stream), gave_up)
            self.stats.closed += transport.closed
        warned = [event for level, event, _ in self.events if level in ("warning", "warn")]
        self.stats.warnings += len(warned)
        self.stats.most_warnings_in_one_input = max(self.stats.most_warnings_in_one_input, len(warned))
        if finding is None and len(warned) > WARNINGS_PER_CONNECTION * len(links):
            finding = Finding("noisy-log", f"{len(warned)} warnings for {len(links)} connection(s): {warned[:3]}",
                              item)
        self._since_reset += 1
        if self.stats.inputs % MEMORY_EVERY == 0:
            finding = finding or self._check_memory(item)
        if finding is not None or self._since_reset >= RESET_EVERY:
            checked = await self.reset(item, check=finding is None)
            finding = finding or checked
        return finding

    async def _drive(self, links: list[tuple[KafkaConnection, FakeTransport]], streams: list[list[bytes]],
                     item: FuzzInput) -> Finding | None:
        def alarm(signum: int, frame: Any) -> None:
            raise InputHang(f"input {item.index} of seed {item.seed}")

        outer = signal.getitimer(signal.ITIMER_REAL)[0] if self.alarm else 0.0  # a caller's watchdog keeps its time
        started = time.monotonic()
        previous = signal.signal(signal.SIGALRM, alarm) if self.alarm else None
        try:
            if self.alarm:
                signal.setitimer(signal.ITIMER_REAL, SYNC_BOUND_S)
            for conn, transport in links:
                conn.connection_made(transport)
            if len(links) == 1:  # one stream, handed over in one to three chunks: frames arrive split too
                data = b"".join(streams[0])
                cuts = sorted({len(data) * (item.index % 3) // 3, len(data) * (item.index % 5) // 5})
                pos = 0
                for cut in [*cuts, len(data)]:
                    if cut > pos and not links[0][0].closed:
                        links[0][0].data_received(data[pos:cut])
                        pos = cut
            else:  # frame by frame, in turn: the connections' requests interleave
                for turn in range(max(len(s) for s in streams)):
                    for (conn, _), stream in zip(links, streams, strict=True):
                        if turn < len(stream) and not conn.closed:
                            conn.data_received(stream[turn])
            for conn, _ in links:
                finding = await self._settle(conn, item)
                if finding is not None:
                    return finding
            return None
        finally:
            if self.alarm:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, signal.SIG_DFL if previous is None else previous)
            if outer:
                signal.setitimer(signal.ITIMER_REAL, max(outer - (time.monotonic() - started), 0.001))

    async def _settle(self, conn: KafkaConnection, item: FuzzInput) -> Finding | None:
        """Wait for the work of every request; give pure waits a moment after waking the long-polls."""
        deadline = time.monotonic() + WORK_BOUND_S
        await asyncio.sleep(0)
        while conn.pending and not conn.closed:
            work = [h.future for h in self._entries(conn) if h.kind == "work" and h.future is not None
                    and not h.future.done()]
            if work:
                left = deadline - time.monotonic()
                if left <= 0:
                    return Finding("hang", f"request work unfinished after {WORK_BOUND_S}s: "
                                   f"{self._describe(conn)}", item)
                await asyncio.wait(work, timeout=left)
                await asyncio.sleep(0)
                continue
            waits = [h.future for h in self._entries(conn) if h.future is not None and not h.future.done()]
            if not waits:
                await asyncio.sleep(0)
                if time.monotonic() > deadline:
                    return Finding("hang", f"answers not written: {self._describe(conn)}", item)
                continue
            purgatory = self.app.state.purgatory if self.app else None
            if purgatory is not None:
                for key in list(purgatory._watchers):
                    purgatory.notify(key)
            await asyncio.wait(waits, timeout=WAIT_GRACE_S)
            await asyncio.sleep(0)
            break
        return None

    def _entries(self, conn: KafkaConnection) -> list[_Handled]:
        return [h for h in self.handled.get(conn.peer, ()) if h.future is not None]

    def _describe(self, conn: KafkaConnection) -> str:
        return ", ".join(f"api {p.api_key} v{p.version} cid {p.correlation_id}" for p in conn.pending)

    # -- oracles -------------------------------------------------------------------------------------
    def _check_logs(self, item: FuzzInput, loop_errors: list[dict[str, Any]]) -> Finding | None:
        if loop_errors:
            context = loop_errors[0]
            return Finding("error-logged", f"event loop: {context.get('message')} {context.get('exception')!r}",
                           item)
        for level, event, kw in self.events:
            if level in ERROR_LEVELS:
                detail = {k: v for k, v in kw.items() if k != "exc_info"}
                exc = kw.get("exc_info") or kw.get("error")
                return Finding("error-logged", f"{event} {detail} {exc!r}", item)
        raised = [h for hs in self.handled.values() for h in hs if h.kind == "raised"]
        if raised:
            return Finding("error-logged", f"handler raised: api {raised[0].api_key} v{raised[0].version}", item)
        return None

    def _check_answers(self, item: FuzzInput, transport: FakeTransport, conn: KafkaConnection,
                       sent: list[int], abandoned: bool) -> Finding | None:
        out = memoryview(transport.out)
        answers: list[tuple[int, bytes]] = []
        pos = 0
        while pos < len(out):
            if len(out) - pos < 8:
                return Finding("bad-answer", f"{len(out) - pos} stray bytes at the end of the answers", item)
            size, correlation_id = struct.unpack_from(">ii", out, pos)
            if size < 4 or pos + 4 + size > len(out):
                return Finding("bad-answer", f"answer size {size} with {len(out) - pos - 4} bytes left", item)
            answers.append((correlation_id, bytes(out[pos + 4 : pos + 4 + size])))
            pos += 4 + size
        self.stats.answered += len(answers)
        handled = self.handled.get(conn.peer, [])
        at = at_handled = 0
        for correlation_id, frame in answers:
            while at < len(sent) and sent[at] != correlation_id:
                at += 1
            if at == len(sent):
                return Finding("lost-answer", f"answer with correlation id {correlation_id} out of order or "
                               f"unknown (sent {sent}, answered {[a for a, _ in answers]})", item)
            at += 1
            match = next((i for i in range(at_handled, len(handled)) if handled[i].correlation_id == correlation_id
                          and handled[i].kind != "none"), None)
            if match is None:
                api_key, version = 18, 0  # not a handler's answer: the ApiVersions v0 fallback
            else:
                api_key, version = handled[match].api_key, handled[match].version
                at_handled = match + 1
            try:
                decode_response(frame, api_key, version)
            except Exception as exc:
                return Finding("bad-answer", f"api {api_key} v{version} cid {correlation_id}: {exc!r}", item)
        if not transport.closed and not abandoned:
            answered = {a for a, _ in answers}
            for h in handled:
                if h.kind in ("response", "work", "waiting") and h.correlation_id not in answered \
                        and not _silent_work(h):
                    return Finding("lost-answer", f"api {h.api_key} v{h.version} cid {h.correlation_id} was "
                                   "answered by its handler but nothing was written", item)
        return None

    def _check_memory(self, item: FuzzInput) -> Finding | None:
        now = rss_mb()
        self.stats.rss_last_mb = now
        self.stats.rss_peak_mb = max(self.stats.rss_peak_mb, now)
        if now - self.stats.rss_first_mb > MEMORY_LIMIT_MB:
            return Finding("memory", f"RSS {now:.0f} MB, {now - self.stats.rss_first_mb:.0f} MB above the "
                           f"{self.stats.rss_first_mb:.0f} MB at the start", item)
        return None


def _split(data: bytes) -> list[bytes]:
    """The whole frames of a stream (size prefix included) as the broker splits them, then what is left."""
    pieces: list[bytes] = []
    pos = 0
    while len(data) - pos >= 4:
        (size,) = struct.unpack_from(">i", data, pos)
        if size < 0 or len(data) - pos - 4 < size:
            break
        pieces.append(data[pos : pos + 4 + size])
        pos += 4 + size
    if pos < len(data):
        pieces.append(data[pos:])
    return pieces


def _deal(data: bytes, connections: int) -> list[list[bytes]]:
    """The stream's pieces dealt to the connections in turn (one connection: all of them, in order)."""
    streams: list[list[bytes]] = [[] for _ in range(max(connections, 1))]
    for n, piece in enumerate(_split(data)):
        streams[n % len(streams)].append(piece)
    return streams


def _frame_ids(stream: list[bytes]) -> list[int]:
    """The correlation ids of the whole frames (a header's worth of bytes at least) in one connection's stream."""
    ids = []
    for piece in _split(b"".join(stream)):
        if len(piece) >= 12 and struct.unpack_from(">i", piece)[0] == len(piece) - 4:
            ids.append(struct.unpack_from(">i", piece, 8)[0])
    return ids


def replay_bytes(data: bytes, *, seed: int = 0, index: int = 0, connections: int = 1) -> FuzzInput:
    """A saved input as the target takes it (correlation ids read from the whole frames in it)."""
    return FuzzInput(seed, index, data, tuple(_frame_ids([data])), (), connections)


def _silent_work(handled: _Handled) -> bool:
    """Work that ended in no answer (an acks=0 produce that had to create its topic or validate off the
    loop first): like a handler that returned None, nothing is owed on the wire."""
    future = handled.future
    return (handled.kind == "work" and future is not None and future.done() and not future.cancelled()
            and future.exception() is None and future.result() is None)


def _only_grew(before: dict[str, Any], after: dict[str, Any]) -> bool:
    """Every partition kept its start offset and lost no offset at its end (a stop may append, never cut)."""
    for key, (start, end) in before["offsets"].items():
        found = after["offsets"].get(key)
        if found is None or found[0] != start or found[1] < end:
            return False
    return True
