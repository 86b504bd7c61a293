"""The broker's side of the cleaner worker process: hand a clean to the worker, swap what it wrote.

`ProcessCleaner.clean` has `Cleaner.clean`'s contract, and the manager's cleaner thread calls it the
same way, but the thread only waits on a pipe (without the interpreter lock) while the worker
(`worker`) maps the dirty section and writes the `.cleaned` segments; for each finished group the
thread checks the output the worker names (its base offset is the group's, its `.log.cleaned` has the
size the worker reported) and swaps it in under the log's lock (`replace_group`), exactly as the
in-process path does.

What can go wrong, and what it leaves:
- the worker dies (killed, crashed, out of memory): its unfinished `.cleaned` files are deleted (only a
  clean writes them, and only one clean of a log runs at a time), groups swapped before stay swapped
  (each swap is whole), the checkpoint does not move, and `WorkerDied` tells the manager to retry later;
  the next clean starts a new worker;
- the broker stops: the worker is told to stop between batches (it deletes its output itself) and is
  killed if it has not within `STOP_GRACE_S`; `close` tells an idle worker to exit, then kills it;
- the worker cannot start at all: the clean runs on this thread (`Cleaner`), with one warning.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import structlog

from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.records.batch import RecordsError
from pybroker.storage.cleaner.channel import Channel, ChannelClosed
from pybroker.storage.cleaner.cleaned_segment import CLEANED_SUFFIX, suffixed_path
from pybroker.storage.cleaner.cleaner import Cleaner, CleaningAborted, CleanResult, replace_group
from pybroker.storage.cleaner.job import WorkerSettings, make_job
from pybroker.storage.cleaner.swap import StepHook, no_hook
from pybroker.storage.log import Log
from pybroker.storage.segment import Segment
from pybroker.storage.segment_names import LOG_SUFFIX

logger = structlog.get_logger("pybroker.cleaner").bind(logger="pybroker.cleaner")

WORKER_MODULE = "pybroker.storage.cleaner.worker"
#: how long a new worker may take to import and say it is ready
READY_TIMEOUT_S = 60.0
#: how long a worker told to stop may take to unwind its clean before it is killed
STOP_GRACE_S = 5.0
#: how long an idle worker told to exit may take before it is killed
EXIT_GRACE_S = 2.0
#: how often the waiting thread looks at `should_stop` and the worker's pulse
POLL_S = 0.05
#: the niceness the worker adds to its own, so the broker's event loop wins the CPU
DEFAULT_NICE = 10
#: after a worker failed to start, clean on the broker's thread this long before trying again
UNAVAILABLE_RETRY_S = 300.0


class WorkerDied(CleaningAborted):
    """The worker process died in the middle of a clean; nothing was lost, the clean is retried later."""


class WorkerUnavailable(Exception):
    """The worker process could not be started."""


class WorkerError(Exception):
    """The worker reported an error other than I/O or undecodable records, or broke the protocol."""


def _never_stop() -> bool:
    return False


class WorkerProcess:
    """One running worker: the process and the pipe pair to it."""

    def __init__(self, nice: int = DEFAULT_NICE, ready_timeout_s: float = READY_TIMEOUT_S) -> None:
        command = [sys.executable, "-m", WORKER_MODULE, "--nice", str(nice), "--parent", str(os.getpid())]
        try:
            self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, close_fds=True)
        except OSError as exc:
            raise WorkerUnavailable(f"cannot start {WORKER_MODULE}: {exc}") from exc
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.channel = Channel(self.proc.stdout.fileno(), self.proc.stdin.fileno())
        try:
            if not self.channel.readable(ready_timeout_s):
                raise WorkerUnavailable(f"{WORKER_MODULE} did not start within {ready_timeout_s:.0f} s")
            hello = self.channel.receive()
            if hello[0] != "ready":
                raise WorkerUnavailable(f"{WORKER_MODULE} said {hello[0]!r} instead of ready")
        except ChannelClosed as exc:
            self.kill()
            raise WorkerUnavailable(f"{WORKER_MODULE} exited at start (code {self.proc.returncode})") from exc
        except BaseException:
            self.kill()
            raise

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            self.proc.kill()
        self._reap()

    def close(self, grace_s: float = EXIT_GRACE_S) -> None:
        """Ask an idle worker to exit; kill it if it does not."""
        if self.alive:
            with contextlib.suppress(ChannelClosed):
                self.channel.send("exit")
            try:
                self.proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(OSError):
                    self.proc.kill()
        self._reap()

    def _reap(self) -> None:
        self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()


def discard_cleaned(directory: Path) -> None:
    """Delete the `.cleaned` files a dead worker left in a partition dir (only a clean writes them)."""
    with contextlib.suppress(OSError):
        for path in directory.glob(f"*{CLEANED_SUFFIX}"):
            with contextlib.suppress(OSError):
                path.unlink()


def _reported(message: tuple[object, ...]) -> Exception:
    """The exception a worker's `("failed", kind, ...)` stands for."""
    kind, details = message[1], message[2:]
    if kind == "os":
        errno, text, filename = details
        return OSError(errno, text, filename) if isinstance(errno, int) else OSError(str(text))
    if kind == "records":
        code, text = details
        return RecordsError(ErrorCode(code) if isinstance(code, int) else ErrorCode.CORRUPT_MESSAGE, str(text))
    return WorkerError(": ".join(str(d) for d in details))


