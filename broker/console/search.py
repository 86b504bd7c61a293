"""Searching and paging a topic's records in the broker, newest first or oldest first, with hard caps.

A search names a topic, one partition or `all` (at most `MAX_ALL_PARTITIONS`), a direction and where to
start, and optionally filters: `key` and `value` (byte substrings of the record's key and value, UTF-8
encoded, case-sensitive), `header` (a header name, exact) and `header_value` (a substring of a header's
value; with `header`, of that header's), `from_ts` / `to_ts` (the record's timestamp, ms, inclusive).
With no filter it is plain paging.

Paging works on a *boundary* per partition, an offset: "older" reads the records below it, newest
first; "newer" reads the records at or above it, oldest first. An answer carries both edges of the
window it shows (`older`, `newer`: `partition:offset` lists) so the page can ask for the next window
either way. Records of several partitions are merged by timestamp, taking each partition's records in
offset order, so an edge never skips a record: a partition's edge moves only past records that were
either shown or did not match.

Every request is bounded whatever it asks for (the hostile-client rule): at most `MAX_SCAN_BYTES` of log
read, `MAX_SCAN_RECORDS` records examined (both shared equally between the partitions searched), and
`TIME_BUDGET_S` of wall time; only matching records are rendered, at most `limit`. When a cap stops it
before `limit` matches, the answer says which (`stopped`) and its edge is where the scan got to, so
"continue" is the next page the same way. Reading backwards is done in chunks below the boundary, read
forwards: the first chunk is one offset (one batch, whatever its size), each next one grows with what
the budget left allows, and a chunk a cap cuts short is dropped (its part would leave a hole), so an
older search always moves on and never skips.

Records are read with Fetch through the principal's `LocalClient` (READ on the topic, as the browser's
reads), at read_uncommitted like the browser, skipping control batches; decoding and matching run off
the event loop (`asyncio.to_thread`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pybroker.broker.console import params as p
from pybroker.broker.console.decoders import FORMATS, render
from pybroker.broker.console.local_client import LocalClient
from pybroker.broker.console.messages import FETCH_VERSION, MAX_ALL_PARTITIONS, MAX_DECOMPRESSED, _bytes_of
from pybroker.broker.console.reads import EARLIEST, LATEST, list_offsets, metadata, refused
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from pybroker.protocol.records.batch import LOG_APPEND_TIME, RecordsError, iter_batches
from pybroker.protocol.records.record import Record, decode_records

#: log bytes one search request reads, records it examines, and the wall time it may take
MAX_SCAN_BYTES = 32 * 1024 * 1024
MAX_SCAN_RECORDS = 200_000
TIME_BUDGET_S = 2.0
#: the longest key, value or header substring searched for
MAX_NEEDLE = 1024
#: bytes one Fetch of a search asks for
FETCH_BYTES = 1024 * 1024
#: a matching record larger than this is rendered (cut) as soon as it is found, not held whole
HELD_BYTES = 32 * 1024
#: the widest chunk (in offsets) an older search reads at once
MAX_STEP = 1 << 20
DIRECTIONS = ("older", "newer")
STARTS = ("latest", "earliest", "offset", "timestamp")


@dataclass(frozen=True)
class Filter:
    """What a record must have to be shown; an empty filter matches every record."""

    key: bytes | None = None
    value: bytes | None = None
    header: str | None = None
    header_value: bytes | None = None
    from_ts: int | None = None
    to_ts: int | None = None

    def matches(self, record: Record, timestamp: int) -> bool:
        if self.from_ts is not None and timestamp < self.from_ts:
            return False
        if self.to_ts is not None and timestamp > self.to_ts:
            return False
        if self.key is not None and (record.key is None or self.key not in record.key):
            return False
        if self.value is not None and (record.value is None or self.value not in record.value):
            return False
        if self.header is None and self.header_value is None:
            return True
        needle = self.header_value
        return any((self.header is None or name == self.header)
                   and (needle is None or (value is not None and needle in value)) for name, value in record.headers)


@dataclass
class Budget:
    """What one partition's scan may still spend; `stopped` names the cap that ran out."""

    bytes_left: int
    records_left: int
    deadline: float
    clock: Callable[[], float] = time.monotonic
    stopped: str | None = None

    def exhausted(self) -> bool:
        if self.stopped is None:
            if self.bytes_left <= 0:
                self.stopped = "bytes"
            elif self.records_left <= 0:
                self.stopped = "records"
            elif self.clock() >= self.deadline:
                self.stopped = "time"
        return self.stopped is not None


