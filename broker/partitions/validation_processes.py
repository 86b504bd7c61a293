"""Big compressed batches validated in a worker process, so their decompression never holds the broker's GIL.

Why: a compressed batch may inflate up to the decompression cap (64 MiB) before its records can be
walked, and a validation thread doing that holds the interpreter lock for long stretches: cramjam's
snappy and zstd decoders hold it throughout, zlib and lz4 let it go while they inflate but not while
their output (tens of MiB) is copied, and the compiled record walk holds it for the whole body. Twenty
1 MB gzip bombs cost another connection's ApiVersions a p99 of 77 to 275 ms that way (bench/bombs.py).

So `validator.RecordWalk` first walks a compressed batch in a validation thread under a small cap
(`THREAD_BUDGET`: inflating and walking that much holds the lock a millisecond or two), which is where
every ordinary batch ends; a payload that inflates past it is judged by its first `PREFIX_BYTES` (a
bomb of zeros is refused there, for its first record, as Kafka refuses it); only when those give no
verdict does it come here, to be walked again under the real cap in a worker process with an
interpreter of its own, at a lower CPU priority (nice), so that on a busy machine the event loop runs
first. The pool has one process per two cores (at least
one): bombs from many connections queue there instead of taking every core.

The child gets plain values (the batch's bytes, the topic's rules as numbers) and answers plain values
(the largest record timestamp, or the refusal's code, message and record errors): nothing of the
broker's objects crosses the pipe. A child that dies (killed, out of memory) breaks the pool: the
append is answered REQUEST_TIMED_OUT (retriable) and the next one gets a fresh pool.

Threads and processes: `check` is awaited on the event loop; the pool starts on first use, with the
`spawn` method (a fork of the threaded broker could copy a held lock); `shutdown` is the broker's stop.
`_child_start` and `_check_in_child` run in the worker process only.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import multiprocessing
import os
import signal
import sys
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.records.batch import BatchHeader, Buffer, RecordsError, parse_header
from pybroker.protocol.records.codecs import passed_cap
from pybroker.protocol.records.records_check import prefix_refusal
from pybroker.protocol.records.validate import TimestampRule, ValidatedRecords, check_produce_records

#: how much a compressed batch may inflate to in a validation thread; past it, a worker process walks it
#: (1 MiB: what librdkafka's default batch holds, and about 5 ms of inflating on a busy 2-core machine)
THREAD_BUDGET = 1 << 20
#: how much of a payload past the budget the thread inflates again to judge its first records
PREFIX_BYTES = 64 << 10
#: the workers' niceness: below the broker's own threads, so the event loop is scheduled first
CHILD_NICENESS = 10
#: the rules of a topic as plain values: (now_ms, before_max_ms, after_max_ms, log_append_time)
RuleValues = tuple[int, int, int, bool]
#: a child's answer: (0, max_timestamp, "", ()) or (error code, 0, message, record errors)
ChildAnswer = tuple[int, int, str, tuple[tuple[int, str], ...]]

#: prctl's option: the signal the kernel sends us when the thread that started us dies
_PR_SET_PDEATHSIG = 1

_pool: ProcessPoolExecutor | None = None


def _workers() -> int:
    return max(1, (os.cpu_count() or 2) // 2)


def _get_pool() -> ProcessPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ProcessPoolExecutor(max_workers=_workers(), mp_context=multiprocessing.get_context("spawn"),
                                    initializer=_child_start, initargs=(os.getpid(),))
    return _pool


def shutdown() -> None:
    """Stop the worker processes (the broker's stop; a later `check` starts new ones)."""
    global _pool
    pool, _pool = _pool, None
    if pool is not None:
        pool.shutdown(wait=False, cancel_futures=True)


async def check(records: Buffer, header: BatchHeader, *, require_keys: bool, timestamps: TimestampRule,
                partition_name: str, max_decompressed: int) -> ValidatedRecords:
    """`check_produce_records` of the batch in a worker process; RecordsError with its refusal."""
    pool = _get_pool()
    rule: RuleValues = (timestamps.now_ms, timestamps.before_max_ms, timestamps.after_max_ms,
                        timestamps.log_append_time)
    try:
        code, max_timestamp, message, record_errors = await asyncio.get_running_loop().run_in_executor(
            pool, _check_in_child, bytes(records), require_keys, rule, partition_name, max_decompressed)
    except BrokenProcessPool:
        if _pool is pool:
            shutdown()
        raise RecordsError(ErrorCode.REQUEST_TIMED_OUT, "the validation worker process died: retry") from None
    if code != ErrorCode.NONE:
        raise RecordsError(code, message, record_errors)
    return ValidatedRecords(records=records, batches=[(0, header)], record_count=header.records_count,
                            producer_id=header.producer_id, producer_epoch=header.producer_epoch,
                            base_sequence=header.base_sequence, is_transactional=header.is_transactional,
                            size_bytes=header.size, max_timestamp=max_timestamp)


def _child_start(parent: int) -> None:
    """In the worker: killed with the broker (even by SIGKILL: nothing else would end a worker waiting for
    work), deaf to the terminal's Ctrl-C (the broker stops its pool), a lower priority, and the same record
    walk the broker judges with (its source when the compiled one is stale, as the broker's start decides)."""
    from pybroker.broker.compiled_modules import guard_record_walk

    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the broker died before we could ask
        os._exit(0)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(OSError):
        os.nice(CHILD_NICENESS)
    guard_record_walk()


def _check_in_child(records: bytes, require_keys: bool, rule: RuleValues, partition_name: str,
                    max_decompressed: int) -> ChildAnswer:
    """In the worker: the batch's header parsed again (a few bytes), its records walked under the cap; a
    payload past the cap is refused for a malformed record among the first `max_decompressed` bytes when
    there is one (Kafka's answer), else for the cap."""
    header = parse_header(records, 0)
    try:
        validated = check_produce_records(records, header, require_keys=require_keys,
                                          max_decompressed=max_decompressed,
                                          timestamps=TimestampRule(*rule), partition_name=partition_name)
    except RecordsError as exc:
        refusal = exc
        if passed_cap(exc, max_decompressed):  # as Kafka: a malformed record before the cap is the verdict
            refusal = prefix_refusal(records, 0, header, max_decompressed) or exc
        return int(refusal.error_code), 0, refusal.message, tuple(refusal.record_errors)
    return int(ErrorCode.NONE), validated.max_timestamp, "", ()
