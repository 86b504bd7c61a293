"""The cleaner's worker process: `python -m pybroker.storage.cleaner.worker`, started by the broker.

Why a process: the clean decodes every record of the dirty section in Python (a few microseconds
each); on a thread of the broker it holds the interpreter lock the event loop needs, and a large clean
doubles request latency. Here it runs on its own interpreter, at a lower scheduling priority (`--nice`),
and its offset map (`log.cleaner.dedupe.buffer.size`) lives in this process's memory, not the broker's.

What it does: read a job (`job.CleanJob`), map the dirty section and write each group's replacement
segment under `.cleaned` names with the same `Cleaner` the broker's in-process path uses, and ask the
broker to swap each finished group in (`("swap", ...)`); the broker validates the output, does the
crash-safe renames under the log's lock and answers. The worker never writes a live segment, an index
the broker serves, a checkpoint or anything of the active segment.

It stops a clean between batches when the broker says `("stop",)`, deleting its unfinished output; it
exits when the broker says `("exit",)`, when its pipe closes, or (Linux) when the broker's thread that
started it dies. SIGINT is ignored: a Ctrl-C on the broker's terminal is the broker's to handle.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import time
from collections.abc import Sequence

from pybroker.protocol.records.batch import RecordsError
from pybroker.storage.cleaner.channel import Channel, ChannelClosed
from pybroker.storage.cleaner.cleaned_segment import CleanedSegment
from pybroker.storage.cleaner.cleaner import Cleaner, CleaningAborted, SourceLog, SourceSegment
from pybroker.storage.cleaner.job import CleanJob, WorkerSettings
from pybroker.storage.cleaner.log_view import LogView
from pybroker.storage.cleaner.offset_map import OffsetMap
from pybroker.storage.cleaner.throttle import UNLIMITED, Throttler

#: how often a running clean looks for a stop from the broker
STOP_POLL_S = 0.02
_PR_SET_PDEATHSIG = 1


class StopPoller:
    """`should_stop` of the worker's cleaner: a look at the pipe at most every `STOP_POLL_S`."""

    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self.stopping = False
        #: the broker is gone: exit once the clean has unwound
        self.orphaned = False
        self._next = 0.0

    def __call__(self) -> bool:
        if self.stopping:
            return True
        now = time.monotonic()
        if now >= self._next:
            self._next = now + STOP_POLL_S
            self.poll()
        return self.stopping

    def poll(self) -> None:
        while not self.stopping and self.channel.readable(0):
            try:
                message = self.channel.receive()
            except ChannelClosed:
                self.orphaned = True
                message = ("exit",)
            if message[0] in ("stop", "exit"):
                self.stopping = True
                self.orphaned = self.orphaned or message[0] == "exit"


class WorkerCleaner(Cleaner):
    """A `Cleaner` whose swaps are done by the broker: it asks, and waits for the answer."""

    def __init__(self, offset_map: OffsetMap, throttler: Throttler, channel: Channel, *,
                 read_chunk: int) -> None:
        self.stopper = StopPoller(channel)
        super().__init__(offset_map, throttler, should_stop=self.stopper, read_chunk=read_chunk)
        self.channel = channel

    def replace(self, log: SourceLog, group: Sequence[SourceSegment], output: CleanedSegment) -> bool:
        self.channel.send("swap", [s.base_offset for s in group], output.base_offset, output.size)
        while True:
            message = self.channel.receive()
            if message[0] == "swapped":
                return bool(message[1])
            if message[0] in ("stop", "exit"):  # sent before the broker saw our question: it answers it too
                self.stopper.stopping = True
                self.stopper.orphaned = self.stopper.orphaned or message[0] == "exit"
                continue
            raise ChannelClosed(f"the broker answered a swap with {message[0]!r}")


def run_job(cleaner: WorkerCleaner, job: CleanJob) -> tuple[object, ...]:
    """Clean as the job says; the message that tells the broker how it went."""
    view = LogView(job)
    try:
        result = cleaner.clean_segments(view, view.segments, job.first_dirty, job.first_uncleanable, job.now_ms,
                                        job.producers)
    except CleaningAborted as exc:
        return ("aborted", str(exc))
    except RecordsError as exc:
        return ("failed", "records", int(exc.error_code), exc.message)
    except OSError as exc:
        return ("failed", "os", exc.errno, exc.strerror or str(exc), None if exc.filename is None else str(exc.filename))
    except ChannelClosed:
        raise
    except Exception as exc:
        return ("failed", "other", type(exc).__name__, str(exc))
    else:
        return ("done", result)
    finally:
        view.close()
        cleaner.offset_map.clear()


def serve(channel: Channel) -> int:
    """Answer jobs until told to exit or the broker goes away."""
    offset_map: OffsetMap | None = None
    shape: tuple[int, float] | None = None
    #: one throttle for the worker's life, as Kafka's cleaner has: a new one per job would measure each
    #: short job (under its check interval) alone and never slow it, whatever the configured rate
    throttler = Throttler(UNLIMITED)
    try:
        channel.send("ready", os.getpid())
        while True:
            message = channel.receive()
            if message[0] == "exit":
                return 0
            if message[0] in ("stop", "swapped"):  # late: the clean they were meant for has ended
                continue
            if message[0] != "clean":
                print(f"cleaner worker: unknown message {message[0]!r}", file=sys.stderr)
                return 2
            job: CleanJob = message[1]
            settings: WorkerSettings = message[2]
            if offset_map is None or shape != (settings.dedupe_buffer_size, settings.load_factor):
                if offset_map is not None:
                    offset_map.close()
                offset_map = OffsetMap(settings.dedupe_buffer_size, settings.load_factor)
                shape = (settings.dedupe_buffer_size, settings.load_factor)
            throttler.bytes_per_second = settings.io_max_bytes_per_second
            cleaner = WorkerCleaner(offset_map, throttler, channel,
                                    read_chunk=settings.read_chunk)
            outcome = run_job(cleaner, job)
            if cleaner.stopper.orphaned:
                return 0
            channel.send(*outcome)
    except ChannelClosed:
        return 0
    finally:
        if offset_map is not None:
            offset_map.close()


def _die_with_parent(parent: int) -> None:
    """Linux: be killed when the broker thread that started us dies, even by SIGKILL."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if parent and os.getppid() != parent:  # the broker died before we could ask
        os._exit(0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The log cleaner's worker process (started by the broker).")
    parser.add_argument("--nice", type=int, default=0, help="add this to the scheduling niceness")
    parser.add_argument("--parent", type=int, default=0, help="the broker's pid")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent(args.parent)
    if args.nice:
        with contextlib.suppress(OSError):
            os.nice(args.nice)
    # the protocol gets its own copy of stdout; anything printed by accident goes to stderr
    protocol_out = os.dup(1)
    os.dup2(2, 1)
    return serve(Channel(0, protocol_out))


if __name__ == "__main__":
    sys.exit(main())