@dataclass
class Scan:
    """One chunk walked: the matches kept (offset order, rendered), how many matched in all, the offset
    the walk examined up to (exclusive), and whether a cap cut it short."""

    matches: list[dict[str, Any]] = field(default_factory=list)
    matched: int = 0
    reached: int = 0
    cut: bool = False
    error: str | None = None
    density: float = 0.0  # log bytes per offset of the data fetched


def _walk(data: bytes, lo: int, hi: int, flt: Filter, fmt: str, partition: int, keep: int, newest: bool,
          budget: Budget, allowance: list[int]) -> Scan:
    """Match the records of `data` with lo <= offset < hi. Oldest-first (`newest` False) stops at `keep`
    matches; newest-first keeps the last `keep` of them and walks the whole range. Off the event loop."""
    scan = Scan(reached=lo)
    span = [(header.base_offset, header.next_offset) for _, header in iter_batches(data)]
    if span:
        scan.density = len(data) / max(1, span[-1][1] - span[0][0])
    kept: list[Any] = []
    for pos, header in iter_batches(data):
        if header.base_offset >= hi:
            break
        if header.next_offset <= lo or header.is_control:
            scan.reached = max(scan.reached, min(header.next_offset, hi))
            continue
        if budget.records_left <= 0 or allowance[0] <= 0:
            budget.stopped = budget.stopped or ("records" if budget.records_left <= 0 else "bytes")
            scan.cut = True
            break
        try:
            records = decode_records(data, pos, header, MAX_DECOMPRESSED)
        except RecordsError as exc:
            scan.error = f"batch at offset {header.base_offset}: {exc.message}"
            scan.cut = True
            break
        for record in records:
            offset = header.base_offset + record.offset_delta
            if offset < lo or offset >= hi:
                continue
            budget.records_left -= 1
            allowance[0] -= len(record.key or b"") + len(record.value or b"")
            timestamp = header.max_timestamp if header.timestamp_type == LOG_APPEND_TIME \
                else header.base_timestamp + record.timestamp_delta
            if flt.matches(record, timestamp):
                scan.matched += 1
                kept.append(_held(offset, timestamp, record, fmt, partition))
                if newest and len(kept) > keep:
                    del kept[0]
                elif not newest and len(kept) >= keep:
                    scan.reached = offset + 1
                    scan.matches = _rendered(kept, fmt, partition)
                    return scan
        scan.reached = max(scan.reached, min(header.next_offset, hi))
    scan.matches = _rendered(kept, fmt, partition)
    return scan


def _render(offset: int, timestamp: int, record: Record, fmt: str, partition: int) -> dict[str, Any]:
    return {"partition": partition, "offset": offset, "timestamp": timestamp,
            "key": render(record.key, fmt), "value": render(record.value, fmt),
            "headers": [{"key": k, "value": render(v, fmt)} for k, v in record.headers]}


def _held(offset: int, timestamp: int, record: Record, fmt: str, partition: int) -> Any:
    """A match as held until the walk knows whether it is shown: a small record as it is (rendering every
    match of a long backwards walk would cost more), a large one rendered at once (so at most `limit`
    records of at most `HELD_BYTES` each are held whole)."""
    size = len(record.key or b"") + len(record.value or b"") + sum(len(v or b"") for _, v in record.headers)
    return _render(offset, timestamp, record, fmt, partition) if size > HELD_BYTES else (offset, timestamp, record)


def _rendered(kept: list[Any], fmt: str, partition: int) -> list[dict[str, Any]]:
    return [item if isinstance(item, dict) else _render(item[0], item[1], item[2], fmt, partition) for item in kept]


