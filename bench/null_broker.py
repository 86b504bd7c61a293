"""A null broker: answers librdkafka's produce and fetch at once and stores nothing. The client-only ceiling.

Why: on a 2-core machine the client processes and the broker share the cores, so a figure near what the
clients alone can do says nothing about the broker. The ceiling is measured the same way as a broker's
figure (the same client processes, settings, records and partitions) against a broker whose per-byte
work is as close to nothing as a broker's can be: a produce is answered from the batch header alone (no
validation, no copy to disk, no fsync), a fetch is answered with ready-made batches of the topic's
record size, shaped like the last batch produced to the partition, starting at the batch boundary at or
before the offset asked for (a broker answers from the start of the batch holding that offset, and the
consumer skips what comes before it: the null broker keeps the base offset of every batch produced to it,
8 bytes each, and counts from the last one at or before the offset), up to the offsets the produce phase
counted (so a consumer reads exactly what it would from a broker, with nothing stored). Its own cost
is one Python decode and encode per request (requests carry up to ~1 MB), so what it measures is the
clients: librdkafka batching, the sockets, the Python loop that hands records over or takes them.

Its limit: it writes fetched batches from memory through the event loop, which here is slower than
pybroker's `os.sendfile` from the page cache, so for consume (mostly at many partitions, where answers
are many MB) a broker can beat it. `bench/report.py` then takes the best figure any target reached in
that cell as the ceiling (the clients did at least that) and marks it.

Topics need not be created: a topic named `...-s<S>-p<N>-...` has N partitions (else 1) and its fetches
return records of S value bytes (else 100).
Only what the benchmark's clients send is served: ApiVersions, Metadata, Produce, Fetch, FindCoordinator.

    .venv/bin/python -m bench.null_broker --port 19092
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import re
import struct
import sys
from array import array
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from pybroker.protocol.frame_codec import decode_request, encode_response  # noqa: E402
from pybroker.protocol.frame_splitter import FrameDecoder  # noqa: E402
from pybroker.protocol.messages.api_versions import ApiVersion, ApiVersionsResponse  # noqa: E402
from pybroker.protocol.messages.fetch import FetchableTopicResponse, FetchResponse, PartitionData  # noqa: E402
from pybroker.protocol.messages.find_coordinator import FindCoordinatorResponse  # noqa: E402
from pybroker.protocol.messages.metadata import (  # noqa: E402
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from pybroker.protocol.messages.produce import (  # noqa: E402
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
)
from pybroker.protocol.records.batch import (  # noqa: E402
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_V2,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    rewrite_crc,
)
from pybroker.protocol.records.record import Record, encode_record  # noqa: E402

#: (key, min, max): versions that need no topic ids (Metadata < 10, Fetch < 13) and no batched coordinators
SERVED = ((18, 0, 3), (3, 1, 9), (0, 3, 9), (1, 4, 12), (10, 0, 3))
_PARTITIONS_IN_NAME = re.compile(r"-p(\d+)-")
_SIZE_IN_NAME = re.compile(r"-s(\d+)-")
_LAST_OFFSET_DELTA = struct.Struct(">i")
LAST_OFFSET_DELTA_AT = 23  # base offset 8, length 4, leader epoch 4, magic 1, crc 4, attributes 2
BATCH_BYTES = 1 << 20  # what a librdkafka producer with batch.size=1 MB sends at most
MADE_CACHE = 64  # ready-made batches kept (up to 1 MB each)


def partitions_of(topic: str) -> int:
    match = _PARTITIONS_IN_NAME.search(topic)
    return max(1, int(match.group(1))) if match else 1


def size_of(topic: str) -> int:
    match = _SIZE_IN_NAME.search(topic)
    return min(1 << 20, int(match.group(1))) if match else 100


def batch_records(size: int, max_bytes: int = BATCH_BYTES) -> int:
    """Records of `size` value bytes in one fetched batch: as many as a 1 MB producer batch holds."""
    return max(1, min(10_000, max_bytes // (size + 16)))


class At:
    """Ready-made batches sent at other base offsets without a copy: the encoder makes them a chunk of
    their own (anything not bytes is), and the writer sends, per batch, the new base offset and then the
    batch's rest (the base offset is outside the CRC)."""

    __slots__ = ("batches", "size")

    def __init__(self) -> None:
        self.batches: list[tuple[int, bytes]] = []
        self.size = 0

    def add(self, base_offset: int, batch: bytes) -> None:
        self.batches.append((base_offset, batch))
        self.size += len(batch)

    def __len__(self) -> int:
        return self.size

    def parts(self) -> list[bytes | memoryview]:
        return [part for base_offset, batch in self.batches
                for part in (base_offset.to_bytes(8, "big", signed=True), memoryview(batch)[8:])]