class ProcessCleaner:
    """Cleans logs in a worker process; the same contract as `Cleaner` (`clean`, `close`)."""

    def __init__(self, settings: Callable[[], WorkerSettings], *, nice: int = DEFAULT_NICE,
                 should_stop: Callable[[], bool] = _never_stop, swap_hook: StepHook = no_hook,
                 fallback: Callable[[], Cleaner] | None = None, worker: WorkerProcess | None = None) -> None:
        self.settings = settings
        self.nice = nice
        self.should_stop = should_stop
        self.swap_hook = swap_hook
        self._make_fallback = fallback
        self._fallback: Cleaner | None = None
        #: a worker handed in is its giver's to close; one this cleaner starts is its own
        self._worker = worker
        self._owns_worker = worker is None
        self._warned_unavailable = False
        self._unavailable_until = 0.0

    # -- lifetime ----------------------------------------------------------------------------------
    @property
    def worker_pid(self) -> int | None:
        worker = self._worker
        return worker.pid if worker is not None and worker.alive else None

    def _ready_worker(self) -> WorkerProcess:
        worker = self._worker
        if worker is not None and worker.alive:
            return worker
        if worker is not None and self._owns_worker:
            worker.kill()
        self._worker = None
        if time.monotonic() < self._unavailable_until:
            raise WorkerUnavailable("the cleaner worker could not start lately")
        try:
            self._worker = WorkerProcess(self.nice)
        except WorkerUnavailable:
            self._unavailable_until = time.monotonic() + UNAVAILABLE_RETRY_S
            raise
        self._owns_worker = True
        return self._worker

    def close(self) -> None:
        if self._worker is not None and self._owns_worker:
            self._worker.close()
        self._worker = None
        if self._fallback is not None:
            self._fallback.close()
            self._fallback = None

    def _drop_worker(self, worker: WorkerProcess) -> None:
        worker.kill()
        if self._worker is worker:
            self._worker = None

    # -- cleaning ----------------------------------------------------------------------------------
    def clean(self, log: Log, first_dirty: int, first_uncleanable: int, now_ms: int) -> CleanResult:
        """Clean `log` from `first_dirty` up to (at most) `first_uncleanable`, in the worker process."""
        if self.should_stop():
            raise CleaningAborted("the cleaner is stopping")
        try:
            worker = self._ready_worker()
        except WorkerUnavailable as exc:
            return self._clean_here(log, first_dirty, first_uncleanable, now_ms, exc)
        segments = [s for s in log.segments[:-1] if s.base_offset < first_uncleanable]
        job = make_job(log, segments, first_dirty, first_uncleanable, now_ms)
        try:
            worker.channel.send("clean", job, self.settings())
            outcome = self._follow(worker, log, segments)
        except ChannelClosed:
            self._drop_worker(worker)
            discard_cleaned(log.dir)
            raise WorkerDied(f"the cleaner worker (pid {worker.pid}) died: exit code {worker.proc.returncode}") from None
        except BaseException:
            self._drop_worker(worker)  # in an unknown state: a new one serves the next clean
            raise
        if isinstance(outcome, CleanResult):
            return outcome
        if not isinstance(outcome, CleaningAborted) and self._changed(log, segments):
            raise CleaningAborted(f"{log!r} changed while it was being cleaned ({outcome})")
        raise outcome

    def _follow(self, worker: WorkerProcess, log: Log, segments: list[Segment]) -> CleanResult | Exception:
        """Answer the worker's swaps until it says how the clean ended; stop it when asked to."""
        by_base = {s.base_offset: s for s in segments}
        channel = worker.channel
        stop_deadline: float | None = None
        while True:
            if not channel.readable(POLL_S):
                if not worker.alive:
                    raise ChannelClosed("the worker exited")
                if stop_deadline is None and self.should_stop():
                    channel.send("stop")
                    stop_deadline = time.monotonic() + STOP_GRACE_S
                elif stop_deadline is not None and time.monotonic() > stop_deadline:
                    self._drop_worker(worker)
                    discard_cleaned(log.dir)
                    return CleaningAborted(f"the cleaner is stopping (worker killed after {STOP_GRACE_S:.0f} s)")
                continue
            message = channel.receive()
            kind = message[0]
            if kind == "swap":
                swapped = stop_deadline is None and self._swap(log, by_base, *message[1:])
                channel.send("swapped", swapped)
            elif kind == "done" and isinstance(message[1], CleanResult):
                return message[1]
            elif kind == "aborted":
                return CleaningAborted(str(message[1]))
            elif kind == "failed":
                return _reported(message)
            else:
                raise WorkerError(f"the cleaner worker sent {kind!r}")

    def _swap(self, log: Log, by_base: dict[int, Segment], old_bases: object, new_base: object,
              size: object) -> bool:
        """Validate the worker's output for one group and swap it in; False when the log changed."""
        if not isinstance(old_bases, list) or not old_bases or not all(b in by_base for b in old_bases):
            raise WorkerError(f"the cleaner worker asked to swap unknown segments {old_bases!r}")
        group = [by_base[b] for b in old_bases]
        if new_base != group[0].base_offset or old_bases != sorted(old_bases):
            raise WorkerError(f"the cleaner worker's output at {new_base!r} does not start its group {old_bases!r}")
        cleaned = suffixed_path(log.dir, group[0].base_offset, LOG_SUFFIX, CLEANED_SUFFIX)
        try:
            actual = cleaned.stat().st_size
        except FileNotFoundError:
            actual = -1
        if actual != size:
            raise WorkerError(f"{cleaned.name} holds {actual} bytes; the cleaner worker wrote {size!r}")
        return replace_group(log, group, group[0].base_offset, self.swap_hook)

    @staticmethod
    def _changed(log: Log, segments: list[Segment]) -> bool:
        """The log was closed, or lost one of the segments the job read (retention, a delete)."""
        if log.closed:
            return True
        current = {id(s) for s in log.segments}
        return not all(id(s) in current for s in segments)

    def _clean_here(self, log: Log, first_dirty: int, first_uncleanable: int, now_ms: int,
                    why: Exception) -> CleanResult:
        """The fallback: clean on this thread, as before the worker process existed."""
        if self._make_fallback is None:
            raise why
        if not self._warned_unavailable:
            self._warned_unavailable = True
            logger.warning("cleaner worker process unavailable; cleaning on a broker thread", reason=str(why))
        if self._fallback is None:
            self._fallback = self._make_fallback()
        return self._fallback.clean(log, first_dirty, first_uncleanable, now_ms)
