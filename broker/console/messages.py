"""The message browser and the produce form: records read with Fetch and written with Produce.

Browsing is a Fetch (v12: topics by name) from a start offset (given, found by ListOffsets for a
timestamp, or the last N of the partition) that stops at the high watermark, at `limit` records or at
`MAX_FETCH_BYTES` read, whichever comes first. Batches are decoded off the event loop with the protocol
package's own record walk; control batches (transaction markers) are skipped, as a consumer does.
Keys, values and header values are shown by the decoders of `decoders` (text, pretty JSON, hex, `auto`),
each cut at `MAX_SHOWN_BYTES` with a flag saying so. Searching and paging are `search`'s.

Producing builds one uncompressed v2 batch (no producer id) and sends it with acks=all, so the answer
comes once the record is fsynced, like `kafka-console-producer --request-required-acks -1`.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from pybroker.broker.console import params as p
from pybroker.broker.console.decoders import FORMATS, render
from pybroker.broker.console.local_client import LocalClient
from pybroker.broker.console.reads import error_name, list_offsets, metadata, refused
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from pybroker.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from pybroker.protocol.records.batch import LOG_APPEND_TIME, RecordsError, iter_batches
from pybroker.protocol.records.record import Record, build_batch, decode_records

INPUT_FORMATS = ("text", "json", "hex")
#: a compressed batch may not expand past this while the console decodes it
MAX_DECOMPRESSED = 16 * 1024 * 1024
#: keys and values one browse decodes before it stops (each record is then kept only as cut text)
MAX_DECODED_BYTES = 32 * 1024 * 1024
FETCH_VERSION = 12
FETCH_ROUNDS = 20
PRODUCE_TIMEOUT_MS = 30_000
#: a topic with more partitions is browsed one partition at a time
MAX_ALL_PARTITIONS = 64


def _decode(data: bytes, start: int, limit: int, fmt: str, partition: int, allowance: int
            ) -> tuple[list[dict[str, Any]], int, str | None, int]:
    """(records from `start` on, at most `limit`, rendered; the offset after the last batch walked; an error;
    the key and value bytes decoded).

    Runs off the event loop. Only the rendered (cut) text is kept, and the walk stops once the batches'
    records add up to `allowance` bytes, so a small compressed read cannot make the broker hold more."""
    records: list[dict[str, Any]] = []
    next_offset = start
    decoded_bytes = 0
    for pos, header in iter_batches(data):
        if decoded_bytes >= allowance:
            break
        if header.is_control:
            next_offset = max(next_offset, header.next_offset)
            continue
        try:
            decoded = decode_records(data, pos, header, MAX_DECOMPRESSED)
        except RecordsError as exc:
            return records, next_offset, f"batch at offset {header.base_offset}: {exc.message}", decoded_bytes
        next_offset = max(next_offset, header.next_offset)
        for record in decoded:
            decoded_bytes += len(record.key or b"") + len(record.value or b"")
            offset = header.base_offset + record.offset_delta
            if offset < start:
                continue
            timestamp = header.max_timestamp if header.timestamp_type == LOG_APPEND_TIME \
                else header.base_timestamp + record.timestamp_delta
            records.append({"partition": partition, "offset": offset, "timestamp": timestamp,
                            "key": render(record.key, fmt), "value": render(record.value, fmt),
                            "headers": [{"key": k, "value": render(v, fmt)} for k, v in record.headers]})
            if len(records) >= limit:
                return records, offset + 1, None, decoded_bytes
    return records, next_offset, None, decoded_bytes


async def browse(client: LocalClient, query: dict[str, Any]) -> dict[str, Any]:
    """One partition's records (`partition=N`), or every partition's merged by timestamp (`partition=all`,
    for topics of at most `MAX_ALL_PARTITIONS`; not with `from=offset`, which names one partition's offset)."""
    topic = p.text(query, "topic", max_len=p.MAX_TOPIC_NAME)
    limit = p.integer(query, "limit", 1, p.MAX_MESSAGES, 50)
    fmt = p.choice(query, "format", FORMATS, "auto")
    mode = p.choice(query, "from", ("offset", "timestamp", "latest", "earliest"), "latest")
    everything = query.get("partition") == "all"
    if everything:
        if mode == "offset":
            raise p.bad("from=offset needs one partition")
        found = await metadata(client, [topic])
        if not found or found[0].error_code:
            raise refused(found[0].error_code if found else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {topic}")
        partitions = sorted(part.partition_index for part in found[0].partitions)
        if len(partitions) > MAX_ALL_PARTITIONS:
            raise p.bad(f"{topic} has {len(partitions)} partitions: choose one (all is for at most "
                        f"{MAX_ALL_PARTITIONS})")
    else:
        partitions = [p.integer(query, "partition", 0, p.MAX_PARTITIONS, 0)]
    keys = [(topic, partition) for partition in partitions]
    starts = await list_offsets(client, keys, -2)
    ends = await list_offsets(client, keys, -1)
    missing = [key for key in keys if starts.get(key, -1) < 0]
    if missing:
        found = await metadata(client, [topic])
        code = found[0].error_code if found and found[0].error_code else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        raise refused(code, f"{topic}-{missing[0][1]}")
    found_at: dict[tuple[str, int], int] = {}
    if mode == "timestamp":
        found_at = await list_offsets(client, keys, p.integer(query, "timestamp", 0, p.INT64_MAX))
    wanted_offset = p.integer(query, "offset", 0, p.INT64_MAX) if mode == "offset" else 0
    shares = len(keys)
    records: list[dict[str, Any]] = []
    reads: list[dict[str, Any]] = []
    error = None
    for key in keys:
        log_start, high_watermark = starts[key], ends[key]
        if mode == "offset":
            start = wanted_offset
        elif mode == "timestamp":
            start = found_at.get(key, -1)
            if start < 0:
                start = high_watermark  # nothing at or after that time
        elif mode == "earliest":
            start = log_start
        else:
            start = max(log_start, high_watermark - limit)
        start = max(start, log_start)
        got, position, problem = await _read_partition(client, key, start, high_watermark, limit, fmt,
                                                       p.MAX_FETCH_BYTES // shares, MAX_DECODED_BYTES // shares)
        records += got
        error = error or problem
        reads.append({"partition": key[1], "start_offset": start, "log_start_offset": log_start,
                      "high_watermark": high_watermark, "next_offset": position})
    if everything:
        records.sort(key=lambda r: (r["timestamp"], r["partition"], r["offset"]))
        records = records[-limit:] if mode == "latest" else records[:limit]
        return {"topic": topic, "partition": "all", "start_offset": None, "high_watermark": None,
                "next_offset": None, "partitions": reads, "messages": records, "error": error}
    return {"topic": topic, **reads[0], "messages": records, "error": error}


async def _read_partition(client: LocalClient, key: tuple[str, int], start: int, high_watermark: int, limit: int,
                          fmt: str, budget: int, allowance: int) -> tuple[list[dict[str, Any]], int, str | None]:
    """Up to `limit` rendered records of one partition from `start`, reading at most `budget` bytes of the log
    and decoding at most `allowance` bytes of keys and values: (records, the offset after them, an error)."""
    topic, partition = key
    records: list[dict[str, Any]] = []
    position, error = start, None
    for _ in range(FETCH_ROUNDS):
        if position >= high_watermark or len(records) >= limit or budget <= 0 or allowance <= 0 or error:
            break
        request = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=budget, topics=[
            FetchTopic(topic=topic, partitions=[FetchPartition(partition=partition, fetch_offset=position,
                                                               partition_max_bytes=min(budget, 1024 * 1024))])])
        response = await client.call(request, FETCH_VERSION)
        data = response.responses[0].partitions[0] if response.responses and response.responses[0].partitions \
            else None
        if data is None or data.error_code:
            code = response.error_code if data is None else data.error_code
            if code == ErrorCode.OFFSET_OUT_OF_RANGE:
                break
            raise refused(code, f"fetch {topic}-{partition}")
        region = data.records
        if region is None or len(region) == 0:
            break
        raw = await asyncio.to_thread(_bytes_of, region)
        budget -= len(raw)
        got, after, error, decoded = await asyncio.to_thread(_decode, raw, position, limit - len(records), fmt,
                                                             partition, allowance)
        allowance -= decoded
        records += got
        if after <= position:
            break
        position = after
    return records, position, error


def _bytes_of(region: Any) -> bytes:
    return bytes(region.read_bytes()) if hasattr(region, "read_bytes") else bytes(region)


def _encode_input(value: Any, fmt: str, what: str) -> bytes | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise p.bad(f"{what} must be a string or null")
    if fmt == "hex":
        try:
            return bytes.fromhex(value)
        except ValueError:
            raise p.bad(f"{what} is not hex") from None
    if fmt == "json":
        try:
            json.loads(value)
        except (ValueError, RecursionError):
            raise p.bad(f"{what} is not JSON") from None
    return value.encode("utf-8", errors="surrogatepass")


async def produce(client: LocalClient, body: dict[str, Any], now_ms: int) -> dict[str, Any]:
    topic = p.text(body, "topic", max_len=p.MAX_TOPIC_NAME)
    partition = p.integer(body, "partition", 0, p.MAX_PARTITIONS, 0)
    key = _encode_input(body.get("key"), p.choice(body, "key_format", INPUT_FORMATS, "text"), "key")
    value = _encode_input(body.get("value"), p.choice(body, "value_format", INPUT_FORMATS, "text"), "value")
    raw_headers = body.get("headers") or []
    if not isinstance(raw_headers, list) or len(raw_headers) > p.MAX_HEADERS:
        raise p.bad(f"headers must be a list of at most {p.MAX_HEADERS} [key, value] pairs")
    headers: list[tuple[str, bytes | None]] = []
    for pair in raw_headers:
        if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str) and pair[0]
                and (pair[1] is None or isinstance(pair[1], str))):
            raise p.bad("each header must be [key, value] with a non-empty key and a string or null value")
        headers.append((pair[0], None if pair[1] is None else pair[1].encode()))
    size = len(key or b"") + len(value or b"") + sum(len(k) + len(v or b"") for k, v in headers)
    if size > p.MAX_PRODUCE_BYTES:
        raise p.bad(f"the message is larger than {p.MAX_PRODUCE_BYTES} bytes")
    found = await metadata(client, [topic])
    if not found or found[0].error_code:
        raise refused(found[0].error_code if found else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {topic}")
    batch = build_batch([Record(0, 0, key, value, headers)], base_timestamp=now_ms)
    request = ProduceRequest(acks=-1, timeout_ms=PRODUCE_TIMEOUT_MS, topic_data=[
        TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=partition,
                                                                          records=bytearray(batch))])])
    response = await client.call(request)
    answer = response.responses[0].partition_responses[0]
    if answer.error_code:
        raise refused(answer.error_code, f"produce to {topic}-{partition}", answer.error_message)
    return {"topic": topic, "partition": partition, "offset": answer.base_offset,
            "error": None if not answer.error_code else error_name(answer.error_code)}