async def _fetch(client: LocalClient, topic: str, partition: int, position: int, max_bytes: int) -> bytes:
    request = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=max_bytes, topics=[
        FetchTopic(topic=topic, partitions=[FetchPartition(partition=partition, fetch_offset=position,
                                                           partition_max_bytes=max_bytes)])])
    response = await client.call(request, FETCH_VERSION)
    data = response.responses[0].partitions[0] if response.responses and response.responses[0].partitions else None
    if data is None or data.error_code:
        code = response.error_code if data is None else data.error_code
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            return b""
        raise refused(code, f"fetch {topic}-{partition}")
    if data.records is None or len(data.records) == 0:
        return b""
    return await asyncio.to_thread(_bytes_of, data.records)


async def _read_range(client: LocalClient, topic: str, partition: int, lo: int, hi: int, flt: Filter, fmt: str,
                      keep: int, newest: bool, budget: Budget, allowance: list[int], hint: int) -> Scan:
    """Walk [lo, hi) of one partition forwards in Fetch rounds (at most `hint` bytes each after the first)."""
    total = Scan(reached=lo)
    kept: list[dict[str, Any]] = []
    while total.reached < hi:
        if budget.exhausted():
            total.cut = True
            break
        raw = await _fetch(client, topic, partition, total.reached, max(1, min(budget.bytes_left, hint)))
        budget.bytes_left -= len(raw)
        if not raw:
            total.reached = hi  # nothing more below the high watermark (deleted or compacted away)
            break
        scan = await asyncio.to_thread(_walk, raw, total.reached, hi, flt, fmt, partition,
                                       keep - (0 if newest else len(kept)), newest, budget, allowance)
        total.matched += scan.matched
        total.density = scan.density
        kept = (kept + scan.matches)[-keep:] if newest else kept + scan.matches
        total.error = scan.error
        if scan.cut:
            total.cut = True
            total.reached = max(total.reached, scan.reached)
            break
        if scan.reached <= total.reached:
            total.reached = hi  # defensive: a walk that moves nowhere ends the range
            break
        total.reached = scan.reached
        if not newest and len(kept) >= keep:
            break
    total.matches = kept
    return total


async def _newer(client: LocalClient, topic: str, partition: int, start: int, end: int, flt: Filter, fmt: str,
                 limit: int, budget: Budget, allowance: list[int]) -> tuple[list[dict[str, Any]], int, str | None]:
    """Matches at or above `start` (below `end`), oldest first; (matches, edge, error)."""
    scan = await _read_range(client, topic, partition, start, end, flt, fmt, limit, False, budget, allowance,
                             FETCH_BYTES)
    return scan.matches, scan.reached, scan.error


