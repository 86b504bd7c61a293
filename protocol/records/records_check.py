"""Walking a whole batch's records: the one record-level validator of produce, recovery and check-log.

A batch's record bytes are its body as stored, or that body decompressed under a size cap; the walk
itself is `record_walk` (mypyc-compiled when installed), after a copy-free fast path in C for uncompressed
batches (`_walk_accept`: it accepts well-formed records in the request's own buffer and leaves every
refusal, and its message, to `record_walk`). The two kinds of failure keep Kafka's codes:
a payload that will not decompress (or decompresses beyond the cap) is CORRUPT_MESSAGE, records that
do not match their header are INVALID_RECORD (Kafka's InvalidRecordException from `DefaultRecord`).

Decompression can take long (a 64 MiB cap of output); callers on the event loop run `walk_batch` of a
compressed batch in a worker thread (zlib, lz4, zstd and cramjam release the GIL while they work).

The walk is the installed `record_walk` (the extension when the install compiled it). When that extension
was built from another version of its source (a checkout changed the .py since the last `make install`),
the broker's start swaps in the source (`use_walk`, from `pybroker.broker.compiled_modules`, which reads
the installed files): a stale walk must never judge records, and this module does no file I/O.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any, Protocol

from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.records import record_walk
from pybroker.protocol.records.batch import HEADER_SIZE, MIN_BATCH_LENGTH, BatchHeader, Buffer, RecordsError
from pybroker.protocol.records.codecs import NONE, decompress, decompress_prefix
from pybroker.protocol.records.record import MAX_DECOMPRESSED


class RecordsSummary(Protocol):
    """What a walk learned (`record_walk.RecordsSummary`, compiled or run from its source: callers that are
    compiled themselves must accept either class, so they see this shape, not the class)."""

    count: int
    min_timestamp_delta: int
    max_timestamp_delta: int
    first_keyless: int

    @property
    def all_keyed(self) -> bool: ...

__all__ = ["COMPILED", "WALK_IMPLEMENTATION", "batch_problem", "prefix_refusal", "record_facts", "use_walk",
           "walk_batch", "walk_module"]


def _fast_path() -> tuple[Any, str]:
    """The copy-free fast path (`_walk_accept`, C) when the install built it (not with PYBROKER_PURE_PYTHON=1)."""
    try:
        fast = importlib.import_module("pybroker.protocol.records._walk_accept")
    except ImportError:
        return None, ""
    return fast.accept, "; valid uncompressed records accepted in place by C (_walk_accept)"


_accept, _FAST_NOTE = _fast_path()


def use_walk(module: ModuleType, implementation: str) -> None:
    """Walk records with `module` (a `record_walk`, installed or run from its source) from now on; the
    broker's start calls it before anything is served, tests and the bench to compare the two."""
    global _walk_module, _walk, _record_facts, _Summary, _Malformed, COMPILED, WALK_IMPLEMENTATION
    _walk_module = module
    _walk = module.walk
    _record_facts = module.record_facts
    _Summary = module.RecordsSummary
    _Malformed = module.MalformedRecords
    COMPILED = module.COMPILED
    WALK_IMPLEMENTATION = implementation + _FAST_NOTE


def walk_module() -> ModuleType:
    """The `record_walk` in use."""
    return _walk_module


_walk_module: ModuleType = record_walk
_walk: Any = None
_record_facts: Any = None
_Summary: Any = None
_Malformed: type[Exception] = Exception
#: True when the record walk in use is the mypyc-compiled one
COMPILED: bool = False
#: what walks records, for the start log
WALK_IMPLEMENTATION = ""
use_walk(record_walk, "compiled (mypyc)" if record_walk.COMPILED
         else "pure Python (the compiled extension is not installed)")


def _batch_end(buf: Buffer, pos: int, header: BatchHeader) -> int:
    """Where the batch at `pos` ends in `buf`; CORRUPT_MESSAGE when its header says it cannot fit."""
    end = pos + header.size
    if header.batch_length < MIN_BATCH_LENGTH or pos < 0 or end > len(buf):
        raise RecordsError(ErrorCode.CORRUPT_MESSAGE, "batch overruns the buffer")
    return end


