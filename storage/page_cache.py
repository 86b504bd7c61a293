"""How much of the logs stays in the OS page cache: the newest `log.page.cache.max.bytes` of fsynced data.

Why drop anything: every byte appended to a log lands in a page-cache page, and a page the kernel has to
find anew costs far more than one it has just freed. On a virtual machine whose free memory is handed back
to the host (free page reporting, ballooning), a new page faults into the hypervisor to be backed and zeroed
again; on any machine, once free memory runs out, every new page is one the kernel first reclaims. Writing
into pages freed a moment ago skips both. Measured on a 2-core VM: 1 GiB of 1 MiB writes, fdatasynced every
4 MiB, took 3.3 s and 2.3 CPU seconds into fresh pages, and 0.8 s and 0.3 CPU seconds when everything 32 MiB
behind the last fsync was dropped as it went; a cold read through `sendfile` went 0.53 GB/s into fresh
pages and 1.39 GB/s when it dropped what it had sent (as fast as reading the same file from the cache).

So the broker keeps a budget: fsynced ranges are counted oldest first across all logs, and once they pass
the budget the oldest are dropped (`posix_fadvise(DONTNEED)`), leaving the newest in the cache for the
consumers that follow the log end. A read of data that was dropped (a consumer far behind) asks the disk to
read ahead of it (`READ_AHEAD`, so its next fetch does not block the event loop on the disk) and is dropped
again once it has been sent, so catching up recycles a few pages instead of filling memory. Nothing here changes
what is on disk or what is read: dropping a clean cached page only means the next read of it goes to the
disk. Data not yet on the disk is never dropped (the kernel would skip dirty pages anyway).

Why the default is 4 GiB and not less. The budget only caps what is left cached: it never holds memory the
kernel wants, which reclaims cached pages under pressure whatever the budget (as it does for Kafka). But a
drop is not free (an fadvise on the thread, the kernel freeing the pages), and what goes is chosen by when
it was fsynced, not by where it sits in its partition: over many partitions one producer batch of a few
MB holds a partition's newest records from early on, so consumers a little behind read it back from the
disk. Measured on the 2-core VM with the bench's client fleet, produce phases of 2.5 s (about 3 GB of 10
KiB records) each followed by a consume of the newest 1 GB, two brokers alternated, medians: one
partition, 2 GiB against 6 GiB, 115k against 127k msgs/s produced (0.79 against 0.70 CPU s/GB) and 171k
against 193k read; 16 partitions, 2 GiB against 4 GiB, 103k against 111k produced and 191k against 216k
read (0.27 against 0.23 CPU s/GB); 1,024 partitions, one broker after the other, 2 GiB against 6 GiB, the
consume read 330 MB from the disk at 68k msgs/s, and none at 82k. 1 KiB records over 16 partitions (2 GB
written, within either budget) did not move.

Data nobody fsyncs (acks=0 and 1 with Kafka's default flush policy) is counted too, or it would fill
fresh pages for ever: once a segment holds `WRITE_BACK_STEP` bytes past what was counted, the thread
writes them back (`sync_file_range`), waits, and counts them, so they are clean when their drop comes (the
kernel passes over pages still being written back: counted on the write-back's start alone, a busy disk
left nearly all of them cached). It waits through a descriptor of its own (`/proc/self/fd`): a wait
takes a write-back error only from the descriptor it waits on, so the segment's own still reports it at the
flusher's next fsync and an acks=all answer cannot claim lost data. Measured on the same VM, 1 KiB acks=1 produce over 1,024
partitions went from 0.29M msgs/s at 3.25 CPU s/GB (every write into fresh pages) to the figures of
acks=all. Nothing about durability changes: the recovery point still moves only with an fsync.

The `posix_fadvise` calls run on one thread of their own (`page-cache`), never on the event loop or a
flusher: dropping 8 MiB of cached pages takes about half a millisecond. On a filesystem whose pages are its
storage (tmpfs) the drops do nothing, harmlessly.

Linux reads at most max(`read_ahead_kb`, `max_sectors_kb`) of the device for one `POSIX_FADV_WILLNEED`
and silently skips the rest. With common settings (128 KiB read-ahead, 128 to 1,280 KiB per request) a
16 MiB read-ahead read its first 128 KiB to 1.25 MiB, and the next fetch blocked the event loop on the
disk for the rest, so a read-ahead is asked for in pieces of that size (`read_ahead_piece`, read once per
device). Measured on the 2-core VM with its disk set to 128 KiB for both: a consumer reading 10 KiB records
of one partition, most of them dropped, went from 97-114k to 139-150k msgs/s.
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections import deque
from pathlib import Path
from typing import IO, TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pybroker.storage.file_region import FileRegion

#: what one drop takes at least (ends aligned to it): the kernel skips a large folio that a range only
#: partly covers, so small ranges with unaligned ends would leave pages behind for good
DROP_ALIGN = 2 << 20
#: queued drops beyond this are forgotten (the cache then only holds more than the budget for a while)
MAX_QUEUED = 65_536
#: fsynced ranges counted at most: a client writing tiny acks=all batches over many partitions makes one
#: range per fsync, and without a cap 1 GiB of 100 B ranges would cost the broker a gigabyte of bookkeeping;
#: past it the oldest range is dropped early (the cache holds less than the budget, never more)
MAX_RANGES = 65_536
#: how far past a read of dropped data the disk is asked to read ahead (`POSIX_FADV_WILLNEED`), so a
#: consumer catching up finds its next fetch in the cache instead of blocking the event loop on the disk
READ_AHEAD = 16 << 20
#: ... but never more than this many times the read itself, so a fetch of many tiny regions cannot make
#: the disk read 16 MiB for each: what a fetch makes the disk read stays within 9x what it is sent, while
#: a consumer's usual 1 MiB fetches keep 8 of them in flight ahead of it
READ_AHEAD_FACTOR = 8
#: the piece asked for when the device's limits cannot be read (a filesystem with no block device of its
#: own in sysfs): the smallest read-ahead window Linux sets by default. Also the smallest piece ever asked
#: for, so one read-ahead is at most READ_AHEAD / READ_AHEAD_PIECE = 128 calls; a device set to read less
#: per call (read-ahead turned off, tiny requests) reads the start of each piece
READ_AHEAD_PIECE = 128 << 10
#: bytes a segment gathers past what the budget counts before they are handed to write-back and counted
#: (data nobody fsyncs: acks=0 and 1); what is left uncounted is at most this much per active segment
WRITE_BACK_STEP = DROP_ALIGN
#: the thread's own advice: start the write-back of a range, then count it
_WRITE_BACK = -1


def _sync_file_range() -> ctypes._NamedFuncPointer | None:
    """glibc's `sync_file_range` (Python has no binding; ctypes lets go of the GIL while it runs)."""
    try:
        function = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (AttributeError, OSError):
        return None
    function.argtypes = (ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint)
    function.restype = ctypes.c_int
    return function