class NullBroker:
    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self.bodies: dict[int, tuple[bytes, list[int]]] = {}  # record size -> (longest body, record ends)
        self.made: dict[tuple[int, int], bytes] = {}  # (record size, count) -> batch at base offset 0
        #: records in the last batch produced to a partition: fetches return batches of that shape, as a
        #: broker returns the batches its producers wrote (the shape matters to the consumer's speed)
        self.shape: dict[tuple[str, int], int] = {}
        self.next_offset: dict[tuple[str, int], int] = defaultdict(int)
        #: the base offset of every batch produced to a partition, ascending: where a fetch's batches start
        self.bases: dict[tuple[str, int], array[int]] = defaultdict(lambda: array("q"))

    def answer(self, api_key: int, version: int, request: Any) -> Any:
        if api_key == 18:
            return ApiVersionsResponse(api_keys=[ApiVersion(k, lo, hi) for k, lo, hi in SERVED])
        if api_key == 3:
            names = [t.name for t in request.topics or []]
            for name in names:  # make the topic's records now, while the client sets up, not in a timed fetch
                self.batch(size_of(name), 1)
            return MetadataResponse(
                brokers=[MetadataResponseBroker(0, self.host, self.port)], cluster_id="null", controller_id=0,
                topics=[MetadataResponseTopic(name=name, partitions=[
                    MetadataResponsePartition(partition_index=p, replica_nodes=[0], isr_nodes=[0])
                    for p in range(partitions_of(name))]) for name in names])
        if api_key == 0:
            return self.produced(request)
        if api_key == 10:
            return FindCoordinatorResponse(node_id=0, host=self.host, port=self.port)
        raise ValueError(f"api key {api_key} is not served")

    def produced(self, request: Any) -> Any:
        responses = []
        for topic in request.topic_data:
            parts = []
            for data in topic.partition_data:
                key = (topic.name, data.index)
                base = self.next_offset[key]
                records = data.records or b""
                pos = 0
                while pos + 61 <= len(records):  # every batch of the request (librdkafka sends one)
                    self.bases[key].append(self.next_offset[key])
                    (delta,) = _LAST_OFFSET_DELTA.unpack_from(records, pos + LAST_OFFSET_DELTA_AT)
                    self.next_offset[key] += delta + 1
                    self.shape[key] = delta + 1
                    pos += 12 + int.from_bytes(records[pos + 8:pos + 12], "big", signed=True)
                parts.append(PartitionProduceResponse(index=data.index, base_offset=base))
            responses.append(TopicProduceResponse(name=topic.name, partition_responses=parts))
        return None if request.acks == 0 else ProduceResponse(responses=responses)

    def batch(self, size: int, count: int) -> bytearray:
        """A batch of `count` records of `size` bytes at base offset 0, fresh (the caller patches it).

        Record i's bytes depend only on i, so the body of any count is a prefix of the longest one's:
        made once per size, then a batch costs a header, a slice and a CRC, never an encode per record.
        """
        made = self.bodies.get(size)
        if made is None:
            body = bytearray()
            ends = []
            for i in range(batch_records(size)):
                encode_record(body, Record(i, 0, None, bytes(size)))
                ends.append(len(body))
            made = self.bodies[size] = (bytes(body), ends)
        body, ends = made
        length = ends[count - 1]
        out = bytearray(HEADER_SIZE + length)
        HEADER.pack_into(out, 0, 0, HEADER_SIZE - LOG_OVERHEAD + length, NO_PARTITION_LEADER_EPOCH, MAGIC_V2, 0,
                         0, count - 1, 1, 1, NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_SEQUENCE, count)
        out[HEADER_SIZE:] = memoryview(body)[:length]
        rewrite_crc(out, 0)
        return out

    def boundary(self, key: tuple[str, int], offset: int, most: int) -> int:
        """Where the batch holding `offset` starts: counted in batches of `most` records from the last batch
        produced at or before it (from 0 when none was)."""
        bases = self.bases.get(key)
        i = bisect.bisect_right(bases, offset) - 1 if bases else -1
        base = bases[i] if bases and i >= 0 else 0
        return offset - (offset - base) % most

    def fetched(self, request: Any) -> tuple[Any, bool]:
        """The answer, and whether it is empty (then it waits `max_wait_ms`, as a broker's long poll does)."""
        topics = []
        empty = True
        room = request.max_bytes if request.max_bytes > 0 else 0x7FFFFFFF  # the answer's cap, as a broker's
        for topic in request.topics:
            size = size_of(topic.topic)
            parts = []
            for p in topic.partitions:
                key = (topic.topic, p.partition)
                end = self.next_offset[key]
                most = min(self.shape.get(key) or batch_records(size), batch_records(size))
                records: bytes | At = b""
                # from the start of the batch that holds the offset asked for, as a broker answers (the last
                # produced batch base at or before it; then batches of `most` records), so a consumer that
                # starts mid-batch gets (and skips) the records ahead of its offset, as it does from a broker
                offset = self.boundary(key, p.fetch_offset, most)
                if offset < end and (empty or most * size < room):
                    records = At()
                    limit = min(p.partition_max_bytes, room)
                    while offset < end and (not records.size or records.size + most * size < limit):
                        count = min(most, end - offset)
                        batch = self.made.get((size, count))
                        if batch is None:
                            if len(self.made) >= MADE_CACHE:  # tail shapes of many partitions: keep it small
                                self.made.clear()
                            batch = self.made[size, count] = bytes(self.batch(size, count))
                        records.add(offset, batch)
                        offset += count
                    room -= records.size
                    empty = False
                parts.append(PartitionData(partition_index=p.partition, high_watermark=end, last_stable_offset=end,
                                           log_start_offset=0, records=records))
            topics.append(FetchableTopicResponse(topic=topic.topic, partitions=parts))
        return FetchResponse(responses=topics), empty

    async def serve(self) -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(lambda: NullConnection(self), self.host, self.port)
        print(f"null broker on {self.host}:{self.port}", flush=True)
        async with server:
            await server.serve_forever()