async def _older(client: LocalClient, topic: str, partition: int, start: int, floor: int, flt: Filter, fmt: str,
                 limit: int, budget: Budget, allowance: list[int]) -> tuple[list[dict[str, Any]], int, str | None]:
    """Matches below `start` (at or above `floor`), newest first; (matches, edge, error). Chunks grow from
    one offset, which is read whatever the caps say (one batch), so every request moves on; a later chunk a
    cap cuts short is dropped."""
    found: list[dict[str, Any]] = []
    edge, step, first = start, 1, True
    density = 1024.0  # log bytes per offset, learnt from each fetch
    while edge > floor and len(found) < limit:
        if not first and budget.exhausted():
            break
        lo = max(floor, edge - step)
        # the first chunk (one offset: one batch) is read whatever the caps say, and charged to them after
        spender = Budget(max(budget.bytes_left, 1), max(budget.records_left, 1), float("inf"), budget.clock) \
            if first else budget
        before = (spender.bytes_left, spender.records_left)
        hint = min(FETCH_BYTES, max(4096, int(step * density * 1.25)))
        scan = await _read_range(client, topic, partition, lo, edge, flt, fmt, limit - len(found), True, spender,
                                 allowance, hint)
        if first:
            budget.bytes_left -= before[0] - spender.bytes_left
            budget.records_left -= before[1] - spender.records_left
        if scan.error:
            return found, edge, scan.error
        if scan.cut:  # a part of the chunk unread: taking the rest would leave a hole, so the next request reads it
            break
        density = max(1.0, scan.density or density)
        found += list(reversed(scan.matches))
        edge = found[-1]["offset"] if scan.matched > len(scan.matches) else lo
        step = max(1, min(MAX_STEP, step * 4, int(max(0, budget.bytes_left) // 2 // density)))
        first = False
    return found, edge, None


def _cursor(params: dict[str, Any], name: str) -> dict[int, int] | None:
    raw = p.optional_text(params, name, max_len=MAX_ALL_PARTITIONS * 32)
    if not raw:
        return None
    out: dict[int, int] = {}
    for item in raw.split(","):
        part, _, offset = item.partition(":")
        if not (part.isdigit() and offset.isdigit()) or len(part) > 6 or len(offset) > 19 or len(out) >= MAX_ALL_PARTITIONS:
            raise p.bad(f"{name} must be a list of partition:offset (at most {MAX_ALL_PARTITIONS})")
        out[int(part)] = min(int(offset), p.INT64_MAX)
    return out


def _needle(params: dict[str, Any], name: str) -> bytes | None:
    value = p.optional_text(params, name, max_len=MAX_NEEDLE)
    return value.encode("utf-8", errors="surrogatepass") if value else None


def parse_filter(params: dict[str, Any]) -> Filter:
    def ts(name: str) -> int | None:
        return p.integer(params, name, 0, p.INT64_MAX) if params.get(name) not in (None, "") else None

    header = p.optional_text(params, "header", max_len=MAX_NEEDLE) or None
    flt = Filter(key=_needle(params, "key"), value=_needle(params, "value"), header=header,
                 header_value=_needle(params, "header_value"), from_ts=ts("from_ts"), to_ts=ts("to_ts"))
    if flt.from_ts is not None and flt.to_ts is not None and flt.from_ts > flt.to_ts:
        raise p.bad("from_ts must not be after to_ts")
    return flt


def parse(params: dict[str, Any]) -> tuple[str, int, str, Filter, dict[int, int] | None, str, str]:
    """(topic, limit, format, filter, cursor, from, direction) of a search's query, or a 400 `ConsoleError`:
    every parameter is checked before any work (the fuzz test feeds this arbitrary query strings)."""
    topic = p.text(params, "topic", max_len=p.MAX_TOPIC_NAME)
    limit = p.integer(params, "limit", 1, p.MAX_MESSAGES, 50)
    fmt = p.choice(params, "format", FORMATS, "auto")
    flt = parse_filter(params)
    cursor = _cursor(params, "cursor")
    start = p.choice(params, "from", STARTS, "latest")
    direction = p.choice(params, "direction", DIRECTIONS, "older" if start == "latest" else "newer")
    return topic, limit, fmt, flt, cursor, start, direction


def _edges(edges: dict[int, int]) -> str:
    return ",".join(f"{part}:{offset}" for part, offset in sorted(edges.items()))


async def search(client: LocalClient, params: dict[str, Any], clock: Callable[[], float] = time.monotonic
                 ) -> dict[str, Any]:
    """One window of matching records; see the module's docstring for the parameters and the caps."""
    topic, limit, fmt, flt, cursor, start, direction = parse(params)
    found = await metadata(client, [topic])
    if not found or found[0].error_code:
        raise refused(found[0].error_code if found else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {topic}")
    existing = sorted(part.partition_index for part in found[0].partitions)
    everything = params.get("partition") == "all"
    if everything:
        if len(existing) > MAX_ALL_PARTITIONS:
            raise p.bad(f"{topic} has {len(existing)} partitions: choose one (all is for at most "
                        f"{MAX_ALL_PARTITIONS})")
        partitions = existing
    else:
        wanted = p.integer(params, "partition", 0, p.MAX_PARTITIONS, 0)
        if wanted not in existing:
            raise refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic}-{wanted}")
        partitions = [wanted]
    keys = [(topic, part) for part in partitions]
    floors = await list_offsets(client, keys, EARLIEST)
    ceilings = await list_offsets(client, keys, LATEST)
    high_watermarks = dict(ceilings)
    # the time range narrows the offsets scanned to those ListOffsets finds for it (the filter still checks
    # each record's own timestamp)
    if flt.from_ts is not None:
        at = await list_offsets(client, keys, flt.from_ts)
        floors = {k: max(floors[k], at[k]) if at.get(k, -1) >= 0 else ceilings[k] for k in keys}
    if flt.to_ts is not None:
        at = await list_offsets(client, keys, min(flt.to_ts + 1, p.INT64_MAX))
        ceilings = {k: max(floors[k], min(ceilings[k], at[k])) if at.get(k, -1) >= 0 else ceilings[k] for k in keys}
    boundary: dict[int, int] = {}
    if cursor is not None:
        boundary = {part: cursor.get(part, ceilings[(topic, part)] if direction == "older" else floors[(topic, part)])
                    for part in partitions}
    elif start == "latest":
        boundary = {part: ceilings[(topic, part)] for part in partitions}
    elif start == "earliest":
        boundary = {part: floors[(topic, part)] for part in partitions}
    elif start == "offset":
        if everything:
            raise p.bad("from=offset needs one partition")
        boundary = {partitions[0]: p.integer(params, "offset", 0, p.INT64_MAX)}
    else:
        at = await list_offsets(client, keys, p.integer(params, "timestamp", 0, p.INT64_MAX))
        boundary = {part: at[(topic, part)] if at.get((topic, part), -1) >= 0 else ceilings[(topic, part)]
                    for part in partitions}
    deadline = clock() + TIME_BUDGET_S
    shares = len(partitions)
    per_partition: dict[int, list[dict[str, Any]]] = {}
    reached: dict[int, int] = {}
    stopped: str | None = None
    error: str | None = None
    for part in partitions:
        key = (topic, part)
        budget = Budget(MAX_SCAN_BYTES // shares, MAX_SCAN_RECORDS // shares, deadline, clock)
        allowance = [MAX_SCAN_BYTES // shares * 4]  # key and value bytes decoded (compressed batches expand)
        b = min(max(boundary[part], floors[key]), ceilings[key])
        boundary[part] = b
        if direction == "older":
            got, edge, problem = await _older(client, topic, part, b, floors[key], flt, fmt, limit, budget, allowance)
        else:
            got, edge, problem = await _newer(client, topic, part, b, ceilings[key], flt, fmt, limit, budget,
                                              allowance)
        per_partition[part], reached[part] = got, edge
        stopped = stopped or budget.stopped
        error = error or problem
    messages, edges = _merge(per_partition, reached, boundary, direction, limit)
    done = all(edges[part] <= floors[(topic, part)] if direction == "older" else edges[part] >= ceilings[(topic, part)]
               for part in partitions)
    if len(messages) >= limit or done:
        stopped = None  # the page is full, or there is nothing more that way: no cap to report
    older, newer = (edges, boundary) if direction == "older" else (boundary, edges)
    return {"topic": topic, "partition": "all" if everything else partitions[0],
            "direction": direction, "messages": messages, "older": _edges(older), "newer": _edges(newer),
            "at_end": done, "stopped": stopped, "error": error,
            "log_start": {str(part): floors[(topic, part)] for part in partitions},
            "high_watermark": {str(part): high_watermarks[(topic, part)] for part in partitions}}


def _merge(found: dict[int, list[dict[str, Any]]], reached: dict[int, int], boundary: dict[int, int],
           direction: str, limit: int) -> tuple[list[dict[str, Any]], dict[int, int]]:
    """Up to `limit` records by timestamp (newest first for older, oldest first for newer), each partition's
    taken in its own order; and each partition's new edge: past every record taken or not matching."""
    older = direction == "older"
    heads = {part: 0 for part in found}
    out: list[dict[str, Any]] = []
    while len(out) < limit:
        ready = [part for part, i in heads.items() if i < len(found[part])]
        if not ready:
            break
        pick = (max if older else min)(ready, key=lambda part: (found[part][heads[part]]["timestamp"], part))
        out.append(found[pick][heads[pick]])
        heads[pick] += 1
    edges: dict[int, int] = {}
    for part, records in found.items():
        taken = heads[part]
        if taken == len(records):
            edges[part] = reached[part]
        elif taken == 0:
            edges[part] = boundary[part]
        else:
            last = records[taken - 1]["offset"]
            edges[part] = last if older else last + 1
    return out, edges