_SYNC_FILE_RANGE = _sync_file_range()
#: SYNC_FILE_RANGE_WAIT_BEFORE | _WRITE | _WAIT_AFTER: write the range back and wait until it is clean
_WRITE_AND_WAIT = 1 | 2 | 4
#: SYNC_FILE_RANGE_WRITE alone: start the write-back, wait for nothing (where no descriptor of our own opens)
_START_WRITE = 2


def _write_back(fd: int, start: int, end: int) -> None:
    """Write [start, end) of `fd`'s file back and wait for it, on a descriptor of its own (see above)."""
    if _SYNC_FILE_RANGE is None:  # not Linux: fadvise's own write-back start has to do
        return
    try:
        own = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:  # no /proc: start the write-back only, which takes no error away
        _SYNC_FILE_RANGE(fd, start, end - start, _START_WRITE)
        return
    try:
        _SYNC_FILE_RANGE(own, start, end - start, _WRITE_AND_WAIT)
    finally:
        os.close(own)


def read_ahead_piece(device: int, sysfs: Path = Path("/sys/dev/block")) -> int:
    """The most one `POSIX_FADV_WILLNEED` reads of the filesystem on `device` (`st_dev`): Linux caps it at
    the larger of the device's read-ahead window and its largest request (`force_page_cache_ra`). A
    partition's limits are its disk's."""
    node = sysfs / f"{os.major(device)}:{os.minor(device)}"
    for queue in (node / "queue", node / ".." / "queue"):
        try:
            kib = max(int((queue / name).read_text()) for name in ("read_ahead_kb", "max_sectors_kb"))
        except (OSError, ValueError):
            continue
        return max(kib << 10, READ_AHEAD_PIECE)
    return READ_AHEAD_PIECE