class NullConnection(asyncio.Protocol):
    """One client connection: frames cut as pybroker cuts them (one allocation per frame, no stream
    buffer copies), answered in order by one task (an empty fetch waits before its answer)."""

    def __init__(self, broker: NullBroker) -> None:
        self.broker = broker
        self.decoder = FrameDecoder(1 << 30)
        self.frames: asyncio.Queue[bytearray | None] = asyncio.Queue()
        self.transport: Any = None
        self.task: asyncio.Task[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # uvloop's transports are not asyncio.Transport subclasses
        self.task = asyncio.get_running_loop().create_task(self.answer_all())

    def data_received(self, data: bytes) -> None:
        for frame in self.decoder.feed(data):
            self.frames.put_nowait(frame)

    def connection_lost(self, exc: Exception | None) -> None:
        self.frames.put_nowait(None)

    async def answer_all(self) -> None:
        while (frame := await self.frames.get()) is not None:
            header, request = decode_request(frame)
            if header.api_key == 1:
                response, empty = self.broker.fetched(request)
                if empty:
                    await asyncio.sleep(min(request.max_wait_ms, 1000) / 1000)
            else:
                response = self.broker.answer(header.api_key, header.api_version, request)
            if response is not None and not self.transport.is_closing():
                chunks = encode_response(header.correlation_id, header.api_key, header.api_version, response)
                self.transport.writelines([part for chunk in chunks for part in
                                           (chunk.parts() if isinstance(chunk, At) else (chunk,))])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(NullBroker(args.host, args.port).serve())  # until SIGTERM
    return 0


if __name__ == "__main__":
    sys.exit(main())