def _record_bytes(buf: Buffer, pos: int, header: BatchHeader, max_decompressed: int) -> tuple[bytes, int, int]:
    """(buffer, start, end) of the batch's uncompressed records, copied only where it must be."""
    end = _batch_end(buf, pos, header)
    if header.compression == NONE:
        if isinstance(buf, bytes):
            return buf, pos + HEADER_SIZE, end
        with memoryview(buf) as view:
            body = bytes(view[pos + HEADER_SIZE : end])
        return body, 0, len(body)
    with memoryview(buf) as view:
        body = decompress(header.compression, view[pos + HEADER_SIZE : end], max_decompressed)
    return body, 0, len(body)


def walk_batch(buf: Buffer, pos: int, header: BatchHeader, *, consecutive: bool,
               max_decompressed: int = MAX_DECOMPRESSED) -> RecordsSummary:
    """Walk every record of the batch at `pos` (decompressed under `max_decompressed`).

    `consecutive` is the produce-path rule (offset deltas 0..records_count-1); a stored batch may
    have gaps the cleaner left. RecordsError: CORRUPT_MESSAGE for the payload, INVALID_RECORD for records.
    """
    if _accept is not None and header.compression == NONE:
        # in place, no copy; anything it does not accept is walked below, for the verdict and its message
        facts = _accept(buf, pos + HEADER_SIZE, _batch_end(buf, pos, header), header.records_count,
                        header.last_offset_delta, consecutive)
        if facts is not None:
            return _Summary(header.records_count, *facts)
    body, start, end = _record_bytes(buf, pos, header, max_decompressed)
    try:
        return _walk(body, start, end, header.records_count, header.last_offset_delta, consecutive)
    except _Malformed as exc:
        message = f"malformed records: {exc}"
        index: int = getattr(exc, "index", -1)
        raise RecordsError(ErrorCode.INVALID_RECORD, message, ((index, message),) if index >= 0 else ()) from None


#: what a walk says when the records ran past the bytes it was given: no verdict on a payload's first bytes
_CUT_SHORT = ("overruns the batch", "truncated varint", "but the batch holds")


def prefix_refusal(buf: Buffer, pos: int, header: BatchHeader, size: int) -> RecordsError | None:
    """Kafka's verdict on a produced batch whose payload inflates past `size`, from its first `size` bytes
    alone, when they already hold it: Kafka reads the records one after the other as they inflate, so a
    malformed record among the first ones is INVALID_RECORD however far the rest would inflate (a
    decompression bomb of zeros is refused for its first record). None when the walk ran out of bytes
    first (the whole payload decides: under the real cap). RecordsError (CORRUPT_MESSAGE) from the codec."""
    with memoryview(buf) as view:
        prefix = decompress_prefix(header.compression, view[pos + HEADER_SIZE : _batch_end(buf, pos, header)], size)
    try:
        _walk(prefix, 0, len(prefix), header.records_count, header.last_offset_delta, True)
    except _Malformed as exc:
        message = f"malformed records: {exc}"
        if any(cut in message for cut in _CUT_SHORT):
            return None
        index: int = getattr(exc, "index", -1)
        return RecordsError(ErrorCode.INVALID_RECORD, message, ((index, message),) if index >= 0 else ())
    return None


def record_facts(buf: Buffer, pos: int, header: BatchHeader,
                 max_decompressed: int = MAX_DECOMPRESSED) -> tuple[list[int], list[int]]:
    """(indexes of the keyless records, each record's timestamp delta) of a batch `walk_batch` accepted:
    the refusal path's second look, to name every bad record."""
    body, start, end = _record_bytes(buf, pos, header, max_decompressed)
    try:
        return _record_facts(body, start, end, header.records_count)
    except _Malformed as exc:
        raise RecordsError(ErrorCode.INVALID_RECORD, f"malformed records: {exc}") from None


def batch_problem(buf: Buffer, pos: int, header: BatchHeader,
                  max_decompressed: int = MAX_DECOMPRESSED) -> str | None:
    """Why the stored batch at `pos` is not what its header says (None when it is): recovery, check-log."""
    try:
        walk_batch(buf, pos, header, consecutive=False, max_decompressed=max_decompressed)
    except RecordsError as exc:
        return exc.message
    return None