class Droppable(Protocol):
    """A segment as the budget sees it: its open `.log` file (None when closed), how far it was counted
    and how far dropped."""

    cache_dropped_to: int
    cache_counted_to: int

    def open_file(self) -> IO[bytes] | None: ...


class PageCache:
    """The budget of fsynced log bytes left cached; `max_bytes` < 0: no budget (the OS decides, as in Kafka)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._lock = threading.Condition()
        #: fsynced ranges not dropped yet, oldest first: [segment, start, end]; a segment's next range
        #: extends its last one when it continues it
        self._ranges: deque[list] = deque()
        self._cached = 0
        #: (advice, file, start, end, segment) waiting for the thread: drops, read-aheads of dropped data,
        #: and write-backs of data nobody fsyncs (the segment to count it for once it is clean)
        self._advice: deque[tuple[int, IO[bytes], int, int, Droppable | None]] = deque()
        self._closed = False
        self.dropped_bytes = 0
        self._thread: threading.Thread | None = None
        #: `read_ahead_piece` of each device read ahead on so far (the thread's own)
        self._pieces: dict[int, int] = {}

    @property
    def enabled(self) -> bool:
        return self.max_bytes >= 0

    @property
    def ranges_held(self) -> int:
        """fsynced ranges counted now (at most `MAX_RANGES`)."""
        return len(self._ranges)

    @property
    def cached_bytes(self) -> int:
        """fsynced bytes counted as cached (deleted segments' ranges stay counted until their turn)."""
        return self._cached

    def fsynced(self, segment: Droppable, end: int) -> None:
        """`segment`'s bytes up to `end` reached the disk: count those not counted yet (by an earlier fsync
        or a write-back), and drop the oldest beyond the budget."""
        if self.max_bytes < 0 or end <= segment.cache_counted_to:
            return
        with self._lock:
            start = segment.cache_counted_to
            if end <= start:
                return
            segment.cache_counted_to = end
            self._count(segment, start, end)

    def written(self, segment: Droppable, end: int) -> None:
        """`segment` now ends at `end` and nobody is about to fsync it (`Log.recycle_unflushed`, on the
        appending thread): past `WRITE_BACK_STEP` uncounted bytes, the thread writes them back and counts
        them, so data nobody fsyncs is recycled too. (acks=all appends never come here: their fsync counts
        them, and a write-back beside it would only be the same work twice.)"""
        if self.max_bytes < 0 or end - segment.cache_counted_to < WRITE_BACK_STEP:
            return
        with self._lock:
            start = segment.cache_counted_to
            file = segment.open_file()
            if end - start < WRITE_BACK_STEP or file is None:
                return
            segment.cache_counted_to = end
            self._queue(_WRITE_BACK, file, start, end, segment)

    def _count(self, segment: Droppable, start: int, end: int) -> None:
        """With the lock held: [start, end) of `segment` is on the disk or on its way: count it, and drop
        the oldest beyond the budget."""
        ranges = self._ranges
        last = ranges[-1] if ranges else None
        if last is not None and last[0] is segment and last[2] == start:
            last[2] = end
        else:
            ranges.append([segment, start, end])
        self._cached += end - start
        excess = self._cached - self.max_bytes
        if excess <= 0 and len(ranges) <= MAX_RANGES:
            return
        if excess > 0:
            excess = max(excess, DROP_ALIGN)
        while ranges and (excess > 0 or len(ranges) > MAX_RANGES):
            victim, first, stop = ranges[0]
            cut = stop if stop - first <= excess or excess <= 0 else \
                max(first + excess - (first + excess) % DROP_ALIGN, first)
            if cut == first:  # less than one aligned step of this range: leave it for the next round
                break
            if cut == stop:
                ranges.popleft()
            else:
                ranges[0][1] = cut
            self._cached -= cut - first
            excess -= cut - first
            victim.cache_dropped_to = max(victim.cache_dropped_to, cut)
            file = victim.open_file()
            if file is not None:
                self._queue(os.POSIX_FADV_DONTNEED, file, first, cut, None)

    def reading(self, segment: Droppable, region: FileRegion) -> None:
        """`region` of `segment` is about to be sent. Where the budget dropped it, it comes from the disk:
        have the disk read on ahead, and drop it again once it is sent."""
        dropped_to = segment.cache_dropped_to
        if region.position >= dropped_to:
            return
        end = region.position + region.length
        region.drop_after_send(self, min(end, dropped_to))
        ahead = min(READ_AHEAD, READ_AHEAD_FACTOR * region.length)  # bounded by what is sent
        self.read_ahead(region.file, end, min(end + ahead, dropped_to))

    def sent(self, file: IO[bytes], start: int, end: int) -> None:
        """A read of [start, end) that had been dropped before was sent: drop it again (from any thread)."""
        if end > start:
            with self._lock:
                self._queue(os.POSIX_FADV_DONTNEED, file, start, end, None)

    def read_ahead(self, file: IO[bytes], start: int, end: int) -> None:
        """A read of dropped data ends at `start`: have the disk read on up to `end` meanwhile."""
        if end > start:
            with self._lock:
                self._queue(os.POSIX_FADV_WILLNEED, file, start, end, None)

    def _queue(self, advice: int, file: IO[bytes], start: int, end: int, segment: Droppable | None) -> None:
        """With the lock held: hand advice to the thread (started on first use). Once closed, only the
        thread itself still queues: the drops that its last write-backs' counts call for."""
        closing = self._closed and threading.current_thread() is not self._thread
        if closing or len(self._advice) >= MAX_QUEUED:
            return
        self._advice.append((advice, file, start, end, segment))
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="page-cache", daemon=True)
            self._thread.start()
        self._lock.notify()

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._advice and not self._closed:
                    self._lock.wait()
                if not self._advice:
                    return
                advice, file, start, end, segment = self._advice.popleft()
            try:
                if advice == _WRITE_BACK:
                    _write_back(file.fileno(), start, end)
                elif advice == os.POSIX_FADV_WILLNEED:
                    self._read_ahead(file.fileno(), start, end)
                else:
                    os.posix_fadvise(file.fileno(), start, end - start, advice)
            except (OSError, ValueError):  # closed meanwhile (deleted, idle): its pages go with it or stay
                continue
            if segment is not None:
                with self._lock:
                    self._count(segment, start, end)
                continue
            if advice == os.POSIX_FADV_DONTNEED:
                self.dropped_bytes += end - start

    def _read_ahead(self, fd: int, start: int, end: int) -> None:
        """On the thread: have the disk read [start, end) of `fd`'s file, in pieces it reads whole."""
        device = os.fstat(fd).st_dev
        piece = self._pieces.get(device)
        if piece is None:
            piece = self._pieces[device] = read_ahead_piece(device)
        for position in range(start, end, piece):
            os.posix_fadvise(fd, position, min(piece, end - position), os.POSIX_FADV_WILLNEED)

    def forget(self) -> None:
        """Drop every count (the logs went away, e.g. at shutdown)."""
        with self._lock:
            self._ranges.clear()
            self._cached = 0

    def close(self, timeout: float | None = 5.0) -> bool:
        """Finish the queued work (and the drops its write-backs call for), then stop the thread. Waits at
        most `timeout` (shutdown must not hang on a stuck disk) and says whether the thread did stop: on a
        busy disk the write-backs can outlast the wait, and a caller that then looks at the cache (a test)
        must know its work is not done yet."""
        with self._lock:
            self._closed = True
            self._lock.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(timeout)
            return not thread.is_alive()
        return True


#: the budget of logs made without one (tests, tools): none
UNLIMITED = PageCache(-1)
